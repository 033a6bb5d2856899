//! The ferrite-serve program itself: --help, bad options, and a --fake server on port 0 that
//! prints the address it bound and answers.

mod common;

use std::process::{Command, Stdio};

const BIN: &str = env!("CARGO_BIN_EXE_ferrite-serve");

#[test]
fn help_and_bad_options() {
    let out = Command::new(BIN).arg("--help").output().unwrap();
    assert!(out.status.success());
    let help = String::from_utf8_lossy(&out.stdout);
    for flag in [
        "--model",
        "--host",
        "--port",
        "--parallel",
        "--kv-budget",
        "--threads",
        "--ctx",
        "--max-queued",
        "--body-limit",
        "--timeout",
        "--fake",
        "--no-prefix-cache",
    ] {
        assert!(help.contains(flag), "--help lacks {flag}");
    }
    let out = Command::new(BIN).args(["--fake", "--port", "x"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--port"));
    let out = Command::new(BIN).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "neither --model nor --fake");
    // Without the real backend built in, --model fails at start with a message, not a panic.
    let out = Command::new(BIN).args(["--model", "/nonexistent.gguf", "--port", "0"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("ferrite-serve:"));
}

#[test]
fn fake_server_on_port_zero() {
    common::within(60, || {
        let mut child = Command::new(BIN)
            .args(["--fake", "--port", "0", "--ctx", "512"])
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let addr = common::listening_addr(&mut child);
        assert_ne!(addr.port(), 0);
        let r = common::get(addr, "/v1/models");
        let _ = child.kill();
        let _ = child.wait();
        assert_eq!(r.status, 200);
        assert_eq!(r.json()["data"][0]["max_model_len"], 512);
    });
}

/// `--device cuda`: the engine says why it cannot run there (no GPU here; where one answers, that
/// the CUDA backend runs no forward pass yet) and the server exits 1, before it listens
/// (C-CUDA-005). A bad device name is a usage error.
// EVIDENCE: C-CUDA-005
#[test]
fn a_cuda_device_is_refused_with_its_reason() {
    let out = Command::new(BIN).args(["--fake", "--device", "gpu"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--device"));
    let dir = std::env::var_os("FERRITE_DATA_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| std::path::PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache/ferrite"));
    let model = dir.join("smollm2-135m-instruct-q4_1.gguf");
    if !model.is_file() {
        println!("SKIPPED: a_cuda_device_is_refused_with_its_reason ({} missing)", model.display());
        return;
    }
    let out = Command::new(BIN)
        .args(["--model", model.to_str().unwrap(), "--port", "0", "--device", "cuda:0"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("device cuda:0"), "{err}");
}
