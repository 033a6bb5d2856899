//! The engine thread: the one OS thread that owns the `Backend`.
//!
//! HTTP tasks send `Command`s over a std channel (a blocking `recv` is the wake-up when the
//! engine is idle) and get replies on tokio oneshots and events on a per-request tokio channel,
//! whose senders never block, so the engine never waits for a slow client. The loop:
//! take every pending command (blocking only when idle), run one step, route the drained events.
//! Rendering the chat template and tokenizing happen here too, so the backend's tokenizer is used
//! from its owning thread only, and a request costs one round trip before it is admitted.

use crate::backend::*;
use std::collections::HashMap;
use std::sync::mpsc::{self, RecvTimeoutError, TryRecvError};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::sync::{mpsc as tmpsc, oneshot};

/// Creates the backend; it runs on the engine thread, so the backend need not be `Send`.
pub type OpenFn = Box<dyn FnOnce() -> Result<Box<dyn Backend>, String> + Send>;

#[derive(Clone, Debug, PartialEq)]
pub enum Prompt {
    /// The chat template's request (`{"messages": [...], "tools": [...], "chat_template_kwargs":
    /// {...}}` as JSON), and text to put after its render (a required tool call's opening marker).
    Chat { request: String, suffix: String },
    Text(String),
    Tokens(Vec<i32>),
}

#[derive(Clone, Debug, PartialEq)]
pub struct Job {
    pub prompt: Prompt,
    /// None: up to the end of the context.
    pub max_tokens: Option<u32>,
    pub params: GenParams,
}

#[derive(Debug, PartialEq)]
pub enum EngineError {
    Rejected(SubmitError),
    /// The engine thread is gone (shut down or panicked).
    Stopped,
}

/// Work for the backend on its thread between steps (tokenize, render), answering on its own channel.
type BackendCall = Box<dyn FnOnce(&mut dyn Backend) + Send>;

enum Command {
    Generate { job: Job, events: tmpsc::UnboundedSender<Event>, reply: oneshot::Sender<Admission> },
    Cancel(u64),
    With(BackendCall),
}

/// The engine thread's answer to Generate: (id, prompt tokens) or why not.
type Admission = Result<(u64, u32), SubmitError>;

pub struct Engine {
    tx: mpsc::Sender<Command>,
    pub model_id: String,
    pub n_ctx: u32,
    /// The chat template's tool-call syntax (`ferrite::engine::tool_format`).
    pub tool_format: u32,
    published: Arc<Mutex<BackendMetrics>>,
}

impl Engine {
    /// Starts the engine thread, opens the backend on it, and waits until it is ready.
    pub fn start(open: OpenFn) -> Result<Engine, String> {
        let (tx, rx) = mpsc::channel();
        let (ready_tx, ready_rx) = mpsc::channel();
        let published = Arc::new(Mutex::new(BackendMetrics::default()));
        let pub2 = published.clone();
        std::thread::Builder::new()
            .name("ferrite-engine".into())
            .spawn(move || {
                let backend = match open() {
                    Ok(b) => b,
                    Err(e) => {
                        let _ = ready_tx.send(Err(e));
                        return;
                    }
                };
                let _ = ready_tx.send(Ok((backend.model_id(), backend.n_ctx(), backend.tool_format())));
                run(backend, rx, pub2);
            })
            .map_err(|e| format!("cannot start the engine thread: {e}"))?;
        let (model_id, n_ctx, tool_format) = ready_rx
            .recv()
            .map_err(|_| "the engine thread panicked while opening the backend".to_string())??;
        Ok(Engine { tx, model_id, n_ctx, tool_format, published })
    }

    /// Renders, tokenizes and submits `job`; Ok once the backend accepted it.
    pub async fn generate(&self, job: Job) -> Result<Generation, EngineError> {
        let (etx, erx) = tmpsc::unbounded_channel();
        let (rtx, rrx) = oneshot::channel();
        self.tx.send(Command::Generate { job, events: etx, reply: rtx }).map_err(|_| EngineError::Stopped)?;
        // If this future is dropped while waiting (the client went away), the guard's drop
        // reads the admission that may have arrived meanwhile and cancels it; if none arrived,
        // the engine thread sees the reply channel closed and cancels on its side.
        let mut guard = CancelGuard { tx: self.tx.clone(), id: None, reply: Some(rrx) };
        let answer = (&mut guard.reply.as_mut().unwrap()).await;
        guard.reply = None;
        match answer {
            Ok(Ok((id, n_prompt))) => {
                guard.id = Some(id);
                Ok(Generation { id, n_prompt, events: erx, guard })
            }
            Ok(Err(e)) => Err(EngineError::Rejected(e)),
            Err(_) => Err(EngineError::Stopped),
        }
    }

    /// Runs `f` with the backend on the engine thread (between steps) and returns what it gives.
    pub async fn with<T: Send + 'static>(&self, f: impl FnOnce(&mut dyn Backend) -> T + Send + 'static) -> Result<T, EngineError> {
        let (tx, rx) = oneshot::channel();
        let call: BackendCall = Box::new(move |b| {
            let _ = tx.send(f(b));
        });
        self.tx.send(Command::With(call)).map_err(|_| EngineError::Stopped)?;
        rx.await.map_err(|_| EngineError::Stopped)
    }

    /// The backend's counters as of the engine thread's last step.
    pub fn metrics(&self) -> BackendMetrics {
        *self.published.lock().unwrap()
    }
}

/// Cancels its sequence when dropped, unless the sequence finished: a dropped response stream
/// (client gone) or an abandoned request future frees the engine's slot.
struct CancelGuard {
    tx: mpsc::Sender<Command>,
    id: Option<u64>,
    reply: Option<oneshot::Receiver<Admission>>,
}

impl CancelGuard {
    fn disarm(&mut self) {
        self.id = None;
    }
}

impl Drop for CancelGuard {
    fn drop(&mut self) {
        if let Some(mut rx) = self.reply.take() {
            if let Ok(Ok((id, _))) = rx.try_recv() {
                self.id = Some(id);
            }
        }
        if let Some(id) = self.id.take() {
            let _ = self.tx.send(Command::Cancel(id));
        }
    }
}

/// One admitted request's events; dropping it before `Finished` cancels the sequence.
pub struct Generation {
    pub id: u64,
    pub n_prompt: u32,
    events: tmpsc::UnboundedReceiver<Event>,
    guard: CancelGuard,
}

impl Generation {
    /// The next event; None if the engine thread stopped. After `Finished`, do not poll again.
    pub fn poll_event(&mut self, cx: &mut Context<'_>) -> Poll<Option<Event>> {
        let p = self.events.poll_recv(cx);
        if let Poll::Ready(Some(Event::Finished { .. })) = &p {
            self.guard.disarm();
        }
        p
    }

    pub async fn next_event(&mut self) -> Option<Event> {
        std::future::poll_fn(|cx| self.poll_event(cx)).await
    }

    /// Asks the engine to stop this sequence now (a stop string matched); its `Finished` still
    /// arrives, with the final counts.
    pub fn cancel(&mut self) {
        let id = self.id;
        self.guard.disarm();
        let _ = self.guard.tx.send(Command::Cancel(id));
    }
}

fn admit(b: &mut dyn Backend, job: Job) -> Result<GenRequest, SubmitError> {
    let prompt = match job.prompt {
        Prompt::Chat { request, suffix } => {
            let text = b.render_chat(&request).map_err(SubmitError::Invalid)? + &suffix;
            b.tokenize(&text, true).map_err(SubmitError::Invalid)?
        }
        Prompt::Text(t) => b.tokenize(&t, true).map_err(SubmitError::Invalid)?,
        Prompt::Tokens(t) => t,
    };
    let n_ctx = b.n_ctx() as u64;
    let n = prompt.len() as u64;
    let max_new = match job.max_tokens {
        Some(m) if n + m as u64 > n_ctx => {
            return Err(SubmitError::TooLarge(format!(
                "This model's maximum context length is {n_ctx} tokens. However, you requested {} \
                 tokens ({n} in the prompt, {m} for the completion). Please reduce the length of \
                 the prompt or completion.",
                n + m as u64
            )))
        }
        Some(m) => m,
        None if n >= n_ctx => {
            return Err(SubmitError::TooLarge(format!(
                "This model's maximum context length is {n_ctx} tokens. However, your prompt has \
                 {n} tokens. Please reduce the length of the prompt."
            )))
        }
        None => (n_ctx - n) as u32,
    };
    Ok(GenRequest { prompt, max_new_tokens: max_new, params: job.params })
}

struct Loop {
    b: Box<dyn Backend>,
    routes: HashMap<u64, tmpsc::UnboundedSender<Event>>,
}

impl Loop {
    fn handle(&mut self, cmd: Command) {
        match cmd {
            Command::Generate { job, events, reply } => {
                let r = admit(&mut *self.b, job).and_then(|req| {
                    let n = req.prompt.len() as u32;
                    self.b.submit(req).map(|id| (id, n))
                });
                match r {
                    Ok((id, n_prompt)) => {
                        if reply.send(Ok((id, n_prompt))).is_err() {
                            self.b.cancel(id); // the client left while we were admitting it
                        } else {
                            self.routes.insert(id, events);
                        }
                    }
                    Err(e) => {
                        let _ = reply.send(Err(e));
                    }
                }
            }
            Command::Cancel(id) => self.b.cancel(id),
            Command::With(f) => f(&mut *self.b),
        }
    }

    fn route(&mut self, ev: Event) {
        let id = ev.id();
        let last = matches!(ev, Event::Finished { .. });
        let gone = match self.routes.get(&id) {
            Some(tx) => tx.send(ev).is_err(),
            None => false,
        };
        if last {
            self.routes.remove(&id);
        } else if gone {
            // The receiver was dropped without a Cancel reaching us (it is on its way, or the
            // task died): stop the sequence now rather than generate for nobody.
            self.routes.remove(&id);
            self.b.cancel(id);
        }
    }
}

fn run(b: Box<dyn Backend>, rx: mpsc::Receiver<Command>, published: Arc<Mutex<BackendMetrics>>) {
    let mut lp = Loop { b, routes: HashMap::new() };
    let mut events = Vec::new();
    let mut closed = false;
    loop {
        if lp.b.idle() {
            if closed {
                break;
            }
            // Idle, the loop still steps once a second: over tensor-parallel ranks or pipeline
            // stages, rank 0's scheduler then tells the other ranks it is alive, so they can give
            // up on a rank 0 that died (feri_llama_tp_keepalive) instead of waiting forever.
            match rx.recv_timeout(Duration::from_secs(1)) {
                Ok(cmd) => lp.handle(cmd),
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => break,
            }
        }
        loop {
            match rx.try_recv() {
                Ok(cmd) => lp.handle(cmd),
                Err(TryRecvError::Empty) => break,
                Err(TryRecvError::Disconnected) => {
                    if !closed {
                        closed = true; // the server is gone: cancel everything, then exit
                        let ids: Vec<u64> = lp.routes.keys().copied().collect();
                        ids.into_iter().for_each(|id| lp.b.cancel(id));
                    }
                    break;
                }
            }
        }
        let worked = lp.b.step();
        lp.b.drain(&mut events);
        let routed = !events.is_empty();
        for ev in events.drain(..) {
            lp.route(ev);
        }
        *published.lock().unwrap() = lp.b.metrics();
        if !worked && !routed && !lp.b.idle() {
            // Work exists but none could run (e.g. waiting for memory): wait for a command
            // briefly instead of spinning.
            match rx.recv_timeout(Duration::from_millis(2)) {
                Ok(cmd) => lp.handle(cmd),
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => closed = true,
            }
        }
    }
    *published.lock().unwrap() = lp.b.metrics();
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fake::{FakeBackend, FakeConfig, FakeStats};

    fn params() -> GenParams {
        GenParams::greedy(1)
    }


    fn engine(cfg: FakeConfig, stats: Arc<FakeStats>) -> Engine {
        Engine::start(Box::new(move || Ok(Box::new(FakeBackend::new(cfg, stats)) as Box<dyn Backend>)))
            .unwrap()
    }

    fn rt() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap()
    }

    #[test]
    fn generates_and_routes_events_to_the_request() {
        let e = engine(FakeConfig::default(), Arc::default());
        assert_eq!((e.model_id.as_str(), e.n_ctx), ("ferrite-fake", 4096));
        rt().block_on(async {
            let job = Job { prompt: Prompt::Text("abc".into()), max_tokens: Some(10), params: params() };
            let mut g = e.generate(job).await.unwrap();
            assert_eq!(g.n_prompt, 3);
            let mut text = Vec::new();
            loop {
                match g.next_event().await.unwrap() {
                    Event::Token { tok, .. } => text.extend(tok.text),
                    Event::Finished { finish, .. } => {
                        assert_eq!(finish, Finish::Stop);
                        break;
                    }
                }
            }
            assert_eq!(text, b"abc");
        });
    }

    #[test]
    fn context_checks_happen_before_submit() {
        let e = engine(FakeConfig { n_ctx: 8, ..FakeConfig::default() }, Arc::default());
        rt().block_on(async {
            let job = |p: &str, m| Job { prompt: Prompt::Text(p.into()), max_tokens: m, params: params() };
            let r = e.generate(job("abcdef", Some(3))).await.err().unwrap();
            assert!(matches!(r, EngineError::Rejected(SubmitError::TooLarge(_))), "{r:?}");
            let r = e.generate(job("abcdefgh", None)).await.err().unwrap();
            assert!(matches!(r, EngineError::Rejected(SubmitError::TooLarge(_))));
            let chat = Job {
                prompt: Prompt::Chat { request: r#"{"messages": [{"role": "wizard", "content": "x"}]}"#.into(), suffix: String::new() },
                max_tokens: Some(1),
                params: params(),
            };
            let r = e.generate(chat).await.err().unwrap();
            assert!(matches!(r, EngineError::Rejected(SubmitError::Invalid(_))));
            // None means "up to the context": 8 - 3 = 5 tokens allowed, the fake stops at EOS.
            assert!(e.generate(job("abc", None)).await.is_ok());
        });
    }

    #[test]
    fn dropping_a_generation_cancels_it() {
        let stats = Arc::new(FakeStats::default());
        let cfg = FakeConfig { step_delay: Duration::from_millis(5), ..FakeConfig::default() };
        let e = engine(cfg, stats.clone());
        rt().block_on(async {
            let mut p = params();
            p.ignore_eos = true;
            let job = Job { prompt: Prompt::Text("abc".into()), max_tokens: Some(4000), params: p };
            let mut g = e.generate(job).await.unwrap();
            g.next_event().await.unwrap();
            drop(g);
        });
        let t0 = std::time::Instant::now();
        while stats.get(&stats.cancelled) == 0 {
            assert!(t0.elapsed() < Duration::from_secs(10), "never cancelled");
            std::thread::sleep(Duration::from_millis(5));
        }
        while e.metrics().running != 0 {
            assert!(t0.elapsed() < Duration::from_secs(10), "still running");
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}
