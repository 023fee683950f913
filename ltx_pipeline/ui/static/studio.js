"use strict";
// The studio's write controls: the new-run form and its folder picker, the gate panel (Approve, caption
// edits) and the control bar. Every change is a POST of JSON to /api/studio/... carrying the CSRF token
// (the page's meta tag, else the cookie: double-submit); the server answers with the CLI command it ran,
// or the CLI's one-line error, and the page shows either as it came. Text is only ever set as text.

const RAN_KEY = "ltx-pipeline-ran";  // the last command, kept across the reloads a new gate causes
const DRAWN_KEY = "ltx-pipeline-drawn";  // the gate subject last drawn: never reload twice for one gate

function csrfToken() {
  const meta = document.querySelector('meta[name="csrf-token"]');
  if (meta && meta.content) return meta.content;
  const cookie = document.cookie.split("; ").find((c) => c.startsWith("ltx_pipeline_csrf="));
  return cookie ? decodeURIComponent(cookie.slice("ltx_pipeline_csrf=".length)) : "";
}

// The answer as an object: the server's JSON, or {ok: false, error} made from a plain-text refusal.
async function answerOf(response) {
  const text = await response.text();
  let data = null;
  try { data = JSON.parse(text); } catch (_) { data = null; }
  if (data && typeof data === "object") {
    if (!response.ok) data.ok = false;
    if (!data.ok && !data.error) data.error = `${response.status}: ${text.trim().split("\n")[0]}`;
    data.status = response.status;
    return data;
  }
  return {ok: response.ok, status: response.status, error: text.trim().split("\n")[0] || `HTTP ${response.status}`};
}

async function studioPost(path, body) {
  try {
    const response = await fetch(path, {
      method: "POST", cache: "no-store", credentials: "same-origin",
      headers: {"Content-Type": "application/json", "X-CSRF-Token": csrfToken()}, body: JSON.stringify(body)});
    return await answerOf(response);
  } catch (error) {
    return {ok: false, status: 0, error: `the dashboard did not answer (${error.message})`};
  }
}

function say(id, text) {
  const node = document.getElementById(id);
  if (!node) return;
  node.replaceChildren(...(Array.isArray(text) ? text : [text]));
  node.hidden = !text || (Array.isArray(text) && !text.length);
}

function ranNode(command, message) {
  return [h("span", {class: "label"}, "Ran: "), h("code", {}, command), message ? h("span", {class: "message"}, " ", message) : null];
}

function remember(run, answer) {
  try { sessionStorage.setItem(RAN_KEY, JSON.stringify({run, command: answer.command, message: answer.message || ""})); }
  catch (_) { /* storage off: the audit list still shows it */ }
}

function showRan(answer) {
  if (answer && answer.command) say("last-command", ranNode(answer.command, answer.message));
}

// ---- The new-run page -------------------------------------------------------------------------------------

function formBody(form) {
  const body = {};
  for (const field of form.querySelectorAll("[data-key]")) {
    const key = field.dataset.key;
    if (field.dataset.kind === "bool") {
      if (field.checked) body[key] = true;
      continue;
    }
    const raw = field.value.trim();
    if (raw === "") continue;  // not given: the CLI's default stands
    if (field.dataset.kind === "lines") {  // one item per line (--set KEY=VALUE)
      body[key] = raw.split("\n").map((line) => line.trim()).filter((line) => line !== "");
      continue;
    }
    const number = Number(raw);
    body[key] = field.dataset.kind === "str" || Number.isNaN(number) ? raw : number;  // the server judges it
  }
  return body;
}

async function waitForRun(name, seconds) {
  const deadline = Date.now() + seconds * 1000;
  while (Date.now() < deadline) {
    try {  // the list, not /api/runs/<name>: a run not there yet is not an error to log
      const response = await fetch("/api/runs", {cache: "no-store"});
      if (response.ok && (await response.json()).runs.some((r) => r.name === name)) return true;
    } catch (_) { /* the next try */ }
    await new Promise((done) => setTimeout(done, 400));
  }
  return false;
}

function setUpNewRun(form) {
  const submit = document.getElementById("submit-run");
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    say("form-error", "");
    submit.disabled = true;
    const body = formBody(form);
    const answer = await studioPost("/api/studio/runs", body);
    if (!answer.ok) {
      say("form-error", answer.error);
      submit.disabled = false;
      return;
    }
    const name = answer.run || body.run;
    remember(name, answer);
    say("last-command", [...ranNode(answer.command, "planning…")]);
    if (await waitForRun(name, 60)) {
      window.location.assign("/runs/" + encodeURIComponent(name));
    } else {
      say("form-error", [`The run ${name} has not appeared in the store yet: see its logs folder, or the `,
        h("a", {href: "/"}, "runs list"), "."]);
      submit.disabled = false;
    }
  });
  setUpPicker();
}

let pickerAt = null;  // the folder the picker shows; null: the roots

async function browse(path) {
  const query = path ? "?path=" + encodeURIComponent(path) : "";
  let answer;
  try {
    answer = await answerOf(await fetch("/api/studio/browse" + query, {cache: "no-store"}));
  } catch (error) {
    answer = {ok: false, error: error.message};
  }
  if (answer.ok === false || !answer.entries && !answer.roots) {
    say("picker-error", answer.error || "the folder could not be listed");
    return;
  }
  say("picker-error", "");
  pickerAt = answer.path || null;
  const entries = pickerAt ? answer.entries || [] : (answer.roots || []).map((r) => ({name: r, path: r, kind: "dir"}));
  document.getElementById("picker-path").textContent = pickerAt || "data roots";
  document.getElementById("picker-up").disabled = !pickerAt;
  document.getElementById("picker-up").dataset.parent = answer.parent || "";
  document.getElementById("picker-use").disabled = !pickerAt;
  const items = entries.map((entry) => h("li", {class: "kind-" + entry.kind},
    h("button", {type: "button", class: "entry", "data-path": entry.path, "data-kind": entry.kind},
      entry.kind === "dir" ? entry.name + "/" : entry.name),
    entry.kind === "dir" ? null : h("span", {class: "kind"}, entry.kind)));
  document.getElementById("picker-entries").replaceChildren(
    ...(items.length ? items : [h("li", {class: "empty"}, "No folder, video or metadata file here.")]));
}

function choose(path) {
  document.getElementById("field-dataset").value = path;
  document.getElementById("picker").hidden = true;
}

function setUpPicker() {
  const open = document.getElementById("browse");
  if (!open) return;
  const picker = document.getElementById("picker");
  open.addEventListener("click", () => {
    picker.hidden = false;
    const typed = document.getElementById("field-dataset").value.trim();
    browse(typed || pickerAt);
  });
  document.getElementById("picker-close").addEventListener("click", () => { picker.hidden = true; });
  document.getElementById("picker-up").addEventListener("click", (event) => browse(event.target.dataset.parent || null));
  document.getElementById("picker-use").addEventListener("click", () => { if (pickerAt) choose(pickerAt); });
  document.getElementById("picker-entries").addEventListener("click", (event) => {
    const button = event.target.closest("button.entry");
    if (!button) return;
    if (button.dataset.kind === "dir") browse(button.dataset.path);
    else choose(button.dataset.path);
  });
}

// ---- The run page -----------------------------------------------------------------------------------------

const dirty = new Set();  // caption boxes edited and not saved: a reload would lose them
const replaced = new Set();  // subjects this page's own saves made out of date: the run re-reads, not stale

function runPath(run, action) {
  return `/api/studio/runs/${encodeURIComponent(run)}/${action}`;
}

function after(run, answer, errorId) {
  if (answer.ok) {
    say(errorId, "");
    remember(run, answer);
    showRan(answer);
  } else {
    say(errorId, answer.error);
  }
  return answer;
}

async function act(run, action) {
  if (action === "resume" || action === "apply_fix") {
    const queue = document.getElementById("resume-queue").checked;  // --queue: wait for free GPUs
    return after(run, await studioPost(runPath(run, "resume"), {apply_fix: action === "apply_fix", queue}),
      "action-error");
  }
  if (action === "continue") {
    const steps = Number(document.getElementById("continue-steps").value);
    return after(run, await studioPost(runPath(run, "continue"), {steps}), "action-error");
  }
  if (action === "stop") {
    // Asked first without a confirmation, the server says what stopping now would lose; the person decides.
    const asked = await studioPost(runPath(run, "stop"), {confirm: false});
    if (asked.ok || asked.status !== 400) return after(run, asked, "action-error");  // e.g. 409: nothing to stop
    const loses = asked.error.split(" Fix: ")[0].replace(/\s*\(stop\)\.?$/, ".");
    if (!window.confirm(`Stop ${run}? ${loses}`)) return asked;
    return after(run, await studioPost(runPath(run, "stop"), {confirm: true}), "action-error");
  }
  if (action === "remove") {
    if (!window.confirm(`Remove ${run}? Its folder in the workspace and its records go; your clips stay.`)) return null;
    const answer = after(run, await studioPost(runPath(run, "remove"), {confirm: true}), "action-error");
    if (answer.ok) window.location.assign("/");
    return answer;
  }
  return null;
}

async function approve(run, button) {
  button.disabled = true;
  const answer = await studioPost(runPath(run, "approve"), {gate: button.dataset.gate, subject: button.dataset.subject});
  after(run, answer, "gate-error");
  if (answer.ok) {
    approvedHere = true;  // the command shown above says what was approved; the page follows the run on
    document.getElementById("gate-panel").hidden = true;
  } else {
    button.disabled = false;
    if (answer.status === 409) say("gate-stale", staleNote());
  }
}

async function saveCaption(run, index) {
  const box = document.getElementById("caption-" + index);
  const answer = await studioPost(runPath(run, "captions"), {clip: box.dataset.clip, caption: box.value});
  if (!answer.ok) {
    say("gate-error", answer.error);
    return;
  }
  say("gate-error", "");
  dirty.delete(box.id);
  box.defaultValue = box.value;
  const button = document.getElementById("approve");
  if (button && answer.subject) {
    // This page made the change, so it knows what the new subject is: Approve now approves that.
    if (answer.subject !== button.dataset.subject) replaced.add(button.dataset.subject);
    button.dataset.subject = answer.subject;
    document.getElementById("gate-panel").dataset.subject = answer.subject;
  }
  say("saved-" + index, "saved: the captions changed, approve them again");
  gateOpen(false);  // until the run has re-read them and asks again (the next polls say when)
  say("gate-stale", "The run is re-reading the captions: Approve comes back when it asks again.");
  if (answer.command) showRan(answer);
}

function staleNote() {
  return ["This changed since the page was drawn: ", h("a", {href: window.location.pathname}, "reload"), " to read it again."];
}

function renderAudit(audit) {
  const list = document.getElementById("audit");
  if (!list || !Array.isArray(audit)) return;
  const items = audit.map((a) => h("li", {}, h("span", {class: "at"}, a.at), " ", h("b", {class: "who"}, a.who), " ",
    h("span", {class: "action"}, a.action), " ", a.command ? h("code", {}, a.command) : null, " ",
    h("span", {class: "outcome" + (a.outcome === "ok" ? "" : " bad")}, a.outcome)));
  list.replaceChildren(...(items.length ? items : [h("li", {class: "empty"}, "Nothing done from the dashboard yet.")]));
}

let reloading = false;
let approvedHere = false;  // this page's Approve went through: a gate after it is a new one to draw

function gateOpen(open) {
  const button = document.getElementById("approve");
  if (button) button.disabled = !open;
  for (const save of document.querySelectorAll("button.save-caption")) save.disabled = !open;
}

// Called by run.js with every poll of /api/runs/<name>: what is possible now, the audit, and the gate.
function studioLive(live) {
  if (!document.getElementById("studio")) return;
  if (Array.isArray(live.actions)) {
    for (const button of document.querySelectorAll("#controls [data-action]")) {
      button.disabled = !live.actions.includes(button.dataset.action);
    }
  }
  // A run driven from the page is detached as `--detach` leaves it: once its trainer is done, Resume collects it.
  const training = (live.run && live.run.training) || {};
  const collect = live.run && live.run.state === "detached" && training.state === "finished" &&
    Array.isArray(live.actions) && live.actions.includes("resume");
  document.getElementById("action-resume").classList.toggle("primary", Boolean(collect));
  say("studio-hint", collect ? "The trainer finished: Resume collects what it made (summary, evaluation) and " +
    "finishes the run, as `ltx-pipeline resume` does." : "");
  if ("fix" in live) {
    const line = document.getElementById("fix-line");
    line.hidden = !live.fix;
    line.querySelector("span").textContent = live.fix || "";
    document.getElementById("action-apply-fix").title = live.fix || "no fix proposed";
  }
  renderAudit(live.audit);
  if (!("gate" in live) || !("gate" in pageData())) return;  // a server without gates in its pages
  const panel = document.getElementById("gate-panel");
  const gate = live.gate;
  if (gate && (!panel || panel.dataset.kind !== gate.kind || approvedHere)) {
    // A gate this page did not draw: draw it (the server renders plan.md safely), unless an edit would be lost.
    if (!dirty.size && !reloading && sessionStorage.getItem(DRAWN_KEY) !== gate.subject) {
      reloading = true;
      sessionStorage.setItem(DRAWN_KEY, gate.subject);
      window.location.reload();
    }
    return;
  }
  if (!panel || approvedHere) return;
  const button = document.getElementById("approve");
  if (!gate || replaced.has(gate.subject)) {
    // At work (a saved caption is being re-read, or approved elsewhere): nothing to approve until it asks again.
    gateOpen(false);
    say("gate-stale", "The run is at work: Approve and Save come back when it waits at this gate again.");
  } else if (button && gate.subject !== button.dataset.subject) {
    gateOpen(false);
    say("gate-stale", staleNote());
  } else {
    gateOpen(true);
    say("gate-stale", "");
  }
}

function setUpRun(studio) {
  const run = studio.dataset.run;
  try {
    const ran = JSON.parse(sessionStorage.getItem(RAN_KEY) || "null");
    if (ran && ran.run === run) showRan(ran);
  } catch (_) { /* nothing remembered */ }
  const panel = document.getElementById("gate-panel");
  if (panel) sessionStorage.setItem(DRAWN_KEY, panel.dataset.subject);
  document.getElementById("controls").addEventListener("click", (event) => {
    const button = event.target.closest("button[data-action]");
    if (button && !button.disabled) act(run, button.dataset.action);
  });
  const approveButton = document.getElementById("approve");
  if (approveButton) approveButton.addEventListener("click", () => approve(run, approveButton));
  for (const button of document.querySelectorAll("button.save-caption")) {
    button.addEventListener("click", () => saveCaption(run, button.dataset.index));
  }
  for (const box of document.querySelectorAll("#captions textarea")) {
    box.addEventListener("input", () => {
      if (box.value === box.defaultValue) dirty.delete(box.id); else dirty.add(box.id);
    });
  }
}

(() => {
  const form = document.getElementById("new-run-form");
  if (form) setUpNewRun(form);
  const studio = document.getElementById("studio");
  if (studio) setUpRun(studio);
})();
