//! Where a person acts on a notification: the server that opens one-tap links and
//! task pages (when one is there), and the command that decides in a terminal.

use crate::LinkKey;
use std::sync::Arc;

/// Where people act on what a notifier sends.
#[derive(Clone)]
pub struct Reach {
    /// Signs one-tap links; `None`: no links.
    pub links: Option<LinkKey>,
    /// The server that opens them, asked before each delivery.
    pub server: ServerUrl,
    /// How a person runs gaffer on this journal (`gaffer`, or `gaffer --config
    /// PATH`): an approval's notification names `<this> approve ap-…`.
    pub gaffer: String,
}

/// Finds the base URL of the server that serves this journal's pages and one-tap
/// links, or `None` when none is reachable. Asked before each delivery (it may
/// block briefly: it runs off the async workers), since a server may start or
/// stop while a `gaffer run` waits for a person.
#[derive(Clone)]
pub struct ServerUrl(Arc<dyn Fn() -> Option<String> + Send + Sync>);

impl ServerUrl {
    /// Always `url` (a `gaffer serve` is the server itself).
    pub fn fixed(url: &str) -> Self {
        let url = url.to_owned();
        Self(Arc::new(move || Some(url.clone())))
    }

    /// Whatever `find` says at the time.
    pub fn found_by(find: impl Fn() -> Option<String> + Send + Sync + 'static) -> Self {
        Self(Arc::new(find))
    }

    /// The base URL now, without a trailing `/`.
    pub(crate) async fn now(&self) -> Option<String> {
        let find = self.0.clone();
        let found = tokio::task::spawn_blocking(move || find()).await.ok()??;
        Some(found.trim_end_matches('/').to_owned())
    }
}

impl std::fmt::Debug for ServerUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ServerUrl(..)")
    }
}
