//! Shared by the integration tests: an in-process server over the fake backend, a raw HTTP/1.1
//! client on `TcpStream` (so the tests see exactly the bytes a client gets), and a per-test
//! deadline so a hang fails one test instead of stalling the run.

#![allow(dead_code)]

use ferrite_serve::args::Options;
use ferrite_serve::backend::Backend;
use ferrite_serve::fake::{FakeBackend, FakeConfig, FakeStats};
use serde_json::Value;
use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The address a `ferrite-serve` child prints first on its stdout (piped): `listening on http://..`.
pub fn listening_addr(child: &mut std::process::Child) -> SocketAddr {
    let mut line = String::new();
    BufReader::new(child.stdout.take().expect("the child's stdout is piped")).read_line(&mut line).unwrap();
    let addr = line.trim().strip_prefix("listening on http://").unwrap_or_else(|| panic!("{line:?}"));
    addr.parse().unwrap_or_else(|e| panic!("{addr:?}: {e}"))
}

/// Runs `f` on its own thread and fails if it takes longer than `secs` (generous: these tests
/// must pass on a loaded 2-core machine).
pub fn within<T: Send + 'static>(secs: u64, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    let t = std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    match rx.recv_timeout(Duration::from_secs(secs)) {
        Ok(v) => v,
        Err(mpsc::RecvTimeoutError::Timeout) => panic!("test did not finish within {secs} s"),
        Err(mpsc::RecvTimeoutError::Disconnected) => {
            // The closure panicked: re-raise its panic here.
            match t.join() {
                Err(p) => std::panic::resume_unwind(p),
                Ok(()) => unreachable!(),
            }
        }
    }
}

pub struct TestServer {
    pub addr: SocketAddr,
    pub stats: Arc<FakeStats>,
    _handle: ferrite_serve::ServerHandle,
}

pub fn start(cfg: FakeConfig, opts: Options) -> TestServer {
    let stats = Arc::new(FakeStats::default());
    let s2 = stats.clone();
    let opts = Options { fake: true, port: 0, ..opts };
    let open = Box::new(move || Ok(Box::new(FakeBackend::new(cfg, s2)) as Box<dyn Backend>));
    let handle = ferrite_serve::start(&opts, open).expect("server starts");
    TestServer { addr: handle.addr, stats, _handle: handle }
}

pub fn start_default() -> TestServer {
    start(FakeConfig::default(), Options::default())
}

#[derive(Debug)]
pub struct Resp {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Resp {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }

    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&self.body)))
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// The `data:` payloads of an event stream.
    pub fn events(&self) -> Vec<String> {
        ferrite_serve::sse::parse_events(&self.body)
            .unwrap_or_else(|e| panic!("bad SSE ({e}): {}", self.text()))
    }
}

pub fn connect(addr: SocketAddr) -> TcpStream {
    let s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    s.set_write_timeout(Some(Duration::from_secs(30))).unwrap();
    s
}

/// Reads the status line and headers.
pub fn read_head(r: &mut impl BufRead) -> std::io::Result<(u16, Vec<(String, String)>)> {
    let mut line = String::new();
    r.read_line(&mut line)?;
    if line.is_empty() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::UnexpectedEof,
            "connection closed before a response",
        ));
    }
    let status: u16 = line
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("bad status line {line:?}"));
    let mut headers = Vec::new();
    loop {
        line.clear();
        r.read_line(&mut line)?;
        let l = line.trim_end();
        if l.is_empty() {
            break;
        }
        let (k, v) = l.split_once(':').expect("header line");
        headers.push((k.trim().to_string(), v.trim().to_string()));
    }
    Ok((status, headers))
}

/// Reads one chunk of a chunked body; None at the last chunk.
pub fn read_chunk(r: &mut impl BufRead) -> std::io::Result<Option<Vec<u8>>> {
    let mut line = String::new();
    r.read_line(&mut line)?;
    let n = usize::from_str_radix(line.trim(), 16).unwrap_or_else(|_| panic!("bad chunk size {line:?}"));
    let mut buf = vec![0; n + 2];
    r.read_exact(&mut buf)?;
    buf.truncate(n);
    Ok(if n == 0 { None } else { Some(buf) })
}

/// Reads one whole response (Content-Length, chunked, or to EOF).
pub fn read_response(r: &mut impl BufRead) -> std::io::Result<Resp> {
    let (status, headers) = read_head(r)?;
    let get = |n: &str| headers.iter().find(|(k, _)| k.eq_ignore_ascii_case(n)).map(|(_, v)| v.clone());
    let mut body = Vec::new();
    if let Some(n) = get("content-length") {
        body.resize(n.parse().unwrap(), 0);
        r.read_exact(&mut body)?;
    } else if get("transfer-encoding").as_deref() == Some("chunked") {
        while let Some(c) = read_chunk(r)? {
            body.extend(c);
        }
    } else {
        r.read_to_end(&mut body)?;
    }
    Ok(Resp { status, headers, body })
}

pub fn raw_request(method: &str, path: &str, body: &[u8], extra: &str) -> Vec<u8> {
    let mut r = format!(
        "{method} {path} HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\nContent-Length: {}\r\n{extra}\r\n",
        body.len()
    )
    .into_bytes();
    r.extend_from_slice(body);
    r
}

/// One request on a fresh connection (Connection: close).
pub fn request(addr: SocketAddr, method: &str, path: &str, body: &[u8]) -> Resp {
    let mut s = connect(addr);
    s.write_all(&raw_request(method, path, body, "Connection: close\r\n")).unwrap();
    read_response(&mut BufReader::new(s)).expect("a response")
}

pub fn post(addr: SocketAddr, path: &str, body: &Value) -> Resp {
    request(addr, "POST", path, body.to_string().as_bytes())
}

pub fn get(addr: SocketAddr, path: &str) -> Resp {
    request(addr, "GET", path, b"")
}

/// Polls `f` until it holds or `secs` pass.
pub fn eventually(secs: u64, what: &str, mut f: impl FnMut() -> bool) {
    let t0 = Instant::now();
    while !f() {
        assert!(t0.elapsed() < Duration::from_secs(secs), "never happened: {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The /metrics samples.
pub fn metrics(addr: SocketAddr) -> std::collections::HashMap<String, f64> {
    let r = get(addr, "/metrics");
    assert_eq!(r.status, 200);
    ferrite_serve::metrics::parse_exposition(&r.text()).unwrap_or_else(|e| panic!("{e}\n{}", r.text()))
}

/// Asserts an OpenAI error body with this status, and returns its `error` object.
pub fn assert_error(r: &Resp, status: u16) -> Value {
    assert_eq!(r.status, status, "{}", r.text());
    let v = r.json();
    let e = v["error"].clone();
    assert!(e["message"].is_string() && e["type"].is_string(), "{v}");
    assert!(e.get("param").is_some() && e.get("code").is_some(), "{v}");
    e
}
