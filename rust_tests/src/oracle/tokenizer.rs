//! Tokenizer oracles: BPE by repeated full rescans (the textbook algorithm, quadratic and obviously
//! right) and Hugging Face's split-delimiter behaviours as list operations, as its documentation
//! describes them.

use std::collections::HashMap;

/// BPE over one word's initial symbols: repeatedly merge the adjacent pair with the lowest rank
/// (the leftmost among equal ranks) until no pair has a merge. `merges[(a, b)] = (rank, result)`.
pub fn bpe(mut symbols: Vec<u32>, merges: &HashMap<(u32, u32), (u32, u32)>) -> Vec<u32> {
    loop {
        let mut best: Option<(u32, usize, u32)> = None;
        for i in 0..symbols.len().saturating_sub(1) {
            if let Some(&(rank, result)) = merges.get(&(symbols[i], symbols[i + 1])) {
                if best.map_or(true, |(r, _, _)| rank < r) {
                    best = Some((rank, i, result));
                }
            }
        }
        match best {
            None => return symbols,
            Some((_, i, result)) => {
                symbols[i] = result;
                symbols.remove(i + 1);
            }
        }
    }
}

/// How a split keeps its delimiters (Hugging Face `SplitDelimiterBehavior`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Behavior {
    Removed,
    Isolated,
    MergedWithPrevious,
    MergedWithNext,
    Contiguous,
}

impl Behavior {
    pub const ALL: [Behavior; 5] = [
        Behavior::Removed,
        Behavior::Isolated,
        Behavior::MergedWithPrevious,
        Behavior::MergedWithNext,
        Behavior::Contiguous,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Behavior::Removed => "Removed",
            Behavior::Isolated => "Isolated",
            Behavior::MergedWithPrevious => "MergedWithPrevious",
            Behavior::MergedWithNext => "MergedWithNext",
            Behavior::Contiguous => "Contiguous",
        }
    }
}

/// Splits `text` at every occurrence of the single character `delim` (each occurrence is its own
/// match), then applies `behavior`; `invert` swaps which spans are delimiters. Empty pieces are
/// dropped, as Hugging Face drops them.
pub fn split(text: &str, delim: char, behavior: Behavior, invert: bool) -> Vec<String> {
    // (span, is_delimiter) in order, covering the text
    let mut spans: Vec<(String, bool)> = Vec::new();
    let mut gap = String::new();
    for c in text.chars() {
        if c == delim {
            if !gap.is_empty() {
                spans.push((std::mem::take(&mut gap), invert));
            }
            spans.push((c.to_string(), !invert));
        } else {
            gap.push(c);
        }
    }
    if !gap.is_empty() {
        spans.push((gap, invert));
    }
    let pieces: Vec<String> = match behavior {
        Behavior::Isolated => spans.into_iter().map(|(s, _)| s).collect(),
        Behavior::Removed => spans.into_iter().filter(|(_, d)| !d).map(|(s, _)| s).collect(),
        Behavior::MergedWithPrevious => {
            let mut out: Vec<String> = Vec::new();
            let mut prev_delim = false;
            for (s, d) in spans {
                if d && !prev_delim && !out.is_empty() {
                    out.last_mut().unwrap().push_str(&s);
                } else {
                    out.push(s);
                }
                prev_delim = d;
            }
            out
        }
        Behavior::MergedWithNext => {
            // the mirror image: walk from the end
            let mut out: Vec<String> = Vec::new();
            let mut next_delim = false;
            for (s, d) in spans.into_iter().rev() {
                if d && !next_delim && !out.is_empty() {
                    let last = out.last_mut().unwrap();
                    *last = format!("{}{}", s, last);
                } else {
                    out.push(s);
                }
                next_delim = d;
            }
            out.reverse();
            out
        }
        Behavior::Contiguous => {
            let mut out: Vec<(String, bool)> = Vec::new();
            for (s, d) in spans {
                match out.last_mut() {
                    Some((last, ld)) if *ld == d => last.push_str(&s),
                    _ => out.push((s, d)),
                }
            }
            out.into_iter().map(|(s, _)| s).collect()
        }
    };
    pieces.into_iter().filter(|p| !p.is_empty()).collect()
}
