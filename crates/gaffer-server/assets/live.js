// What the page keeps live on every screen: one EventSource on the journal's
// event stream, the pending approvals (read once, then kept from the stream:
// approval events carry the approval as it stands), and browser notifications
// for new approvals.
import { api, EVENT_KINDS, FINAL, useEffect, useRef, useState } from "./lib.js";

const listeners = new Set();
const sources = new Set();

// A page left for another keeps no stream open (browsers allow six connections
// to a server, and a page kept for "back" would hold its streams); coming back
// to it reads everything afresh.
addEventListener("pagehide", () => {
  for (const s of sources) s.close();
  sources.clear();
});
addEventListener("pageshow", (e) => {
  if (e.persisted) location.reload();
});
let status = "connecting";
const statusListeners = new Set();

/** Call `f(event)` for every journal event while the page is open; returns the unsubscribe. */
export function onEvent(f) {
  listeners.add(f);
  return () => listeners.delete(f);
}

function setStatus(s) {
  status = s;
  for (const f of statusListeners) f(s);
}

export function useLiveStatus() {
  const [s, set] = useState(status);
  useEffect(() => {
    statusListeners.add(set);
    // The stream may have opened between the first render and this effect.
    set(status);
    return () => statusListeners.delete(set);
  }, []);
  return s;
}

/**
 * Follow `path` (an SSE stream of journal events) and call `f` for each event.
 * The browser resumes after a drop with `Last-Event-ID`, so nothing is missed.
 */
export function follow(path, f, onStatus) {
  const source = new EventSource(path);
  sources.add(source);
  const handle = (m) => {
    let e;
    try {
      e = JSON.parse(m.data);
    } catch {
      return;
    }
    f(e);
  };
  source.onmessage = handle;
  for (const t of EVENT_KINDS) source.addEventListener(t, handle);
  if (onStatus) {
    source.onopen = () => onStatus("live");
    source.onerror = () => onStatus(source.readyState === EventSource.CLOSED ? "offline" : "reconnecting");
  }
  const close = source.close.bind(source);
  source.close = () => { sources.delete(source); close(); };
  return source;
}

// ---------- approvals ----------

const approvals = new Map();
const approvalListeners = new Set();
let loaded = false;

function changed() {
  for (const f of approvalListeners) f();
}

/**
 * Keep what we know of an approval. A settled approval is never turned back into
 * a pending one by an older copy (events and the first read can cross).
 */
export function putApproval(a) {
  if (!a || !a.id) return;
  const old = approvals.get(a.id);
  if (old && old.state !== "pending" && a.state === "pending") return;
  approvals.set(a.id, { ...old, ...a, project: a.project || old?.project || "" });
  changed();
}

export const approval = (id) => approvals.get(id);

/** Pending approvals, oldest first: the one that expires first is on top, and a new one goes to the bottom. */
export function pending(taskId) {
  return [...approvals.values()]
    .filter((a) => a.state === "pending" && (!taskId || a.task_id === taskId))
    .sort((a, b) => a.requested_at - b.requested_at || (a.id < b.id ? -1 : 1));
}

/**
 * The approvals a screen lists: pending ones as they arrive, and every one
 * listed stays (showing its decision) until the screen is left, so nothing
 * below a decided card jumps up under a finger.
 */
export function useListed(taskId) {
  const seen = useRef([]);
  for (const a of pending(taskId)) if (!seen.current.includes(a.id)) seen.current.push(a.id);
  return seen.current.map(approval).filter(Boolean);
}

export function useApprovals() {
  const [, bump] = useState(0);
  useEffect(() => {
    const f = () => bump((n) => n + 1);
    approvalListeners.add(f);
    return () => approvalListeners.delete(f);
  }, []);
  return { pending, approval, loaded };
}

function applyApprovalEvent(e) {
  if (e.approval) {
    const fresh = !approvals.has(e.approval.id) && e.approval.state === "pending";
    putApproval(e.approval);
    if (fresh && e.type === "approval_requested") notify(e.approval);
    if (e.approval.state !== "pending") closeNotification(e.approval.id);
  }
  // A final task withdraws its pending approvals without events of their own.
  if (["task_done", "task_failed", "task_cancelled", "task_blocked", "task_dependency_failed"].includes(e.type)) {
    for (const a of approvals.values()) {
      if (a.task_id === e.stream_id && a.state === "pending") {
        approvals.set(a.id, { ...a, state: "withdrawn", note: "the task ended" });
        closeNotification(a.id);
      }
    }
    changed();
  }
}

// ---------- notifications ----------

let registration = null;

export function notificationsSupported() {
  return "Notification" in window;
}

export function useNotificationPermission() {
  const [p, set] = useState(notificationsSupported() ? Notification.permission : "unsupported");
  return [p, async () => set(await Notification.requestPermission())];
}

/** Whether this screen already shows the approval (then a notification would only interrupt). */
function onScreen(a) {
  if (document.visibilityState !== "visible" || !document.hasFocus()) return false;
  return location.pathname === "/approvals" || location.pathname === "/tasks/" + a.task_id;
}

async function notify(a) {
  if (!notificationsSupported() || Notification.permission !== "granted" || onScreen(a)) return;
  const title = `${a.project || "gaffer"}: ${a.kind} approval`;
  const options = {
    body: a.summary,
    tag: a.id, // one notification per approval, however many tabs are open
    icon: "/assets/icons/icon-192.png",
    badge: "/assets/icons/icon-192.png",
    data: { url: "/tasks/" + encodeURIComponent(a.task_id) },
    requireInteraction: true,
  };
  try {
    if (registration) await registration.showNotification(title, options);
    else new Notification(title, options);
  } catch (e) {
    // A browser that refuses (a phone without the service worker): the page shows it anyway.
    console.warn("gaffer: the browser refused a notification:", e);
  }
}

async function closeNotification(id) {
  if (!registration) return;
  for (const n of await registration.getNotifications({ tag: id })) n.close();
}

// ---------- start ----------

/** Start the live connection, once per page load. */
export async function start() {
  if ("serviceWorker" in navigator) {
    navigator.serviceWorker
      .register("/assets/sw.js", { scope: "/" })
      .then(() => navigator.serviceWorker.ready)
      .then((r) => { registration = r; })
      .catch(() => {});
  }
  let opened;
  const open = new Promise((resolve) => { opened = resolve; });
  follow("/api/events", (e) => {
    if (e.type.startsWith("approval_") || FINAL.has(e.type.slice("task_".length))) applyApprovalEvent(e);
    for (const f of listeners) f(e);
  }, (s) => {
    setStatus(s);
    if (s === "live") opened();
  });
  // The one read of the queue, once the stream listens (so nothing falls between
  // the two); from here on the stream keeps it.
  await Promise.race([open, new Promise((r) => setTimeout(r, 3000))]);
  const r = await api("GET", "/api/approvals?state=pending");
  if (r.status === 200) for (const a of r.data) putApproval(a);
  loaded = true;
  changed();
}
