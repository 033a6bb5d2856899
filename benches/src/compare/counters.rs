//! Counters that do not depend on machine load: instructions executed inside ferrite's C entry
//! points, counted by callgrind (`kernel-counts` runs a scenario a fixed number of times), and the
//! drift of those counts from a pinned reference revision (`benches/baseline/reference.json`).
//!
//! A timing threshold on a shared 2-core machine sits at 5-30%; an instruction count repeats
//! exactly, so a 1% regression in a kernel's work is visible (C-BENCH-003). And a change can stay
//! under every per-change threshold while the code drifts: five changes of +5% each compound to
//! +27.6% against the reference (C-BENCH-004).

use super::noise::{load_json, save_json, Machine, NoiseFile, Threshold, COUNT_RULE};
use super::stats::{median, relative_change};
use super::CompareError;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;

/// Drift from the reference above this is called out in the report's header.
pub const DRIFT_WARN: f64 = 0.05;

/// One scenario's count on one side: the callgrind total of each run, each for `reps` calls.
#[derive(Clone, Debug, PartialEq)]
pub struct CountSample {
    pub reps: u32,
    pub totals: Vec<u64>,
}

impl CountSample {
    /// Instructions per call, median over the runs (set-up calls amortised over `reps`).
    pub fn per_call(&self) -> f64 {
        let per: Vec<f64> = self.totals.iter().map(|&t| t as f64 / self.reps as f64).collect();
        median(&per)
    }

    /// (max - min) / median over the runs: 0 when the count repeated exactly.
    pub fn spread(&self) -> f64 {
        let (Some(&lo), Some(&hi)) = (self.totals.iter().min(), self.totals.iter().max()) else {
            return 0.0;
        };
        let mid = median(&self.totals.iter().map(|&t| t as f64).collect::<Vec<_>>());
        (hi - lo) as f64 / mid
    }
}

/// The instruction total from a callgrind output file (`totals:` or, failing that, `summary:`).
pub fn parse_callgrind_totals(text: &str) -> Option<u64> {
    let find = |key: &str| {
        text.lines().find_map(|l| l.strip_prefix(key)).and_then(|rest| rest.split_whitespace().next()).and_then(|n| n.parse().ok())
    };
    find("totals:").or_else(|| find("summary:"))
}

/// Drift of `current` from the pinned `reference` (a relative change). Drift compounds where
/// per-change deltas do not: it is measured against one fixed point.
pub fn drift(reference: f64, current: f64) -> f64 {
    relative_change(reference, current)
}

/// The pinned reference: instruction counts per counter scenario at one revision (the drift
/// baseline), plus that revision's timings on the machine that pinned it, for information only.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct Reference {
    pub revision: String,
    pub date: String,
    pub machine: Machine,
    /// How the counts were taken, e.g. `callgrind --toggle-collect=fer_*, 3 calls per run`.
    pub counter: String,
    pub reps: u32,
    /// Instructions per call.
    pub instructions: BTreeMap<String, f64>,
    /// Median of the pinning run's rounds, ns; machine-dependent, not used for verdicts.
    pub timings_ns: BTreeMap<String, f64>,
    pub note: String,
}

impl Reference {
    pub fn load(path: &Path) -> Result<Option<Reference>, CompareError> {
        load_json(path)
    }

    pub fn save(&self, path: &Path) -> Result<(), CompareError> {
        save_json(path, self)
    }
}

/// The counter verdict of one scenario.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CounterVerdict {
    /// More instructions than the threshold allows: a regression.
    More,
    Fewer,
    Same,
    /// Counted on one side only (the other failed to build or run the scenario).
    OnlyBase,
    OnlyChange,
}

/// One scenario's instruction comparison.
#[derive(Clone, Debug, PartialEq)]
pub struct CounterCmp {
    pub base: Option<f64>,
    pub change: Option<f64>,
    pub delta: Option<f64>,
    pub threshold: Threshold,
    pub verdict: CounterVerdict,
    pub drift: Option<f64>,
}

/// Compares the counts of every scenario counted on either side. The threshold is
/// [`COUNT_RULE`] over the largest spread seen: either side's repeated runs in this job, or the
/// A/A noise file's entry.
pub fn compare_counts(
    base: &BTreeMap<String, CountSample>,
    change: &BTreeMap<String, CountSample>,
    noise: Option<&NoiseFile>,
    reference: Option<&Reference>,
) -> BTreeMap<String, CounterCmp> {
    let mut names: Vec<&String> = base.keys().chain(change.keys()).collect();
    names.sort();
    names.dedup();
    let mut out = BTreeMap::new();
    for name in names {
        let (b, c) = (base.get(name), change.get(name));
        let spread = [b.map(CountSample::spread), c.map(CountSample::spread), noise.and_then(|n| n.counters.get(name).copied())]
            .into_iter()
            .flatten()
            .fold(0.0, f64::max);
        let threshold = COUNT_RULE.threshold(Some(spread));
        let (bv, cv) = (b.map(CountSample::per_call), c.map(CountSample::per_call));
        let delta = bv.zip(cv).map(|(b, c)| relative_change(b, c));
        let verdict = match (bv, cv, delta) {
            (_, _, Some(d)) if d > threshold.value => CounterVerdict::More,
            (_, _, Some(d)) if d < -threshold.value => CounterVerdict::Fewer,
            (Some(_), Some(_), _) => CounterVerdict::Same,
            (Some(_), None, _) => CounterVerdict::OnlyBase,
            _ => CounterVerdict::OnlyChange,
        };
        let drift = cv.zip(reference.and_then(|r| r.instructions.get(name))).map(|(c, &r)| drift(r, c));
        out.insert(name.clone(), CounterCmp { base: bv, change: cv, delta, threshold, verdict, drift });
    }
    out
}
