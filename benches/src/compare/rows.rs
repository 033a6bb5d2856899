//! One row per scenario: the timing verdict against the scenario's own noise threshold, the
//! instruction-count verdict beside it, the worst-first order, and the gate decision.

use super::counters::{CounterCmp, CounterVerdict};
use super::noise::Threshold;
use super::stats::{relative_change, Side};
use std::collections::BTreeMap;

/// The timing verdict of one scenario.
#[derive(Clone, Debug, PartialEq)]
pub enum TimeVerdict {
    /// Slower by more than the scenario's threshold.
    Regression,
    /// Faster by more than the threshold.
    Improvement,
    WithinNoise,
    /// Timed on the change side only.
    Added,
    /// Timed on the base side only.
    Removed,
    /// A side gave no usable estimate; the text says which side and why (naming the file).
    Invalid(String),
    /// Counted, but not timed in this run (filtered out, or a counter-only scenario).
    NotTimed,
}

/// One scenario of the report.
#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    pub scenario: String,
    pub base_ns: Option<f64>,
    pub change_ns: Option<f64>,
    /// (change - base) / base of the medians.
    pub delta: Option<f64>,
    pub threshold: Threshold,
    pub time: TimeVerdict,
    pub counter: Option<CounterCmp>,
}

/// The timing verdict and delta of one scenario from its two sides.
pub fn time_verdict(base: Option<&Side>, change: Option<&Side>, threshold: Threshold) -> (TimeVerdict, Option<f64>) {
    match (base, change) {
        (None, None) => (TimeVerdict::NotTimed, None),
        (Some(Side::Invalid(why)), _) => (TimeVerdict::Invalid(format!("base: {why}")), None),
        (_, Some(Side::Invalid(why))) => (TimeVerdict::Invalid(format!("change: {why}")), None),
        (None, Some(_)) => (TimeVerdict::Added, None),
        (Some(_), None) => (TimeVerdict::Removed, None),
        (Some(b), Some(c)) => {
            let d = relative_change(b.median().unwrap_or(f64::NAN), c.median().unwrap_or(f64::NAN));
            let verdict = if d > threshold.value {
                TimeVerdict::Regression
            } else if d < -threshold.value {
                TimeVerdict::Improvement
            } else {
                TimeVerdict::WithinNoise
            };
            (verdict, Some(d))
        }
    }
}

/// A row for every scenario timed on either side or counted on either side; none is dropped.
pub fn build_rows(
    base: &BTreeMap<String, Side>,
    change: &BTreeMap<String, Side>,
    threshold: impl Fn(&str) -> Threshold,
    counters: &BTreeMap<String, CounterCmp>,
) -> Vec<Row> {
    let mut names: Vec<&String> = base.keys().chain(change.keys()).chain(counters.keys()).collect();
    names.sort();
    names.dedup();
    names
        .into_iter()
        .map(|name| {
            let (b, c) = (base.get(name), change.get(name));
            let thr = threshold(name);
            let (time, delta) = time_verdict(b, c, thr);
            Row {
                scenario: name.clone(),
                base_ns: b.and_then(Side::median),
                change_ns: c.and_then(Side::median),
                delta,
                threshold: thr,
                time,
                counter: counters.get(name).cloned(),
            }
        })
        .collect()
}

impl Row {
    /// Higher is worse: regressions, then invalid data, then scenarios present on one side only,
    /// then the unremarkable, improvements last.
    pub fn severity(&self) -> u8 {
        let time = match self.time {
            TimeVerdict::Regression => 60,
            TimeVerdict::Invalid(_) => 40,
            TimeVerdict::Removed => 30,
            TimeVerdict::Added => 20,
            TimeVerdict::WithinNoise | TimeVerdict::NotTimed => 10,
            TimeVerdict::Improvement => 5,
        };
        let counter = match self.counter.as_ref().map(|c| c.verdict) {
            Some(CounterVerdict::More) => 50,
            Some(CounterVerdict::OnlyBase | CounterVerdict::OnlyChange) => 15,
            _ => 0,
        };
        time.max(counter)
    }

    /// The delta that orders rows of equal severity: the time delta, else the instruction delta.
    fn order_delta(&self) -> f64 {
        self.delta.or_else(|| self.counter.as_ref().and_then(|c| c.delta)).unwrap_or(0.0)
    }

    /// True when this row alone fails the gate.
    pub fn regressed(&self) -> bool {
        self.time == TimeVerdict::Regression || self.counter.as_ref().is_some_and(|c| c.verdict == CounterVerdict::More)
    }
}

/// Worst first: by severity, then by delta descending, then by name (a stable, total order).
pub fn sort_worst_first(rows: &mut [Row]) {
    rows.sort_by(|a, b| {
        b.severity().cmp(&a.severity()).then(b.order_delta().total_cmp(&a.order_delta())).then_with(|| a.scenario.cmp(&b.scenario))
    });
}

/// The gate fails exactly when some scenario is slower beyond its noise threshold or executes
/// more instructions beyond the count threshold. Added, removed and invalid rows are reported
/// loudly but do not fail it: they are not evidence of a slowdown (C-BENCH-005).
pub fn gate_fails(rows: &[Row]) -> bool {
    rows.iter().any(Row::regressed)
}

/// The process exit status: 1 only with `--gate` and a regression; reporting alone exits 0.
pub fn exit_code(gate: bool, rows: &[Row]) -> i32 {
    i32::from(gate && gate_fails(rows))
}
