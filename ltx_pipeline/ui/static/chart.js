"use strict";
// Small SVG charts for the dashboard: lines over training steps, and points with a limit line (autotune's
// memory against speed). Drawn here, not with a charting library: two chart kinds need ~150 lines, the
// package ships no third-party code to audit or update, and each chart states how many points it drew
// (data-points) so a test can watch a curve grow.
const SVG_NS = "http://www.w3.org/2000/svg";

function svgEl(name, attrs, parent) {
  const node = document.createElementNS(SVG_NS, name);
  for (const [key, value] of Object.entries(attrs || {})) node.setAttribute(key, String(value));
  if (parent) parent.appendChild(node);
  return node;
}

// About `count` round tick values covering [min, max] (1, 2 or 5 times a power of ten apart).
function niceTicks(min, max, count) {
  if (!(max > min)) { max = min + 1; }
  const raw = (max - min) / Math.max(1, count);
  const power = Math.pow(10, Math.floor(Math.log10(raw)));
  const step = [1, 2, 5, 10].map((m) => m * power).find((s) => s >= raw);
  const ticks = [];
  for (let t = Math.ceil(min / step) * step; t <= max + step * 1e-9; t += step) ticks.push(+t.toPrecision(12));
  return ticks;
}

function fmt(value) {
  const abs = Math.abs(value);
  if (abs !== 0 && (abs < 0.01 || abs >= 1e5)) return value.toExponential(1);
  return String(+value.toPrecision(3));
}

// spec: {series: [{name, points: [[x, y], ...], colour, line, dots}], hline: {y, label} | null,
//        xLabel, yLabel, labels: [[x, y, text], ...], empty: "text shown without points"}
function drawChart(container, spec) {
  const width = Math.max(container.clientWidth || 0, 320), height = 240;
  const pad = {left: 56, right: 16, top: 12, bottom: 40};
  const all = spec.series.flatMap((s) => s.points).filter((p) => p[1] !== null && isFinite(p[1]));
  container.textContent = "";
  container.dataset.points = String(all.length);
  if (!all.length) {
    const empty = document.createElement("p");
    empty.className = "empty";
    empty.textContent = spec.empty || "No points yet.";
    container.appendChild(empty);
    return;
  }
  const xs = all.map((p) => p[0]), ys = all.map((p) => p[1]);
  if (spec.hline) ys.push(spec.hline.y);
  let [x0, x1, y0, y1] = [Math.min(...xs), Math.max(...xs), Math.min(...ys), Math.max(...ys)];
  if (spec.fromZero) { x0 = Math.min(0, x0); y0 = Math.min(0, y0); x1 *= 1.15; }
  if (x0 === x1) { const half = Math.abs(x0) * 0.5 || 1; x0 -= half; x1 += half; }
  const ySpan = (y1 - y0) || Math.abs(y1) || 1;
  if (!spec.fromZero) y0 -= ySpan * 0.05;
  y1 += ySpan * 0.08;
  const sx = (x) => pad.left + (x - x0) / (x1 - x0) * (width - pad.left - pad.right);
  const sy = (y) => height - pad.bottom - (y - y0) / (y1 - y0) * (height - pad.top - pad.bottom);
  const svg = svgEl("svg", {viewBox: `0 0 ${width} ${height}`, width, height, role: "img",
                            "aria-label": spec.yLabel + " against " + spec.xLabel}, container);
  for (const t of niceTicks(y0, y1, 5)) {
    svgEl("line", {x1: pad.left, x2: width - pad.right, y1: sy(t), y2: sy(t), class: "grid"}, svg);
    svgEl("text", {x: pad.left - 6, y: sy(t) + 4, class: "tick", "text-anchor": "end"}, svg).textContent = fmt(t);
  }
  for (const t of niceTicks(x0, x1, 6)) {
    svgEl("text", {x: sx(t), y: height - pad.bottom + 16, class: "tick", "text-anchor": "middle"}, svg)
      .textContent = fmt(t);
  }
  svgEl("text", {x: (pad.left + width - pad.right) / 2, y: height - 6, class: "axis", "text-anchor": "middle"}, svg)
    .textContent = spec.xLabel;
  svgEl("text", {x: 12, y: (pad.top + height - pad.bottom) / 2, class: "axis", "text-anchor": "middle",
                 transform: `rotate(-90 12 ${(pad.top + height - pad.bottom) / 2})`}, svg).textContent = spec.yLabel;
  if (spec.hline) {
    svgEl("line", {x1: pad.left, x2: width - pad.right, y1: sy(spec.hline.y), y2: sy(spec.hline.y), class: "limit"}, svg);
    svgEl("text", {x: pad.left + 6, y: sy(spec.hline.y) - 5, class: "limit-label"}, svg)
      .textContent = spec.hline.label;
  }
  for (const series of spec.series) {
    const pts = series.points.filter((p) => p[1] !== null && isFinite(p[1]));
    if (series.line && pts.length > 1) {
      svgEl("polyline", {points: pts.map((p) => `${sx(p[0])},${sy(p[1])}`).join(" "), fill: "none",
                         stroke: series.colour, "stroke-width": 1.5}, svg);
    }
    if (series.dots || pts.length === 1) {
      for (const p of pts) {
        const dot = svgEl("circle", {cx: sx(p[0]), cy: sy(p[1]), r: series.line ? 2.5 : 5, fill: series.colour}, svg);
        svgEl("title", {}, dot).textContent = `${series.name}: ${fmt(p[0])}, ${fmt(p[1])}`;
      }
    }
  }
  for (const [x, y, text] of spec.labels || []) {
    svgEl("text", {x: sx(x) + 7, y: sy(y) - 7, class: "point-label"}, svg).textContent = text;
  }
  if (spec.series.length > 1) {  // the legend as HTML under the plot, where it never covers a line
    const legend = document.createElement("div");
    legend.className = "legend";
    for (const series of spec.series) {
      const key = document.createElement("span");
      key.style.setProperty("--key", series.colour);
      key.textContent = series.name;
      legend.appendChild(key);
    }
    container.appendChild(legend);
  }
}

window.drawChart = drawChart;
