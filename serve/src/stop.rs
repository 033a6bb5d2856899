//! Stop strings, matched on the output text as it streams.
//!
//! A stop string can span several tokens, so text that could be the start of one is held back
//! until the next bytes decide it. The stop string itself is never released. Matching is on UTF-8
//! bytes: a match of a valid UTF-8 stop string inside valid UTF-8 text always starts and ends on
//! character boundaries, and the release point never splits a character (an incomplete trailing
//! character is held too), so every released piece is valid UTF-8 on its own.

pub struct StopMatcher {
    stops: Vec<Vec<u8>>,
    pending: Vec<u8>,
    stopped: bool,
}

/// What one `push` released.
#[derive(Debug, PartialEq, Eq)]
pub struct Released {
    /// Text safe to send now (whole UTF-8 characters).
    pub text: String,
    /// A stop string matched: `text` is everything before it, and nothing more will come.
    pub stopped: bool,
}

impl StopMatcher {
    /// Empty stop strings are ignored (they would match before any text).
    pub fn new(stops: &[String]) -> Self {
        let stops = stops.iter().filter(|s| !s.is_empty()).map(|s| s.as_bytes().to_vec()).collect();
        StopMatcher { stops, pending: Vec::new(), stopped: false }
    }

    /// Feeds the next bytes of output. After a stop has matched, everything is swallowed.
    pub fn push(&mut self, bytes: &[u8]) -> Released {
        if self.stopped {
            return Released { text: String::new(), stopped: true };
        }
        self.pending.extend_from_slice(bytes);
        if let Some(at) = self.earliest_match() {
            self.stopped = true;
            let text = lossy(&self.pending[..at]);
            self.pending.clear();
            return Released { text, stopped: true };
        }
        let hold = self.holdback().max(incomplete_utf8_tail(&self.pending));
        let cut = self.pending.len() - hold;
        let text = lossy(&self.pending[..cut]);
        self.pending.drain(..cut);
        Released { text, stopped: false }
    }

    /// The end of the output: releases whatever is held (it did not turn into a stop string).
    pub fn flush(&mut self) -> String {
        let text = if self.stopped { String::new() } else { lossy(&self.pending) };
        self.pending.clear();
        text
    }

    pub fn is_stopped(&self) -> bool {
        self.stopped
    }

    /// Byte offset of the first (leftmost) stop-string occurrence in `pending`.
    fn earliest_match(&self) -> Option<usize> {
        self.stops.iter().filter_map(|s| find(&self.pending, s)).min()
    }

    /// Length of the longest suffix of `pending` that is a proper prefix of some stop string.
    /// Earlier released bytes cannot begin a match: any position that could is inside this suffix.
    fn holdback(&self) -> usize {
        let p = &self.pending;
        let mut best = 0;
        for s in &self.stops {
            let max = (s.len() - 1).min(p.len());
            for n in (best + 1..=max).rev() {
                if p[p.len() - n..] == s[..n] {
                    best = n;
                    break;
                }
            }
        }
        best
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    if needle.len() > hay.len() {
        return None;
    }
    (0..=hay.len() - needle.len()).find(|&i| &hay[i..i + needle.len()] == needle)
}

/// Bytes at the end of `b` that start a UTF-8 character whose remaining bytes have not arrived.
fn incomplete_utf8_tail(b: &[u8]) -> usize {
    for back in 1..=b.len().min(3) {
        let c = b[b.len() - back];
        if c & 0xC0 == 0x80 {
            continue; // a continuation byte: look further back for the lead byte
        }
        let need = match c {
            0xC0..=0xDF => 2,
            0xE0..=0xEF => 3,
            0xF0..=0xF7 => 4,
            _ => 1,
        };
        return if need > back { back } else { 0 };
    }
    0
}

fn lossy(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(stops: &[&str], pieces: &[&[u8]]) -> (Vec<String>, bool, String) {
        let stops: Vec<String> = stops.iter().map(|s| s.to_string()).collect();
        let mut m = StopMatcher::new(&stops);
        let mut out = Vec::new();
        let mut stopped = false;
        for p in pieces {
            let r = m.push(p);
            out.push(r.text);
            stopped |= r.stopped;
        }
        (out, stopped, m.flush())
    }

    #[test]
    fn no_stops_releases_everything_at_once() {
        let (out, stopped, tail) = run(&[], &[b"ab", b"cd"]);
        assert_eq!(out, ["ab", "cd"]);
        assert!(!stopped);
        assert_eq!(tail, "");
    }

    #[test]
    fn holds_back_a_possible_prefix_then_releases_it() {
        // "EN" could start "END": held; "x" proves it is not.
        let (out, stopped, tail) = run(&["END"], &[b"abEN", b"x"]);
        assert_eq!(out, ["ab", "ENx"]);
        assert!(!stopped);
        assert_eq!(tail, "");
    }

    #[test]
    fn match_across_three_tokens_is_removed() {
        let (out, stopped, tail) = run(&["END"], &[b"hi E", b"N", b"D tail"]);
        assert_eq!(out, ["hi ", "", ""]);
        assert!(stopped);
        assert_eq!(tail, "");
    }

    #[test]
    fn held_text_is_flushed_at_the_end() {
        let (out, stopped, tail) = run(&["END"], &[b"xE"]);
        assert_eq!(out, ["x"]);
        assert!(!stopped);
        assert_eq!(tail, "E");
    }

    #[test]
    fn overlapping_candidates() {
        // "aab" inside "aaab": after "aa", "aa" is held; a third "a" releases one "a" only.
        let (out, stopped, _) = run(&["aab"], &[b"aa", b"a", b"b"]);
        assert_eq!(out, ["", "a", ""]);
        assert!(stopped);
        // Two stops: the leftmost occurrence wins even if the other completes first in the list.
        let (out, stopped, _) = run(&["cd", "bcx"], &[b"abcd"]);
        assert_eq!(out, ["ab"]);
        assert!(stopped);
        let (out, _, _) = run(&["xyz", "b"], &[b"abxyz"]);
        assert_eq!(out, ["a"]);
    }

    #[test]
    fn multibyte_stop_and_split_characters() {
        // "é" is C3 A9; the stop "é!" arrives byte by byte.
        let (out, stopped, _) = run(&["é!"], &[b"caf", &[0xC3], &[0xA9], b"!", b"more"]);
        assert_eq!(out, ["caf", "", "", "", ""]);
        assert!(stopped);
        // A 4-byte character split across tokens is held until complete, never released broken.
        let crab = "🦀".as_bytes();
        let (out, stopped, tail) = run(&["STOP"], &[b"a", &crab[..1], &crab[1..3], &crab[3..]]);
        assert_eq!(out, ["a", "", "", "🦀"]);
        assert!(!stopped);
        assert_eq!(tail, "");
        // Without any stop strings the same applies.
        let (out, _, _) = run(&[], &[&crab[..2], &crab[2..]]);
        assert_eq!(out, ["", "🦀"]);
        // The stop string is a multi-byte character that shares its lead byte with other text.
        let (out, stopped, _) = run(&["ü"], &["ä".as_bytes(), "bü".as_bytes()]);
        assert_eq!(out, ["ä", "b"]);
        assert!(stopped);
    }

    #[test]
    fn after_stop_everything_is_swallowed() {
        let mut m = StopMatcher::new(&["x".to_string()]);
        assert!(m.push(b"ax").stopped);
        assert_eq!(m.push(b"more"), Released { text: String::new(), stopped: true });
        assert_eq!(m.flush(), "");
        assert!(m.is_stopped());
    }

    #[test]
    fn empty_stop_strings_are_ignored() {
        let (out, stopped, _) = run(&[""], &[b"abc"]);
        assert_eq!(out, ["abc"]);
        assert!(!stopped);
    }

    #[test]
    fn invalid_utf8_never_panics_and_is_replaced_at_flush() {
        let (out, _, tail) = run(&["zz"], &[&[0xFF, b'a'], &[0xE2, 0x82]]);
        assert_eq!(out, ["\u{FFFD}a", ""]);
        assert_eq!(tail, "\u{FFFD}");
    }
}
