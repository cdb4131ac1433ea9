// Schedules (/schedules): the config's [[schedules]] and those added at run time
// (`gaffer schedules add`, POST /api/schedules), each with its next run in the
// reader's local time and the task its newest slot made (GET /api/schedules).
import { html, api, errorText, ago, badge, firstLine, clip, useEffect, useState, useNow } from "./lib.js";
import { onEvent } from "./live.js";

// Comments on lines of their own, so a phone's narrow width wraps nothing in them.
const EXAMPLE = `[[schedules]]
name = "nightly-deps"
# 03:00 daily; tz defaults to UTC
cron = "0 3 * * *"
tz = "Europe/Berlin"
project = "myapp"
request = "Update the dependencies and fix what breaks"`;

/** "in 3 min", "in 5 h", "in 2 days" until `ms`. */
function soon(ms, now) {
  const m = Math.max(0, Math.round((ms - now) / 60000));
  if (m < 1) return "in under a minute";
  if (m < 90) return `in ${m} min`;
  const h = Math.round(m / 60);
  if (h < 36) return `in ${h} h`;
  return `in ${Math.round(h / 24)} days`;
}

const LOCAL = { weekday: "short", month: "short", day: "numeric", hour: "2-digit", minute: "2-digit", timeZoneName: "short" };

function Schedule({ s, now }) {
  const t = s.last_task;
  return html`<li class="card schedule" data-name=${s.name}>
    <div class="schedule-head">
      <h2 class="schedule-name">${s.name}</h2>
      <span class="chip" title="project">${s.project}</span>
    </div>
    <p class="schedule-request">${clip(firstLine(s.request), 200)}</p>
    <dl class="schedule-facts">
      <dt>When</dt>
      <dd><code class="cron">${s.cron}</code> <span class="muted">${s.tz}</span>${s.missed === "run_once" ? html` <span class="muted">· a missed slot runs once</span>` : null}</dd>
      <dt>Next run</dt>
      <dd class="next">${s.next_at ? html`<time datetime=${s.next_slot}>${new Date(s.next_at).toLocaleString([], LOCAL)}</time> <span class="muted">(${soon(s.next_at, now)})</span>` : html`<span class="muted">never: the expression has no slot left</span>`}</dd>
      <dt>Last task</dt>
      <dd class="last">${t ? html`<a href=${"/tasks/" + encodeURIComponent(t.id)}><code>${t.id.slice(0, 10)}</code></a> ${badge(t.stage)} <span class="muted">${ago(t.created_at, now)}</span>` : html`<span class="muted">none yet</span>`}</dd>
      ${s.agent ? html`<dt>Agent</dt><dd><code>${s.agent}</code></dd>` : null}
      <dt>From</dt>
      <dd class="source">${s.source === "api" ? html`added by ${s.created_by || "someone"}${s.created_at ? html` <span class="muted">${ago(s.created_at, now)}</span>` : null}` : html`the config file`}</dd>
    </dl>
  </li>`;
}

export function SchedulesPage() {
  const [schedules, setSchedules] = useState(null);
  const [error, setError] = useState("");
  const now = useNow(30000);
  const load = async () => {
    const r = await api("GET", "/api/schedules");
    if (r.status === 200) { setSchedules(r.data); setError(""); }
    else setError(errorText(r));
  };
  useEffect(() => {
    load();
    // A slot's task appears, or the last one moves on: read the list again.
    const off = onEvent((e) => { if (e.type.startsWith("task_")) load(); });
    return off;
  }, []);
  // A next run that has passed is now the last one.
  useEffect(() => {
    if ((schedules || []).some((s) => s.next_at && s.next_at <= now)) load();
  }, [now]);
  document.title = "Schedules — gaffer";
  return html`<main class="page narrow" id="main">
    <div class="page-head"><h1>Schedules</h1><span class="muted">${schedules ? (schedules.length ? `${schedules.length} schedule${schedules.length === 1 ? "" : "s"}` : "") : error ? "" : "Loading…"}</span></div>
    ${error ? html`<p class="err" role="alert" id="schedules-error">${error}</p>` : null}
    ${schedules && schedules.length ? html`<ul id="schedules" class="schedules">${schedules.map((s) => html`<${Schedule} key=${s.name} s=${s} now=${now} />`)}</ul>` : null}
    ${schedules && !schedules.length ? html`<div class="empty" id="schedules-empty">
      <p><strong>No schedule is configured.</strong></p>
      <p class="muted">A schedule queues a request as a task at every slot of a cron expression. Add one to gaffer's config file and restart <code>gaffer serve</code>, or add one while it runs with <code>gaffer schedules add</code>:</p>
      <pre class="example">${EXAMPLE}</pre>
      <p class="muted small"><code>gaffer init</code> writes a config file with every field explained; <code>gaffer schedules</code> lists them in a terminal.</p>
    </div>` : null}
    ${schedules && schedules.length ? html`<p class="muted small">Schedules from the config file (<code>[[schedules]]</code>) change there, with a restart of <code>gaffer serve</code>; added ones are removed with <code>gaffer schedules remove NAME</code>. Times are in your time zone.</p>` : null}
  </main>`;
}
