// gaffer's service worker: it makes the page installable and shows approval
// notifications (phones show them only through a service worker). It caches
// nothing: an approval must never be read from a stale copy.
self.addEventListener("install", () => self.skipWaiting());
self.addEventListener("activate", (e) => e.waitUntil(self.clients.claim()));

// Tapping a notification opens (or focuses) the task that asks.
self.addEventListener("notificationclick", (e) => {
  e.notification.close();
  const url = new URL((e.notification.data && e.notification.data.url) || "/approvals", self.location.origin).href;
  e.waitUntil((async () => {
    const windows = await self.clients.matchAll({ type: "window", includeUncontrolled: true });
    for (const w of windows) {
      if (w.url === url) return w.focus();
    }
    if (windows.length && "navigate" in windows[0]) {
      await windows[0].navigate(url);
      return windows[0].focus();
    }
    return self.clients.openWindow(url);
  })());
});
