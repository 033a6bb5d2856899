//! ferrite-serve over two tensor-parallel ranks (`mpirun -n 2 ferrite-serve --tp 2`, TCP on
//! loopback), and over two pipeline stages (`--pp 2`): rank 0 serves HTTP with its scheduler and
//! prefix cache, rank 1 follows its steps.
//! Three chat requests at once (two greedy ones sharing a long system prompt, so the second forks
//! the first's cached prefix, and a top-k sampled one, which the ranks draw from their candidates)
//! and one streamed answer give, token for token, what one process gives with the same options,
//! on the exact matmul route where the two agree (docs/CLAIMS.md C-TP-003); the prefix cache hit on
//! both; on SmolLM2-135M and, over two ranks, on Gemma 3 270M. Then a rank killed in the middle of a step (SIGKILL): the request in
//! flight and a new one get 503 naming the rank that stopped answering, within the timeout, and
//! the server exits (status 3) so the job ends. SKIPPED (printed) without mpirun or the model.
//! Over 2 stages of 2 tensor-parallel ranks (4 processes) the same answers again.
//! EVIDENCE: C-TP-006 C-TP-008 C-TP-009 C-TP-011

mod common;

use serde_json::{json, Value};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

const BIN: &str = env!("CARGO_BIN_EXE_ferrite-serve");

fn data_file(name: &str) -> Option<PathBuf> {
    let dir = std::env::var_os("FERRITE_DATA_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache/ferrite"));
    let p = dir.join(name);
    p.is_file().then_some(p)
}

fn model() -> Option<PathBuf> {
    data_file("smollm2-135m-instruct-q4_1.gguf")
}

/// The sanitizer run (make test-sanitize) preloads ASan's runtime.
fn under_asan() -> bool {
    std::env::var("LD_PRELOAD").is_ok_and(|p| p.contains("libasan"))
}

fn have_mpirun() -> bool {
    Command::new("mpirun").arg("--version").stdout(Stdio::null()).stderr(Stdio::null()).status().is_ok_and(|s| s.success())
}

/// A server (one process, or mpirun's ranks), killed on drop.
struct Server {
    child: Child,
    addr: SocketAddr,
}

impl Server {
    fn start(model: &PathBuf, ranks: u32) -> Server {
        Server::start_with(model, ranks, &[])
    }

    fn start_with(model: &PathBuf, ranks: u32, extra: &[&str]) -> Server {
        let serve = ["--port", "0", "--threads", "1", "--parallel", "3", "--matmul", "exact", "--kv-dtype", "f32"];
        let mut cmd = if ranks > 1 {
            let mut c = Command::new("mpirun");
            // a dead rank does not end the job at once: rank 0 finds it by its timeout and answers
            // 503 (without this, mpirun kills every rank as soon as one dies)
            c.arg("--enable-recovery");
            // SAFETY: geteuid has no preconditions
            if unsafe { geteuid() } == 0 {
                c.arg("--allow-run-as-root");
            }
            c.args(["--oversubscribe", "-n", &ranks.to_string(), "--mca", "pml", "ob1", "--mca", "btl", "self,tcp"]);
            c.args(["--mca", "btl_tcp_if_include", "lo", "--mca", "oob_tcp_if_include", "lo"]);
            // LeakSanitizer under mpirun: Open MPI keeps what its unloaded components allocated
            let asan = std::env::var("ASAN_OPTIONS").unwrap_or_default();
            c.env("ASAN_OPTIONS", format!("{asan}:detect_leaks=0").trim_start_matches(':'));
            c.args(["-x", "ASAN_OPTIONS", BIN]);
            if !extra.contains(&"--pp") {
                c.args(["--tp", &ranks.to_string()]);
            }
            c
        } else {
            Command::new(BIN)
        };
        let mut child = cmd.arg("--model").arg(model).args(serve).args(extra).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
        let addr = common::listening_addr(&mut child);
        Server { child, addr }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

extern "C" {
    fn geteuid() -> u32;
}

/// How a test request samples.
#[derive(Clone, Copy, PartialEq)]
enum Sampling {
    Greedy,
    /// top-k 40 at temperature 0.8 with a seed: over tensor-parallel ranks the ranks then send
    /// their 40 best candidates and the ties they cut, not their logits (C-TP-010)
    TopK,
    /// temperature 0.9 alone with a seed (the API's default way): the ranks draw the token
    /// together in a step of such rows (C-TP-013)
    Plain,
}

fn chat(addr: SocketAddr, system: &str, user: &str, sampling: Sampling) -> Value {
    let mut body = json!({"messages": [{"role": "system", "content": system}, {"role": "user", "content": user}],
                          "max_tokens": 16, "temperature": 0});
    if sampling == Sampling::TopK {
        body["temperature"] = json!(0.8);
        body["top_k"] = json!(40);
        body["seed"] = json!(7);
    } else if sampling == Sampling::Plain {
        body["temperature"] = json!(0.9);
        body["seed"] = json!(11);
    }
    common::post(addr, "/v1/chat/completions", &body).json()
}

fn content(v: &Value) -> String {
    v["choices"][0]["message"]["content"].as_str().unwrap().to_string()
}

/// The answers of three requests sent together, then a plain-sampled one alone, then a streamed
/// one, and the prefix cache's hits.
fn answers(s: &Server) -> (Vec<String>, String, f64) {
    let system = "You are a helpful assistant who answers in one short sentence. ".repeat(6);
    let asks = ["What is the capital of France?", "What is the capital of Italy?", "Name a primary color."];
    let threads: Vec<_> = asks
        .iter()
        .enumerate()
        .map(|(i, q)| {
            let (addr, q, sys) = (s.addr, q.to_string(), if i < 2 { system.clone() } else { String::new() });
            let sampling = if i == 2 { Sampling::TopK } else { Sampling::Greedy };
            std::thread::spawn(move || content(&chat(addr, &sys, &q, sampling)))
        })
        .collect();
    let mut texts: Vec<String> = threads.into_iter().map(|t| t.join().unwrap()).collect();
    texts.push(content(&chat(s.addr, "", "Write a short line about the sea.", Sampling::Plain)));
    let body = json!({"messages": [{"role": "system", "content": system}, {"role": "user", "content": "Count to five."}],
                      "max_tokens": 12, "temperature": 0, "stream": true});
    let streamed: String = common::post(s.addr, "/v1/chat/completions", &body)
        .events()
        .iter()
        .filter(|e| *e != "[DONE]")
        .filter_map(|e| serde_json::from_str::<Value>(e).ok()?["choices"][0]["delta"]["content"].as_str().map(String::from))
        .collect();
    let hits = common::metrics(s.addr).get("ferrite_prefix_cache_hits_total").copied().unwrap_or(-1.0);
    (texts, streamed, hits)
}

// EVIDENCE: C-TP-006 C-TP-011 C-TP-013
#[test]
fn two_ranks_serve_what_one_process_serves() {
    let Some(m) = model() else {
        println!("SKIPPED: tensor_parallel (smollm2-135m-instruct-q4_1.gguf missing)");
        return;
    };
    if !have_mpirun() {
        println!("SKIPPED: tensor_parallel (no mpirun: scripts/setup.sh installs openmpi-bin)");
        return;
    }
    common::within(600, move || {
        let one = answers(&Server::start(&m, 1));
        let two = answers(&Server::start(&m, 2));
        println!("one process: {one:?}\ntwo ranks:   {two:?}");
        assert!(one.0.iter().all(|t| !t.is_empty()) && !one.1.is_empty());
        assert_eq!(one.0, two.0, "the concurrent requests' answers");
        assert_eq!(one.1, two.1, "the streamed answer");
        assert!(two.2 >= 1.0, "the prefix cache hit over the ranks too ({} hits)", two.2);
        if under_asan() {
            return; // the sanitizer build checks the ranks; the stages' bits are the optimized build's to show
        }
        let stages = answers(&Server::start_with(&m, 2, &["--pp", "2"]));
        println!("two stages:  {stages:?}");
        assert_eq!(one, stages, "two pipeline stages: the same answers, bit for bit");
        // both: 2 stages of 2 tensor-parallel ranks, 4 processes (C-TP-011)
        let grid = answers(&Server::start_with(&m, 4, &["--tp", "2", "--pp", "2"]));
        println!("2 x 2 ranks: {grid:?}");
        assert_eq!((&one.0, &one.1), (&grid.0, &grid.1), "2 stages of 2 tensor-parallel ranks");
        assert!(grid.2 >= 1.0, "the prefix cache hit over 2 x 2 ranks ({} hits)", grid.2);
        // Gemma 3: one KV head, which both ranks hold, soft-capped logits, 262,144 tokens; the
        // file is the base model, so Gemma's turns come from Gemma 2's template (the same format)
        let (Some(g), Some(t)) = (data_file("gemma3-270m-q4_k_m.gguf"), data_file("templates/google-gemma-2-2b-it.jinja")) else {
            println!("SKIPPED: tensor_parallel Gemma 3 (gemma3-270m-q4_k_m.gguf or templates/ missing)");
            return;
        };
        let template = ["--chat-template", t.to_str().unwrap()];
        let one = answers(&Server::start_with(&g, 1, &template));
        let two = answers(&Server::start_with(&g, 2, &template));
        println!("Gemma 3, one process: {one:?}\nGemma 3, two ranks:   {two:?}");
        assert!(one.0.iter().all(|t| !t.is_empty()) && !one.1.is_empty());
        // the plain-sampled answer (the last) is left out: Gemma's logits over ranks are within
        // C-TP-003's 8.5e-3 of one process's, and a draw over the whole 262,144-token row at
        // temperature 0.9 moves with that (measured: it parts from one process's after the echoed
        // prompt with the rows gathered whole too, so not through the draw; tp_model_test checks
        // the draw itself against the gathered rows)
        assert_eq!((&one.0[..3], &one.1), (&two.0[..3], &two.1), "Gemma 3 over two ranks");
        assert!(two.2 >= 1.0, "the prefix cache hit over the ranks on Gemma 3 ({} hits)", two.2);
    });
}

/// The pid of rank `rank` among mpirun's children (its environment's OMPI_COMM_WORLD_RANK).
fn rank_pid(mpirun: u32, rank: u32) -> Option<u32> {
    let children = std::fs::read_to_string(format!("/proc/{mpirun}/task/{mpirun}/children")).ok()?;
    children.split_whitespace().filter_map(|p| p.parse::<u32>().ok()).find(|pid| {
        std::fs::read(format!("/proc/{pid}/environ"))
            .map(|env| env.split(|&b| b == 0).any(|kv| kv == format!("OMPI_COMM_WORLD_RANK={rank}").as_bytes()))
            .unwrap_or(false)
    })
}

/// The model for a fault test, or None (printed SKIPPED) without it, without mpirun, or under the
/// sanitizers (the tests' timing is the optimized build's).
fn fault_model(what: &str) -> Option<PathBuf> {
    let why = if model().is_none() {
        "smollm2-135m-instruct-q4_1.gguf missing"
    } else if !have_mpirun() {
        "no mpirun"
    } else if under_asan() {
        "under the sanitizers: its timing is the optimized build's"
    } else {
        return model();
    };
    println!("SKIPPED: tensor_parallel {what} ({why})");
    None
}

/// Waits up to 60 s for mpirun to end (every rank gone); its status.
fn job_end(s: &mut Server, what: &str) -> std::process::ExitStatus {
    let t = std::time::Instant::now();
    loop {
        if let Some(st) = s.child.try_wait().unwrap() {
            return st;
        }
        assert!(t.elapsed().as_secs() < 60, "the job did not end: {what}");
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

// EVIDENCE: C-TP-008
#[test]
fn a_killed_rank_gets_503_and_ends_the_server() {
    let Some(m) = fault_model("fault") else {
        return;
    };
    common::within(300, move || {
        let mut s = Server::start_with(&m, 2, &["--tp-timeout", "3"]);
        let addr = s.addr;
        let long = std::thread::spawn(move || {
            let body = json!({"messages": [{"role": "user", "content": "Write a very long story about dragons."}],
                              "max_tokens": 2000, "ignore_eos": true, "temperature": 0});
            common::post(addr, "/v1/chat/completions", &body)
        });
        std::thread::sleep(std::time::Duration::from_millis(1500)); // generating by now
        let victim = rank_pid(s.child.id(), 1).expect("rank 1's pid");
        let killed = std::time::Instant::now();
        assert!(Command::new("kill").args(["-9", &victim.to_string()]).status().unwrap().success());
        let r = long.join().unwrap();
        let took = killed.elapsed().as_secs_f64();
        let e = r.json();
        println!("in flight: {} after {took:.1} s: {e}", r.status);
        assert_eq!(r.status, 503);
        assert!(e["error"]["message"].as_str().unwrap().contains("rank 1 did not answer within 3.0 s"), "{e}");
        assert!(took < 15.0, "the step's failure took {took:.1} s (timeout 3 s)");
        let again = common::post(addr, "/v1/chat/completions", &json!({"messages": [{"role": "user", "content": "Hi"}]}));
        println!("new request: {} {}", again.status, again.text());
        assert_eq!(again.status, 503);
        assert!(again.json()["error"]["message"].as_str().unwrap().contains("cannot go on"));
        // the server exits, and so the job: mpirun returns within seconds, no rank left behind
        let status = job_end(&mut s, "after a rank's kill");
        let mut err = String::new();
        std::io::Read::read_to_string(s.child.stderr.as_mut().unwrap(), &mut err).unwrap();
        println!("job ended ({status}) {:.1} s after the kill", killed.elapsed().as_secs_f64());
        assert!(err.contains("ferrite-serve: exiting with status 3"), "{err}");
        assert!(std::fs::metadata(format!("/proc/{victim}")).is_err());
    });
}

// EVIDENCE: C-TP-008
// Rank 0 killed while idle: the other rank, which rank 0's keepalives (one a second while idle)
// kept waiting through an idle spell longer than the timeout, gives up within the timeout of the
// last one and the job ends, instead of waiting forever for a call that cannot come.
#[test]
fn a_rank_0_killed_while_idle_ends_the_job() {
    let Some(m) = fault_model("idle fault") else {
        return;
    };
    common::within(300, move || {
        let mut s = Server::start_with(&m, 2, &["--tp-timeout", "3"]);
        let ask = |addr| common::post(addr, "/v1/chat/completions", &json!({"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 4}));
        assert_eq!(ask(s.addr).status, 200);
        std::thread::sleep(std::time::Duration::from_millis(4500)); // idle past the 3 s timeout
        let r = ask(s.addr);
        assert_eq!(r.status, 200, "after an idle spell longer than the timeout: {}", r.text());
        let leader = rank_pid(s.child.id(), 0).expect("rank 0's pid");
        let killed = std::time::Instant::now();
        assert!(Command::new("kill").args(["-9", &leader.to_string()]).status().unwrap().success());
        let status = job_end(&mut s, "rank 1 still waits for rank 0");
        let took = killed.elapsed().as_secs_f64();
        let mut err = String::new();
        std::io::Read::read_to_string(s.child.stderr.as_mut().unwrap(), &mut err).unwrap();
        println!("job ended ({status}) {took:.1} s after rank 0's kill");
        assert!(err.contains("rank 0 did not answer within 3.0 s"), "{err}");
        assert!(took < 15.0, "rank 1 gave up {took:.1} s after the kill (timeout 3 s)");
    });
}
