//! Connections with deadlines, so slow or silent clients cannot hold sockets forever.
//!
//! hyper 0.14.19's `http1_header_read_timeout` never fires (it re-arms the timer on every parse
//! attempt and never marks it running; fixed upstream in 0.14.20), so the deadlines live in the
//! socket wrapper instead:
//! - while the connection is idle (no request in the service: before the first request, between
//!   keep-alive requests, while a request's headers trickle in), a read that would wait past
//!   `idle_since + timeout` fails, and hyper drops the connection;
//! - once hyper hands a request to the service, `BusyGuard` suspends that deadline until the
//!   response body is finished; the body itself is read under `tokio::time::timeout` (http.rs);
//! - a write that stays blocked for `timeout` (a client that stopped reading) fails.

use hyper::server::accept::Accept;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::time::{Instant, Sleep};

/// State a connection shares with the requests it serves.
pub struct ConnShared {
    busy: AtomicBool,
    idle_since: Mutex<Instant>,
}

impl ConnShared {
    /// Marks the connection busy until the guard drops.
    pub fn busy(self: &Arc<Self>) -> BusyGuard {
        self.busy.store(true, Ordering::SeqCst);
        BusyGuard(self.clone())
    }
}

pub struct BusyGuard(Arc<ConnShared>);

impl Drop for BusyGuard {
    fn drop(&mut self) {
        *self.0.idle_since.lock().unwrap() = Instant::now();
        self.0.busy.store(false, Ordering::SeqCst);
    }
}

pub struct TimedStream {
    io: TcpStream,
    shared: Arc<ConnShared>,
    timeout: Duration,
    read_timer: Pin<Box<Sleep>>,
    write_timer: Pin<Box<Sleep>>,
    write_blocked_since: Option<Instant>,
}

fn timed_out(what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::TimedOut, what.to_string())
}

impl TimedStream {
    pub fn new(io: TcpStream, timeout: Duration) -> Self {
        let now = Instant::now();
        TimedStream {
            io,
            shared: Arc::new(ConnShared { busy: AtomicBool::new(false), idle_since: Mutex::new(now) }),
            timeout,
            read_timer: Box::pin(tokio::time::sleep_until(now + timeout)),
            write_timer: Box::pin(tokio::time::sleep_until(now + timeout)),
            write_blocked_since: None,
        }
    }

    pub fn shared(&self) -> Arc<ConnShared> {
        self.shared.clone()
    }

    /// Ready(Err) once the idle deadline passed; otherwise arms the timer to wake this task.
    fn poll_idle_deadline(&mut self, cx: &mut Context<'_>) -> Poll<io::Error> {
        if self.shared.busy.load(Ordering::SeqCst) {
            return Poll::Pending;
        }
        let deadline = *self.shared.idle_since.lock().unwrap() + self.timeout;
        if self.read_timer.deadline() != deadline {
            self.read_timer.as_mut().reset(deadline);
        }
        match self.read_timer.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(timed_out("the request did not arrive in time")),
            Poll::Pending => Poll::Pending,
        }
    }

    fn poll_write_with<T>(&mut self, cx: &mut Context<'_>, r: Poll<io::Result<T>>) -> Poll<io::Result<T>> {
        if r.is_ready() {
            self.write_blocked_since = None;
            return r;
        }
        let since = *self.write_blocked_since.get_or_insert_with(Instant::now);
        let deadline = since + self.timeout;
        if self.write_timer.deadline() != deadline {
            self.write_timer.as_mut().reset(deadline);
        }
        match self.write_timer.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Err(timed_out("the client stopped reading"))),
            Poll::Pending => Poll::Pending,
        }
    }
}

use std::future::Future;

impl AsyncRead for TimedStream {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        // Checked before reading too: a client dribbling a byte at a time never leaves the
        // read pending long enough for the timer alone to catch it.
        let before = this.poll_idle_deadline(cx);
        if let Poll::Ready(e) = before {
            return Poll::Ready(Err(e));
        }
        match Pin::new(&mut this.io).poll_read(cx, buf) {
            Poll::Pending => match this.poll_idle_deadline(cx) {
                Poll::Ready(e) => Poll::Ready(Err(e)),
                Poll::Pending => Poll::Pending,
            },
            ready => ready,
        }
    }
}

impl AsyncWrite for TimedStream {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let r = Pin::new(&mut this.io).poll_write(cx, buf);
        this.poll_write_with(cx, r)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let r = Pin::new(&mut this.io).poll_write_vectored(cx, bufs);
        this.poll_write_with(cx, r)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let r = Pin::new(&mut this.io).poll_flush(cx);
        this.poll_write_with(cx, r)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_shutdown(cx)
    }
}

/// hyper's `Accept` over a tokio listener, wrapping each connection in a `TimedStream`.
/// Accept errors never end the server: per-connection ones are skipped, resource ones (out of
/// file descriptors) pause accepting briefly, as hyper's own AddrIncoming does.
pub struct TimedListener {
    listener: TcpListener,
    timeout: Duration,
    backoff: Option<Pin<Box<Sleep>>>,
}

impl TimedListener {
    pub fn new(listener: TcpListener, timeout: Duration) -> Self {
        TimedListener { listener, timeout, backoff: None }
    }
}

impl Accept for TimedListener {
    type Conn = TimedStream;
    type Error = io::Error;

    fn poll_accept(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<io::Result<TimedStream>>> {
        let this = self.get_mut();
        if let Some(b) = this.backoff.as_mut() {
            if b.as_mut().poll(cx).is_pending() {
                return Poll::Pending;
            }
            this.backoff = None;
        }
        loop {
            match this.listener.poll_accept(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Ok((s, _))) => {
                    let _ = s.set_nodelay(true); // stream tokens as they come
                    return Poll::Ready(Some(Ok(TimedStream::new(s, this.timeout))));
                }
                Poll::Ready(Err(e))
                    if matches!(
                        e.kind(),
                        io::ErrorKind::ConnectionAborted | io::ErrorKind::ConnectionReset
                    ) =>
                {
                    continue
                }
                Poll::Ready(Err(e)) => {
                    eprintln!("ferrite-serve: accept failed ({e}); pausing 100 ms");
                    let mut b = Box::pin(tokio::time::sleep(Duration::from_millis(100)));
                    if b.as_mut().poll(cx).is_ready() {
                        continue;
                    }
                    this.backoff = Some(b);
                    return Poll::Pending;
                }
            }
        }
    }
}
