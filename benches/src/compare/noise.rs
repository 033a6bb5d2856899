//! Noise measured, not assumed: the per-scenario spread of A/A runs (the same revision on both
//! sides), kept in a committed file per machine (`benches/noise/<machine>.json`), and the rule that
//! turns a spread into the threshold a change must exceed to be called a regression.

use super::stats::{median, relative_change, Side};
use super::CompareError;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;

/// The machine a noise file (or the reference) was measured on.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct Machine {
    /// The file-name slug, e.g. `amd-epyc-2cpu`.
    pub name: String,
    /// The CPU model from /proc/cpuinfo.
    pub cpu: String,
    /// Logical CPUs online.
    pub cores: usize,
}

/// One A/A run that contributed to a noise file.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct NoiseRun {
    /// UTC, `YYYY-MM-DD HH:MM`.
    pub date: String,
    pub revision: String,
    pub rounds: usize,
    pub benches: Vec<String>,
    pub filter: Option<String>,
    pub criterion_args: Vec<String>,
}

/// One A/A run's measurement of one scenario.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct NoiseSample {
    /// Index into [`NoiseFile::runs`] of the run that measured it.
    pub run: usize,
    /// The largest distance of any single A/A round (either side) from the median of all of them,
    /// relative to that median. A round is one criterion mean, so this is the scatter the median
    /// of a few rounds is drawn from.
    pub spread: f64,
    /// The A/A run's own delta of medians (change side vs base side), for information.
    pub aa_delta: f64,
    /// Rounds per side in that run.
    pub rounds: usize,
}

/// One scenario's noise: every A/A measurement, and the spread thresholds use.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct ScenarioNoise {
    /// The largest spread any recorded A/A run measured. Noise is a property of the machine and
    /// its neighbours; a quiet calibration run must not lower the bar for the next busy hour, so
    /// the file keeps the worst it has seen (`--aa-fresh` starts a machine's file over).
    pub spread: f64,
    /// Oldest first.
    pub history: Vec<NoiseSample>,
}

/// The committed noise file of one machine.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct NoiseFile {
    pub machine: Machine,
    /// The threshold rule in words, as it was when the file was written.
    pub rule: String,
    pub runs: Vec<NoiseRun>,
    pub scenarios: BTreeMap<String, ScenarioNoise>,
    /// Instruction-count spread per counter scenario over the A/A run's callgrind runs (both
    /// sides): 0 where the count was exactly repeatable.
    #[serde(default)]
    pub counters: BTreeMap<String, f64>,
}

impl NoiseFile {
    pub fn new(machine: Machine) -> NoiseFile {
        NoiseFile { machine, rule: TIME_RULE.describe(), runs: Vec::new(), scenarios: BTreeMap::new(), counters: BTreeMap::new() }
    }

    /// The file at `path`, or None when there is none yet.
    pub fn load(path: &Path) -> Result<Option<NoiseFile>, CompareError> {
        load_json(path)
    }

    pub fn save(&self, path: &Path) -> Result<(), CompareError> {
        save_json(path, self)
    }

    pub fn spread(&self, scenario: &str) -> Option<f64> {
        self.scenarios.get(scenario).map(|s| s.spread)
    }

    /// Adds an A/A run: each scenario it measured gains a history entry and keeps the largest
    /// spread seen; scenarios it did not run (narrowed by `--filter`) are left as they were.
    /// Count spreads likewise keep their maximum.
    pub fn record(&mut self, run: NoiseRun, measured: BTreeMap<String, NoiseSample>, counters: BTreeMap<String, f64>) {
        let index = self.runs.len();
        self.runs.push(run);
        for (name, mut sample) in measured {
            sample.run = index;
            let entry = self.scenarios.entry(name).or_insert(ScenarioNoise { spread: 0.0, history: Vec::new() });
            entry.spread = entry.spread.max(sample.spread);
            entry.history.push(sample);
        }
        for (name, spread) in counters {
            let kept = self.counters.entry(name).or_insert(0.0);
            *kept = kept.max(spread);
        }
        self.rule = TIME_RULE.describe();
    }
}

/// The spread of one scenario's A/A rounds: max |x - M| / M over the rounds of both sides, M the
/// median of all of them.
pub fn aa_spread(base_rounds: &[f64], change_rounds: &[f64]) -> f64 {
    let all: Vec<f64> = base_rounds.iter().chain(change_rounds).copied().collect();
    let m = median(&all);
    all.iter().map(|x| (x - m).abs() / m).fold(0.0, f64::max)
}

/// The noise of every scenario valid on both sides of an A/A run.
pub fn measure_aa(base: &BTreeMap<String, Side>, change: &BTreeMap<String, Side>) -> BTreeMap<String, NoiseSample> {
    let mut out = BTreeMap::new();
    for (name, b) in base {
        let (Side::Valid { median_ns: bm, rounds_ns: br }, Some(Side::Valid { median_ns: cm, rounds_ns: cr })) = (b, change.get(name)) else {
            continue;
        };
        let sample = NoiseSample { run: 0, spread: aa_spread(br, cr), aa_delta: relative_change(*bm, *cm), rounds: br.len() };
        out.insert(name.clone(), sample);
    }
    out
}

/// How a measured spread becomes a threshold: `max(factor x spread, floor)`; `default` where no
/// spread was measured.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ThresholdRule {
    pub factor: f64,
    pub floor: f64,
    pub default: f64,
}

/// Timing rule. Factor 3: a new round may scatter further than the few A/A rounds did, and the
/// delta is the difference of two medians, each as noisy as the rounds. Floor 5%: below that
/// timing is not trusted on a shared 2-core machine even when an A/A run happened to be quiet
/// (instruction counts cover the range below). Default 30% where no A/A data exists: the original
/// system's alert level, above the ~27% worst case it assumed.
pub const TIME_RULE: ThresholdRule = ThresholdRule { factor: 3.0, floor: 0.05, default: 0.30 };

/// Instruction-count rule. Counts are normally exactly repeatable (spread 0), so the floor
/// decides: 0.5%, under the 1% the issue asks to see. The spread is measured in every run (each
/// side's count is taken several times) and in A/A runs, and raises the threshold where a count
/// is not exactly repeatable.
pub const COUNT_RULE: ThresholdRule = ThresholdRule { factor: 3.0, floor: 0.005, default: 0.005 };

/// The threshold for one scenario, with the spread it came from (None: the default was used).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Threshold {
    pub value: f64,
    pub spread: Option<f64>,
}

impl ThresholdRule {
    pub fn threshold(&self, spread: Option<f64>) -> Threshold {
        let value = match spread {
            Some(s) => (self.factor * s).max(self.floor),
            None => self.default,
        };
        Threshold { value, spread }
    }

    pub fn describe(&self) -> String {
        format!(
            "threshold = max({} x A/A spread, {:.1}%); {:.1}% where no A/A data exists",
            self.factor,
            self.floor * 100.0,
            self.default * 100.0
        )
    }
}

/// Reads a JSON file into `T`; Ok(None) when it does not exist; errors name the file.
pub(crate) fn load_json<T: for<'de> Deserialize<'de>>(path: &Path) -> Result<Option<T>, CompareError> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(error) => return Err(CompareError::Io { path: path.to_path_buf(), error }),
    };
    serde_json::from_str(&text).map(Some).map_err(|e| CompareError::Json { path: path.to_path_buf(), error: e.to_string() })
}

/// Writes `value` as pretty JSON with a trailing newline, creating the directory.
pub(crate) fn save_json<T: Serialize>(path: &Path, value: &T) -> Result<(), CompareError> {
    let io = |error| CompareError::Io { path: path.to_path_buf(), error };
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(io)?;
    }
    let mut text = serde_json::to_string_pretty(value).expect("plain data serialises");
    text.push('\n');
    std::fs::write(path, text).map_err(io)
}
