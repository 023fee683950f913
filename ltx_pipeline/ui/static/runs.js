"use strict";
// The runs list: one row per run from the same dict as `status --json`, re-read every poll.

function runRow(run) {
  const training = run.training || {};
  // States between phases (and status's views: queued, stopped) name no phase.
  const phase = ["finished", "failed", "new", "interrupted", "awaiting_approval", "gate_stopped", "detached", "queued",
    "stopped"].includes(run.state) ? "" : run.state;
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

// Who holds which GPU and the runs waiting for one: the board `ltx-pipeline queue` prints (gpus.gpu_board).
function waitsFor(entry) {
  const listed = entry.gpus.map(g => `GPU ${g.gpu} (${g.held_by ? "held by run " + g.held_by : "free"})`).join(", ");
  return entry.need && entry.need < entry.gpus.length ? `${entry.need} of: ${listed}` : listed;
}

function renderBoard(board) {
  const holders = (board && board.holders) || [];
  const queue = (board && board.queue) || [];
  document.getElementById("gpu-board").hidden = holders.length === 0 && queue.length === 0;
  document.querySelector("#gpus-held tbody").replaceChildren(...holders.map(g => h("tr", {"data-gpu": g.gpu},
    h("td", {}, `GPU ${g.gpu}`), h("td", {}, g.run || ""), h("td", {}, g.kind),
    h("td", {}, (g.running || []).join(", ") || "-"), h("td", {}, g.since || ""))));
  document.querySelector("#gpu-queue tbody").replaceChildren(...queue.map(q => h("tr", {"data-run": q.run},
    h("td", {class: "num"}, q.position), h("td", {}, q.run || ""), h("td", {}, waitsFor(q)), h("td", {}, q.engine),
    h("td", {}, q.since || ""))));
  document.getElementById("gpu-queue").hidden = queue.length === 0;
  document.getElementById("gpu-queue-empty").hidden = queue.length > 0;
}

function renderRuns(data) {
  const body = document.querySelector("#runs tbody");
  body.replaceChildren(...data.runs.map(runRow));
  document.getElementById("no-runs").hidden = data.runs.length > 0;
  document.getElementById("runs").hidden = data.runs.length === 0;
  renderBoard(data.gpus);
}

renderRuns(pageData());
poll("/api/runs", renderRuns);
