// gaffer's web page: task list, task page, approvals queue. No build step, no
// dependencies; every untrusted string goes through textContent.
"use strict";

const CSRF = document.querySelector('meta[name="csrf-token"]').content;
// Every journal event type, from the server: SSE events are named by type, and an
// EventSource hears a named event only with a listener for that name.
const EVENT_KINDS = document.querySelector('meta[name="event-kinds"]').content.split(" ");
const STAGES = ["queued", "planning", "awaiting_plan_approval", "coding", "reviewing", "arbitrating", "testing", "shipping", "done"];
const view = document.getElementById("view");

function el(tag, attrs, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k === "class") e.className = v;
    else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v === true ? "" : v);
  }
  for (const k of kids.flat()) if (k !== null && k !== undefined) e.append(k instanceof Node ? k : String(k));
  return e;
}

async function api(method, path, body) {
  const opts = { method, headers: { "X-CSRF-Token": CSRF } };
  if (body !== undefined) { opts.headers["Content-Type"] = "application/json"; opts.body = JSON.stringify(body); }
  const r = await fetch(path, opts);
  if (r.status === 401) { location.href = "/login"; throw new Error("log in"); }
  const data = r.headers.get("content-type")?.includes("json") ? await r.json() : null;
  return { status: r.status, data };
}

function age(ms) {
  const s = Math.max(0, Math.floor((Date.now() - ms) / 1000));
  if (s < 60) return s + "s ago"; if (s < 3600) return Math.floor(s / 60) + "m ago";
  if (s < 86400) return Math.floor(s / 3600) + "h ago"; return Math.floor(s / 86400) + "d ago";
}
const money = (x) => "$" + (x || 0).toFixed(x >= 1 ? 2 : 4);
const badge = (s) => el("span", { class: "badge " + s }, s.replaceAll("_", " "));

// One EventSource per page, resumed by the browser with Last-Event-ID.
let source = null;
function listen(path, onEvent) {
  if (source) source.close();
  source = new EventSource(path);
  const live = document.getElementById("live");
  source.onopen = () => { live.className = "live on"; };
  source.onerror = () => { live.className = "live off"; };
  source.onmessage = (m) => onEvent(JSON.parse(m.data));
  for (const t of EVENT_KINDS) source.addEventListener(t, (m) => onEvent(JSON.parse(m.data)));
  window.__gafferSource = source;
}

function debounce(f, ms) { let t = null; return () => { clearTimeout(t); t = setTimeout(f, ms); }; }

async function refreshPendingCount() {
  const { data } = await api("GET", "/api/approvals?state=pending");
  document.getElementById("pending-count").textContent = data && data.length ? data.length : "";
}

// ---------- task list ----------
async function tasksPage() {
  document.title = "gaffer — tasks";
  const [{ data: projects }, { data: tasks }] = await Promise.all([api("GET", "/api/projects"), api("GET", "/api/tasks?limit=100")]);
  const msg = el("p", { id: "form-msg", class: "err" });
  const form = el("form", { class: "card", id: "new-task-form" },
    el("label", { for: "project" }, "Project"),
    el("select", { id: "project", required: true }, (projects || []).map((p) => el("option", { value: p.name }, p.name))),
    el("label", { for: "request" }, "What should be done?"),
    el("textarea", { id: "request", required: true, placeholder: "Add a --json flag to the list command" }),
    el("div", { class: "row" }, el("button", { type: "submit", id: "submit" }, "Submit request")),
    msg);
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const { status, data } = await api("POST", "/api/tasks", { project: form.querySelector("#project").value, request: form.querySelector("#request").value });
    if (status === 201) location.href = "/tasks/" + encodeURIComponent(data.id);
    else msg.textContent = data?.error?.message || "failed (" + status + ")";
  });
  const list = el("ul", { class: "tasks", id: "task-list" });
  const render = (ts) => {
    list.replaceChildren(...(ts.length ? ts.map((t) => el("li", { class: "task-row", "data-id": t.id },
      el("a", { class: "req", href: "/tasks/" + encodeURIComponent(t.id) }, t.request.length > 140 ? t.request.slice(0, 139) + "…" : t.request),
      el("span", {}, badge(t.stage)),
      el("span", { class: "meta" }, t.project + " · " + age(t.created_at)),
      el("span", { class: "meta" }, money(t.cost_usd) + " · " + t.tokens + " tokens"))) : [el("li", { class: "muted" }, "No tasks yet.")]));
  };
  render(tasks || []);
  view.replaceChildren(el("h1", {}, "New request"), projects && projects.length ? form : el("p", { class: "muted" }, "Register a project first: gaffer project add PATH"), el("h2", {}, "Tasks"), list);
  const reload = debounce(async () => { const { data } = await api("GET", "/api/tasks?limit=100"); render(data || []); refreshPendingCount(); }, 150);
  listen("/api/events", (e) => { if (e.type.startsWith("task_") || e.type.startsWith("step_") || e.type.startsWith("approval_")) reload(); });
}

// ---------- approvals ----------
function details(a) {
  const d = a.details || {};
  const out = [];
  const subj = d.subject || {};
  if (subj.command || d.command) out.push(el("pre", {}, subj.command || d.command));
  const files = subj.paths || d.files;
  if (files && files.length) out.push(el("p", { class: "meta" }, "files: " + files.join(", ")));
  if (d.diff) out.push(diffBlock(d.diff));
  if (d.text) out.push(el("pre", {}, d.text));
  else if (d.plan) out.push(el("pre", {}, typeof d.plan === "string" ? d.plan : JSON.stringify(d.plan, null, 2)));
  if (d.tool && !subj.command) out.push(el("p", { class: "meta" }, "tool: " + d.tool));
  if (d.input !== undefined && d.input !== null && !subj.command) out.push(el("pre", {}, typeof d.input === "string" ? d.input : JSON.stringify(d.input, null, 2)));
  if (d.reason) out.push(el("p", {}, d.reason));
  if (a.expires_at && a.state === "pending") out.push(el("p", { class: "meta" }, "expires " + new Date(a.expires_at).toLocaleString() + " (then denied)"));
  return out;
}

function approvalCard(a, onGone) {
  const note = el("textarea", { class: "note", placeholder: "Note (optional)", "aria-label": "note" });
  const msg = el("p", { class: "err" });
  const card = el("div", { class: "card approval", "data-id": a.id, "data-kind": a.kind },
    el("div", { class: "row" }, badge(a.kind), badge(a.state), el("span", { class: "meta project" }, a.project || a.project_id),
      el("a", { href: "/tasks/" + encodeURIComponent(a.task_id), class: "meta" }, "task " + a.task_id.slice(0, 14) + "…")),
    el("p", { class: "summary" }, a.summary), details(a));
  if (a.state === "pending") {
    const decide = async (decision, forTask) => {
      for (const b of card.querySelectorAll("button")) b.disabled = true;
      const body = { decision, note: note.value || null, task_id: a.task_id };
      if (forTask) body.for_task = true;
      const { status, data } = await api("POST", "/api/approvals/" + encodeURIComponent(a.id) + "/decision", body);
      if (status === 200 || status === 409) { onGone(a.id, status === 409 ? data.error.message : null); }
      else { msg.textContent = data?.error?.message || "failed (" + status + ")"; for (const b of card.querySelectorAll("button")) b.disabled = false; }
    };
    const buttons = [
      el("button", { class: "approve", type: "button", onclick: () => decide("approve") }, "Approve"),
      el("button", { class: "deny", type: "button", onclick: () => decide("deny") }, "Deny")];
    // A grant needs a command to match later requests against (the server says the same).
    if (a.kind === "tool" && ((a.details || {}).subject || {}).command) {
      buttons.splice(1, 0, el("button", { class: "approve for-task", type: "button", title: "Also approve this exact command when this task asks for it again",
        onclick: () => decide("approve", true) }, "Allow for this task"));
    }
    card.append(note, el("div", { class: "row" }, ...buttons), msg);
  } else if (a.decided_by || a.note) {
    const who = a.decided_by ? (a.for_task ? "allowed for this task by " : "") + a.decided_by.name + " (" + a.decided_by.via + ")" : "";
    card.append(el("p", { class: "meta" }, who + (a.note ? ": " + a.note : "")));
  }
  return card;
}

async function approvalsPage() {
  document.title = "gaffer — approvals";
  const list = el("div", { id: "approvals" });
  const gone = (id) => {
    const c = list.querySelector('[data-id="' + CSS.escape(id) + '"]');
    if (c) c.remove();
    if (!list.querySelector(".approval")) list.replaceChildren(el("p", { class: "muted", id: "empty" }, "Nothing waits for you."));
    refreshPendingCount();
  };
  const load = async () => {
    const { data } = await api("GET", "/api/approvals?state=pending");
    list.replaceChildren(...((data || []).length ? data.map((a) => approvalCard(a, gone)) : [el("p", { class: "muted", id: "empty" }, "Nothing waits for you.")]));
    refreshPendingCount();
  };
  view.replaceChildren(el("h1", {}, "Approvals"), list);
  await load();
  const reload = debounce(load, 100);
  listen("/api/events", (e) => {
    const id = e.event.approval_id;
    if (e.type === "approval_requested") reload();
    else if (id && e.type.startsWith("approval_")) gone(id);
    else if (["task_done", "task_failed", "task_cancelled", "task_blocked"].includes(e.type)) reload();
  });
}

// ---------- task page ----------
const KEYWORDS = new Set(["fn", "let", "mut", "const", "pub", "struct", "enum", "impl", "use", "mod", "match", "return", "if", "else", "for", "while", "loop", "async", "await", "def", "class", "import", "from", "function", "var", "package", "func", "type", "interface", "true", "false", "null", "None", "self", "Self"]);

// A small highlighter: keywords and string literals, built with text nodes only.
function highlight(line) {
  const out = [];
  const re = /("(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|[A-Za-z_][A-Za-z0-9_]*)/g;
  let last = 0, m;
  while ((m = re.exec(line)) !== null) {
    if (m.index > last) out.push(line.slice(last, m.index));
    const tok = m[0];
    if (tok[0] === '"' || tok[0] === "'") out.push(el("span", { class: "str" }, tok));
    else if (KEYWORDS.has(tok)) out.push(el("span", { class: "kw" }, tok));
    else out.push(tok);
    last = m.index + tok.length;
  }
  if (last < line.length) out.push(line.slice(last));
  return out;
}

function diffBlock(text) {
  const pre = el("pre", { class: "diff" });
  for (const line of String(text).split("\n")) {
    const file = line.startsWith("+++") || line.startsWith("---") || line.startsWith("diff ");
    const cls = file ? "file" : line.startsWith("+") ? "add" : line.startsWith("-") ? "del" : line.startsWith("@@") ? "hunk" : null;
    const body = file || cls === "hunk" ? [line] : [line.slice(0, 1), ...highlight(line.slice(1))];
    pre.append(el("span", { class: cls }, body), "\n");
  }
  return pre;
}

function describe(e) {
  const ev = e.event;
  switch (e.type) {
    case "task_created": return "task created: " + ev.request;
    case "task_stage_entered": return "stage → " + ev.stage;
    case "step_intent_recorded": return "step " + ev.step_id + " (" + ev.intent + "): " + ev.name;
    case "step_started": return "step " + ev.step_id + " started";
    case "step_completed": return "step " + ev.step_id + " completed";
    case "step_failed": return "step " + ev.step_id + " failed: " + ev.error;
    case "approval_requested": return ev.kind + " approval asked: " + ev.summary;
    case "approval_decided": return "approval " + ev.decision + " by " + ev.by.name + (ev.note ? ": " + ev.note : "");
    case "approval_expired": return "approval expired: " + ev.reason;
    case "approval_withdrawn": return "approval withdrawn: " + ev.reason;
    case "task_leased": return "worker " + ev.worker_id + " took the task (lease generation " + ev.generation + ")";
    case "ci_status_changed": return "CI " + ev.state + " for " + String(ev.sha).slice(0, 12);
    case "agent_activity": return "agent: " + (ev.text || ev.summary || JSON.stringify(ev).slice(0, 200));
    default: return e.type.replaceAll("_", " ");
  }
}

// Which worker runs the task: with many workers (many machines) on one
// database, this is where to look for its processes and logs.
function workerLine(w) {
  const where = w.host ? " on " + w.host + (w.pid ? " (pid " + w.pid + ")" : "") : "";
  const state = { held: "running it", released: "released it", expired: "stopped renewing its lease; the next worker to claim the task takes it over" }[w.state] || w.state;
  return "worker " + w.id + where + " · " + state + " · lease generation " + w.generation;
}

async function taskPage(id) {
  const events = el("ul", { id: "events" });
  const top = el("div", { id: "task" });
  view.replaceChildren(top, el("h2", {}, "Live events"), events);
  const render = async () => {
    const { status, data: t } = await api("GET", "/api/tasks/" + encodeURIComponent(id));
    if (status !== 200) { top.replaceChildren(el("p", { class: "err" }, t?.error?.message || "not found")); return; }
    document.title = "gaffer — " + t.request.slice(0, 40);
    const idx = STAGES.indexOf(t.stage);
    const stages = el("ul", { class: "stages", id: "stages" }, STAGES.map((s, i) => el("li", { class: i < idx ? "past" : i === idx ? "current" : "" }, s.replaceAll("_", " "))));
    const final = ["failed", "cancelled", "blocked"].includes(t.stage);
    const parts = [
      el("h1", {}, t.request),
      el("p", { class: "row" }, el("span", { id: "stage" }, badge(t.stage)), el("span", { class: "meta" }, t.project + " · " + age(t.created_at) + " · " + t.tokens + " tokens · " + money(t.cost_usd))),
      final ? el("p", { class: "err" }, JSON.stringify(t.outcome)) : stages,
    ];
    if (t.worker) parts.push(el("p", { class: "meta", id: "worker" }, workerLine(t.worker)));
    if (!["done", "failed", "cancelled", "blocked"].includes(t.stage)) {
      parts.push(el("div", { class: "row" }, el("button", { class: "deny", type: "button", id: "cancel", onclick: async () => { await api("POST", "/api/tasks/" + encodeURIComponent(id) + "/cancel", { reason: "cancelled from the web page" }); render(); } }, "Cancel task")));
    }
    const pending = t.approvals.filter((a) => a.state === "pending");
    if (pending.length) parts.push(el("h2", {}, "Waiting for you"), pending.map((a) => approvalCard(a, () => render())));
    for (const s of t.steps) {
      const r = s.receipt || {};
      if (r.plan) parts.push(el("h2", {}, "Plan"), el("pre", {}, typeof r.plan === "string" ? r.plan : JSON.stringify(r.plan, null, 2)));
      if (r.verdict) parts.push(el("h2", {}, "Review verdict (" + s.id + ")"), el("pre", {}, typeof r.verdict === "string" ? r.verdict : JSON.stringify(r.verdict, null, 2)));
      const out = r.output_tail || r.check_output || r.output;
      if (out !== undefined && out !== null) parts.push(el("h2", {}, "Check " + (r.passed ? "passed" : "failed") + (r.command ? ": " + r.command : "") + " (" + s.id + ")"), el("pre", {}, out));
      if (r.ruling) parts.push(el("h2", {}, "Arbiter ruling (" + s.id + ")"), el("pre", {}, typeof r.ruling === "string" ? r.ruling : JSON.stringify(r.ruling, null, 2)));
      if (r.changed_files && r.changed_files.length) parts.push(el("p", { class: "meta" }, s.id + " changed: " + r.changed_files.join(", ")));
      if (r.diff) parts.push(el("h2", {}, "Diff (" + s.id + ")"), diffBlock(r.diff));
    }
    parts.push(el("h2", {}, "Steps"), el("ul", { class: "tasks" }, t.steps.map((s) => el("li", { class: "task-row" }, el("span", {}, s.id + " — " + s.name), badge(s.state), el("span", { class: "meta" }, s.intent + " · attempt " + s.attempt), el("span", { class: "meta err" }, s.error || "")))));
    const diff = await api("GET", "/api/tasks/" + encodeURIComponent(id) + "/diff");
    if (diff.status === 200 && diff.data.diff.trim()) parts.push(el("h2", {}, "Worktree diff (" + diff.data.branch + ")"), el("div", { id: "diff" }, diffBlock(diff.data.diff)));
    const done = t.approvals.filter((a) => a.state !== "pending");
    if (done.length) parts.push(el("h2", {}, "Decided"), done.map((a) => approvalCard(a, () => {})));
    top.replaceChildren(...parts.flat());
  };
  await render();
  const rerender = debounce(render, 120);
  listen("/api/tasks/" + encodeURIComponent(id) + "/events", (e) => {
    events.append(el("li", { "data-pos": e.pos }, el("span", { class: "t" }, new Date(e.at).toLocaleTimeString() + " "), describe(e)));
    events.scrollTop = events.scrollHeight;
    rerender();
    refreshPendingCount();
  });
}

async function main() {
  const p = location.pathname;
  refreshPendingCount();
  try {
    if (p === "/approvals") await approvalsPage();
    else if (p.startsWith("/tasks/")) await taskPage(decodeURIComponent(p.slice(7)));
    else await tasksPage();
  } catch (err) { view.replaceChildren(el("p", { class: "err" }, String(err))); }
}
main();
