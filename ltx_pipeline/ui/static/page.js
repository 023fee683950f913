"use strict";
// What both pages share: building nodes safely (text is always textContent, never HTML), the state
// badge, and polling a JSON endpoint every data-poll-ms while marking the "live" light.

function h(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (key === "class") node.className = value;
    else if (key in node && key !== "list") node[key] = value;
    else node.setAttribute(key, value === true ? "" : String(value));
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    node.appendChild(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

function badge(state) {
  return h("span", {class: "badge state-" + String(state).replace(/[^a-z_]/g, "")}, String(state).replace(/_/g, " "));
}

function pageData() {
  return JSON.parse(document.getElementById("page-data").textContent);
}

function stepText(training) {
  if (!training || training.step === null || training.step === undefined) return "";
  return training.total ? `${training.step}/${training.total}` : String(training.step);
}

function lastLoss(training) {
  const losses = (training && training.last_losses) || [];
  const last = losses.length ? losses[losses.length - 1] : null;
  return last === null || last === undefined ? "" : Number(last).toPrecision(4);
}

// Re-read `url` every data-poll-ms and hand the JSON to `apply`; the "live" light says whether the last read worked.
function poll(url, apply) {
  const every = Number(document.body.dataset.pollMs) || 2000;
  const light = document.getElementById("live");
  async function once() {
    try {
      const response = await fetch(url, {cache: "no-store"});
      if (!response.ok) throw new Error(`${response.status}`);
      apply(await response.json());
      light.className = "live";
      light.textContent = "live";
    } catch (error) {
      light.className = "live stale";
      light.textContent = "not updating (" + error.message + ")";
    }
    setTimeout(once, every);
  }
  setTimeout(once, every);
}
