// The board: every task by stage, per project, with filters, the approvals
// waiting, and the form for a new task.
import { html, api, errorText, ago, badge, clip, firstLine, money, stageName, useEffect, useRef, useState, useNow, throttle } from "./lib.js";
import { onEvent, useApprovals } from "./live.js";

const COLUMNS = [
  { id: "queued", title: "Queued", stages: ["waiting", "queued"] },
  { id: "planning", title: "Planning", stages: ["planning"] },
  { id: "approval", title: "Awaiting approval", stages: ["awaiting_plan_approval"] },
  { id: "coding", title: "Coding", stages: ["coding"] },
  { id: "reviewing", title: "Reviewing", stages: ["reviewing", "arbitrating"] },
  { id: "testing", title: "Testing", stages: ["testing"] },
  { id: "shipping", title: "Shipping", stages: ["shipping"] },
  { id: "done", title: "Done", stages: ["done"] },
  { id: "failed", title: "Failed", stages: ["failed", "cancelled", "blocked"] },
];

const AGENTS = ["claude", "codex", "gemini", "openai", "anthropic"];

function Card({ t, asks, now }) {
  const reason = t.outcome && typeof t.outcome === "object" ? t.outcome.reason : null;
  return html`<li class=${"task-card" + (asks ? " asks" : "")} data-id=${t.id}>
    <a class="card-link" href=${"/tasks/" + encodeURIComponent(t.id)}>
      <span class="req">${clip(firstLine(t.request), 140)}</span>
    </a>
    ${asks ? html`<a class="needs" href=${"/tasks/" + encodeURIComponent(t.id) + "#waiting-h"}>${asks} approval${asks === 1 ? "" : "s"} waiting</a>` : null}
    ${reason ? html`<p class="reason small">${clip(firstLine(reason), 120)}</p>` : null}
    ${t.stage === "waiting" ? html`<p class="waits small">Waits for ${t.after.filter((d) => d.stage !== "done").map((d, i) => html`${i ? ", " : ""}<a href=${"/tasks/" + encodeURIComponent(d.id)}><code>${d.id.slice(0, 10)}</code></a>`)}</p>` : null}
    <div class="card-meta">
      <span class="chip">${t.project}</span>
      ${["waiting", "cancelled", "blocked"].includes(t.stage) ? badge(t.stage) : null}
      <span class="muted">${ago(t.updated_at, now)}</span>
      <span class="spacer"></span>
      <span class="muted cost">${money(t.cost_usd)}</span>
    </div>
  </li>`;
}

function NewTask({ projects, tasks, onClose }) {
  const ref = useRef(null);
  const [msg, setMsg] = useState("");
  const [project, setProject] = useState(projects[0]?.name || "");
  // Tasks it may start after: the chosen project's that have not failed, been cancelled or blocked.
  const before = (tasks || []).filter((t) => t.project === project && !["failed", "cancelled", "blocked"].includes(t.stage));
  const [busy, setBusy] = useState(false);
  useEffect(() => { ref.current?.showModal(); }, []);
  const submit = async (ev) => {
    ev.preventDefault();
    const f = ev.currentTarget;
    setBusy(true);
    const body = { project: f.project.value, request: f.request.value };
    if (f.agent.value) body.agent = f.agent.value;
    const after = [...f.after.selectedOptions].map((o) => o.value);
    if (after.length) body.after = after;
    const r = await api("POST", "/api/tasks", body);
    setBusy(false);
    if (r.status === 201) location.href = "/tasks/" + encodeURIComponent(r.data.id);
    else setMsg(errorText(r));
  };
  return html`<dialog ref=${ref} class="dialog wide" aria-labelledby="new-task-title" onClose=${onClose}>
    <form id="new-task-form" class="form" onSubmit=${submit}>
      <h2 id="new-task-title">New task</h2>
      <label for="project">Project</label>
      <select id="project" name="project" required onChange=${(e) => setProject(e.currentTarget.value)}>${projects.map((p) => html`<option value=${p.name}>${p.name}</option>`)}</select>
      <label for="request">What should be done?</label>
      <textarea id="request" name="request" required rows="5" placeholder="Add a --json flag to the list command"></textarea>
      <label for="agent">Agent</label>
      <select id="agent" name="agent"><option value="">As configured</option>${AGENTS.map((a) => html`<option value=${a}>${a}</option>`)}</select>
      <label for="after">Start after <span class="muted">(optional; it waits until these are done)</span></label>
      <select id="after" name="after" multiple size=${Math.min(4, Math.max(2, before.length))} disabled=${!before.length} aria-describedby="after-hint">
        ${before.map((t) => html`<option value=${t.id}>${clip(firstLine(t.request), 60)} · ${stageName(t.stage)}</option>`)}
      </select>
      <p class="muted small" id="after-hint">${before.length ? "Ctrl- or ⌘-click to pick several." : "No open task in this project to wait for."}</p>
      ${msg ? html`<p class="err" role="alert" id="form-msg">${msg}</p>` : null}
      <div class="actions end">
        <button type="button" class="secondary" onClick=${() => ref.current?.close()}>Cancel</button>
        <button type="submit" class="primary" id="submit" disabled=${busy}>${busy ? "Submitting…" : "Start task"}</button>
      </div>
    </form>
  </dialog>`;
}

export function Board() {
  const [tasks, setTasks] = useState(null);
  const [projects, setProjects] = useState([]);
  const [project, setProject] = useState(new URLSearchParams(location.search).get("project") || "");
  const [query, setQuery] = useState("");
  const [creating, setCreating] = useState(false);
  const { pending } = useApprovals();
  const now = useNow(30000);
  document.title = "Board — gaffer";

  useEffect(() => {
    let gone = false;
    const load = async () => {
      const [p, t] = await Promise.all([api("GET", "/api/projects"), api("GET", "/api/tasks?limit=200")]);
      if (gone) return;
      if (p.status === 200) setProjects(p.data);
      if (t.status === 200) setTasks(t.data);
    };
    load();
    // Events patch the board: a stage change moves a card at once; a finished step
    // changes what a task cost, which only the server counts, so that task is read again.
    const stale = new Set();
    const reread = throttle(async () => {
      const ids = [...stale];
      stale.clear();
      for (const id of ids) {
        const r = await api("GET", `/api/tasks/${encodeURIComponent(id)}`);
        if (r.status !== 200 || gone) continue;
        const { steps, approvals, sessions, worker, spend, ...task } = r.data;
        setTasks((ts) => (ts || []).some((x) => x.id === id) ? ts.map((x) => (x.id === id ? task : x)) : [task, ...(ts || [])]);
      }
    }, 800);
    const off = onEvent((e) => {
      const stage = { task_stage_entered: e.event.stage, task_done: "done", task_failed: "failed", task_cancelled: "cancelled", task_blocked: "blocked", task_dependency_failed: "blocked" }[e.type];
      if (stage) setTasks((ts) => ts && ts.map((x) => (x.id === e.stream_id ? { ...x, stage, updated_at: e.at } : x)));
      const ended = stage && e.type !== "task_stage_entered"; // with its outcome to show
      // A dependency done changes what a waiting task waits for (the last queues it).
      if (e.type === "task_created" || e.type === "step_completed" || e.type === "task_dependency_done" || ended) {
        stale.add(e.stream_id);
        reread();
      }
    });
    return () => { gone = true; off(); };
  }, []);

  const waiting = pending();
  const asks = {};
  for (const a of waiting) asks[a.task_id] = (asks[a.task_id] || 0) + 1;
  const q = query.trim().toLowerCase();
  const shown = (tasks || []).filter((t) => (!project || t.project === project) && (!q || t.request.toLowerCase().includes(q) || t.id.includes(q)));
  const columns = COLUMNS.map((c) => ({ ...c, tasks: shown.filter((t) => c.stages.includes(t.stage)) }));
  return html`<main class="page wide" id="main">
    <div class="page-head">
      <h1>Board</h1>
      <span class="spacer"></span>
      <button type="button" class="primary" id="new-task" disabled=${!projects.length} onClick=${() => setCreating(true)}>New task</button>
    </div>
    <div class="filters" role="search">
      <label class="sr-only" for="filter-project">Project</label>
      <select id="filter-project" value=${project} onChange=${(e) => setProject(e.currentTarget.value)}>
        <option value="">All projects</option>
        ${projects.map((p) => html`<option value=${p.name}>${p.name}</option>`)}
      </select>
      <label class="sr-only" for="filter-text">Search tasks</label>
      <input id="filter-text" type="search" placeholder="Search requests" value=${query} onInput=${(e) => setQuery(e.currentTarget.value)} />
    </div>
    ${waiting.length ? html`<a class="banner" href="/approvals" id="approvals-banner"><strong>${waiting.length} approval${waiting.length === 1 ? "" : "s"}</strong> waiting for you →</a>` : null}
    ${tasks && !projects.length ? html`<div class="empty"><p><strong>No projects yet.</strong></p><p class="muted">Register one with <code>gaffer project add PATH</code>, then start a task here.</p></div>` : null}
    ${tasks === null ? html`<p class="muted">Loading…</p>` : html`<div class="board" id="board">
      ${columns.map((c) => html`<section class=${"column c-" + c.id + (c.tasks.length ? "" : " empty-col")} aria-labelledby=${"col-" + c.id} key=${c.id}>
        <h2 id=${"col-" + c.id}><span>${c.title}</span> <span class="n">${c.tasks.length}</span></h2>
        <ul class="cards">${c.tasks.map((t) => html`<${Card} key=${t.id} t=${t} asks=${asks[t.id] || 0} now=${now} />`)}</ul>
      </section>`)}
    </div>`}
    ${creating ? html`<${NewTask} projects=${projects} tasks=${tasks} onClose=${() => setCreating(false)} />` : null}
  </main>`;
}
