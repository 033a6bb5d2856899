//! Folding the rounds of one side into one value per scenario.
//!
//! Each round is a full criterion run; a scenario's value for the side is the median of its
//! per-round means, so one round disturbed by a neighbour on the machine moves it little.

use super::criterion::{Estimate, RunResults};
use std::collections::BTreeMap;

/// One scenario on one side, over all rounds.
#[derive(Clone, Debug, PartialEq)]
pub enum Side {
    Valid { median_ns: f64, rounds_ns: Vec<f64> },
    /// Some round gave no usable value, or the scenario ran in only some rounds.
    Invalid(String),
}

impl Side {
    pub fn median(&self) -> Option<f64> {
        match self {
            Side::Valid { median_ns, .. } => Some(*median_ns),
            Side::Invalid(_) => None,
        }
    }
}

/// The median of `values` (the mean of the middle two for an even count); NaN for none.
pub fn median(values: &[f64]) -> f64 {
    if values.is_empty() {
        return f64::NAN;
    }
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    let mid = v.len() / 2;
    if v.len() % 2 == 1 {
        v[mid]
    } else {
        (v[mid - 1] + v[mid]) / 2.0
    }
}

/// (change - base) / base: +0.10 is 10% slower (or 10% more instructions).
pub fn relative_change(base: f64, change: f64) -> f64 {
    (change - base) / base
}

/// The median per scenario over `rounds`. A scenario absent from some rounds, or invalid in any,
/// is [`Side::Invalid`] with the reason: a side is only as good as its worst round.
pub fn aggregate_rounds(rounds: &[RunResults]) -> BTreeMap<String, Side> {
    let mut names: Vec<&String> = rounds.iter().flat_map(|r| r.keys()).collect();
    names.sort();
    names.dedup();
    names.into_iter().map(|name| (name.clone(), aggregate_one(name, rounds))).collect()
}

fn aggregate_one(name: &str, rounds: &[RunResults]) -> Side {
    let mut values = Vec::with_capacity(rounds.len());
    for round in rounds {
        match round.get(name) {
            Some(Estimate::Ns(ns)) => values.push(*ns),
            Some(Estimate::Invalid(why)) => return Side::Invalid(why.clone()),
            None => {}
        }
    }
    if values.len() < rounds.len() {
        let n = values.len();
        return Side::Invalid(format!("ran in {n} of {} rounds", rounds.len()));
    }
    Side::Valid { median_ns: median(&values), rounds_ns: values }
}
