// Approvals: the card a person decides on (queue, task page), the line that
// marks where one was asked in a transcript, and the queue across projects.
import { html, api, WORDS, errorText, actor, ago, countdown, money, tokens, shortIds, useNow, useState, useRef, Data, Diff, Text } from "./lib.js";
import { putApproval, useApprovals, useListed, useNotificationPermission } from "./live.js";

// Each kind's name and its answers' words (Continue / Interrupt for a stall, Raise
// cap / Stop task for a budget), served by the server: the same on every surface.
const KIND = Object.fromEntries(Object.entries(WORDS.kinds || {}).map(([k, w]) => [k, w.name]));
const CHOICES = WORDS.kinds || {};

const STATE = { approved: "Approved", denied: "Denied", expired: "Expired", withdrawn: "Withdrawn", pending: "Waiting" };

function Plan({ plan }) {
  const subtasks = plan?.subtasks || [];
  return html`<ol class="plan">${subtasks.map((s) => html`<li>
    <div class="plan-title"><${Text} text=${s.title} /></div>
    ${s.description ? html`<div class="plan-desc"><${Text} text=${s.description} /></div>` : null}
    ${s.files?.length ? html`<div class="plan-files">${s.files.map((f) => html`<code>${f}</code>`)}</div>` : null}
    ${s.acceptance ? html`<div class="plan-acc"><span class="muted">Done when </span><${Text} text=${s.acceptance} /></div>` : null}
  </li>`)}</ol>`;
}
export { Plan };

/** What the plan's challenger left: challenges still open, and each revision's changes and answers. */
function Challenged({ d }) {
  const open = d.open_challenges || [];
  const revisions = (d.revisions || []).slice(1);
  if (!open.length && !revisions.length) return null;
  return html`<div class="challenged">
    ${open.length ? html`<div class="open-challenges" role="note"><strong>${open.length} challenge${open.length === 1 ? "" : "s"} left open</strong>
      <ul>${open.map((c) => html`<li><code>${c.id}</code> <span class=${"sev sev-" + c.severity}>${c.severity}</span> <${Text} text=${c.claim} />
        <div class="muted">evidence: <${Text} text=${c.evidence} /></div></li>`)}</ul></div>` : null}
    ${revisions.map((r) => html`<details class="revision"><summary>Revision ${r.revision}: ${(r.changes || []).length || "no"} change${(r.changes || []).length === 1 ? "" : "s"}, ${(r.answers || []).length} answer${(r.answers || []).length === 1 ? "" : "s"}</summary>
      <ul>${(r.changes || []).map((c) => html`<li>${c}</li>`)}</ul>
      <ul>${(r.answers || []).map((a) => html`<li><code>${a.id}</code> <strong>${a.decision}</strong>: <${Text} text=${a.reason} /></li>`)}</ul>
    </details>`)}
  </div>`;
}

/** What is asked, in the words and shapes a person judges it by. */
export function ApprovalDetails({ a }) {
  const d = a.details || {};
  const subject = d.subject || {};
  const command = subject.command || d.command;
  const parts = [];
  if (a.kind === "plan" && d.plan) parts.push(html`<${Plan} plan=${d.plan} />`, html`<${Challenged} d=${d} />`);
  if (command) parts.push(html`<pre class="cmd"><span class="prompt" aria-hidden="true">$ </span>${command}</pre>`);
  else if (d.tool) parts.push(html`<div class="kv"><span class="muted">tool</span> <code>${d.tool}</code></div>`);
  if (!command && d.input !== undefined && d.input !== null && a.kind === "tool") parts.push(html`<${Data} value=${d.input} />`);
  const files = subject.paths || d.files || d.changed_files;
  if (files?.length) parts.push(html`<div class="files">${files.map((f) => html`<code>${f}</code>`)}</div>`);
  if (a.kind === "ship") {
    if (d.branch) parts.push(html`<div class="kv"><code>${d.branch}</code> <span class="muted">→</span> <code>${d.base || "base"}</code>${d.remote ? html` <span class="muted">on ${d.remote}</span>` : null}</div>`);
    if (d.commits?.length) parts.push(html`<ul class="commits">${d.commits.map((c) => html`<li><code>${String(c.sha).slice(0, 8)}</code> ${c.subject}</li>`)}</ul>`);
  }
  if (a.kind === "memory" && d.memory) parts.push(html`<div class="kv"><span class="muted">Every later task in</span> <code>${d.project}</code> <span class="muted">will be told:</span></div><pre class="out memory">${d.memory}</pre>`);
  if (a.kind === "manual" && d.error) parts.push(html`<pre class="out">${d.error}</pre>`);
  if (a.kind === "stall" && d.trigger) parts.push(html`<div class="kv"><span class="muted">The watchdog saw</span> ${WORDS.triggers?.[d.trigger] || d.trigger}${d.count ? html` <span class="muted">× ${d.count}</span>` : null}</div>`);
  if (a.kind === "budget" && d.cap) parts.push(html`<div class="kv"><span class="muted">Cap on</span> ${WORDS.caps?.[d.cap] || d.cap} <span class="muted">· raise without an amount:</span> ${d.unit === "usd" ? money(d.default_raise) : tokens(d.default_raise)}</div>`);
  if (d.reason && a.kind !== "escalation") parts.push(html`<p class="reason"><${Text} text=${d.reason} /></p>`);
  if (d.diff) parts.push(html`<${Diff} text=${d.diff} />`);
  return parts.length ? html`<div class="details">${parts}</div>` : null;
}

function Expiry({ a }) {
  const now = useNow(1000);
  if (!a.expires_at || a.state !== "pending") return null;
  const left = countdown(a.expires_at, now);
  const soon = left && a.expires_at - now < 5 * 60 * 1000;
  return html`<span class=${"expiry" + (soon ? " soon" : "")} title=${"Denied if nobody decides by " + new Date(a.expires_at).toLocaleString()}>
    ${left ? `expires in ${left}` : "expiring…"}</span>`;
}

/** Who decided and how, for a settled approval. */
export function Decision({ a }) {
  const by = a.decided_by ? actor(a.decided_by) : null;
  const what = a.state === "approved" && a.for_task ? "Allowed for this task" : CHOICES[a.kind]?.[a.state] || STATE[a.state] || a.state;
  return html`<div class=${"decision d-" + a.state} role="status">
    <span class="mark" aria-hidden="true">${a.state === "approved" ? "✓" : "✕"}</span>
    <span><strong>${what}</strong>${by ? html` by ${by}` : null}${a.decided_at ? html` <span class="muted">· ${ago(a.decided_at)}</span>` : null}
    ${a.note ? html`<span class="note-text">: ${a.note}</span>` : null}</span>
  </div>`;
}

/**
 * One approval to decide. Keyed by id wherever it is listed, so an update (or
 * another approval arriving) re-renders it in place: the note being typed stays,
 * the buttons do not move.
 */
export function ApprovalCard({ a, showTask = true, taskLabel }) {
  const note = useRef(null);
  const [busy, setBusy] = useState(null);
  const [error, setError] = useState("");
  const decide = async (decision, forTask) => {
    setBusy(forTask ? "task" : decision);
    setError("");
    const body = { decision, note: note.current?.value.trim() || null, task_id: a.task_id };
    if (forTask) body.for_task = true;
    const r = await api("POST", `/api/approvals/${encodeURIComponent(a.id)}/decision`, body);
    setBusy(null);
    if (r.status === 200) {
      putApproval(r.data);
    } else if (r.status === 409 && r.data?.approval) {
      putApproval(r.data.approval);
    } else {
      setError(errorText(r));
    }
  };
  const [cancelling, setCancelling] = useState(false);
  // Cancel the whole task (a stall's third choice): a second tap confirms.
  const cancelTask = async () => {
    if (!cancelling) return setCancelling(true);
    setBusy("cancel");
    setError("");
    const r = await api("POST", `/api/tasks/${encodeURIComponent(a.task_id)}/cancel`, { reason: note.current?.value.trim() || null });
    setBusy(null);
    setCancelling(false);
    if (r.status !== 200) setError(errorText(r));
  };
  const pending = a.state === "pending";
  const grant = a.kind === "tool" && (a.details?.subject?.command || a.details?.command);
  const choice = CHOICES[a.kind];
  return html`<article class=${"card approval k-" + a.kind + (pending ? "" : " settled")} data-id=${a.id} data-kind=${a.kind} aria-label=${KIND[a.kind] + " approval"}>
    <header class="approval-head">
      <span class=${"kind k-" + a.kind}>${KIND[a.kind] || a.kind}</span>
      ${showTask ? html`<a class="task-link" href=${"/tasks/" + encodeURIComponent(a.task_id)}>${a.project || "task"} · ${taskLabel || a.task_id}</a>` : null}
      <span class="spacer"></span>
      <${Expiry} a=${a} />
    </header>
    <p class="summary"><${Text} text=${a.summary} /></p>
    <${ApprovalDetails} a=${a} />
    ${pending ? html`
      <label class="sr-only" for=${"note-" + a.id}>Note for ${KIND[a.kind] || a.kind} approval</label>
      <textarea id=${"note-" + a.id} class="note" ref=${note} rows="1" placeholder=${choice?.note || "Note (optional)"}></textarea>
      <div class="actions">
        <button type="button" class="approve" disabled=${!!busy} onClick=${() => decide("approve")}>${busy === "approve" ? "Recording…" : choice?.approve || "Approve"}</button>
        ${grant ? html`<button type="button" class="secondary for-task" disabled=${!!busy} title="Also approve this exact command when this task asks again" onClick=${() => decide("approve", true)}>${busy === "task" ? "Allowing…" : "Allow for this task"}</button>` : null}
        <button type="button" class="deny" disabled=${!!busy} onClick=${() => decide("deny")}>${busy === "deny" ? "Recording…" : choice?.deny || "Deny"}</button>
        ${a.kind === "stall" ? html`<button type="button" class="secondary danger cancel-task" disabled=${!!busy} onClick=${cancelTask}>${busy === "cancel" ? "Cancelling…" : cancelling ? "Tap again to cancel" : "Cancel task"}</button>` : null}
      </div>
      ${error ? html`<p class="err" role="alert">${error}</p>` : null}` : html`
      <${Decision} a=${a} />`}
  </article>`;
}

/** Where an approval was asked, in a transcript; the card itself is at the top of the task. */
export function ApprovalLine({ a }) {
  if (!a) return null;
  return html`<div class=${"entry approval-line d-" + a.state}>
    <span class="icon" aria-hidden="true">${a.state === "pending" ? "?" : a.state === "approved" ? "✓" : "✕"}</span>
    <div class="body">
      <div><strong>${KIND[a.kind] || a.kind} approval asked</strong>: <${Text} text=${a.summary} /></div>
      ${a.state === "pending" ? html`<a class="jump" href=${"#approval-" + a.id}>Waiting for you — decide above</a>` : html`<${Decision} a=${a} />`}
    </div>
  </div>`;
}

export function NotifyButton() {
  const [permission, ask] = useNotificationPermission();
  if (permission !== "default") return null;
  return html`<button type="button" class="secondary small" id="enable-notifications" onClick=${ask}>Notify me of new approvals</button>`;
}

/** The queue across projects: oldest first, new ones at the bottom, decided ones stay where they were. */
export function ApprovalsPage() {
  const { loaded } = useApprovals();
  const cards = useListed();
  const waiting = cards.filter((a) => a.state === "pending").length;
  const labels = shortIds(cards.map((a) => a.task_id));
  document.title = waiting ? `(${waiting}) Approvals — gaffer` : "Approvals — gaffer";
  return html`<main class="page narrow" id="main">
    <div class="page-head">
      <h1>Approvals</h1>
      <span class="muted">${loaded ? (waiting ? `${waiting} waiting` : "") : "Loading…"}</span>
      <span class="spacer"></span>
      <${NotifyButton} />
    </div>
    <div id="approvals" class="approvals">
      ${cards.map((a) => html`<${ApprovalCard} key=${a.id} a=${a} taskLabel=${labels[a.task_id]} />`)}
      ${loaded && !waiting ? html`<div class="empty" id="empty"><p><strong>Nothing waits for you.</strong></p><p class="muted">New approvals appear here as agents ask${"Notification" in window ? ", and as notifications when you allow them" : ""}.</p></div>` : null}
    </div>
  </main>`;
}
