//! The accept loop: HTTP/1.1 connections served by hyper with the timeouts a
//! server facing hostile clients needs (`axum::serve` takes no configuration, and
//! without a timer hyper never closes a connection that does not finish its headers).
//!
//! - **headers**: a connection must deliver a request's headers within
//!   [`Limits::header_read`] of being accepted or of its previous answer being sent
//!   (hyper arms the same timer while a kept-alive connection waits for its next
//!   request), so half-open and idle connections are closed;
//! - **requests**: a request must be answered (body read and handled) within
//!   [`Limits::request`], else `408` (the event streams answer at once and then
//!   stream, so they are not cut);
//! - **slow readers**: a write that cannot go out for [`Limits::slow_reader`] (the
//!   client stopped reading, its socket buffer is full) closes the connection, so a
//!   client that never reads its event stream does not hold a task and buffers forever.

use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::Router;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use std::future::Future;
use std::io;
use std::pin::{pin, Pin};
use std::task::{ready, Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::time::{sleep, Sleep};
use tower::ServiceExt;

/// What a connection buffers towards its client (hyper's default is 400 KiB): with
/// hundreds of event streams open, this is most of their memory. It also bounds a
/// request's head.
const WRITE_BUFFER: usize = 64 * 1024;

/// How long the server waits on a client; see the module docs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// From accepting a connection (or sending its previous answer) to having the
    /// next request's headers.
    pub header_read: Duration,
    /// From having a request's headers to having its answer's headers.
    pub request: Duration,
    /// How long a write may wait on a client that does not read before the
    /// connection is closed.
    pub slow_reader: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            header_read: Duration::from_secs(10),
            request: Duration::from_secs(60),
            slow_reader: Duration::from_secs(60),
        }
    }
}

/// Serve `router` on `listener` until `shutdown` resolves, then stop accepting,
/// let each connection finish its current answer and wait for them all.
pub(crate) async fn serve(
    listener: TcpListener,
    router: Router,
    limits: Limits,
    shutdown: impl Future<Output = ()> + Send + 'static,
) {
    let (stop_tx, stop_rx) = watch::channel(false);
    let mut shutdown = pin!(shutdown);
    loop {
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(e) => {
                    // Out of file descriptors and the like: wait, do not spin.
                    tracing::warn!(error = %e, "accepting a connection failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let router = router.clone();
        let mut stop = stop_rx.clone();
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |mut req: hyper::Request<Incoming>| {
                req.extensions_mut().insert(ConnectInfo(peer));
                router.clone().oneshot(req.map(Body::new))
            });
            let mut builder = hyper::server::conn::http1::Builder::new();
            builder
                .timer(TokioTimer::new())
                .header_read_timeout(limits.header_read)
                .max_buf_size(WRITE_BUFFER);
            let mut conn = pin!(builder.serve_connection(
                TokioIo::new(WriteDeadline::new(stream, limits.slow_reader)),
                service
            ));
            tokio::select! {
                done = conn.as_mut() => {
                    if let Err(e) = done {
                        tracing::debug!(%peer, error = %e, "connection ended");
                    }
                }
                _ = stop.changed() => {
                    conn.as_mut().graceful_shutdown();
                    let _ = conn.as_mut().await;
                }
            }
            drop(stop);
        });
    }
    drop(listener);
    let _ = stop_tx.send(true);
    drop(stop_rx);
    // Every connection task holds a receiver until it ends.
    stop_tx.closed().await;
}

/// The request timeout as a middleware: a handler (body reading included) that has
/// not answered within the limit gets `408`.
pub(crate) async fn request_timeout(
    axum::extract::State(limit): axum::extract::State<Duration>,
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    use axum::response::IntoResponse;
    match tokio::time::timeout(limit, next.run(req)).await {
        Ok(response) => response,
        Err(_) => crate::error::ApiError::new(
            axum::http::StatusCode::REQUEST_TIMEOUT,
            "request_timeout",
            format!(
                "the request was not complete within {} s; send the body at once",
                limit.as_secs()
            ),
        )
        .into_response(),
    }
}

/// A connection whose writes fail with `TimedOut` once one has waited `limit` for
/// the peer to take bytes; reads are untouched (hyper times those).
struct WriteDeadline<T> {
    inner: T,
    limit: Duration,
    /// Armed while a write or flush waits.
    stalled: Option<Pin<Box<Sleep>>>,
}

impl<T> WriteDeadline<T> {
    fn new(inner: T, limit: Duration) -> Self {
        Self {
            inner,
            limit,
            stalled: None,
        }
    }

    /// After the inner write said `Pending`: still waiting, or out of time.
    fn wait<R>(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<R>> {
        let limit = self.limit;
        let stalled = self.stalled.get_or_insert_with(|| Box::pin(sleep(limit)));
        ready!(stalled.as_mut().poll(cx));
        Poll::Ready(Err(io::Error::new(
            io::ErrorKind::TimedOut,
            "the client has not read for too long",
        )))
    }

    fn done<R>(&mut self, result: io::Result<R>) -> Poll<io::Result<R>> {
        self.stalled = None;
        Poll::Ready(result)
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for WriteDeadline<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for WriteDeadline<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match Pin::new(&mut self.inner).poll_write(cx, buf) {
            Poll::Ready(result) => self.done(result),
            Poll::Pending => self.wait(cx),
        }
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match Pin::new(&mut self.inner).poll_write_vectored(cx, bufs) {
            Poll::Ready(result) => self.done(result),
            Poll::Pending => self.wait(cx),
        }
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match Pin::new(&mut self.inner).poll_flush(cx) {
            Poll::Ready(result) => self.done(result),
            Poll::Pending => self.wait(cx),
        }
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match Pin::new(&mut self.inner).poll_shutdown(cx) {
            Poll::Ready(result) => self.done(result),
            Poll::Pending => self.wait(cx),
        }
    }
}
