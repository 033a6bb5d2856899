//! Unit tests of the comparison logic on synthetic criterion result directories (built in temp
//! dirs). Claims: C-BENCH-001 (deltas, verdicts, one-sided scenarios, errors, order, rendering),
//! C-BENCH-002 (thresholds from measured A/A noise; A/A flags nothing), C-BENCH-003 (instruction
//! counts flag a regression below timing noise), C-BENCH-004 (drift compounds), C-BENCH-005 (the
//! gate fails exactly on a regression beyond noise).

use super::counters::{compare_counts, drift, parse_callgrind_totals, CountSample, CounterVerdict, Reference};
use super::criterion::{read_run, Estimate, RunResults};
use super::format::{fmt_count, fmt_ns, fmt_pct, fmt_pct2};
use super::noise::{aa_spread, measure_aa, Machine, NoiseFile, NoiseRun, Threshold, COUNT_RULE, TIME_RULE};
use super::report::{headline, render_markdown, HostInfo, ReportMeta};
use super::rows::{build_rows, exit_code, gate_fails, sort_worst_first, Row, TimeVerdict};
use super::stats::{aggregate_rounds, median, Side};
use super::svg;
use super::CompareError;
use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

// ---------------------------------------------------------------------------------------------
// Synthetic criterion output

/// An estimates.json as criterion 0.3 writes it, with the given mean.
fn estimates_json(mean_ns: f64) -> String {
    format!(
        r#"{{"mean":{{"confidence_interval":{{"confidence_level":0.95,"lower_bound":{lo},"upper_bound":{hi}}},"point_estimate":{mean_ns},"standard_error":1.5}},"median":{{"confidence_interval":{{"confidence_level":0.95,"lower_bound":1.0,"upper_bound":2.0}},"point_estimate":{med},"standard_error":1.0}}}}"#,
        lo = mean_ns * 0.99,
        hi = mean_ns * 1.01,
        med = mean_ns * 0.5 // a different median, so a reader of the wrong field is caught
    )
}

fn write_file(path: &Path, body: &str) {
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(path, body).unwrap();
}

/// One criterion run dir holding the given scenarios' means, plus the clutter criterion leaves
/// (report/, base/, change/) that the reader must ignore.
fn run_dir(root: &Path, name: &str, values: &[(&str, f64)]) -> PathBuf {
    let dir = root.join(name);
    for (scenario, ns) in values {
        let s = dir.join(scenario);
        write_file(&s.join("new/estimates.json"), &estimates_json(*ns));
        write_file(&s.join("base/estimates.json"), &estimates_json(ns * 7.0));
        write_file(&s.join("change/estimates.json"), r#"{"mean":{"point_estimate":0.5}}"#);
        write_file(&s.join("report/index.html"), "<html></html>");
    }
    write_file(&dir.join("report/index.html"), "<html></html>");
    write_file(&dir.join("report/bogus/new/estimates.json"), &estimates_json(1.0));
    dir
}

/// Rounds of one side: `rounds[i]` holds each scenario's mean in round i.
fn side(root: &Path, label: &str, rounds: &[&[(&str, f64)]]) -> BTreeMap<String, Side> {
    let runs: Vec<RunResults> = rounds.iter().enumerate().map(|(i, v)| read_run(&run_dir(root, &format!("{label}-r{i}"), v)).unwrap()).collect();
    aggregate_rounds(&runs)
}

fn fixed(value: f64) -> impl Fn(&str) -> Threshold {
    move |_| Threshold { value, spread: Some(value / 3.0) }
}

fn no_counters() -> BTreeMap<String, super::counters::CounterCmp> {
    BTreeMap::new()
}

fn row<'a>(rows: &'a [Row], name: &str) -> &'a Row {
    rows.iter().find(|r| r.scenario == name).unwrap_or_else(|| panic!("no row {name}"))
}

const ADD: &str = "add/large_f32_threads=1-internal/4194304";
const GATHER: &str = "gather/large_f32_threads=1-internal/131072";
const CHAIN: &str = "logit_processing/seven_processor_chain_per_step";

// ---------------------------------------------------------------------------------------------
// C-BENCH-001: reading, deltas, verdicts, one-sided scenarios, errors, order, rendering

#[test]
fn c_bench_001_reader_names_scenarios_by_path_and_reads_the_mean() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = run_dir(tmp.path(), "run", &[(ADD, 1_350_000.0), (CHAIN, 21_000.0)]);
    let got = read_run(&dir).unwrap();
    let want: RunResults = [(ADD.to_string(), Estimate::Ns(1_350_000.0)), (CHAIN.to_string(), Estimate::Ns(21_000.0))].into();
    // report/ (top level and per scenario), base/ and change/ are skipped; mean, not median.
    assert_eq!(got, want);
}

#[test]
fn c_bench_001_side_value_is_the_median_of_its_rounds() {
    assert_eq!(median(&[100.0, 300.0, 110.0]), 110.0);
    assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), 2.5);
    let tmp = tempfile::tempdir().unwrap();
    let s = side(tmp.path(), "b", &[&[(ADD, 100.0)], &[(ADD, 300.0)], &[(ADD, 110.0)]]);
    assert_eq!(s[ADD], Side::Valid { median_ns: 110.0, rounds_ns: vec![100.0, 300.0, 110.0] });
}

#[test]
fn c_bench_001_known_deltas_give_known_verdicts() {
    let tmp = tempfile::tempdir().unwrap();
    let b: &[(&str, f64)] = &[(ADD, 1000.0), (GATHER, 500.0), (CHAIN, 200.0)];
    let c: &[(&str, f64)] = &[(ADD, 1500.0), (GATHER, 300.0), (CHAIN, 204.0)];
    let base = side(tmp.path(), "b", &[b; 3]);
    let change = side(tmp.path(), "c", &[c; 3]);
    let rows = build_rows(&base, &change, fixed(0.10), &no_counters());
    let check = |name: &str, delta: f64, verdict: TimeVerdict| {
        let r = row(&rows, name);
        assert!((r.delta.unwrap() - delta).abs() < 1e-12, "{name}: delta {:?}", r.delta);
        assert_eq!(r.time, verdict, "{name}");
    };
    check(ADD, 0.50, TimeVerdict::Regression);
    check(GATHER, -0.40, TimeVerdict::Improvement);
    check(CHAIN, 0.02, TimeVerdict::WithinNoise);
    assert_eq!(row(&rows, ADD).base_ns, Some(1000.0));
    assert_eq!(row(&rows, ADD).change_ns, Some(1500.0));
}

#[test]
fn c_bench_001_delta_exactly_at_the_threshold_is_within_noise() {
    let tmp = tempfile::tempdir().unwrap();
    let base = side(tmp.path(), "b", &[&[(ADD, 1000.0)]]);
    let change = side(tmp.path(), "c", &[&[(ADD, 1125.0)]]);
    let at = build_rows(&base, &change, fixed(0.125), &no_counters());
    assert_eq!(at[0].time, TimeVerdict::WithinNoise);
    let below = build_rows(&base, &change, fixed(0.124), &no_counters());
    assert_eq!(below[0].time, TimeVerdict::Regression);
}

#[test]
fn c_bench_001_one_sided_scenarios_are_listed_as_added_or_removed() {
    let tmp = tempfile::tempdir().unwrap();
    let base = side(tmp.path(), "b", &[&[(ADD, 1000.0), (GATHER, 500.0)]]);
    let change = side(tmp.path(), "c", &[&[(ADD, 1000.0), (CHAIN, 200.0)]]);
    let rows = build_rows(&base, &change, fixed(0.10), &no_counters());
    assert_eq!(rows.len(), 3, "no scenario is dropped");
    assert_eq!(row(&rows, GATHER).time, TimeVerdict::Removed);
    assert_eq!(row(&rows, GATHER).base_ns, Some(500.0));
    assert_eq!(row(&rows, CHAIN).time, TimeVerdict::Added);
    assert_eq!(row(&rows, CHAIN).change_ns, Some(200.0));
    let md = render_markdown(&meta(), &rows, &HostInfo::default());
    assert!(md.contains(&format!("| ➖ removed | `{GATHER}` | 500.0 ns | — |")), "{md}");
    assert!(md.contains(&format!("| 🆕 added | `{CHAIN}` | — | 200.0 ns |")), "{md}");
    assert!(md.contains("1 added, 1 removed"), "{md}");
}

#[test]
fn c_bench_001_zero_or_missing_estimates_are_invalid_rows_naming_the_file() {
    let tmp = tempfile::tempdir().unwrap();
    let base = run_dir(tmp.path(), "b", &[(ADD, 1000.0), (GATHER, 500.0), (CHAIN, 200.0)]);
    let change = run_dir(tmp.path(), "c", &[(ADD, 1000.0), (GATHER, 500.0), (CHAIN, 200.0)]);
    let zero = change.join(ADD).join("new/estimates.json");
    write_file(&zero, r#"{"mean":{"point_estimate":0.0}}"#);
    let missing = change.join(GATHER).join("new/estimates.json");
    write_file(&missing, r#"{"median":{"point_estimate":12.0}}"#);
    let negative = base.join(CHAIN).join("new/estimates.json");
    write_file(&negative, r#"{"mean":{"point_estimate":-3}}"#);

    let (b, c) = (aggregate_rounds(&[read_run(&base).unwrap()]), aggregate_rounds(&[read_run(&change).unwrap()]));
    let rows = build_rows(&b, &c, fixed(0.10), &no_counters());
    let invalid = |name: &str, side: &str, file: &Path, why: &str| match &row(&rows, name).time {
        TimeVerdict::Invalid(text) => {
            assert!(text.starts_with(side), "{text}");
            assert!(text.contains(&file.display().to_string()), "{text} names {}", file.display());
            assert!(text.contains(why), "{text}");
        }
        other => panic!("{name}: {other:?}"),
    };
    invalid(ADD, "change", &zero, "is 0");
    invalid(GATHER, "change", &missing, "no mean.point_estimate");
    invalid(CHAIN, "base", &negative, "is -3");
    let md = render_markdown(&meta(), &rows, &HostInfo::default());
    assert!(md.contains("Invalid estimates:") && md.contains(&zero.display().to_string()), "{md}");
    assert!(md.contains("3 invalid"), "{md}");
}

#[test]
fn c_bench_001_a_scenario_missing_from_one_round_is_invalid() {
    let tmp = tempfile::tempdir().unwrap();
    let s = side(tmp.path(), "b", &[&[(ADD, 1.0), (CHAIN, 2.0)], &[(ADD, 1.0)]]);
    assert_eq!(s[CHAIN], Side::Invalid("ran in 1 of 2 rounds".into()));
}

#[test]
fn c_bench_001_malformed_json_is_an_error_naming_the_file() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = run_dir(tmp.path(), "run", &[(ADD, 1000.0), (CHAIN, 200.0)]);
    let bad = dir.join(CHAIN).join("new/estimates.json");
    write_file(&bad, r#"{"mean":{"point_estimate":12.0"#);
    let err = read_run(&dir).unwrap_err();
    assert!(matches!(err, CompareError::Json { ref path, .. } if path == &bad), "{err:?}");
    let text = err.to_string();
    assert!(text.starts_with(&bad.display().to_string()) && text.contains("malformed JSON"), "{text}");
}

#[test]
fn c_bench_001_missing_or_empty_dir_is_an_error_naming_it() {
    let tmp = tempfile::tempdir().unwrap();
    let gone = tmp.path().join("nope");
    let err = read_run(&gone).unwrap_err();
    assert!(err.to_string().contains(&gone.display().to_string()) && err.to_string().contains("no such directory"), "{err}");
    let empty = tmp.path().join("empty");
    write_file(&empty.join("report/index.html"), "");
    let err = read_run(&empty).unwrap_err();
    assert!(matches!(err, CompareError::NoResults(ref p) if p == &empty), "{err:?}");
}

#[test]
fn c_bench_001_rows_sort_worst_first() {
    let tmp = tempfile::tempdir().unwrap();
    let base = side(tmp.path(), "b", &[&[("a/slow2", 100.0), ("a/slow1", 100.0), ("a/same", 100.0), ("a/fast", 100.0), ("a/gone", 100.0), ("a/bad", 100.0)]]);
    let change = side(tmp.path(), "c", &[&[("a/slow2", 150.0), ("a/slow1", 300.0), ("a/same", 101.0), ("a/fast", 50.0), ("a/new", 100.0)]]);
    let change_bad = {
        let mut c = change.clone();
        c.insert("a/bad".into(), Side::Invalid("x: no mean.point_estimate".into()));
        c
    };
    let mut rows = build_rows(&base, &change_bad, fixed(0.10), &no_counters());
    sort_worst_first(&mut rows);
    let order: Vec<&str> = rows.iter().map(|r| r.scenario.as_str()).collect();
    assert_eq!(order, ["a/slow1", "a/slow2", "a/bad", "a/gone", "a/new", "a/same", "a/fast"]);
}

#[test]
fn c_bench_001_times_print_in_ns_us_ms() {
    assert_eq!(fmt_ns(150.04), "150.0 ns");
    assert_eq!(fmt_ns(12_345.0), "12.35 µs");
    assert_eq!(fmt_ns(1_350_000.0), "1.35 ms");
    assert_eq!(fmt_ns(2.5e9), "2.50 s");
    assert_eq!(fmt_count(12_815_675.0), "12,815,675");
    assert_eq!(fmt_count(999.0), "999");
    assert_eq!(fmt_pct2(-1e-17), "+0.00%");
    assert_eq!(fmt_pct(-0.0004), "+0.0%");
    assert_eq!(fmt_pct(-0.1234), "-12.3%");
}

fn meta() -> ReportMeta {
    ReportMeta {
        date: "2026-12-01 10:00".into(),
        command: "scripts/bench-compare".into(),
        base: "`aaaaaaa`".into(),
        change: "`bbbbbbb`".into(),
        rounds: 3,
        benches: vec!["kernels".into()],
        criterion_args: vec!["--noplot".into()],
        noise_source: "test".into(),
        counter_source: "test".into(),
        chart: Some("report.svg".into()),
        ..ReportMeta::default()
    }
}

#[test]
fn c_bench_001_report_has_verdict_table_host_and_limits() {
    let tmp = tempfile::tempdir().unwrap();
    let base = side(tmp.path(), "b", &[&[(ADD, 1_000_000.0), (CHAIN, 20_000.0)]]);
    let change = side(tmp.path(), "c", &[&[(ADD, 2_000_000.0), (CHAIN, 20_100.0)]]);
    let mut rows = build_rows(&base, &change, fixed(0.10), &no_counters());
    sort_worst_first(&mut rows);
    let host = HostInfo { machine_name: "amd-epyc-2cpu".into(), cpu: "AMD EPYC".into(), cores: 2, ..HostInfo::default() };
    let md = render_markdown(&meta(), &rows, &host);
    assert!(md.starts_with("## 🔴 Benchmark regression beyond noise: 1 scenario(s) slower"), "{md}");
    assert!(md.contains("| Status | Scenario | Base | Change | Delta | Noise band (threshold) | Instr. Δ | Drift vs ref |"));
    let add_line = md.lines().find(|l| l.contains(ADD)).unwrap();
    assert_eq!(add_line, format!("| 🔴 slower | `{ADD}` | 1.00 ms | 2.00 ms | +100.0% | ±3.3% (10.0%) | — | — |"));
    assert!(md.find(ADD).unwrap() < md.find(CHAIN).unwrap(), "worst first");
    assert!(md.contains("](report.svg)"), "links the chart");
    assert!(md.contains("Host info") && md.contains("AMD EPYC, 2 logical CPUs"));
    assert!(md.contains("What this cannot catch") && md.contains("GPU-only changes") && md.contains("End-to-end decode"));
    let calm = build_rows(&base, &base, fixed(0.10), &no_counters());
    assert_eq!(headline(&calm), "✅ No regression beyond noise");
}

/// Checks that `svg` is one `<svg>` element whose tags balance, and returns the tag names opened.
fn well_formed(svg: &str) -> Vec<String> {
    assert!(svg.starts_with("<svg "), "starts with <svg");
    assert!(svg.trim_end().ends_with("</svg>"));
    let mut stack: Vec<String> = Vec::new();
    let mut opened = Vec::new();
    let mut rest = svg;
    while let Some(start) = rest.find('<') {
        let end = rest[start..].find('>').expect("unclosed tag") + start;
        let tag = &rest[start + 1..end];
        assert!(!tag.contains('<'), "stray < inside a tag: {tag}");
        if let Some(name) = tag.strip_prefix('/') {
            assert_eq!(stack.pop().as_deref(), Some(name), "mismatched </{name}>");
        } else {
            let name = tag.split_whitespace().next().unwrap().trim_end_matches('/').to_string();
            opened.push(name.clone());
            if !tag.ends_with('/') {
                stack.push(name);
            }
        }
        // Text between tags must not hold a raw & that is not an entity.
        let text = &rest[end + 1..rest[end + 1..].find('<').map_or(rest.len(), |i| i + end + 1)];
        for (i, _) in text.match_indices('&') {
            let ent = &text[i..];
            assert!(["&amp;", "&lt;", "&gt;", "&quot;", "&apos;"].iter().any(|e| ent.starts_with(e)), "raw & in {text}");
        }
        rest = &rest[end + 1..];
    }
    assert!(stack.is_empty(), "unclosed: {stack:?}");
    opened
}

#[test]
fn c_bench_001_svg_is_well_formed_with_one_bar_per_compared_scenario() {
    let tmp = tempfile::tempdir().unwrap();
    let names = ["add/a<b>&c", "add/x", "add/y", "add/z"];
    let base = side(tmp.path(), "b", &[&[(names[0], 100.0), (names[1], 100.0), (names[2], 100.0), ("only/base", 1.0)]]);
    let change = side(tmp.path(), "c", &[&[(names[0], 300.0), (names[1], 100.0), (names[2], 60.0), ("only/change", 1.0)]]);
    let mut rows = build_rows(&base, &change, fixed(0.10), &no_counters());
    sort_worst_first(&mut rows);
    let svg = svg::render(&rows, "A & B");
    let tags = well_formed(&svg);
    let bars = svg.matches(r#"class="bar""#).count();
    let bands = svg.matches(r#"class="band""#).count();
    assert_eq!(bars, 3, "one bar per scenario with a delta (added/removed have none)");
    assert_eq!(bands, 3, "each bar has its noise band");
    assert_eq!(tags.iter().filter(|t| *t == "svg").count(), 1);
    assert!(svg.contains("add/a&lt;b&gt;&amp;c") && svg.contains("A &amp; B"));
    // Band drawn before (behind) its bar.
    assert!(svg.find(r#"class="band""#).unwrap() < svg.find(r#"class="bar""#).unwrap());
}

// ---------------------------------------------------------------------------------------------
// C-BENCH-002: thresholds from measured A/A noise; an A/A run flags nothing

#[test]
fn c_bench_002_threshold_is_3x_the_aa_spread_with_a_floor_and_a_stated_default() {
    let t = TIME_RULE.threshold(Some(0.04));
    assert!((t.value - 0.12).abs() < 1e-12);
    assert_eq!(t.spread, Some(0.04));
    assert_eq!(TIME_RULE.threshold(Some(0.01)).value, 0.05, "floor");
    assert_eq!(TIME_RULE.threshold(None), Threshold { value: 0.30, spread: None }, "default without A/A data");
    assert_eq!(TIME_RULE.describe(), "threshold = max(3 x A/A spread, 5.0%); 30.0% where no A/A data exists");
    // A row without A/A data says so.
    let tmp = tempfile::tempdir().unwrap();
    let b = side(tmp.path(), "b", &[&[(ADD, 100.0)]]);
    let c = side(tmp.path(), "c", &[&[(ADD, 110.0)]]);
    let rows = build_rows(&b, &c, |_| TIME_RULE.threshold(None), &no_counters());
    let md = render_markdown(&meta(), &rows, &HostInfo::default());
    assert!(md.contains("| +10.0% | no A/A data (30.0%, default) |"), "{md}");
}

#[test]
fn c_bench_002_aa_spread_is_the_largest_round_distance_from_the_pooled_median() {
    // Pooled median of 100 108 95 103 97 130 is 101.5 (the mean is 105.5); the farthest round is 130.
    let s = aa_spread(&[100.0, 108.0, 95.0], &[103.0, 97.0, 130.0]);
    assert!((s - 28.5 / 101.5).abs() < 1e-12, "{s}");
}

#[test]
fn c_bench_002_a_second_aa_run_flags_nothing_against_the_first_runs_noise() {
    let tmp = tempfile::tempdir().unwrap();
    // Calibration A/A run: rounds scatter by up to ~7%.
    let b1 = side(tmp.path(), "b1", &[&[(ADD, 100.0), (CHAIN, 50.0)], &[(ADD, 108.0), (CHAIN, 50.4)], &[(ADD, 95.0), (CHAIN, 49.8)]]);
    let c1 = side(tmp.path(), "c1", &[&[(ADD, 103.0), (CHAIN, 50.2)], &[(ADD, 97.0), (CHAIN, 49.9)], &[(ADD, 106.0), (CHAIN, 50.1)]]);
    let mut noise = NoiseFile::new(machine());
    noise.record(aa_run(), measure_aa(&b1, &c1), BTreeMap::new());
    let thr = |n: &str| TIME_RULE.threshold(noise.spread(n));
    assert!((thr(ADD).value - 3.0 * 6.5 / 101.5).abs() < 1e-12);
    assert_eq!(thr(CHAIN).value, 0.05, "a quiet scenario gets the floor");
    // A second, independent A/A run with its own scatter flags nothing ...
    let b2 = side(tmp.path(), "b2", &[&[(ADD, 104.0), (CHAIN, 50.2)], &[(ADD, 96.0), (CHAIN, 49.1)], &[(ADD, 101.0), (CHAIN, 50.9)]]);
    let c2 = side(tmp.path(), "c2", &[&[(ADD, 92.0), (CHAIN, 49.6)], &[(ADD, 107.0), (CHAIN, 51.3)], &[(ADD, 99.0), (CHAIN, 50.0)]]);
    let rows = build_rows(&b2, &c2, thr, &no_counters());
    assert!(rows.iter().all(|r| r.time == TimeVerdict::WithinNoise), "{rows:?}");
    assert!(!gate_fails(&rows));
    // ... while a real shift beyond that noise is flagged.
    let s: &[(&str, f64)] = &[(ADD, 140.0), (CHAIN, 50.0)];
    let slow = side(tmp.path(), "s", &[s; 3]);
    let rows = build_rows(&b2, &slow, thr, &no_counters());
    assert_eq!(row(&rows, ADD).time, TimeVerdict::Regression);
    assert_eq!(row(&rows, CHAIN).time, TimeVerdict::WithinNoise);
}

proptest::proptest! {
    /// An A/A run judged by the thresholds it measures itself never flags, for rounds scattered
    /// up to ±10%: the delta of the two medians is at most 2s/(1 - s) for a spread s (each
    /// median lies within s of the pooled median), under 3s while s < 1/3.
    #[test]
    fn c_bench_002_aa_run_never_flags_against_its_own_noise(
        v in 1.0f64..1e7,
        b in proptest::collection::vec(-0.1f64..0.1, 1..6),
        c in proptest::collection::vec(-0.1f64..0.1, 1..6),
    ) {
        let n = b.len().min(c.len());
        let side = |e: &[f64]| -> BTreeMap<String, Side> {
            let rounds: Vec<f64> = e[..n].iter().map(|e| v * (1.0 + e)).collect();
            [(ADD.to_string(), Side::Valid { median_ns: median(&rounds), rounds_ns: rounds })].into()
        };
        let (bs, cs) = (side(&b), side(&c));
        let noise = measure_aa(&bs, &cs);
        let rows = build_rows(&bs, &cs, |s| TIME_RULE.threshold(noise.get(s).map(|n| n.spread)), &no_counters());
        proptest::prop_assert_eq!(&rows[0].time, &TimeVerdict::WithinNoise);
    }
}

fn machine() -> Machine {
    Machine { name: "amd-epyc-2cpu".into(), cpu: "AMD EPYC".into(), cores: 2 }
}

fn aa_run() -> NoiseRun {
    NoiseRun { date: "2026-12-01 10:00".into(), revision: "abc".into(), rounds: 3, benches: vec!["kernels".into()], filter: None, criterion_args: vec![] }
}

#[test]
fn c_bench_002_noise_file_round_trips_and_a_narrow_run_keeps_other_scenarios() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("noise/amd-epyc-2cpu.json");
    assert_eq!(NoiseFile::load(&path).unwrap(), None);
    let b = side(tmp.path(), "b", &[&[(ADD, 100.0), (CHAIN, 10.0)], &[(ADD, 110.0), (CHAIN, 10.0)]]);
    let c = side(tmp.path(), "c", &[&[(ADD, 100.0), (CHAIN, 10.0)], &[(ADD, 100.0), (CHAIN, 11.0)]]);
    let mut noise = NoiseFile::new(machine());
    noise.record(aa_run(), measure_aa(&b, &c), [(ADD.to_string(), 0.0)].into());
    noise.save(&path).unwrap();
    let loaded = NoiseFile::load(&path).unwrap().unwrap();
    assert_eq!(loaded, noise);
    assert_eq!(loaded.machine.cpu, "AMD EPYC");
    // A later A/A run of ADD only adds to ADD's history, keeps the larger spread, leaves CHAIN.
    let b = side(tmp.path(), "b2", &[&[(ADD, 100.0)]]);
    let c = side(tmp.path(), "c2", &[&[(ADD, 150.0)]]);
    let before = loaded.scenarios[ADD].spread;
    let mut again = loaded;
    again.record(aa_run(), measure_aa(&b, &c), [(ADD.to_string(), 0.002)].into());
    assert_eq!(again.runs.len(), 2);
    let add = &again.scenarios[ADD];
    assert_eq!((add.history.len(), add.history[1].run), (2, 1));
    assert!((add.history[1].aa_delta - 0.5).abs() < 1e-12);
    assert!((add.spread - 0.2).abs() < 1e-12 && add.spread > before, "the larger spread is kept: 125 vs 100..150");
    assert_eq!(again.scenarios[CHAIN].history.len(), 1);
    assert_eq!(again.counters[ADD], 0.002);
    // A quieter run does not lower the kept spread.
    let quiet = side(tmp.path(), "q", &[&[(ADD, 100.0)]]);
    again.record(aa_run(), measure_aa(&quiet, &quiet), BTreeMap::new());
    assert!((again.scenarios[ADD].spread - 0.2).abs() < 1e-12);
    assert_eq!(again.scenarios[ADD].history[2].spread, 0.0);
    write_file(&path, "{ not json");
    let err = NoiseFile::load(&path).unwrap_err();
    assert!(err.to_string().contains(&path.display().to_string()), "{err}");
}

// ---------------------------------------------------------------------------------------------
// C-BENCH-003: instruction counts flag what timing noise hides

fn counts(reps: u32, totals: &[u64]) -> CountSample {
    CountSample { reps, totals: totals.to_vec() }
}

#[test]
fn c_bench_003_parse_callgrind_totals() {
    let out = "# callgrind format\nversion: 1\ncreator: callgrind-3.19.0\nevents: Ir\nfn=(1) fer_add\n0 12\nsummary: 12815675\n\n\ntotals: 12815675\n";
    assert_eq!(parse_callgrind_totals(out), Some(12_815_675));
    assert_eq!(parse_callgrind_totals("events: Ir\nsummary: 42\n"), Some(42));
    assert_eq!(parse_callgrind_totals("events: Ir\n"), None);
}

#[test]
fn c_bench_003_a_one_percent_instruction_regression_is_flagged_inside_timing_noise() {
    let tmp = tempfile::tempdir().unwrap();
    // Timing: +3%, inside a 15% noise threshold.
    let base = side(tmp.path(), "b", &[&[(ADD, 1_000_000.0), (CHAIN, 20_000.0)]]);
    let change = side(tmp.path(), "c", &[&[(ADD, 1_030_000.0), (CHAIN, 20_000.0)]]);
    // Instructions: exactly repeatable, +1% on ADD, +0.3% (below the 0.5% floor) on CHAIN.
    let cb: BTreeMap<String, CountSample> = [(ADD.into(), counts(3, &[12_000_000; 3])), (CHAIN.into(), counts(3, &[3_000_000; 3]))].into();
    let cc: BTreeMap<String, CountSample> = [(ADD.into(), counts(3, &[12_120_000; 3])), (CHAIN.into(), counts(3, &[3_009_000; 3]))].into();
    let cmp = compare_counts(&cb, &cc, None, None);
    assert_eq!(cmp[ADD].threshold, Threshold { value: COUNT_RULE.floor, spread: Some(0.0) });
    assert_eq!(cmp[ADD].verdict, CounterVerdict::More);
    assert!((cmp[ADD].delta.unwrap() - 0.01).abs() < 1e-12);
    assert_eq!(cmp[CHAIN].verdict, CounterVerdict::Same);
    let mut rows = build_rows(&base, &change, fixed(0.15), &cmp);
    sort_worst_first(&mut rows);
    assert_eq!(rows[0].scenario, ADD);
    assert_eq!(rows[0].time, TimeVerdict::WithinNoise, "the timer cannot see it");
    assert!(rows[0].regressed(), "the counter does");
    assert!(headline(&rows).starts_with("🟠 Instruction-count regression: 1 scenario(s)"));
    let md = render_markdown(&meta(), &rows, &HostInfo::default());
    assert!(md.contains("| ✅ within noise · 🟠 more instructions |") && md.contains("| +1.00% |"), "{md}");
}

#[test]
fn c_bench_003_a_count_that_does_not_repeat_exactly_raises_its_own_threshold() {
    // 1.3% scatter between callgrind runs of one side: threshold 3 x 1.3% = 3.9%.
    let b: BTreeMap<String, CountSample> = [(GATHER.into(), counts(3, &[307_256, 311_180, 311_180]))].into();
    let c: BTreeMap<String, CountSample> = [(GATHER.into(), counts(3, &[311_180, 311_180, 311_180]))].into();
    let cmp = compare_counts(&b, &c, None, None);
    let spread = (311_180.0 - 307_256.0) / 311_180.0;
    assert!((cmp[GATHER].threshold.value - 3.0 * spread).abs() < 1e-12);
    assert_eq!(cmp[GATHER].verdict, CounterVerdict::Same, "median per call is equal");
    // The A/A noise file's count spread counts too.
    let mut noise = NoiseFile::new(machine());
    noise.counters.insert(ADD.into(), 0.01);
    let same: BTreeMap<String, CountSample> = [(ADD.into(), counts(1, &[100]))].into();
    let up: BTreeMap<String, CountSample> = [(ADD.into(), counts(1, &[102]))].into();
    assert_eq!(compare_counts(&same, &up, Some(&noise), None)[ADD].verdict, CounterVerdict::Same, "2% < 3 x 1%");
    // One-sided counts are kept, not dropped.
    let one = compare_counts(&same, &BTreeMap::new(), None, None);
    assert_eq!(one[ADD].verdict, CounterVerdict::OnlyBase);
}

// ---------------------------------------------------------------------------------------------
// C-BENCH-004: drift from the pinned reference compounds

fn reference(instr: f64) -> Reference {
    Reference {
        revision: "ref".into(),
        date: "2026-12-01 10:00".into(),
        machine: machine(),
        counter: "callgrind".into(),
        reps: 3,
        instructions: [(ADD.to_string(), instr)].into(),
        timings_ns: [(ADD.to_string(), 1.35e6)].into(),
        note: String::new(),
    }
}

#[test]
fn c_bench_004_five_changes_of_5pct_drift_27_6pct_from_the_reference() {
    let pinned = reference(1e9);
    let mut per_call = 1_000_000_000u64;
    let mut last = None;
    for _ in 0..5 {
        let next = per_call * 105 / 100;
        let b: BTreeMap<String, CountSample> = [(ADD.into(), counts(1, &[per_call]))].into();
        let c: BTreeMap<String, CountSample> = [(ADD.into(), counts(1, &[next]))].into();
        let cmp = compare_counts(&b, &c, None, Some(&pinned));
        assert!((cmp[ADD].delta.unwrap() - 0.05).abs() < 1e-8, "each change alone is +5%");
        last = Some(cmp);
        per_call = next;
    }
    let cmp = last.unwrap();
    let d = cmp[ADD].drift.unwrap();
    assert!((d - (1.05f64.powi(5) - 1.0)).abs() < 1e-8);
    assert_eq!(format!("{:.1}%", d * 100.0), "27.6%");
    assert!((drift(100.0, 127.63) - 0.2763).abs() < 1e-12);
    // The header calls it out.
    let rows = build_rows(&BTreeMap::new(), &BTreeMap::new(), fixed(0.1), &cmp);
    let m = ReportMeta { reference: Some("`ref` pinned 2026-12-01".into()), ..meta() };
    let md = render_markdown(&m, &rows, &HostInfo::default());
    assert!(md.contains("⚠️ above 5.0%: largest +27.63% in instructions"), "{md}");
}

#[test]
fn c_bench_004_reference_round_trips() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("baseline/reference.json");
    let r = reference(4_271_891.0);
    r.save(&path).unwrap();
    assert_eq!(Reference::load(&path).unwrap(), Some(r));
    assert_eq!(Reference::load(&tmp.path().join("none.json")).unwrap(), None);
}

// ---------------------------------------------------------------------------------------------
// C-BENCH-005: --gate exits non-zero exactly on a regression beyond noise

#[test]
fn c_bench_005_gate_fails_exactly_on_a_regression_beyond_noise() {
    let tmp = tempfile::tempdir().unwrap();
    let b = side(tmp.path(), "b", &[&[(ADD, 100.0), (GATHER, 100.0), ("x/removed", 1.0), ("x/bad", 1.0)]]);
    let mut c_calm = side(tmp.path(), "c", &[&[(ADD, 109.0), (GATHER, 40.0), ("x/added", 1.0)]]);
    c_calm.insert("x/bad".into(), Side::Invalid("f: mean.point_estimate is 0".into()));
    // Within noise, faster, added, removed, invalid: report only, exit 0 with or without --gate.
    let calm = build_rows(&b, &c_calm, fixed(0.10), &no_counters());
    assert!(!gate_fails(&calm));
    assert_eq!((exit_code(true, &calm), exit_code(false, &calm)), (0, 0));
    // One row 11% slower with a 10% threshold: exit 1 with --gate, 0 without.
    let mut c_slow = c_calm.clone();
    let slow_side = side(tmp.path(), "s", &[&[(ADD, 111.0)]]);
    c_slow.insert(ADD.into(), slow_side[ADD].clone());
    let slow = build_rows(&b, &c_slow, fixed(0.10), &no_counters());
    assert_eq!((exit_code(true, &slow), exit_code(false, &slow)), (1, 0));
    // Timing calm, instructions up beyond their threshold: exit 1 with --gate.
    let cb: BTreeMap<String, CountSample> = [(ADD.into(), counts(3, &[1000; 3]))].into();
    let cc: BTreeMap<String, CountSample> = [(ADD.into(), counts(3, &[1006; 3]))].into();
    let instr = build_rows(&b, &c_calm, fixed(0.10), &compare_counts(&cb, &cc, None, None));
    assert_eq!(exit_code(true, &instr), 1);
    // Fewer instructions, or more within the threshold: exit 0.
    let cc: BTreeMap<String, CountSample> = [(ADD.into(), counts(3, &[1004; 3]))].into();
    let fine = build_rows(&b, &c_calm, fixed(0.10), &compare_counts(&cb, &cc, None, None));
    assert_eq!(exit_code(true, &fine), 0);
}
