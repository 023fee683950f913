"use strict";
// One run's live parts: header, phase timeline, training figures and curves, and the sample grid, drawn
// from the page's data and again from /api/runs/<name> every poll. The sample grid is rebuilt only when
// its files change, so a video being watched keeps playing while the rest updates.

const STAGE_COLOURS = ["#2563eb", "#db2777", "#059669", "#d97706", "#7c3aed"];
let sampleKey = null;

function duration(seconds) {
  if (seconds === null || seconds === undefined) return "";
  if (seconds < 0.1) return `${Math.round(seconds * 1000)} ms`;
  if (seconds < 60) return `${seconds.toFixed(1)} s`;
  const minutes = Math.floor(seconds / 60);
  return minutes < 60 ? `${minutes}m ${Math.round(seconds % 60)}s` : `${Math.floor(minutes / 60)}h ${minutes % 60}m`;
}

function fact(label, ...value) {
  return h("div", {class: "fact"}, h("span", {class: "label"}, label), h("span", {class: "value"}, ...value));
}

function renderHeader(run) {
  const training = run.training || {};
  const phase = run.phases.find((p) => p.status === "running");
  const facts = [
    fact("State", badge(run.state)),
    phase ? fact("Phase", phase.phase)
      : fact("Last phase", run.phases.length ? run.phases[run.phases.length - 1].phase : "none yet"),
  ];
  if (run.generates) facts.push(fact("Generates", run.generates));
  if (training.step !== null && training.step !== undefined) {
    facts.push(fact("Step", stepText(training),
      training.percent !== null ? h("progress", {max: 100, value: training.percent}) : null));
  }
  if (training.eta) facts.push(fact("ETA", training.eta));
  if (training.duration) facts.push(fact("Trained in", training.duration));
  if (lastLoss(training)) facts.push(fact("Last loss", lastLoss(training)));
  if (run.approval && run.approval.gate) {
    facts.push(fact("Approval", `${run.approval.gate}: ${run.approval.state}`,
      run.approval.blockers.length ? ` (blocked: ${run.approval.blockers.join("; ")})` : ""));
  }
  if (run.driver) facts.push(fact("Driver", `pid ${run.driver.pid} on ${run.driver.host}`));
  const parts = [h("h1", {}, run.name), h("div", {class: "facts"}, facts)];
  if (run.next_command) parts.push(h("p", {class: "next"}, "Next: ", h("code", {}, run.next_command)));
  if (run.warnings.length) parts.push(h("ul", {class: "warnings"}, run.warnings.map((w) => h("li", {}, w))));
  document.getElementById("header").replaceChildren(...parts);
}

function renderTimeline(phases) {
  const items = phases.map((p) => {
    const [what, fix] = (p.error || "").split(" Fix: ");
    return h("li", {class: "phase status-" + p.status, "data-phase": p.phase},
      h("div", {class: "phase-head"}, h("b", {}, p.phase), badge(p.status),
        p.attempt > 1 ? h("span", {class: "attempt"}, `attempt ${p.attempt}`) : null,
        h("span", {class: "seconds"}, p.status === "running" && p.started_at
          ? `running for ${duration((Date.now() - Date.parse(p.started_at)) / 1000)}` : duration(p.seconds))),
      p.reason ? h("div", {class: "reason"}, "Why it ran: ", p.reason) : null,
      p.summary ? h("div", {class: "summary"}, p.summary) : null,
      p.error ? h("div", {class: "error"}, what, fix ? h("div", {class: "fix"}, h("b", {}, "Fix: "), fix) : null) : null);
  });
  document.getElementById("timeline").replaceChildren(...items);
}

function renderTraining(training, series) {
  const box = document.getElementById("training-facts");
  if (!training) {
    box.replaceChildren(h("p", {class: "empty"}, "No trainer launched yet."));
  } else {
    const facts = [fact("Trainer", badge(training.state)), fact("Stage", `${training.stage}/${training.stages}`),
                   fact("Step", stepText(training))];
    if (training.step_time_s) facts.push(fact("Step time", `${training.step_time_s.toFixed(2)} s`));
    if (training.eta) facts.push(fact("ETA", training.eta));
    if (training.stalled) facts.push(fact("Log", h("span", {class: "bad"}, "stalled")));
    for (const gpu of training.gpus || []) {
      facts.push(fact(`GPU ${gpu.index}`, `${gpu.utilization_pct}% · ${(gpu.memory_used_mib / 1024).toFixed(1)}` +
        ` of ${(gpu.memory_total_mib / 1024).toFixed(1)} GiB`));
    }
    if (training.latest_checkpoint) facts.push(fact("Latest checkpoint", h("code", {}, training.latest_checkpoint.split("/").pop())));
    if (training.wandb_url) facts.push(fact("W&B", h("a", {href: training.wandb_url, rel: "noreferrer"}, "run page")));
    if (training.last_log_line && training.state !== "running") facts.push(fact("Last log line", h("code", {}, training.last_log_line)));
    box.replaceChildren(...facts);
  }
  const stages = series.map((s, i) => ({stage: s.stage, colour: STAGE_COLOURS[i % STAGE_COLOURS.length], s}));
  drawChart(document.getElementById("loss-chart"), {
    xLabel: "step", yLabel: "loss", empty: "No loss logged yet.",
    series: stages.map(({stage, colour, s}) => ({name: `stage ${stage}`, colour, line: true,
      points: s.steps.map((step, i) => [step, s.loss[i]])}))});
  drawChart(document.getElementById("time-chart"), {
    xLabel: "step", yLabel: "seconds", empty: "No clean step time logged yet.",
    series: stages.map(({stage, colour, s}) => ({name: `stage ${stage}`, colour, line: true,
      points: s.steps.map((step, i) => [step, s.step_time_s[i]])}))});
}

function mediaNode(item) {
  if (item.kind === "video") return h("video", {controls: true, preload: "metadata", src: item.url});
  if (item.kind === "audio") return h("audio", {controls: true, preload: "metadata", src: item.url});
  return h("img", {src: item.url, alt: item.name});
}

function renderSamples(samples) {
  const key = JSON.stringify(samples.map((s) => s.steps.map((st) => st.items.map((i) => i.url))));
  if (key === sampleKey) return;
  sampleKey = key;
  const blocks = samples.filter((s) => s.steps.length).map((stage) => {
    const width = Math.max(...stage.steps.map((st) => st.items.length), stage.prompts.length);
    const ks = Array.from({length: width}, (_, i) => i + 1);
    const head = h("tr", {}, h("th", {}, "step"), ks.map((k) => h("th", {class: "prompt"}, stage.prompts[k - 1] || `sample ${k}`)));
    const rows = stage.steps.map((st) => h("tr", {"data-step": st.step}, h("th", {}, String(st.step)),
      ks.map((k) => { const item = st.items.find((i) => i.k === k); return h("td", {}, item ? mediaNode(item) : ""); })));
    return h("div", {class: "stage-samples"}, samples.length > 1 ? h("h3", {}, `Stage ${stage.stage}`) : null,
      h("table", {class: "samples"}, h("thead", {}, head), h("tbody", {}, rows)));
  });
  const grid = document.getElementById("sample-grid");
  grid.replaceChildren(...(blocks.length ? blocks : [h("p", {class: "empty"}, "No validation samples yet.")]));
}

function renderTrials(autotune) {
  const box = document.getElementById("trials-chart");
  if (!box || !autotune) return;
  const points = autotune.points || [];
  drawChart(box, {
    xLabel: "step time (s)", yLabel: "peak GiB", fromZero: true, empty: "No trial measured both its step time and its peak.",
    hline: autotune.limit_gb ? {y: autotune.limit_gb, label: `headroom limit ${autotune.limit_gb.toFixed(1)} GiB`} : null,
    labels: points.map((p) => [p.x, p.y, p.label]),
    series: [{name: "fits", colour: "#059669", dots: true, points: points.filter((p) => p.fits).map((p) => [p.x, p.y])},
             {name: "over the limit", colour: "#dc2626", dots: true,
              points: points.filter((p) => !p.fits).map((p) => [p.x, p.y])}]});
}

function applyLive(live) {
  renderHeader(live.run);
  renderTimeline(live.run.phases);
  renderTraining(live.run.training, live.series);
  renderSamples(live.samples);
  if (typeof studioLive === "function") studioLive(live);  // studio.js: absent under --read-only
}

const initial = pageData();
applyLive(initial);
renderTrials(initial.autotune);
poll("/api/runs/" + encodeURIComponent(initial.run.name), applyLive);

// The checkpoint grid: "Play row" plays that row's renders from their start, side by side.
document.addEventListener("click", (event) => {
  const button = event.target.closest ? event.target.closest(".play-row") : null;
  if (!button) return;
  for (const media of button.closest("tr").querySelectorAll("video, audio")) {
    media.currentTime = 0;
    media.play().catch(() => {});
  }
});
