// A task as a conversation. The model is a fold over the task's journal events
// (`apply`), the same whether they come from the history on load or live from
// the task's event stream; each step keeps a version so only the steps an event
// touched render again. A new kind of event (a person's message to a running
// agent, say) is one more case in `apply` and one more entry kind in `Entry`.
import { html, Component, Data, Diff, DiffLines, ErrorText, Fold, Prose, TailOutput, Text, actor, headLine, WORDS, channel, duration, money, time, tokens, useState } from "./lib.js";
import { ApprovalLine, Plan } from "./approvals.js";
import { approval as approvalById, putApproval, useApprovals } from "./live.js";
import { FOLLOW_UP_STEPS, FollowUpCard, ResolveResult, doneAgain, endedText, replyText, syncText } from "./followup.js";

export function newModel() {
  return { items: [], steps: new Map(), calls: new Map(), lastPos: 0, lastSeq: 0, v: 0, raw: [], stage: "queued", followUps: 0,
    // Agent sessions by id ({step, role, open, interrupted}, in start order) and
    // people's messages by id ({entry, step}), for steering the running agent.
    sessions: new Map(), messages: new Map() };
}

function step(m, id) {
  let s = m.steps.get(id);
  if (!s) {
    s = { id, name: id, state: "recorded", entries: [], v: 0, live: null };
    m.steps.set(id, s);
    m.items.push({ type: "step", id });
  }
  return s;
}

const touch = (m, s) => { s.v++; m.v++; };
const note = (m, e, text, cls) => { m.items.push({ type: "note", key: "e" + e.seq, at: e.at, text, cls }); m.v++; };

/** Apply one journal event of the task to the model. */
export function apply(m, e) {
  if (e.seq <= m.lastSeq) return; // already applied (history and stream overlap)
  m.lastSeq = e.seq;
  m.lastPos = Math.max(m.lastPos, e.pos);
  m.raw.push(e);
  const ev = e.event || {};
  switch (e.type) {
    case "task_created":
      note(m, e, [html`<strong>${ev.by?.name || "someone"}</strong>`, ` asked${ev.by?.via ? " via " + channel(ev.by.via) : ""}`], "created");
      if (ev.options?.after?.length) m.stage = "waiting"; // a task blocked by a dependency stopped there
      break;
    case "task_stage_entered":
      m.stage = ev.stage; // the last stage reached, for where a task that ended early stopped
      break;
    case "task_leased":
      if (ev.generation > 1) note(m, e, `Worker ${ev.worker_id} took the task over (lease generation ${ev.generation})`, "lease");
      break;
    case "task_done":
      note(m, e, m.followUps ? doneAgain(m.followUps) : "Task done", "done");
      break;
    case "follow_up_opened":
      // Numbered as the reducer numbers them: 1 for the first, +1 for each next.
      m.followUps++;
      m.items.push({ type: "follow_up", key: "e" + e.seq, at: e.at, n: m.followUps, kind: ev.kind, keys: ev.keys || [], detail: ev.detail || {} });
      m.stage = "shipping";
      m.v++;
      break;
    case "following_ended":
      note(m, e, endedText(ev.reason), "ended");
      break;
    case "task_failed":
      // Its first line: a failed step's output is shown with the step.
      note(m, e, ["Task failed: ", headLine(ev.reason)], "failed");
      break;
    case "task_blocked":
      note(m, e, ["Task blocked: ", headLine(ev.reason)], "failed");
      break;
    case "task_dependency_done":
      note(m, e, [`Task ${ev.dependency}, which this one runs after, is done`], "done");
      break;
    case "task_dependency_failed":
      note(m, e, [`Task blocked: task ${ev.dependency}, which this one runs after, ${{ cancelled: "was cancelled", blocked: "was blocked" }[ev.stage] || "failed"}`, ev.reason ? `: ${ev.reason}` : ""], "failed");
      break;
    case "task_cancelled":
      note(m, e, [`Cancelled by ${actor(ev.by)}`, ev.reason ? `: ${ev.reason}` : ""], "failed");
      break;
    case "step_intent_recorded": {
      const s = step(m, ev.step_id);
      Object.assign(s, { name: ev.name, intent: ev.intent, input: ev.input, recorded_at: e.at });
      touch(m, s);
      break;
    }
    case "step_started":
    case "step_retried":
    case "step_reconcile_started": {
      const s = step(m, ev.step_id);
      s.state = e.type === "step_started" ? "started" : e.type === "step_retried" ? "retried" : "reconciling";
      s.started_at = e.at;
      touch(m, s);
      break;
    }
    case "step_completed":
    case "step_failed":
    case "step_interrupted":
    case "step_manual_required": {
      const s = step(m, ev.step_id);
      s.state = { step_completed: "completed", step_failed: "failed", step_interrupted: "interrupted", step_manual_required: "manual_required" }[e.type];
      if (ev.receipt !== undefined) s.receipt = ev.receipt;
      s.error = ev.error || ev.reason || null;
      s.ended_at = e.at;
      touch(m, s);
      break;
    }
    case "session_started": {
      const s = step(m, ev.step_id || "session");
      // Panel members run inside the arbiter's step: until the arbiter's own
      // session starts, the step is the arbiter's, hearing its panel.
      if (ev.role !== "panelist") s.session = { id: ev.session_id, role: ev.role, agent: ev.agent };
      else if (!s.session) s.session = { id: ev.session_id, role: "arbiter", agent: "panel" };
      m.sessions.set(ev.session_id, { step: s.id, role: ev.role, agent: ev.agent, open: true, interrupted: false });
      touch(m, s);
      break;
    }
    case "panel_opinion": {
      const s = step(m, ev.step_id);
      s.entries.push({ key: "e" + e.seq, kind: "opinion", member: ev.member, opinion: ev.opinion || null, text: ev.text, error: ev.error || null, usage: ev.usage || {} });
      touch(m, s);
      break;
    }
    case "session_ended": {
      const sess = m.sessions.get(ev.session_id);
      if (sess) { sess.open = false; m.v++; }
      break;
    }
    case "message_sent": {
      // Into the step of the agent that will read it: the running session, as the server picks it.
      const to = liveSession(m);
      const entry = { key: "e" + e.seq, kind: "message", by: ev.by, text: ev.text, at: e.at, delivery: null, masked: false, role: to?.role };
      if (to) {
        const s = step(m, to.step);
        s.entries.push(entry);
        m.messages.set(ev.message_id, { entry, step: s });
        touch(m, s);
      } else {
        m.items.push({ type: "message", key: entry.key, entry });
        m.messages.set(ev.message_id, { entry, step: null });
        m.v++;
      }
      break;
    }
    case "message_delivered": {
      const sent = m.messages.get(ev.message_id);
      const sess = m.sessions.get(ev.session_id);
      if (sess) sess.interrupted = false; // a message after an interrupt starts the next turn
      if (sent) {
        Object.assign(sent.entry, { delivery: ev.delivery, masked: !!ev.masked });
        if (sent.step) touch(m, sent.step);
      }
      m.v++;
      break;
    }
    case "turn_interrupted": {
      const sess = m.sessions.get(ev.session_id);
      if (!sess) break;
      sess.interrupted = true;
      const s = step(m, sess.step);
      s.entries.push({ key: "e" + e.seq, kind: "interrupted", by: ev.by, at: e.at });
      touch(m, s);
      break;
    }
    case "agent_activity":
      activity(m, step(m, ev.step_id), ev.activity || {}, e);
      break;
    case "step_context_packed": {
      const s = step(m, ev.step_id);
      s.context = ev.pack;
      touch(m, s);
      break;
    }
    case "ci_status_changed": {
      const s = step(m, ev.step_id);
      s.entries.push({ key: "e" + e.seq, kind: "ci", state: ev.state, sha: ev.sha, checks: ev.checks, at: e.at });
      touch(m, s);
      break;
    }
    case "agent_switched": {
      const s = step(m, ev.step_id);
      s.entries.push({ key: "e" + e.seq, kind: "switch", from: ev.from, to: ev.to, trigger: ev.trigger, detail: ev.detail, until: ev.until, effects: ev.effects });
      touch(m, s);
      break;
    }
    case "approval_requested": {
      const s = step(m, ev.step_id);
      s.entries.push({ key: "a" + ev.approval_id, kind: "approval", id: ev.approval_id });
      if (e.approval) putApproval(e.approval);
      touch(m, s);
      break;
    }
    case "approval_decided":
    case "approval_expired":
    case "approval_withdrawn":
      if (e.approval) putApproval(e.approval);
      break;
    default:
      break;
  }
}

function activity(m, s, a, e) {
  switch (a.type) {
    case "assistant_text": {
      if (!a.text || !a.text.trim()) return;
      s.entries.push({ key: "e" + e.seq, kind: "text", text: a.text });
      break;
    }
    case "tool_call": {
      const entry = { key: "e" + e.seq, kind: "tool", name: a.name, input: a.input, result: null };
      s.entries.push(entry);
      if (a.call_id) m.calls.set(a.call_id, entry);
      break;
    }
    case "tool_result": {
      const call = m.calls.get(a.call_id);
      if (call) call.result = { output: a.output, is_error: a.is_error };
      else s.entries.push({ key: "e" + e.seq, kind: "tool", name: "tool", input: null, result: { output: a.output, is_error: a.is_error } });
      break;
    }
    case "file_change":
      s.entries.push({ key: "e" + e.seq, kind: "file", path: a.path, change: a.kind, diff: a.diff });
      break;
    case "usage": {
      const u = a.usage || {};
      const live = s.live || { tokens: 0, cost: 0 };
      live.tokens += (u.input_tokens || 0) + (u.output_tokens || 0) + (u.cached_input_tokens || 0);
      s.live = live;
      break;
    }
    case "rate_limited":
      s.entries.push({ key: "e" + e.seq, kind: "wait", text: `Waiting for ${a.provider} (${a.reason}) until ${a.until}` });
      break;
    default:
      return;
  }
  touch(m, s);
}

/** The agent session a person's message goes to now: the open one started last
 *  (as the server's `running_session`), or null when no agent runs. */
export function liveSession(m) {
  let last = null;
  for (const [id, sess] of m.sessions) if (sess.open) last = { id, ...sess };
  return last;
}

// ---------- view ----------

export const ROLE = { planner: "Planner", owner: "Owner", reviewer: "Reviewer", arbiter: "Arbiter", challenger: "Challenger", tester: "Tester", panelist: "Panel member" };

export function stepLabel(id) {
  const [k, n] = String(id).split("/");
  return ({
    worktree: "Worktree", setup: "Setup", plan: "Plan", challenge: `Challenge, round ${n}`, revise: `Plan revision ${n}`, test: `Tests ${n}`, "commit-test": `Commit, tests ${n}`, "test-run": `Test run ${n}`, "plan-approval": "Plan approval", code: `Subtask ${n}`, commit: `Commit, subtask ${n}`,
    review: `Review, round ${n}`, fix: `Fix, round ${n}`, "commit-fix": `Commit, fix ${n}`, arbiter: `Arbiter, call ${n}`,
    escalation: `Escalation ${n}`, check: `Check, run ${n}`, ship: "Ship", "tracker-open": "Tracker tasks",
    "ship-approval": "Ship approval", push: `Push ${n}`, pr: "Pull request", ci: `CI, run ${n}`, report: "Report",
    ...FOLLOW_UP_STEPS(n),
  })[k] || id;
}

function commandOf(input) {
  if (!input || typeof input !== "object") return null;
  const c = input.command ?? input.cmd;
  if (Array.isArray(c)) return c.join(" ");
  return typeof c === "string" ? c : null;
}

const pathOf = (input) => input && typeof input === "object" ? input.file_path || input.path || input.filePath || input.notebook_path || null : null;

/** A tool call as a line people scan: what it did, to what; the rest folded. */
function Tool({ entry }) {
  const { name, input, result } = entry;
  const cmd = commandOf(input);
  const path = pathOf(input);
  const lower = String(name).toLowerCase();
  let title, body = null;
  if (cmd) {
    title = html`<span class="verb">Ran</span> <code class="cmdline">${cmd}</code>`;
  } else if (input && typeof input.old_string === "string") {
    title = html`<span class="verb">Edited</span> <code>${path}</code>`;
    const split = (s) => String(s ?? "").replace(/\n$/, "").split("\n");
    const lines = [...split(input.old_string).map((l) => "-" + l), ...split(input.new_string).map((l) => "+" + l)];
    body = html`<${DiffLines} lines=${lines} />`;
  } else if (input && typeof input.content === "string" && path) {
    title = html`<span class="verb">Wrote</span> <code>${path}</code> <span class="muted">${input.content.split("\n").length} lines</span>`;
    body = html`<${Fold} summary="Content">${() => html`<pre class="out">${input.content}</pre>`}</${Fold}>`;
  } else if (path && /read|view|open|cat/.test(lower)) {
    title = html`<span class="verb">Read</span> <code>${path}</code>`;
  } else if (input && (input.pattern || input.query)) {
    title = html`<span class="verb">Searched</span> <code>${input.pattern || input.query}</code>${path ? html` <span class="muted">in ${path}</span>` : null}`;
  } else {
    title = html`<span class="verb">${name}</span>${path ? html` <code>${path}</code>` : null}`;
    if (input && typeof input === "object" && Object.keys(input).length) body = html`<${Data} value=${input} />`;
  }
  const out = result?.output ?? "";
  const lines = out ? out.split("\n").length : 0;
  return html`<div class=${"entry tool" + (result?.is_error ? " error" : "")}>
    <span class="icon" aria-hidden="true">${cmd ? "›_" : "⚙"}</span>
    <div class="body">
      <div class="tool-title"><span class="tool-name">${name}</span> ${title}</div>
      ${body}
      ${result ? (out.trim()
        ? html`<${Fold} cls=${result.is_error ? "error" : ""} summary=${result.is_error ? `Failed · ${lines} line${lines === 1 ? "" : "s"}` : `Output · ${lines} line${lines === 1 ? "" : "s"}`}>
            ${() => html`<pre class="out">${out}</pre>`}</${Fold}>`
        : html`<div class="muted small">${result.is_error ? "Failed, no output" : "No output"}</div>`)
        : html`<div class="muted small running">running…</div>`}
    </div>
  </div>`;
}

function Ci({ entry }) {
  const checks = Array.isArray(entry.checks) ? entry.checks : [];
  return html`<div class=${"entry ci ci-" + entry.state}>
    <span class="icon" aria-hidden="true">${entry.state === "success" ? "✓" : entry.state === "pending" ? "…" : "✕"}</span>
    <div class="body"><div>CI <strong>${entry.state}</strong> on <code>${String(entry.sha).slice(0, 10)}</code> <span class="muted">${time(entry.at)}</span></div>
      ${checks.length ? html`<ul class="checks">${checks.map((c) => html`<li class=${"ci-" + c.state}>${c.name || c.context || "check"}: ${c.state}${c.description ? " — " + c.description : ""}</li>`)}</ul>` : null}
    </div>
  </div>`;
}

const RECOMMENDS = { proceed: "Proceed", revise: "Revise", escalate: "Escalate" };

/** One member of the arbiter's panel: what it recommends and why (or why it said
 *  nothing), what it spent; its whole answer folded. */
function Opinion({ entry }) {
  const o = entry.opinion;
  const u = entry.usage || {};
  const spent = (u.input_tokens || 0) + (u.output_tokens || 0) + (u.cached_input_tokens || 0);
  const cost = u.cost_usd === undefined || u.cost_usd === null ? (spent ? null : 0) : u.cost_usd;
  return html`<div class=${"entry opinion " + (o ? "op-" + o.opinion : "op-failed")}>
    <span class="icon" aria-hidden="true">⚖</span>
    <div class="body">
      <div class="opinion-head"><code class="member">${entry.member}</code>
        <strong class="op-word">${o ? RECOMMENDS[o.opinion] || o.opinion : "No opinion"}</strong>
        <span class="muted small">${tokens(spent)} tokens · ${money(cost)}</span></div>
      ${o ? html`<p><${Text} text=${o.reason} /></p>` : html`<p class="err">${entry.error}</p>`}
      ${entry.text ? html`<${Fold} summary="Whole answer">${() => html`<${Prose} text=${entry.text} />`}</${Fold}>` : null}
    </div>
  </div>`;
}

function Entry({ entry }) {
  switch (entry.kind) {
    case "text":
      return html`<div class="entry text"><${Prose} text=${entry.text} /></div>`;
    case "tool":
      return html`<${Tool} entry=${entry} />`;
    case "file":
      return html`<div class="entry file"><span class="icon" aria-hidden="true">±</span><div class="body">
        <div><span class="verb">${entry.change === "delete" ? "Deleted" : entry.change === "add" ? "Added" : "Changed"}</span> <code>${entry.path}</code></div>
        ${entry.diff ? html`<${Diff} text=${entry.diff} />` : null}</div></div>`;
    case "approval":
      return html`<${LiveApprovalLine} id=${entry.id} />`;
    case "ci":
      return html`<${Ci} entry=${entry} />`;
    case "opinion":
      return html`<${Opinion} entry=${entry} />`;
    case "switch":
      return html`<div class="entry switch"><span class="icon" aria-hidden="true">⇄</span><div class="body">
        <div><strong>${entry.from}</strong> is out (${SWITCH_WHY[entry.trigger] || entry.trigger}); <strong>${entry.to}</strong> takes over${entry.effects ? " after a person's approval: the turn had already done something" : ", running the turn again"}.</div>
        ${entry.detail ? html`<p class="muted">${entry.detail}</p>` : null}
        <p class="muted">${entry.from} is tried again after ${new Date(entry.until).toLocaleString()}.</p></div></div>`;
    case "wait":
      return html`<div class="entry wait"><span class="icon" aria-hidden="true">⏸</span><div class="body">${entry.text}</div></div>`;
    case "message":
      return html`<${Message} entry=${entry} />`;
    case "interrupted":
      return html`<div class="entry interrupted"><span class="icon" aria-hidden="true">‖</span><div class="body">
        <div><strong>${actor(entry.by)}</strong> stopped the turn <span class="muted small">${time(entry.at)}</span></div>
        <p class="muted small">The agent waits; the next message starts its next turn.</p></div></div>`;
    default:
      return null;
  }
}

/** How a person's message reached the agent, in words (`message_delivered`). */
function deliveryText(entry) {
  const who = ROLE[entry.role] ? `The ${ROLE[entry.role].toLowerCase()}` : "The agent";
  if (!entry.delivery) return `Waiting for ${who.toLowerCase()} to read it`;
  const how = entry.delivery === "live" ? `${who} got it in its running turn` : `${who} got it as its next turn`;
  return entry.masked ? `${how}, masked: its names replaced by the step's placeholders (a cloud model of a masked project)` : how;
}

/** A person's message to the running agent, and whether the agent got it. */
function Message({ entry }) {
  return html`<div class=${"entry message" + (entry.delivery ? " delivered" : " pending")}>
    <span class="icon" aria-hidden="true">✉</span>
    <div class="body">
      <div class="msg-head"><strong>${entry.by?.name || "someone"}</strong> <span class="muted small">via ${channel(entry.by?.via)} · ${time(entry.at)}</span></div>
      <p class="msg-text"><${Text} text=${entry.text} /></p>
      <div class="muted small delivery" role="status">${deliveryText(entry)}</div>
    </div>
  </div>`;
}

/** Why a role's agent was out, in words (`agent_switched` triggers), as Discord says it. */
const SWITCH_WHY = WORDS.switches || {};

/** Re-renders on approval changes by itself, so its step need not. */
function LiveApprovalLine({ id }) {
  useApprovals();
  return html`<${ApprovalLine} a=${approvalById(id)} />`;
}

function Verdict({ v }) {
  if (!v) return null;
  if (v.verdict === "done") return html`<div class="result ok"><strong>✓ Approved the work</strong></div>`;
  if (v.verdict === "changes_requested") return html`<div class="result warn"><strong>Changes requested</strong><${Prose} text=${v.feedback} /></div>`;
  return html`<div class="result bad"><strong>Blocked</strong><${Prose} text=${v.reason} /></div>`;
}

function Ruling({ r }) {
  if (!r) return null;
  const title = { proceed: "✓ Proceed to the checks", revise: "Revise", escalate: "Escalate to a person" }[r.ruling] || r.ruling;
  return html`<div class=${"result " + (r.ruling === "proceed" ? "ok" : r.ruling === "revise" ? "warn" : "bad")}><strong>${title}</strong>
    ${r.reason || r.instructions ? html`<${Prose} text=${r.reason || r.instructions} />` : null}</div>`;
}

/** What a step produced, in words. */
function Result({ s }) {
  const r = s.receipt;
  const kind = String(s.id).split("/")[0];
  if (s.state === "failed" || s.state === "manual_required") return html`<div class="result bad"><strong>${s.state === "failed" ? "Failed" : "Needs a person"}</strong><${ErrorText} error=${s.error} /></div>`;
  if (!r || typeof r !== "object") return null;
  switch (kind) {
    case "plan":
      return r.plan ? html`<div class="result plan-result"><strong>Plan</strong><${Plan} plan=${r.plan} /></div>` : null;
    case "challenge": {
      const c = r.challenges;
      if (!c) return null;
      return html`<div class="result"><strong>${c.agreement ? "The challenger agrees" : `${c.challenges.length} challenge${c.challenges.length === 1 ? "" : "s"}`}</strong>
        ${c.challenges.length ? html`<ul>${c.challenges.map((x) => html`<li><code>${x.id}</code> <span class=${"sev sev-" + x.severity}>${x.severity}</span> <${Text} text=${x.claim} /></li>`)}</ul>` : null}</div>`;
    }
    case "revise":
      return r.revision ? html`<div class="result plan-result"><strong>Revised plan</strong>
        <ul>${r.revision.answers.map((a) => html`<li><code>${a.id}</code> <strong>${a.decision}</strong>: <${Text} text=${a.reason} /></li>`)}</ul>
        <${Plan} plan=${r.revision.plan} /></div>` : null;
    case "review":
      return html`<${Verdict} v=${r.verdict} />`;
    case "arbiter":
      return html`<${Ruling} r=${r.ruling} />`;
    case "resolve":
      return html`<${ResolveResult} r=${r} />`;
    case "test":
    case "code":
    case "fix":
      return r.changed_files?.length ? html`<div class="result files"><span class="muted">Changed </span>${r.changed_files.map((f) => html`<code>${f}</code>`)}</div>` : null;
    default:
      return null;
  }
}

/** A step without an agent: one line, details folded. */
function SystemStep({ s }) {
  const r = s.receipt || {};
  const kind = String(s.id).split("/")[0];
  let text, body = null, cls = s.state;
  const sha = (x) => html`<code>${String(x || "").slice(0, 8)}</code>`;
  switch (kind) {
    case "worktree":
      text = r.branch ? html`Worktree on branch <code>${r.branch}</code> from ${sha(r.base)}` : "Preparing the worktree";
      break;
    case "setup": {
      const n = (r.commands || []).length;
      text = s.state === "completed"
        ? html`Worktree set up: ${(r.copied || []).map((f) => html`<code>${f}</code> `)}${(r.copied || []).length ? "copied, " : ""}${n} command${n === 1 ? "" : "s"} run${r.port ? html`, port <code>${r.port}</code>` : ""}`
        : "Setting up the worktree";
      break;
    }
    case "commit":
    case "commit-test":
    case "commit-fix":
      text = r.sha ? html`Committed ${sha(r.sha)}${r.created === false ? " (nothing new)" : ""}` : "Committing";
      break;
    case "check":
    case "test-run": {
      if (r.command === null) { text = "No check command configured"; break; }
      const passed = r.passed === true;
      cls = s.state === "completed" ? (passed ? "completed" : "failed") : s.state;
      text = s.state === "completed"
        ? html`Check ${passed ? "passed" : "failed"}: <code>${r.command}</code> <span class="muted">exit ${r.exit_code ?? "?"}${r.duration_ms !== undefined ? " · " + duration(r.duration_ms) : ""}</span>`
        : html`Running the check${s.input?.command ? html` <code>${s.input.command}</code>` : ""}`;
      if (r.output_tail) body = html`<${Fold} open=${!passed} cls=${passed ? "" : "error"} summary=${"Output · " + r.output_tail.split("\n").length + " lines"}>${() => html`<${TailOutput} text=${r.output_tail} />`}</${Fold}>`;
      break;
    }
    case "ship":
      text = r.commits ? `Ready to ship: ${r.commits.length} commit${r.commits.length === 1 ? "" : "s"} on ${r.branch}` : "Preparing to ship";
      if (r.note) body = html`<p class="muted">${r.note}</p>`;
      break;
    case "push":
      text = r.sha ? html`Pushed ${sha(r.sha)} to <code>${r.branch}</code>${r.remote ? html` <span class="muted">on ${r.remote}</span>` : ""}` : "Pushing";
      break;
    case "pr":
      text = r.url ? html`Pull request <a href=${r.url} target="_blank" rel="noopener">#${r.number}</a> ${r.created ? "opened" : "found"}` : "Opening the pull request";
      break;
    case "ci":
      text = r.state ? html`CI ${r.state} on ${sha(r.sha)}` : "Waiting for CI";
      break;
    case "sync":
      text = syncText(s);
      if (r.outcome === "conflicted") cls = "warn";
      break;
    case "reply":
      text = replyText(s);
      break;
    default:
      text = stepLabel(s.id);
  }
  const icon = cls === "completed" ? "✓" : cls === "failed" || cls === "manual_required" ? "✕" : "•";
  return html`<div class=${"sys-step st-" + cls} data-step=${s.id}>
    <span class="icon" aria-hidden="true">${icon}</span>
    <div class="body"><div>${text}</div>
      ${s.error ? html`<${ErrorText} error=${s.error} />` : null}
      ${body}
      ${s.entries.length ? html`<${Entries} entries=${s.entries} />` : null}
    </div>
  </div>`;
}

/** How many of a session's latest entries show at first: a long session opens
 *  at its end, as quickly as a short one; the earlier ones are a click away. */
const SHOWN = 120;

function Entries({ entries }) {
  const [shown, setShown] = useState(SHOWN);
  const hidden = Math.max(0, entries.length - shown);
  return html`<div class="entries">
    ${hidden ? html`<button type="button" class="secondary small earlier" onClick=${() => setShown(shown + 500)}>
      Show ${Math.min(hidden, 500)} earlier of ${hidden}</button>` : null}
    ${(hidden ? entries.slice(hidden) : entries).map((en) => html`<${Entry} key=${en.key} entry=${en} />`)}
  </div>`;
}

function Avatar({ role }) {
  return html`<span class=${"avatar r-" + role} aria-hidden="true">${(ROLE[role] || role || "?")[0]}</span>`;
}

/** The repository context the agent was given: one line, folded open to the files. */
function ContextPack({ pack }) {
  const n = pack.files.length;
  const full = pack.files.filter((f) => f.mode === "full").length;
  const summary = `context: ${n} file${n === 1 ? "" : "s"}, ${tokens(pack.used)} tokens`;
  return html`<${Fold} summary=${summary} cls="context-pack">
    ${() => html`<p class="muted small">${full} whole, ${n - full} as signatures; ${tokens(pack.used)} of a ${tokens(pack.budget)}-token budget, in rank order.</p>
      <ol class="pack-files">
        ${pack.files.map((f) => html`<li key=${f.path}><code class="path">${f.path}</code> <span class=${"mode m-" + f.mode}>${f.mode}</span> <span class="muted">${tokens(f.tokens)}</span></li>`)}
      </ol>`}
  </${Fold}>`;
}

/** An agent's session: its turn as a conversation, then what it concluded. */
function AgentStep({ s, spend }) {
  const role = s.session.role;
  const running = s.state === "started";
  const shown = spend && (spend.tokens || spend.cost_usd) ? `${tokens(spend.tokens)} tokens · ${money(spend.cost_usd)}` : s.live ? `${tokens(s.live.tokens)} tokens so far` : "";
  return html`<section class=${"agent-step st-" + s.state} data-step=${s.id} aria-label=${`${ROLE[role] || role}: ${stepLabel(s.id)}`}>
    <header class="agent-head">
      <${Avatar} role=${role} />
      <span class="who">${ROLE[role] || role}</span>
      <span class="muted">${s.session.agent} · ${stepLabel(s.id)}</span>
      <span class="spacer"></span>
      ${running ? html`<span class="working" role="status">working</span>` : null}
      ${shown ? html`<span class="spend">${shown}</span>` : null}
    </header>
    ${s.context ? html`<${ContextPack} pack=${s.context} />` : null}
    <${Entries} entries=${s.entries} />
    ${running && !s.entries.length ? html`<div class="entries muted small">Thinking…</div>` : null}
    <${Result} s=${s} />
  </section>`;
}

/** A step, rendered again only when it changed (its version) or its spend did. */
class Step extends Component {
  shouldComponentUpdate(next) {
    return next.v !== this.props.v || next.spendKey !== this.props.spendKey;
  }
  render({ s, spend }) {
    return s.session ? html`<${AgentStep} s=${s} spend=${spend} />` : html`<${SystemStep} s=${s} />`;
  }
}

/** The whole conversation. `spend` is the API's per-step tokens and cost (the one definition). */
export function Transcript({ model, spend }) {
  return html`<div id="transcript" class="transcript">
    ${model.items.map((it) => {
      if (it.type === "note") return html`<div key=${it.key} class=${"tnote n-" + it.cls}><span class="muted">${time(it.at)}</span> ${it.text}</div>`;
      if (it.type === "follow_up") return html`<${FollowUpCard} key=${it.key} f=${it} />`;
      if (it.type === "message") return html`<div key=${it.key} class="loose"><${Message} entry=${it.entry} /></div>`;
      const s = model.steps.get(it.id);
      const sp = spend?.[s.id];
      return html`<${Step} key=${"s:" + s.id} s=${s} v=${s.v} spend=${sp} spendKey=${sp ? sp.tokens + ":" + sp.cost_usd : ""} />`;
    })}
  </div>`;
}

/** The events as recorded, for whoever needs to see exactly what happened. */
export function RawEvents({ model }) {
  const [limit, setLimit] = useState(200);
  return html`<${Fold} summary=${`Raw events (${model.raw.length})`} cls="raw">
    ${() => html`<div class="raw-events">
      ${model.raw.slice(-limit).map((e) => html`<pre key=${e.pos}>${e.seq} ${e.type} ${JSON.stringify(e.event)}</pre>`)}
      ${model.raw.length > limit ? html`<button type="button" class="secondary small" onClick=${() => setLimit(limit * 4)}>Show more</button>` : null}
    </div>`}
  </${Fold}>`;
}
