"use strict";
// The compare page: each run's loss curve, and its holdout curve when outputs/holdout-loss.json exists, overlaid
// on one chart each (a colour per run, the same in both). The figures, differences and renders are in the HTML.
const RUN_COLOURS = ["#2563eb", "#dc2626", "#16a34a", "#9333ea", "#ea580c", "#0891b2", "#ca8a04", "#db2777"];

function lossSeries(data) {
  const names = data.comparison.runs.map((r) => r.run);
  return names.map((name, i) => {
    const stages = data.series[name] || [];
    const stage = stages.length ? stages[stages.length - 1] : {steps: [], loss: []};
    return {name, colour: RUN_COLOURS[i % RUN_COLOURS.length], line: true,
            points: stage.steps.map((step, k) => [step, stage.loss[k]])};
  });
}

function holdoutSeries(data) {
  return data.comparison.runs.map((run, i) => ({
    name: run.run, colour: RUN_COLOURS[i % RUN_COLOURS.length], line: true, dots: true,
    points: run.holdout_curve.map((p) => [p.step, p.holdout]),
  }));
}

function drawCompare(data) {
  if (!data.comparison) return;
  drawChart(document.getElementById("loss-overlay"), {
    series: lossSeries(data), xLabel: "step", yLabel: "loss", empty: "No run has logged a loss yet.",
  });
  drawChart(document.getElementById("holdout-overlay"), {
    series: holdoutSeries(data), xLabel: "step", yLabel: "holdout loss",
    empty: "No run has outputs/holdout-loss.json (the holdout loss was not measured).",
  });
}

drawCompare(pageData());
window.addEventListener("resize", () => drawCompare(pageData()));
