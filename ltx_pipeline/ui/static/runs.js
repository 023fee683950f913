"use strict";
// The runs list: one row per run from the same dict as `status --json`, re-read every poll.

function runRow(run) {
  const training = run.training || {};
  const phase = ["finished", "failed", "new", "interrupted", "awaiting_approval", "gate_stopped", "detached"]
    .includes(run.state) ? "" : run.state;
  const percent = training.percent;
  const gate = run.state === "awaiting_approval" && run.approval ? `${run.approval.gate} approval` : "";
  return h("tr", {"data-run": run.name},
    h("td", {}, h("a", {href: "/runs/" + encodeURIComponent(run.name)}, run.name)),
    h("td", {}, badge(run.state)),
    h("td", {}, phase || (training.state === "running" ? "train" : "")),
    h("td", {class: "step"}, stepText(training),
      percent !== null && percent !== undefined ? h("progress", {max: 100, value: percent}) : null),
    h("td", {}, training.eta || ""),
    h("td", {class: "num"}, lastLoss(training)),
    h("td", {}, gate),
    h("td", {}, run.next_command ? h("code", {}, run.next_command) : ""));
}

function renderRuns(data) {
  const body = document.querySelector("#runs tbody");
  body.replaceChildren(...data.runs.map(runRow));
  document.getElementById("no-runs").hidden = data.runs.length > 0;
  document.getElementById("runs").hidden = data.runs.length === 0;
}

renderRuns(pageData());
poll("/api/runs", renderRuns);
