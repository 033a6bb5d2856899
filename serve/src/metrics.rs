//! /metrics in the Prometheus text exposition format (version 0.0.4).
//!
//! The server's own counters (requests by endpoint and status, tokens, latencies) live here; the
//! engine's (queue, running, prefix cache, KV bytes, steps) are read from the `BackendMetrics` the
//! engine thread publishes after every step, so a scrape never waits on the engine.

use crate::backend::BackendMetrics;
use std::collections::{BTreeMap, HashMap};
use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

/// Time to first token: from the request's arrival (queueing and prefill included).
pub const TTFT_BUCKETS: &[f64] = &[0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0];
/// Time between two tokens of one request: one decode step, normally milliseconds.
pub const ITL_BUCKETS: &[f64] = &[0.001, 0.0025, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 1.0];
/// Whole request, arrival to last byte produced.
pub const DURATION_BUCKETS: &[f64] = &[0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0];

pub struct Histogram {
    bounds: &'static [f64],
    state: Mutex<HistState>,
}

struct HistState {
    counts: Vec<u64>, // per bucket, not cumulative; the last one is +Inf
    sum: f64,
}

impl Histogram {
    pub fn new(bounds: &'static [f64]) -> Self {
        Histogram { bounds, state: Mutex::new(HistState { counts: vec![0; bounds.len() + 1], sum: 0.0 }) }
    }

    pub fn observe(&self, v: f64) {
        let i = self.bounds.iter().position(|&b| v <= b).unwrap_or(self.bounds.len());
        let mut s = self.state.lock().unwrap();
        s.counts[i] += 1;
        s.sum += v;
    }

    fn render(&self, name: &str, help: &str, out: &mut String) {
        let s = self.state.lock().unwrap();
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} histogram");
        let mut cum = 0;
        for (i, b) in self.bounds.iter().enumerate() {
            cum += s.counts[i];
            let _ = writeln!(out, "{name}_bucket{{le=\"{b}\"}} {cum}");
        }
        cum += s.counts[self.bounds.len()];
        let _ = writeln!(out, "{name}_bucket{{le=\"+Inf\"}} {cum}\n{name}_sum {}\n{name}_count {cum}", s.sum);
    }
}

pub struct Metrics {
    requests: Mutex<BTreeMap<(&'static str, u16), u64>>,
    pub prompt_tokens: AtomicU64,
    pub generated_tokens: AtomicU64,
    /// Requests whose client went away before the end (their sequences were cancelled).
    pub client_disconnects: AtomicU64,
    pub ttft: Histogram,
    pub itl: Histogram,
    pub duration: Histogram,
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics {
            requests: Mutex::new(BTreeMap::new()),
            prompt_tokens: AtomicU64::new(0),
            generated_tokens: AtomicU64::new(0),
            client_disconnects: AtomicU64::new(0),
            ttft: Histogram::new(TTFT_BUCKETS),
            itl: Histogram::new(ITL_BUCKETS),
            duration: Histogram::new(DURATION_BUCKETS),
        }
    }
}

fn counter(out: &mut String, name: &str, help: &str, v: u64) {
    let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} counter\n{name} {v}");
}

fn gauge(out: &mut String, name: &str, help: &str, v: impl std::fmt::Display) {
    let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} gauge\n{name} {v}");
}

impl Metrics {
    /// `endpoint` is a fixed label (the route, or "other"), never the raw path: a scanner
    /// probing random paths must not grow the label set.
    pub fn count_request(&self, endpoint: &'static str, status: u16) {
        *self.requests.lock().unwrap().entry((endpoint, status)).or_insert(0) += 1;
    }

    pub fn add(c: &AtomicU64, n: u64) {
        c.fetch_add(n, Ordering::Relaxed);
    }

    pub fn render(&self, b: &BackendMetrics) -> String {
        let mut out = String::new();
        let name = "ferrite_requests_total";
        let _ = writeln!(out, "# HELP {name} HTTP requests by endpoint and status.\n# TYPE {name} counter");
        for ((ep, status), n) in self.requests.lock().unwrap().iter() {
            let _ = writeln!(out, "{name}{{endpoint=\"{ep}\",status=\"{status}\"}} {n}");
        }
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        counter(
            &mut out,
            "ferrite_prompt_tokens_total",
            "Prompt tokens of admitted requests.",
            get(&self.prompt_tokens),
        );
        counter(
            &mut out,
            "ferrite_generation_tokens_total",
            "Tokens generated.",
            get(&self.generated_tokens),
        );
        counter(
            &mut out,
            "ferrite_client_disconnects_total",
            "Requests cancelled because the client went away.",
            get(&self.client_disconnects),
        );
        gauge(&mut out, "ferrite_queue_depth", "Requests waiting for a sequence slot.", b.queued);
        gauge(&mut out, "ferrite_running_sequences", "Sequences being generated.", b.running);
        counter(
            &mut out,
            "ferrite_prefix_cache_hits_total",
            "Admissions that reused a cached prompt prefix.",
            b.prefix_cache_hits,
        );
        counter(
            &mut out,
            "ferrite_prefix_cache_misses_total",
            "Admissions that found no cached prefix.",
            b.prefix_cache_misses,
        );
        counter(
            &mut out,
            "ferrite_prefix_cache_hit_tokens_total",
            "Prompt tokens served from the prefix cache.",
            b.prefix_cache_hit_tokens,
        );
        let lookups = b.prefix_cache_hits + b.prefix_cache_misses;
        let rate = if lookups == 0 { 0.0 } else { b.prefix_cache_hits as f64 / lookups as f64 };
        gauge(
            &mut out,
            "ferrite_prefix_cache_hit_rate",
            "Hits over lookups since start (0 before any).",
            rate,
        );
        gauge(
            &mut out,
            "ferrite_kv_committed_bytes",
            "KV memory mapped now: running requests and the prefix cache (the pool's physical bytes).",
            b.kv_committed_bytes,
        );
        gauge(
            &mut out,
            "ferrite_kv_os_bytes",
            "KV pool bytes as the kernel counts them (the memfd's allocated blocks).",
            b.kv_os_bytes,
        );
        gauge(&mut out, "ferrite_kv_live_bytes", "KV bytes of the running requests.", b.kv_live_bytes);
        gauge(&mut out, "ferrite_prefix_cache_bytes", "Bytes the prefix cache holds.", b.prefix_cache_bytes);
        gauge(&mut out, "ferrite_prefix_cache_entries", "Prefixes the cache holds.", b.prefix_cache_entries);
        let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
        gauge(
            &mut out,
            "process_resident_memory_bytes",
            "Resident memory of the server process (the kernel's VmRSS).",
            status_kb(&status, "VmRSS:") * 1024,
        );
        gauge(
            &mut out,
            "ferrite_process_resident_anon_bytes",
            "Of it, anonymous memory (the kernel's RssAnon: heaps, scratch, repacked weights).",
            status_kb(&status, "RssAnon:") * 1024,
        );
        gauge(
            &mut out,
            "ferrite_process_resident_shmem_bytes",
            "Of it, shared memory (the kernel's RssShmem: the KV pool's pages this process touched).",
            status_kb(&status, "RssShmem:") * 1024,
        );
        counter(&mut out, "ferrite_engine_steps_total", "Engine steps run.", b.steps);
        self.ttft.render(
            "ferrite_time_to_first_token_seconds",
            "Request arrival to its first token.",
            &mut out,
        );
        self.itl.render(
            "ferrite_inter_token_latency_seconds",
            "Time between consecutive tokens of a request.",
            &mut out,
        );
        self.duration.render(
            "ferrite_request_duration_seconds",
            "Generation requests, arrival to end.",
            &mut out,
        );
        out
    }
}

/// A strict reader of the exposition format, for the tests here and in tests/: every sample belongs to a declared family,
/// names and labels are well formed, values parse, histogram buckets are cumulative with
/// +Inf equal to _count. Returns sample name{labels} -> value.
pub fn parse_exposition(text: &str) -> Result<HashMap<String, f64>, String> {
    let mut types: HashMap<String, String> = HashMap::new();
    let mut samples = HashMap::new();
    let name_ok = |n: &str| {
        !n.is_empty()
            && n.chars().enumerate().all(|(i, c)| {
                c.is_ascii_alphabetic() || c == '_' || c == ':' || (i > 0 && c.is_ascii_digit())
            })
    };
    if !text.ends_with('\n') {
        return Err("no final newline".into());
    }
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# ") {
            let mut it = rest.splitn(3, ' ');
            let (kw, name, val) = (it.next().unwrap_or(""), it.next().unwrap_or(""), it.next().unwrap_or(""));
            if !name_ok(name) || !matches!(kw, "HELP" | "TYPE") {
                return Err(format!("bad comment line `{line}`"));
            }
            // (HELP lines declare nothing; the insert only runs for TYPE lines)
            if kw == "TYPE"
                && (!matches!(val, "counter" | "gauge" | "histogram")
                    || types.insert(name.to_string(), val.to_string()).is_some())
            {
                return Err(format!("bad or repeated TYPE `{line}`"));
            }
            continue;
        }
        let (key, value) = line.rsplit_once(' ').ok_or(format!("no value in `{line}`"))?;
        let v: f64 = match value {
            "+Inf" => f64::INFINITY,
            v => v.parse().map_err(|_| format!("bad value in `{line}`"))?,
        };
        let name = key.split('{').next().unwrap();
        if !name_ok(name) {
            return Err(format!("bad name in `{line}`"));
        }
        if let Some(labels) = key.strip_prefix(name) {
            if !labels.is_empty() {
                let inner = labels
                    .strip_prefix('{')
                    .and_then(|l| l.strip_suffix('}'))
                    .ok_or(format!("bad labels `{line}`"))?;
                for pair in inner.split(',') {
                    let (k, v) = pair.split_once('=').ok_or(format!("bad label `{line}`"))?;
                    if !(name_ok(k) && v.len() >= 2 && v.starts_with('"') && v.ends_with('"')) {
                        return Err(format!("bad label `{line}`"));
                    }
                }
            }
        }
        let family = ["_bucket", "_sum", "_count"]
            .iter()
            .find_map(|s| {
                name.strip_suffix(s).filter(|f| types.get(*f).map(|t| t == "histogram").unwrap_or(false))
            })
            .unwrap_or(name);
        if !types.contains_key(family) {
            return Err(format!("sample `{name}` before its TYPE"));
        }
        if types[family] == "counter" && !name.ends_with("_total") {
            return Err(format!("counter `{name}` without _total"));
        }
        samples.insert(key.to_string(), v);
    }
    for (fam, t) in &types {
        if t != "histogram" {
            continue;
        }
        let mut buckets: Vec<(f64, f64)> = samples
            .iter()
            .filter_map(|(k, v)| {
                let le = k.strip_prefix(&format!("{fam}_bucket{{le=\""))?.strip_suffix("\"}")?;
                Some((if le == "+Inf" { f64::INFINITY } else { le.parse().ok()? }, *v))
            })
            .collect();
        buckets.sort_by(|a, b| a.0.partial_cmp(&b.0).unwrap());
        if buckets.last().map(|b| b.0) != Some(f64::INFINITY) {
            return Err(format!("{fam}: no +Inf bucket"));
        }
        if buckets.windows(2).any(|w| w[1].1 < w[0].1) {
            return Err(format!("{fam}: buckets not cumulative"));
        }
        if samples.get(&format!("{fam}_count")) != Some(&buckets.last().unwrap().1) {
            return Err(format!("{fam}: +Inf bucket != _count"));
        }
        if !samples.contains_key(&format!("{fam}_sum")) {
            return Err(format!("{fam}: no _sum"));
        }
    }
    Ok(samples)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exposition_is_well_formed_and_counts() {
        let m = Metrics::default();
        m.count_request("/v1/chat/completions", 200);
        m.count_request("/v1/chat/completions", 200);
        m.count_request("other", 404);
        Metrics::add(&m.prompt_tokens, 7);
        m.ttft.observe(0.003);
        m.ttft.observe(0.3);
        m.ttft.observe(1000.0);
        m.itl.observe(0.02);
        let b = BackendMetrics {
            running: 2,
            queued: 3,
            prefix_cache_hits: 1,
            prefix_cache_misses: 3,
            ..Default::default()
        };
        let text = m.render(&b);
        let s = parse_exposition(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
        assert_eq!(s["ferrite_requests_total{endpoint=\"/v1/chat/completions\",status=\"200\"}"], 2.0);
        assert_eq!(s["ferrite_requests_total{endpoint=\"other\",status=\"404\"}"], 1.0);
        assert_eq!(s["ferrite_prompt_tokens_total"], 7.0);
        assert_eq!(s["ferrite_queue_depth"], 3.0);
        assert_eq!(s["ferrite_running_sequences"], 2.0);
        assert_eq!(s["ferrite_prefix_cache_hit_rate"], 0.25);
        assert_eq!(s["ferrite_time_to_first_token_seconds_bucket{le=\"0.01\"}"], 1.0);
        assert_eq!(s["ferrite_time_to_first_token_seconds_bucket{le=\"0.5\"}"], 2.0);
        assert_eq!(s["ferrite_time_to_first_token_seconds_bucket{le=\"60\"}"], 2.0);
        assert_eq!(s["ferrite_time_to_first_token_seconds_bucket{le=\"+Inf\"}"], 3.0);
        assert_eq!(s["ferrite_time_to_first_token_seconds_count"], 3.0);
        assert_eq!(s["ferrite_inter_token_latency_seconds_bucket{le=\"0.02\"}"], 1.0);
    }

    #[test]
    fn the_checker_rejects_broken_text() {
        let bad = [
            "ferrite_x 1\n",           // no TYPE
            "# TYPE a counter\na 1\n", // counter without _total
            "# TYPE h histogram\nh_bucket{le=\"1\"} 2\nh_bucket{le=\"+Inf\"} 1\nh_sum 0\nh_count 1\n",
            "# TYPE g gauge\ng{x=1} 1\n", // unquoted label
            "# TYPE g gauge\ng one\n",
        ];
        for b in bad {
            assert!(parse_exposition(b).is_err(), "accepted: {b}");
        }
    }
}

/// A "Name: value kB" field of /proc/self/status, in kB; 0 where it is missing.
fn status_kb(status: &str, field: &str) -> u64 {
    status.lines().find_map(|l| l.strip_prefix(field)).and_then(|v| v.split_whitespace().next()?.parse().ok()).unwrap_or(0)
}
