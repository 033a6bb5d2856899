//! bench-table: reads criterion's results (`target/criterion/**/new/estimates.json`) and prints a
//! markdown table of the kernel scenarios: mean time, bytes moved per second, the fraction of the
//! streaming-copy ceiling measured in the same run, and f16/bf16 time per element relative to f32.
//! It then states the two targets of the foundation issue (C-PERF-001: every `large` kernel at
//! least 70% of the ceiling; C-PERF-002: f16/bf16 within 1.3x of f32) as met or missed.
//!
//! Usage: bench-table [CRITERION_DIR] [--gate]   (default dir: target/criterion; --gate exits 1
//! when a target is missed).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

const CEILING_ID: &str = "memory_bandwidth/stream_copy/67108864";
const CEILING_BYTES: f64 = 2.0 * (64u64 << 20) as f64;

fn walk(dir: &Path, root: &Path, out: &mut BTreeMap<String, f64>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            walk(&p, root, out);
        } else if p.ends_with("new/estimates.json") {
            let rel = p.parent().and_then(Path::parent).and_then(|d| d.strip_prefix(root).ok());
            let Some(rel) = rel else { continue };
            let name = rel.to_string_lossy().to_string();
            if name.starts_with("report") || name.contains("/change") {
                continue;
            }
            let Ok(text) = std::fs::read_to_string(&p) else { continue };
            let Ok(v) = serde_json::from_str::<serde_json::Value>(&text) else { continue };
            if let Some(ns) = v["mean"]["point_estimate"].as_f64() {
                out.insert(name, ns);
            }
        }
    }
}

/// Bytes read + written by one call of a kernel scenario, from its id.
fn bytes_moved(group: &str, size: &str, elem: f64) -> Option<f64> {
    let (rows, cols, n_idx) = match (group, size) {
        ("add", "small") => (1.0, 1024.0, 0.0),
        ("add", "medium") => (256.0, 1024.0, 0.0),
        ("add", "large") => (1024.0, 4096.0, 0.0),
        ("gather", "small") => (4096.0, 128.0, 32.0),
        ("gather", "medium") => (16384.0, 256.0, 128.0),
        ("gather", "large") => (32768.0, 512.0, 256.0),
        ("reduce_mean", "small") => (32.0, 128.0, 0.0),
        ("reduce_mean", "medium") => (128.0, 512.0, 0.0),
        ("reduce_mean", "large") => (256.0, 1024.0, 0.0),
        _ => return None,
    };
    Some(match group {
        "add" => (2.0 * rows * cols + cols) * elem,
        "gather" => 2.0 * n_idx * cols * elem + 8.0 * n_idx,
        _ => (rows * cols + rows) * elem,
    })
}

/// The sampling scenarios and the targets of the sampling issue, from the same run's results.
fn sampling_section(results: &BTreeMap<String, f64>, ceiling: f64, missed: &mut Vec<String>) {
    let rows: Vec<(&String, &f64)> = results
        .iter()
        .filter(|(k, _)| k.starts_with("sampling_latency/") || k.starts_with("logit_processing/") || k.starts_with("qwen3_sampling_processors/"))
        .collect();
    if rows.is_empty() {
        return;
    }
    println!("| Sampling scenario | Mean |");
    println!("|---|---|");
    for (name, ns) in &rows {
        println!("| `{name}` | {} |", fmt_time(**ns));
    }
    println!();
    let get = |k: &str| results.get(k).copied();
    if let Some(chain) = get("logit_processing/seven_processor_chain_per_step") {
        let ok = chain < 60_000.0;
        println!("- C-PERF-003 seven-processor chain at V = 32,000: {} per step (target < 60 µs; the original measured 357 µs on its runner)", fmt_time(chain));
        if !ok {
            missed.push(format!("C-PERF-003 seven-processor chain {} >= 60 µs", fmt_time(chain)));
        }
    }
    let q = |id: &str| get(&format!("qwen3_sampling_processors/{id}"));
    if let (Some(full), Some(fast)) = (q("top_k_full_sort_baseline"), q("top_k_partial_selection")) {
        let r = full / fast;
        println!("- C-PERF-004 top-k at V = 151,936: partial selection {:.1}x faster than the full sort in the same run (target >= 10x)", r);
        if r < 10.0 {
            missed.push(format!("C-PERF-004 top-k speedup {r:.1}x < 10x"));
        }
    }
    if let (Some(fused), Some(fast)) = (q("top_k_top_p_fused"), q("top_k_partial_selection")) {
        let r = fused / fast;
        println!("- C-PERF-005 fused top-k + top-p takes {:.2}x the time of top-k alone (target <= 1.2x)", r);
        if r > 1.2 {
            missed.push(format!("C-PERF-005 fused/top-k {r:.2}x > 1.2x"));
        }
    }
    if let Some(g) = q("greedy_argmax") {
        let frac = (151_936.0 * 4.0 / (g * 1e-9)) / ceiling;
        println!("- C-PERF-006 greedy at V = 151,936: {} = {:.0}% of the streaming-copy bandwidth for the logits read (target >= 60%)", fmt_time(g), frac * 100.0);
        if frac < 0.6 {
            missed.push(format!("C-PERF-006 greedy at {:.0}% < 60%", frac * 100.0));
        }
    }
    println!();
}

fn fmt_time(ns: f64) -> String {
    if ns < 1e3 {
        format!("{ns:.1} ns")
    } else if ns < 1e6 {
        format!("{:.2} µs", ns / 1e3)
    } else {
        format!("{:.2} ms", ns / 1e6)
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let gate = args.iter().any(|a| a == "--gate");
    let dir = args.iter().find(|a| !a.starts_with("--")).map(PathBuf::from).unwrap_or_else(|| PathBuf::from("target/criterion"));
    let mut results = BTreeMap::new();
    walk(&dir, &dir, &mut results);
    let Some(&copy_ns) = results.get(CEILING_ID) else {
        eprintln!("bench-table: no {CEILING_ID} in {} (run the kernels bench first)", dir.display());
        std::process::exit(2);
    };
    let ceiling = CEILING_BYTES / (copy_ns * 1e-9);
    println!("Ceiling: `{CEILING_ID}` {} = {:.1} GB/s (read + write)\n", fmt_time(copy_ns), ceiling / 1e9);
    println!("| Scenario | Mean | GB/s | Fraction of ceiling | Time/element vs f32 |");
    println!("|---|---|---|---|---|");
    let mut missed = Vec::new();
    for (name, &ns) in &results {
        let parts: Vec<&str> = name.split('/').collect();
        if parts.len() != 3 || name == CEILING_ID || !matches!(parts[0], "add" | "gather" | "reduce_mean") {
            continue;
        }
        let (group, func) = (parts[0], parts[1]);
        let fparts: Vec<&str> = func.split('_').collect();
        if fparts.len() < 2 {
            continue;
        }
        let (size, dtype) = (fparts[0], fparts[1]);
        let elem = if dtype == "f32" { 4.0 } else { 2.0 };
        let Some(bytes) = bytes_moved(group, size, elem) else { continue };
        let bw = bytes / (ns * 1e-9);
        let frac = bw / ceiling;
        let f32_name = name.replacen(&format!("_{dtype}_"), "_f32_", 1);
        let vs = if dtype == "f32" {
            "1.00x".to_string()
        } else {
            match results.get(&f32_name) {
                Some(&f32_ns) => {
                    let r = ns / f32_ns; // same element count: time per element ratio
                    if size == "large" && r > 1.3 {
                        missed.push(format!("C-PERF-002 {name}: {r:.2}x f32 time per element (target <= 1.3x)"));
                    }
                    format!("{r:.2}x")
                }
                None => "n/a".to_string(),
            }
        };
        if size == "large" && frac < 0.70 {
            missed.push(format!("C-PERF-001 {name}: {:.0}% of the ceiling (target >= 70%)", frac * 100.0));
        }
        println!("| `{name}` | {} | {:.1} | {:.0}% | {vs} |", fmt_time(ns), bw / 1e9, frac * 100.0);
    }
    println!();
    sampling_section(&results, ceiling, &mut missed);
    if missed.is_empty() {
        println!("Targets met: every `large` kernel >= 70% of the ceiling (C-PERF-001); f16/bf16 large within 1.3x of f32 (C-PERF-002); and, where the sampling bench ran, C-PERF-003..006.");
    } else {
        println!("Targets missed:");
        for m in &missed {
            println!("- {m}");
        }
    }
    if gate && !missed.is_empty() {
        std::process::exit(1);
    }
}
