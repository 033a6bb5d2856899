//! Reading one criterion run: every `<dir>/**/new/estimates.json`, the mean point estimate in ns.
//!
//! The scenario name is the path of the directory holding `new/`, relative to `<dir>`, with `/`
//! separators (`add/large_f32_threads=1-internal/4194304`). criterion's own `report/` tree is
//! skipped, and so are `base/` and `change/` (only `new/` holds this run's numbers). As in the
//! original system the value is `mean.point_estimate` (not the median, not the CI bounds).

use super::CompareError;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// One scenario's value in one run.
#[derive(Clone, Debug, PartialEq)]
pub enum Estimate {
    /// The mean time per iteration, in ns (finite and > 0).
    Ns(f64),
    /// The file exists but gives no usable mean; the text names the file and says why.
    Invalid(String),
}

/// One run of one side: scenario name -> estimate.
pub type RunResults = BTreeMap<String, Estimate>;

/// Reads every `new/estimates.json` below `dir`.
///
/// Errors: `dir` missing, nothing found below it, an unreadable file, or a file that is not JSON
/// (each naming the path). A JSON file without a positive finite `mean.point_estimate` is not an
/// error here: its scenario is returned as [`Estimate::Invalid`] so that the report can show it.
pub fn read_run(dir: &Path) -> Result<RunResults, CompareError> {
    if !dir.is_dir() {
        return Err(CompareError::MissingDir(dir.to_path_buf()));
    }
    let mut files = Vec::new();
    find_estimates(dir, dir, &mut files)?;
    if files.is_empty() {
        return Err(CompareError::NoResults(dir.to_path_buf()));
    }
    let mut out = RunResults::new();
    for (name, path) in files {
        out.insert(name, read_estimate(&path)?);
    }
    Ok(out)
}

/// Collects (scenario name, file) for every `new/estimates.json` below `dir`, skipping the
/// top-level `report/` tree.
fn find_estimates(root: &Path, dir: &Path, out: &mut Vec<(String, PathBuf)>) -> Result<(), CompareError> {
    let entries = std::fs::read_dir(dir).map_err(|error| CompareError::Io { path: dir.to_path_buf(), error })?;
    for entry in entries {
        let entry = entry.map_err(|error| CompareError::Io { path: dir.to_path_buf(), error })?;
        let path = entry.path();
        if !path.is_dir() {
            continue;
        }
        if dir == root && entry.file_name() == "report" {
            continue;
        }
        // A scenario may itself be called `new` (`group/new/new/estimates.json`): only a `new`
        // holding estimates.json is criterion's; anything else is walked like any directory.
        let file = path.join("estimates.json");
        if entry.file_name() == "new" && file.is_file() {
            if let Some(name) = scenario_name(root, dir) {
                out.push((name, file));
            }
        } else {
            find_estimates(root, &path, out)?;
        }
    }
    Ok(())
}

/// `dir` relative to `root`, joined with `/` whatever the platform; None for `root` itself.
fn scenario_name(root: &Path, dir: &Path) -> Option<String> {
    let rel = dir.strip_prefix(root).ok()?;
    let parts: Vec<String> = rel.components().map(|c| c.as_os_str().to_string_lossy().into_owned()).collect();
    if parts.is_empty() {
        None
    } else {
        Some(parts.join("/"))
    }
}

/// Parses one estimates.json. Malformed JSON is an error; a missing, zero, negative or non-finite
/// mean is an [`Estimate::Invalid`] naming the file.
pub fn read_estimate(path: &Path) -> Result<Estimate, CompareError> {
    let text = std::fs::read_to_string(path).map_err(|error| CompareError::Io { path: path.to_path_buf(), error })?;
    let json: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| CompareError::Json { path: path.to_path_buf(), error: e.to_string() })?;
    let mean = &json["mean"]["point_estimate"];
    let why = match mean.as_f64() {
        Some(ns) if ns.is_finite() && ns > 0.0 => return Ok(Estimate::Ns(ns)),
        Some(ns) => format!("mean.point_estimate is {ns}, not a positive time"),
        None if mean.is_null() => "no mean.point_estimate".to_string(),
        None => format!("mean.point_estimate is {mean}, not a number"),
    };
    Ok(Estimate::Invalid(format!("{}: {why}", path.display())))
}
