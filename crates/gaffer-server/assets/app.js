// gaffer's page: the board (/), a task (/tasks/{id}), the approvals queue
// (/approvals) and the schedules (/schedules). Preact and htm are vendored
// (assets/vendor), so there is no build step: these modules are what the browser
// runs.
import { html, render, Component } from "./lib.js";
import { start, useApprovals, useLiveStatus } from "./live.js";
import { Board } from "./board.js";
import { TaskPage } from "./task.js";
import { ApprovalsPage } from "./approvals.js";
import { SchedulesPage } from "./schedules.js";

function Header({ path }) {
  const { pending } = useApprovals();
  const status = useLiveStatus();
  const n = pending().length;
  const here = (p) => (p === path ? "page" : null);
  return html`<header class="top">
    <a class="skip" href="#main">Skip to content</a>
    <a class="brand" href="/" aria-label="gaffer: the board"><img src="/assets/icons/icon.svg" alt="" width="22" height="22" /><span class="brand-name">gaffer</span></a>
    <nav aria-label="Main">
      <a href="/" id="nav-board" aria-current=${here("/")}>Board</a>
      <a href="/approvals" id="nav-approvals" aria-current=${here("/approvals")}>Approvals${n ? html` <span id="pending-count" class="count" aria-label=${n + " waiting"}>${n}</span>` : html`<span id="pending-count"></span>`}</a>
      <a href="/schedules" id="nav-schedules" aria-current=${here("/schedules")}>Schedules</a>
    </nav>
    <span class="live" data-state=${status} id="live" role="status" title=${status === "live" ? "Live: updates arrive as they happen" : "Reconnecting…"}>
      <span class="dot" aria-hidden="true"></span><span class="label">${{ live: "Live", offline: "Offline", reconnecting: "Reconnecting" }[status] || "Connecting"}</span>
    </span>
  </header>`;
}

/** A screen that failed to render says so, instead of staying blank. */
class Guard extends Component {
  componentDidCatch(error) {
    this.setState({ error });
  }
  render({ children }, { error }) {
    if (!error) return children;
    return html`<main class="page narrow" id="main"><h1>This screen failed</h1>
      <p class="err" id="page-error">${String(error && error.message || error)}</p>
      <p class="muted">Reload the page; if it fails again, the message above is what to report.</p></main>`;
  }
}

function App() {
  const path = location.pathname;
  let page;
  if (path === "/approvals") page = html`<${ApprovalsPage} />`;
  else if (path === "/schedules") page = html`<${SchedulesPage} />`;
  else if (path.startsWith("/tasks/")) page = html`<${TaskPage} id=${decodeURIComponent(path.slice("/tasks/".length))} />`;
  else page = html`<${Board} />`;
  return html`<${Header} path=${path} /><${Guard}>${page}</${Guard}>`;
}

start();
render(html`<${App} />`, document.getElementById("app"));
