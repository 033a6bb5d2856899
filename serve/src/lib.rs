//! ferrite-serve: an OpenAI-compatible HTTP server over ferrite's engine.
//!
//! The pieces, one concern per file: `args` (options), `backend` (the trait that is the server's
//! only view of the engine), `fake` (a deterministic backend for tests), `engine_thread` (the one
//! thread that owns the backend), `openai` (request parsing and validation), `completion`
//! (events to responses, streaming or not), `stop` (stop strings), `sse` (event framing),
//! `http` (routing, limits, errors), `conn` (connection deadlines), `metrics` (/metrics).
//! `start` puts them together; the binary (main.rs) only parses arguments and picks the backend.

pub mod args;
pub mod backend;
pub mod completion;
pub mod conn;
pub mod embeddings;
pub mod engine_thread;
pub mod error;
pub mod fake;
pub mod json_scan;
pub mod ferrite_backend;
pub mod http;
pub mod metrics;
pub mod openai;
pub mod sse;
pub mod stop;
pub mod tools;

use args::Options;
use engine_thread::{Engine, OpenFn};
use hyper::service::{make_service_fn, service_fn};
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};
use tokio::sync::oneshot;

/// HTTP worker threads: requests only parse JSON and move bytes; the engine has its own thread.
const HTTP_THREADS: usize = 2;

/// A running server. Dropping it stops accepting connections (open streams finish first).
pub struct ServerHandle {
    pub addr: SocketAddr,
    shutdown: Option<oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl ServerHandle {
    /// Blocks until the server stops.
    pub fn wait(mut self) {
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for ServerHandle {
    fn drop(&mut self) {
        if let Some(s) = self.shutdown.take() {
            let _ = s.send(());
        }
    }
}

/// Opens the backend (on the engine thread), binds `opts.host:opts.port` and serves on
/// background threads.
pub fn start(opts: &Options, open: OpenFn) -> Result<ServerHandle, String> {
    let engine = Engine::start(open)?;
    let std_listener = std::net::TcpListener::bind((opts.host.as_str(), opts.port))
        .map_err(|e| format!("cannot listen on {}:{}: {e}", opts.host, opts.port))?;
    let addr = std_listener.local_addr().map_err(|e| e.to_string())?;
    std_listener.set_nonblocking(true).map_err(|e| e.to_string())?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(HTTP_THREADS)
        .thread_name("ferrite-http")
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the HTTP runtime: {e}"))?;
    let listener = {
        let _in_runtime = runtime.enter();
        tokio::net::TcpListener::from_std(std_listener).map_err(|e| e.to_string())?
    };
    let app = Arc::new(http::App {
        engine,
        metrics: Arc::new(metrics::Metrics::default()),
        body_limit: opts.body_limit,
        timeout: opts.timeout,
        created: SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs()),
    });
    let timeout = opts.timeout;
    let (tx, rx) = oneshot::channel::<()>();
    let thread = std::thread::Builder::new()
        .name("ferrite-serve".into())
        .spawn(move || {
            runtime.block_on(async move {
                let make = make_service_fn(move |conn: &conn::TimedStream| {
                    let shared = conn.shared();
                    let app = app.clone();
                    async move {
                        Ok::<_, Infallible>(service_fn(move |req| {
                            http::serve(req, app.clone(), shared.clone())
                        }))
                    }
                });
                let server = hyper::Server::builder(conn::TimedListener::new(listener, timeout))
                    .http1_only(true)
                    .serve(make)
                    .with_graceful_shutdown(async {
                        let _ = rx.await;
                    });
                if let Err(e) = server.await {
                    eprintln!("ferrite-serve: {e}");
                }
            });
        })
        .map_err(|e| format!("cannot start the server thread: {e}"))?;
    Ok(ServerHandle { addr, shutdown: Some(tx), thread: Some(thread) })
}
