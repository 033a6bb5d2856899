//! The logic of `bench-compare` (issue 8), apart from its git and process plumbing so that it can be
//! unit-tested on synthetic criterion result directories:
//!
//! - [`criterion`] reads one criterion run (`<dir>/**/new/estimates.json`, the mean in ns);
//! - [`stats`] folds several rounds of one side into a median per scenario;
//! - [`noise`] keeps the per-scenario spread measured by A/A runs and turns it into thresholds;
//! - [`counters`] compares instruction counts (callgrind) and the drift from a pinned reference;
//! - [`rows`] puts both together into one verdict per scenario, sorts worst first, decides the gate;
//! - [`report`] and [`svg`] render the markdown report and its chart.
//!
//! The original system's comparison (`../shared/reference/original-system.md` A.3) used fixed
//! thresholds (15% / 30%) calibrated against an assumed runner noise, ran base and change one after
//! the other, dropped one-sided scenarios and never gated. Here every threshold comes from noise
//! measured on the machine, rounds are interleaved by the CLI, one-sided scenarios are listed, load
//! independent instruction counts sit beside the times, and `--gate` can fail a job.

pub mod counters;
pub mod criterion;
pub mod format;
pub mod noise;
pub mod report;
pub mod rows;
pub mod stats;
pub mod svg;

#[cfg(test)]
mod tests;

use std::fmt;
use std::path::PathBuf;

/// A failure that stops a comparison. Each names the file or directory it is about.
#[derive(Debug)]
pub enum CompareError {
    /// A criterion result directory (or a noise/reference file's directory) does not exist.
    MissingDir(PathBuf),
    /// A directory holds no `new/estimates.json` at all.
    NoResults(PathBuf),
    Io { path: PathBuf, error: std::io::Error },
    /// A JSON file that does not parse (criterion's estimates, the noise file, the reference).
    Json { path: PathBuf, error: String },
}

impl fmt::Display for CompareError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CompareError::MissingDir(p) => write!(f, "{}: no such directory", p.display()),
            CompareError::NoResults(p) => {
                write!(f, "{}: no criterion results (no */new/estimates.json below it)", p.display())
            }
            CompareError::Io { path, error } => write!(f, "{}: {error}", path.display()),
            CompareError::Json { path, error } => write!(f, "{}: malformed JSON: {error}", path.display()),
        }
    }
}

impl std::error::Error for CompareError {}
