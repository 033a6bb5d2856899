//! The markdown report: a header with the verdict, the table `Status | Scenario | Base | Change |
//! Delta` (plus each scenario's noise band, instruction delta and drift from the reference),
//! sorted worst first, the instruction counts, host information, and what the report cannot catch.

use super::counters::{CounterCmp, CounterVerdict, DRIFT_WARN};
use super::format::{fmt_count, fmt_frac, fmt_ns, fmt_pct, fmt_pct2};
use super::noise::{NoiseFile, NoiseSample, COUNT_RULE, TIME_RULE};
use super::rows::{gate_fails, Row, TimeVerdict};
use std::collections::BTreeMap;
use std::fmt::Write;

/// The machine the run happened on.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct HostInfo {
    pub machine_name: String,
    pub cpu: String,
    pub cores: usize,
    /// `uname -srm`.
    pub kernel: String,
    pub rustc: String,
    /// /proc/loadavg before and after the measurements.
    pub load_before: String,
    pub load_after: String,
}

/// Everything about the run the report states besides the rows.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ReportMeta {
    /// True for an A/A run (`--aa`): the same revision on both sides.
    pub aa: bool,
    /// UTC, `YYYY-MM-DD HH:MM`.
    pub date: String,
    pub command: String,
    pub base: String,
    pub change: String,
    pub rounds: usize,
    pub benches: Vec<String>,
    pub filter: Option<String>,
    pub criterion_args: Vec<String>,
    /// Where the timing thresholds came from, in words.
    pub noise_source: String,
    /// How instructions were counted, or why not.
    pub counter_source: String,
    /// The pinned reference, in words, if there is one.
    pub reference: Option<String>,
    /// File name of the chart, relative to the report.
    pub chart: Option<String>,
    /// A/A mode: the noise this run measured, and the noise file as written after it.
    pub aa_noise: Option<(BTreeMap<String, NoiseSample>, NoiseFile)>,
    /// Anything that went wrong on the way and bears on the reading.
    pub notes: Vec<String>,
}

/// The whole report.
pub fn render_markdown(meta: &ReportMeta, rows: &[Row], host: &HostInfo) -> String {
    let mut out = String::new();
    header(&mut out, meta, rows);
    table(&mut out, rows);
    counts_section(&mut out, rows);
    if let Some((measured, file)) = &meta.aa_noise {
        aa_section(&mut out, measured, file);
    }
    host_section(&mut out, meta, host);
    cannot_catch(&mut out, rows, meta);
    out
}

/// The headline: red for a timing regression beyond noise, orange for an instruction-count
/// regression alone, green otherwise.
pub fn headline(rows: &[Row]) -> String {
    let slower = rows.iter().filter(|r| r.time == TimeVerdict::Regression).count();
    let more = rows.iter().filter(|r| counter_more(r)).count();
    if slower > 0 {
        format!("🔴 Benchmark regression beyond noise: {slower} scenario(s) slower")
    } else if more > 0 {
        format!("🟠 Instruction-count regression: {more} scenario(s), timing within noise")
    } else {
        "✅ No regression beyond noise".to_string()
    }
}

fn counter_more(r: &Row) -> bool {
    r.counter.as_ref().is_some_and(|c| c.verdict == CounterVerdict::More)
}

fn header(out: &mut String, meta: &ReportMeta, rows: &[Row]) {
    let kind = if meta.aa { "A/A run (same revision on both sides)" } else { "comparison" };
    let _ = writeln!(out, "## {}\n", headline(rows));
    let _ = writeln!(out, "**Base:** {}  \n**Change:** {}  \n**Kind:** {kind}, {}  ", meta.base, meta.change, meta.date);
    let filter = meta.filter.as_deref().map(|f| format!(", filter `{f}`")).unwrap_or_default();
    let _ = writeln!(
        out,
        "**Timing:** {} rounds per side, interleaved (base, change, base, change, ...); benches {}{filter}; criterion `{}`; each side's value is the median of its rounds' means.  ",
        meta.rounds,
        meta.benches.join(", "),
        meta.criterion_args.join(" ")
    );
    let _ = writeln!(out, "**Command:** `{}`\n", meta.command);
    summary_lines(out, meta, rows);
    if let Some(chart) = &meta.chart {
        let _ = writeln!(out, "\n[Chart: each scenario's delta with its noise band]({chart})\n\n![deltas]({chart})\n");
    }
    for note in &meta.notes {
        let _ = writeln!(out, "> ⚠️ {note}\n");
    }
}

fn summary_lines(out: &mut String, meta: &ReportMeta, rows: &[Row]) {
    let n = |f: &dyn Fn(&Row) -> bool| rows.iter().filter(|r| f(r)).count();
    let compared = n(&|r| r.delta.is_some());
    let _ = writeln!(
        out,
        "- **Timing:** {compared} compared: {} slower beyond noise, {} faster beyond noise, {} within noise; {} added, {} removed, {} invalid.",
        n(&|r| r.time == TimeVerdict::Regression),
        n(&|r| r.time == TimeVerdict::Improvement),
        n(&|r| r.time == TimeVerdict::WithinNoise),
        n(&|r| r.time == TimeVerdict::Added),
        n(&|r| r.time == TimeVerdict::Removed),
        n(&|r| matches!(r.time, TimeVerdict::Invalid(_))),
    );
    let counted = n(&|r| r.counter.as_ref().is_some_and(|c| c.delta.is_some()));
    let _ = writeln!(
        out,
        "- **Instructions:** {counted} counted ({}): {} more beyond threshold, {} fewer, {} one-sided.",
        meta.counter_source,
        n(&counter_more),
        n(&|r| r.counter.as_ref().is_some_and(|c| c.verdict == CounterVerdict::Fewer)),
        n(&|r| r.counter.as_ref().is_some_and(|c| matches!(c.verdict, CounterVerdict::OnlyBase | CounterVerdict::OnlyChange))),
    );
    let _ = writeln!(
        out,
        "- **Thresholds:** timing {} (noise: {}); instructions max({} x the count's spread, {}).",
        TIME_RULE.describe(),
        meta.noise_source,
        COUNT_RULE.factor,
        fmt_frac(COUNT_RULE.floor)
    );
    drift_line(out, meta, rows);
    let gate = if gate_fails(rows) { "would fail (exit 1)" } else { "passes (exit 0)" };
    let _ = writeln!(out, "- **Gate:** with `--gate` this run {gate}; it fails exactly on a row slower beyond its noise or with more instructions beyond the count threshold.");
}

fn drift_line(out: &mut String, meta: &ReportMeta, rows: &[Row]) {
    let Some(reference) = &meta.reference else {
        let _ = writeln!(out, "- **Drift:** no pinned reference (`--pin-reference` writes one).");
        return;
    };
    let worst = rows.iter().filter_map(|r| Some((r.counter.as_ref()?.drift?, &r.scenario))).max_by(|a, b| a.0.total_cmp(&b.0));
    match worst {
        Some((d, name)) => {
            let flag = if d > DRIFT_WARN { format!("⚠️ above {}: ", fmt_frac(DRIFT_WARN)) } else { String::new() };
            let _ = writeln!(out, "- **Drift vs the pinned reference** ({reference}): {flag}largest {} in instructions (`{name}`).", fmt_pct2(d));
        }
        None => {
            let _ = writeln!(out, "- **Drift vs the pinned reference** ({reference}): no counted scenario in common.");
        }
    }
}

fn table(out: &mut String, rows: &[Row]) {
    let _ = writeln!(out, "\n| Status | Scenario | Base | Change | Delta | Noise band (threshold) | Instr. Δ | Drift vs ref |");
    let _ = writeln!(out, "|---|---|---|---|---|---|---|---|");
    for r in rows {
        let time = |v: Option<f64>| v.map(fmt_ns).unwrap_or_else(|| "—".into());
        let delta = r.delta.map(fmt_pct).unwrap_or_else(|| "—".into());
        let instr = r.counter.as_ref().and_then(|c| c.delta).map(fmt_pct2).unwrap_or_else(|| "—".into());
        let drift = r.counter.as_ref().and_then(|c| c.drift).map(fmt_pct2).unwrap_or_else(|| "—".into());
        let _ = writeln!(
            out,
            "| {} | `{}` | {} | {} | {delta} | {} | {instr} | {drift} |",
            status(r),
            r.scenario,
            time(r.base_ns),
            time(r.change_ns),
            noise_band(r)
        );
    }
    let invalid: Vec<&Row> = rows.iter().filter(|r| matches!(r.time, TimeVerdict::Invalid(_))).collect();
    if !invalid.is_empty() {
        let _ = writeln!(out, "\nInvalid estimates:");
        for r in invalid {
            if let TimeVerdict::Invalid(why) = &r.time {
                let _ = writeln!(out, "- `{}`: {why}", r.scenario);
            }
        }
    }
}

/// The status cell: the timing verdict, plus the counter's when it says something.
pub fn status(r: &Row) -> String {
    let time = match &r.time {
        TimeVerdict::Regression => "🔴 slower",
        TimeVerdict::Improvement => "🟢 faster",
        TimeVerdict::WithinNoise => "✅ within noise",
        TimeVerdict::Added => "🆕 added",
        TimeVerdict::Removed => "➖ removed",
        TimeVerdict::Invalid(_) => "⚠️ invalid estimate",
        TimeVerdict::NotTimed => "· not timed",
    };
    let counter = match r.counter.as_ref().map(|c| c.verdict) {
        Some(CounterVerdict::More) => " · 🟠 more instructions",
        Some(CounterVerdict::Fewer) => " · 🟢 fewer instructions",
        Some(CounterVerdict::OnlyBase) => " · counted on base only",
        Some(CounterVerdict::OnlyChange) => " · counted on change only",
        _ => "",
    };
    format!("{time}{counter}")
}

fn noise_band(r: &Row) -> String {
    if r.delta.is_none() {
        return "—".into();
    }
    match r.threshold.spread {
        Some(s) => format!("±{} ({})", fmt_frac(s), fmt_frac(r.threshold.value)),
        None => format!("no A/A data ({}, default)", fmt_frac(r.threshold.value)),
    }
}

fn counts_section(out: &mut String, rows: &[Row]) {
    let counted: Vec<(&Row, &CounterCmp)> = rows.iter().filter_map(|r| Some((r, r.counter.as_ref()?))).collect();
    if counted.is_empty() {
        return;
    }
    let _ = writeln!(out, "\n<details><summary>Instruction counts per call (callgrind, inside <code>fer_*</code> only)</summary>\n");
    let _ = writeln!(out, "| Scenario | Base | Change | Δ | Threshold (count spread) | Drift vs ref |");
    let _ = writeln!(out, "|---|---|---|---|---|---|");
    for (r, c) in counted {
        let count = |v: Option<f64>| v.map(fmt_count).unwrap_or_else(|| "—".into());
        let spread = c.threshold.spread.map(fmt_frac).unwrap_or_else(|| "—".into());
        let _ = writeln!(
            out,
            "| `{}` | {} | {} | {} | {} ({spread}) | {} |",
            r.scenario,
            count(c.base),
            count(c.change),
            c.delta.map(fmt_pct2).unwrap_or_else(|| "—".into()),
            fmt_frac(c.threshold.value),
            c.drift.map(fmt_pct2).unwrap_or_else(|| "—".into())
        );
    }
    let _ = writeln!(out, "\n</details>");
}

fn aa_section(out: &mut String, measured: &BTreeMap<String, NoiseSample>, file: &NoiseFile) {
    let _ = writeln!(out, "\n### Noise measured by this A/A run (merged into the noise file)\n");
    let _ = writeln!(out, "Spread: the largest distance of one round (either side) from the median of all {} rounds. The file keeps each scenario's largest spread over its A/A runs.\n", measured.values().next().map_or(0, |s| 2 * s.rounds));
    let _ = writeln!(out, "| Scenario | Spread, this run | A/A delta, this run | Spread kept (A/A runs) | Threshold from now on |");
    let _ = writeln!(out, "|---|---|---|---|---|");
    for (name, n) in measured {
        let (kept, runs) = file.scenarios.get(name).map_or((n.spread, 1), |s| (s.spread, s.history.len()));
        let thr = TIME_RULE.threshold(Some(kept)).value;
        let _ = writeln!(out, "| `{name}` | ±{} | {} | ±{} ({runs}) | {} |", fmt_frac(n.spread), fmt_pct(n.aa_delta), fmt_frac(kept), fmt_frac(thr));
    }
}

fn host_section(out: &mut String, meta: &ReportMeta, host: &HostInfo) {
    let _ = writeln!(out, "\n<details><summary>Host info</summary>\n");
    let _ = writeln!(out, "- Machine: `{}`: {}, {} logical CPUs", host.machine_name, host.cpu, host.cores);
    let _ = writeln!(out, "- Kernel: {}", host.kernel);
    let _ = writeln!(out, "- Rust: {}", host.rustc);
    let _ = writeln!(out, "- Load average before / after: {} / {}", host.load_before, host.load_after);
    let _ = writeln!(out, "- Date (UTC): {}", meta.date);
    let _ = writeln!(out, "- Build: each side in its own git worktree and CARGO_TARGET_DIR, C sources compiled by ferrite-sys's build.rs at -O2 (no Bazel, no FERRITE_LIB_DIR)");
    let _ = writeln!(out, "\n</details>");
}

fn cannot_catch(out: &mut String, rows: &[Row], meta: &ReportMeta) {
    let thresholds: Vec<f64> = rows.iter().filter(|r| r.delta.is_some()).map(|r| r.threshold.value).collect();
    let (lo, hi) = thresholds.iter().fold((f64::INFINITY, 0.0f64), |(lo, hi), &t| (lo.min(t), hi.max(t)));
    let range = if thresholds.is_empty() { "none compared".to_string() } else { format!("{} to {} in this run", fmt_frac(lo), fmt_frac(hi)) };
    let _ = writeln!(out, "\n<details><summary>What this cannot catch</summary>\n");
    let lines = [
        format!("Timing changes smaller than a scenario's threshold ({range}). Only the counter scenarios (large add, gather and reduce_mean in f32/f16/bf16, the seven-processor chain, top-k and greedy at V = 151,936) have an instruction count beneath the timing; small and medium shapes and the other sampling scenarios rely on timing alone."),
        "Slowdowns that leave the instruction count unchanged: cache misses, memory bandwidth, alignment, branch mispredictions, clock frequency, a noisy neighbour. Counts measure work, not time; `perf stat` cache-miss counters are not available on this machine and callgrind's cache simulation is not run.".to_string(),
        "Code that callgrind's virtual CPU does not run: valgrind has no AVX-512, so counts follow the AVX2 and portable paths (ferrite's dispatch picks AVX2 there); an AVX-512-only change is not counted. Instructions of a `fer_*` function called from inside another `fer_*` function (e.g. `fer_cpu_features` inside the samplers) are not counted either: callgrind toggles collection at each `fer_*` boundary.".to_string(),
        "End-to-end decode with a real model: there is no decode engine yet (the decode-engine issue); its benchmark joins this report when it exists.".to_string(),
        "GPU-only changes: the suites time and count CPU kernels; CUDA kernels are neither timed nor counted here (these machines have no GPU).".to_string(),
        "Multi-threaded scaling and contention: every scenario runs on the calling thread (`threads=1-internal`).".to_string(),
        "Timing drift across changes: drift is tracked for instruction counts against the pinned reference only; timings from another day or machine are not comparable, so the reference's timings are informational.".to_string(),
        format!("A disturbance that lasts a whole round on one side only: with {} rounds per side a median can still move; rerun before trusting a lone red row whose instruction count did not move.", meta.rounds),
    ];
    for l in lines {
        let _ = writeln!(out, "- {l}");
    }
    let _ = writeln!(out, "\n</details>");
}
