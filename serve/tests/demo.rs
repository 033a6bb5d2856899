//! The serving part of `make run` (scripts/serve/demo.sh) as a user meets it: on the demo's model
//! (SmolLM2-135M-Instruct Q8_0, which setup makes), under a time limit, it must print both answers
//! (the streamed one naming Paris) and the server's metrics, exit 0 by itself, and leave no server
//! running. SKIPPED (printed) without the model, and in the sanitizer run (the script's curl and
//! python3 would inherit the runner's preloaded ASan runtime).
//! EVIDENCE: C-RUN-002

use std::io::Read;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_ferrite-serve");
/// The whole demo on a loaded 2-core machine takes seconds; a hang shows as this.
const LIMIT: Duration = Duration::from_secs(300);

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

fn demo_model() -> Option<PathBuf> {
    let dir = std::env::var_os("FERRITE_DATA_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache/ferrite"));
    let p = dir.join("smollm2-135m-instruct-q8_0.gguf");
    p.is_file().then_some(p)
}

#[test]
fn demo_prints_both_answers_and_the_metrics_and_returns() {
    if std::env::var("LD_PRELOAD").is_ok_and(|p| p.contains("libasan")) {
        println!("SKIPPED: demo under the sanitizer runner");
        return;
    }
    let Some(model) = demo_model() else {
        println!("SKIPPED: demo: no smollm2-135m-instruct-q8_0.gguf (scripts/setup.sh makes it)");
        return;
    };
    let mut child = Command::new("bash")
        .arg(repo().join("scripts/serve/demo.sh"))
        .arg(BIN)
        .arg(&model)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        out.read_to_string(&mut s).unwrap();
        s
    });
    let t0 = Instant::now();
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st;
        }
        if t0.elapsed() > LIMIT {
            let _ = child.kill();
            let _ = child.wait();
            panic!("demo.sh did not return within {} s", LIMIT.as_secs());
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let stdout = reader.join().unwrap();
    let mut stderr = String::new();
    child.stderr.take().unwrap().read_to_string(&mut stderr).unwrap();
    println!("demo.sh ({:.1} s):\n{stdout}{stderr}", t0.elapsed().as_secs_f64());
    assert!(status.success(), "demo.sh exited {status}");

    let lines: Vec<&str> = stdout.lines().collect();
    let after = |head: &str| -> &str {
        let i = lines.iter().position(|l| l.starts_with(head)).unwrap_or_else(|| panic!("no line {head:?}"));
        lines.get(i + 1).copied().unwrap_or("")
    };
    let streamed = after("POST /v1/chat/completions, streamed: What is the capital of France?");
    assert!(streamed.contains("Paris"), "the streamed answer does not name Paris: {streamed:?}");
    let colours = after("POST /v1/chat/completions, at the same time: Name three colours.");
    assert!(!colours.trim().is_empty() && !colours.starts_with("usage:"), "no second answer: {colours:?}");
    assert!(lines.iter().any(|l| l.starts_with("usage:") && l.contains("completion_tokens")), "no usage line");
    for metric in ["ferrite_requests_total", "ferrite_generation_tokens_total", "ferrite_engine_steps_total"] {
        assert!(lines.iter().any(|l| l.starts_with(metric)), "no {metric} in the metrics");
    }
    // the server the script started is gone (the script kills and reaps it on exit)
    let pid: u32 = lines
        .iter()
        .find_map(|l| l.strip_prefix("ferrite-serve (pid ")?.split(')').next()?.parse().ok())
        .expect("the script names the server's pid");
    let alive = std::fs::read_to_string(format!("/proc/{pid}/cmdline")).is_ok_and(|c| c.contains("ferrite-serve"));
    assert!(!alive, "ferrite-serve (pid {pid}) is still running after the demo returned");
}
