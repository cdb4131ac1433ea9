// One task: what it is and where it stands, what waits for you, its crew's
// conversation, the changes, and what it cost.
import { html, api, errorText, actor, channel, ago, badge, clip, firstLine, money, stageName, tokens, useEffect, useRef, useState, useNow, FINAL, RETRYABLE, Diff, ErrorText, throttle } from "./lib.js";
import { ApprovalCard } from "./approvals.js";
import { follow, putApproval, useApprovals, useListed } from "./live.js";
import { newModel, apply, liveSession, Transcript, RawEvents } from "./transcript.js";
import { Steer } from "./steer.js";

const PROGRESS = ["queued", "planning", "awaiting_plan_approval", "coding", "reviewing", "testing", "shipping", "done"];

/** The stages, with where the task is; a task that ended early shows where it stopped.
 * A task that runs after others starts with `waiting`. */
function Progress({ stage, reached, waits }) {
  const stages = waits ? ["waiting", ...PROGRESS] : PROGRESS;
  const ended = FINAL.has(stage) && stage !== "done";
  const where = ended ? reached : stage;
  const at = where === "arbitrating" ? stages.indexOf("reviewing") : stages.indexOf(where);
  const state = (i) => (i < at || stage === "done" ? "past" : i === at ? (ended ? "stopped" : "current") : ended ? "skipped" : "");
  return html`<ol class="progress" aria-label="Stages">
    ${stages.map((s, i) => html`<li class=${state(i)} aria-current=${i === at ? "step" : null}>
      <span class="dot" aria-hidden="true"></span><span class="name">${stageName(s)}${i === at && ended ? html` <span class="stopped-here">· ${stageName(stage)} here</span>` : null}</span></li>`)}
  </ol>`;
}

/** What the forge calls the change it shipped as, as its users say it. */
const changeRequest = (summary) => (summary?.forge?.kind === "gitlab" ? "Merge request" : "Pull request");

/** How the task ended, in words, for every end state. */
function Outcome({ t }) {
  const o = t.outcome || {};
  if (t.stage === "done") {
    const pr = o.pull_request?.url;
    return html`<div class="outcome ok" id="outcome" role="status">
      <strong>${pr ? "Shipped" : "Done"}</strong>
      ${pr ? html`<p>${changeRequest(o)} <a href=${pr} target="_blank" rel="noopener">${pr}</a> waits for a review${o.ci?.state ? ` (CI ${o.ci.state})` : ""}.</p>`
        : html`<p>${o.note || "The work is on its branch."}</p>`}
      ${o.branch ? html`<p class="muted">Branch <code>${o.branch}</code>${o.commits?.length ? ` · ${o.commits.length} commit${o.commits.length === 1 ? "" : "s"}` : ""}</p>` : null}
    </div>`;
  }
  if (t.stage === "cancelled") {
    return html`<div class="outcome bad" id="outcome" role="status"><strong>Cancelled</strong>
      <p>${o.by ? `By ${actor(o.by)}` : "Stopped"}${o.reason ? `: ${o.reason}` : "."}</p></div>`;
  }
  if (t.stage === "failed" || t.stage === "blocked") {
    return html`<div class="outcome bad" id="outcome" role="status"><strong>${t.stage === "failed" ? "Failed" : "Blocked"}</strong>
      ${o.reason ? html`<${ErrorText} error=${o.reason} />` : html`<p>${typeof t.outcome === "string" ? t.outcome : "No reason was recorded."}</p>`}
      ${o.dependency ? html`<p><a href=${"/tasks/" + encodeURIComponent(o.dependency)} id="blocked-by">Open the task it ran after</a></p>` : null}
      <p class="muted">${o.dependency ? "Retry queues the same request as a new task that does not wait for the one that blocked it (it still waits for the others it ran after)." : "Retry queues the same request as a new task."}</p></div>`;
  }
  return null;
}

/** The tasks it runs after, each with its stage; while it waits, which it waits for. */
function After({ t }) {
  if (!t.after?.length) return null;
  const open = t.after.filter((d) => d.stage !== "done");
  const link = (d) => html`<li key=${d.id}><a href=${"/tasks/" + encodeURIComponent(d.id)}><code>${d.id}</code></a> ${badge(d.stage)}</li>`;
  return html`<section class=${"after" + (t.stage === "waiting" ? " waits" : "")} id="after" aria-labelledby="after-h">
    <h2 id="after-h" class="side-h">${t.stage === "waiting" ? `Waiting for ${open.length} task${open.length === 1 ? "" : "s"}` : "Ran after"}</h2>
    ${t.stage === "waiting" ? html`<p class="small">No worker takes this task until every task below is done; if one fails or is cancelled, this one is blocked.</p>` : null}
    <ul class="after-list">${t.after.map(link)}</ul>
  </section>`;
}

function Confirm({ open, title, children, confirm, cancel, onConfirm, onCancel }) {
  const ref = useRef(null);
  useEffect(() => {
    const d = ref.current;
    if (!d) return;
    if (open && !d.open) d.showModal();
    if (!open && d.open) d.close();
  }, [open]);
  return html`<dialog ref=${ref} class="dialog" aria-labelledby="confirm-title" onClose=${onCancel}>
    <h2 id="confirm-title">${title}</h2>
    ${children}
    <div class="actions end">
      <button type="button" class="secondary" onClick=${onCancel}>${cancel}</button>
      <button type="button" class="deny" id="confirm" onClick=${onConfirm}>${confirm}</button>
    </div>
  </dialog>`;
}

function Actions({ t, reload }) {
  const [asking, setAsking] = useState(false);
  const [busy, setBusy] = useState(false);
  const [msg, setMsg] = useState("");
  const reason = useRef(null);
  const cancel = async () => {
    setBusy(true);
    const r = await api("POST", `/api/tasks/${encodeURIComponent(t.id)}/cancel`, { reason: reason.current?.value.trim() || null });
    setBusy(false);
    setAsking(false);
    setMsg(r.status === 200 ? "" : errorText(r));
    reload();
  };
  const retry = async () => {
    setBusy(true);
    const r = await api("POST", `/api/tasks/${encodeURIComponent(t.id)}/retry`);
    setBusy(false);
    if (r.status === 201) location.href = "/tasks/" + encodeURIComponent(r.data.id);
    else setMsg(errorText(r));
  };
  return html`<div class="task-actions">
    ${!FINAL.has(t.stage) ? html`<button type="button" class="secondary danger" id="cancel" disabled=${busy} onClick=${() => setAsking(true)}>Cancel task</button>` : null}
    ${RETRYABLE.has(t.stage) ? html`<button type="button" class="primary" id="retry" disabled=${busy} onClick=${retry}>${busy ? "Retrying…" : "Retry"}</button>` : null}
    ${msg ? html`<span class="err" role="alert">${msg}</span>` : null}
    <${Confirm} open=${asking} title="Cancel this task?" confirm=${busy ? "Cancelling…" : "Cancel task"} cancel="Keep it running"
      onConfirm=${cancel} onCancel=${() => setAsking(false)}>
      <p>The agents stop, and its pending approvals are withdrawn. The worktree and branch are kept; you can retry it later.</p>
      <label for="cancel-reason">Reason (optional)</label>
      <input id="cancel-reason" ref=${reason} placeholder="Not needed any more" />
    </${Confirm}>
  </div>`;
}

function Spend({ d }) {
  if (!d.spend?.length) return html`<p class="muted small">Nothing spent yet.</p>`;
  return html`<table class="spend-table">
    <thead><tr><th scope="col">Role</th><th scope="col" class="num">Tokens</th><th scope="col" class="num">Cost</th></tr></thead>
    <tbody>${d.spend.map((r) => html`<tr><td>${r.role}</td><td class="num" title=${`${r.input_tokens} in, ${r.output_tokens} out, ${r.cached_input_tokens} cached`}>${tokens(r.input_tokens + r.output_tokens + r.cached_input_tokens)}</td><td class="num">${money(r.cost_usd)}</td></tr>`)}</tbody>
    <tfoot><tr><th scope="row">Total</th><td class="num">${tokens(d.tokens)}</td><td class="num" id="task-cost">${money(d.cost_usd)}</td></tr></tfoot>
  </table>`;
}

function Links({ d }) {
  const receipt = (id) => d.steps.find((s) => s.id === id)?.receipt || null;
  const wt = receipt("worktree");
  const pr = receipt("pr") || d.outcome?.pull_request;
  const rows = [];
  // GitLab numbers merge requests !N; the others #N.
  const shipped = d.outcome || receipt("ship");
  const sigil = shipped?.forge?.kind === "gitlab" ? "!" : "#";
  if (pr?.url) rows.push(html`<li>${changeRequest(shipped)} <a href=${pr.url} target="_blank" rel="noopener">${sigil}${pr.number ?? ""}</a></li>`);
  if (wt?.branch) rows.push(html`<li>Branch <code>${wt.branch}</code></li>`);
  if (d.worker) rows.push(html`<li id="worker" class="muted small">${workerLine(d.worker)}</li>`);
  return rows.length ? html`<ul class="links">${rows}</ul>` : null;
}

// Which worker runs the task: with many workers (many machines) on one
// database, this is where to look for its processes and logs.
function workerLine(w) {
  const where = w.host ? " on " + w.host + (w.pid ? " (pid " + w.pid + ")" : "") : "";
  const state = { held: "running it", released: "released it", expired: "stopped renewing its lease; the next worker to claim the task takes it over" }[w.state] || w.state;
  return "worker " + w.id + where + " · " + state + " · lease generation " + w.generation;
}

/** The API's `created_by` ("ana via web:login-link") in words. */
const askedBy = (by) => {
  const [name, via] = String(by).split(" via ");
  return via ? `${name} via ${channel(via)}` : name;
};

export function TaskPage({ id }) {
  const [detail, setDetail] = useState(null);
  const [error, setError] = useState("");
  const [diff, setDiff] = useState(null);
  const [, setVersion] = useState(0);
  const model = useRef(newModel());
  useApprovals();
  const listed = useListed(id);
  useNow(30000);

  useEffect(() => {
    let source = null;
    let gone = false;
    const loadDetail = async () => {
      const r = await api("GET", `/api/tasks/${encodeURIComponent(id)}`);
      if (gone) return;
      if (r.status !== 200) { setError(errorText(r)); return; }
      for (const a of r.data.approvals) putApproval(a);
      setDetail(r.data);
    };
    const loadDiff = async () => {
      const r = await api("GET", `/api/tasks/${encodeURIComponent(id)}/diff`);
      if (!gone && r.status === 200) setDiff(r.data);
    };
    const rerender = (() => {
      let queued = false;
      return () => {
        if (queued) return;
        queued = true;
        requestAnimationFrame(() => { queued = false; setVersion((v) => v + 1); });
      };
    })();
    // Steps finishing change the task's spend and receipts: read the task again, at most once a second.
    const refresh = throttle(loadDetail, 700);
    const refreshDiff = throttle(loadDiff, 1500);
    (async () => {
      await loadDetail();
      loadDiff();
      // The history, a page at a time, then the live stream from where it ended.
      let after = 0;
      for (;;) {
        const r = await api("GET", `/api/tasks/${encodeURIComponent(id)}/history?after=${after}&limit=5000`);
        if (gone || r.status !== 200) break;
        for (const e of r.data.events) apply(model.current, e);
        after = model.current.lastSeq;
        if (!r.data.more) break;
      }
      if (gone) return;
      setVersion((v) => v + 1);
      // Loaded once the history is on screen: the frame after it rendered.
      requestAnimationFrame(() => {
        performance.mark("gaffer:task-loaded");
        document.body.dataset.loaded = "task";
      });
      source = follow(`/api/tasks/${encodeURIComponent(id)}/events?last_event_id=${model.current.lastPos}`, (e) => {
        apply(model.current, e);
        rerender();
        if (e.type.startsWith("task_") || e.type === "step_completed" || e.type === "step_failed") refresh();
        if (e.type === "step_completed" && /^(worktree|commit|commit-fix|code|fix)\b/.test(e.event.step_id)) refreshDiff();
      });
    })();
    return () => { gone = true; if (source) source.close(); };
  }, [id]);

  if (error) return html`<main class="page" id="main"><h1>Task not found</h1><p class="err">${error}</p><p><a href="/">Back to the board</a></p></main>`;
  if (!detail) return html`<main class="page" id="main"><p class="muted">Loading…</p></main>`;
  const t = detail;
  document.title = `${clip(firstLine(t.request), 50)} — gaffer`;
  const waiting = listed.filter((a) => a.state === "pending").length;
  const spend = Object.fromEntries(t.steps.map((s) => [s.id, s]));
  const rest = t.request.includes("\n") ? t.request.slice(t.request.indexOf("\n") + 1).trim() : "";
  return html`<main class="page task-page" id="main">
    <nav class="crumbs" aria-label="Breadcrumb"><a href="/">Board</a> <span aria-hidden="true">/</span> <span>${t.project}</span> <span aria-hidden="true">/</span> <code>${t.id}</code></nav>
    <header class="task-head">
      <h1>${firstLine(t.request)}</h1>
      ${rest ? html`<p class="request-rest">${rest}</p>` : null}
      <div class="task-meta">
        <span id="stage">${badge(t.stage)}</span>
        <span class="muted">${askedBy(t.created_by)} · ${ago(t.created_at)}${t.agent ? ` · ${t.agent}` : ""}</span>
        <span class="muted" id="task-spend">${tokens(t.tokens)} tokens · ${money(t.cost_usd)}</span>
      </div>
      <${Actions} t=${t} reload=${() => null} />
    </header>
    <${Outcome} t=${t} />
    <${After} t=${t} />
    <div class="task-layout">
      <div class="task-main">
        ${listed.length ? html`<section class="waiting" aria-labelledby="waiting-h">
          <h2 id="waiting-h">${waiting ? html`Waiting for you <span class="count">${waiting}</span>` : "Decided just now"}</h2>
          ${listed.map((a) => html`<div id=${"approval-" + a.id} key=${a.id}><${ApprovalCard} a=${a} showTask=${false} /></div>`)}
        </section>` : null}
        <h2>Conversation</h2>
        <${Transcript} model=${model.current} spend=${spend} />
        <${Steer} t=${t} live=${liveSession(model.current)} />
        ${diff && diff.diff.trim() ? html`<section id="diff" aria-labelledby="diff-h"><h2 id="diff-h">Changes on <code>${diff.branch}</code></h2><${Diff} text=${diff.diff} /></section>` : null}
        <${RawEvents} model=${model.current} />
      </div>
      <aside class="task-side" aria-label="Details">
        <section><h2 class="side-h">Progress</h2><${Progress} stage=${t.stage} reached=${model.current.stage} waits=${t.after?.length > 0} /></section>
        <section><h2 class="side-h">Spend</h2><${Spend} d=${t} /></section>
        <section><${Links} d=${t} /></section>
      </aside>
    </div>
  </main>`;
}
