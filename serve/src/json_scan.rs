//! A JSON scanner over text that may be cut short: where a value ends, an object's members and
//! an array's elements, with "not yet known" kept apart from "not JSON". Tool calls stream with
//! it (their arguments go out as the model writes them) and their arguments are taken as the raw
//! text the model wrote, so streamed and whole answers carry the same string.

/// How far a value reaches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scan {
    /// It ends just before this byte.
    Done(usize),
    /// The text ends inside it.
    Incomplete,
    /// It is not JSON.
    Invalid,
}

pub fn skip_ws(b: &[u8], mut i: usize) -> usize {
    while i < b.len() && matches!(b[i], b' ' | b'\t' | b'\n' | b'\r') {
        i += 1;
    }
    i
}

fn scan_string(b: &[u8], mut i: usize) -> Scan {
    i += 1; // the opening quote
    while i < b.len() {
        match b[i] {
            b'"' => return Scan::Done(i + 1),
            b'\\' => i += 2,
            c if c < 0x20 => return Scan::Invalid,
            _ => i += 1,
        }
    }
    Scan::Incomplete
}

/// The value starting at b[i] (no leading whitespace).
pub fn scan_value(b: &[u8], i: usize) -> Scan {
    match b.get(i) {
        None => Scan::Incomplete,
        Some(b'"') => scan_string(b, i),
        Some(b'{') | Some(b'[') => {
            let mut depth = 0usize;
            let mut j = i;
            while j < b.len() {
                match b[j] {
                    b'"' => match scan_string(b, j) {
                        Scan::Done(e) => {
                            j = e;
                            continue;
                        }
                        other => return other,
                    },
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => {
                        depth -= 1;
                        if depth == 0 {
                            return Scan::Done(j + 1);
                        }
                    }
                    _ => {}
                }
                j += 1;
            }
            Scan::Incomplete
        }
        Some(c) if c.is_ascii_digit() || matches!(c, b'-' | b't' | b'f' | b'n') => {
            let mut j = i;
            while j < b.len() && !matches!(b[j], b',' | b'}' | b']' | b' ' | b'\t' | b'\n' | b'\r') {
                j += 1;
            }
            if j == b.len() {
                Scan::Incomplete // a number or literal may go on
            } else {
                Scan::Done(j)
            }
        }
        Some(_) => Scan::Invalid,
    }
}

/// A member of an object: its key, where its value starts and how far it reaches.
#[derive(Clone, Debug, PartialEq)]
pub struct Member {
    pub key: String,
    pub start: usize,
    pub value: Scan,
}

/// The members of the object at b[i] (its '{') as far as the text goes, and how far the object
/// reaches.
pub fn object_members(b: &[u8], i: usize) -> (Vec<Member>, Scan) {
    let mut members = Vec::new();
    if b.get(i) != Some(&b'{') {
        return (members, if i >= b.len() { Scan::Incomplete } else { Scan::Invalid });
    }
    let mut j = skip_ws(b, i + 1);
    if b.get(j) == Some(&b'}') {
        return (members, Scan::Done(j + 1));
    }
    loop {
        match b.get(j) {
            None => return (members, Scan::Incomplete),
            Some(b'"') => {}
            Some(_) => return (members, Scan::Invalid),
        }
        let key_end = match scan_string(b, j) {
            Scan::Done(e) => e,
            other => return (members, other),
        };
        let key: String = match std::str::from_utf8(&b[j..key_end]).ok().and_then(|k| serde_json::from_str(k).ok()) {
            Some(k) => k,
            None => return (members, Scan::Invalid),
        };
        j = skip_ws(b, key_end);
        match b.get(j) {
            None => return (members, Scan::Incomplete),
            Some(b':') => {}
            Some(_) => return (members, Scan::Invalid),
        }
        let start = skip_ws(b, j + 1);
        let value = scan_value(b, start);
        members.push(Member { key, start, value });
        let Scan::Done(end) = value else { return (members, value) };
        j = skip_ws(b, end);
        match b.get(j) {
            None => return (members, Scan::Incomplete),
            Some(b',') => j = skip_ws(b, j + 1),
            Some(b'}') => return (members, Scan::Done(j + 1)),
            Some(_) => return (members, Scan::Invalid),
        }
    }
}

/// Where the elements of the array at b[i] (its '[') start, as far as the text goes, and how far
/// the array reaches.
pub fn array_elements(b: &[u8], i: usize) -> (Vec<usize>, Scan) {
    let mut starts = Vec::new();
    if b.get(i) != Some(&b'[') {
        return (starts, if i >= b.len() { Scan::Incomplete } else { Scan::Invalid });
    }
    let mut j = skip_ws(b, i + 1);
    if b.get(j) == Some(&b']') {
        return (starts, Scan::Done(j + 1));
    }
    loop {
        if j >= b.len() {
            return (starts, Scan::Incomplete);
        }
        starts.push(j);
        let end = match scan_value(b, j) {
            Scan::Done(e) => e,
            other => return (starts, other),
        };
        j = skip_ws(b, end);
        match b.get(j) {
            None => return (starts, Scan::Incomplete),
            Some(b',') => j = skip_ws(b, j + 1),
            Some(b']') => return (starts, Scan::Done(j + 1)),
            Some(_) => return (starts, Scan::Invalid),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_members_and_elements_as_far_as_they_go() {
        let t = br#"{"a": [1, {"b": "x\"}"}], "c" : true }"#;
        assert_eq!(scan_value(t, 0), Scan::Done(t.len()));
        let (m, s) = object_members(t, 0);
        assert_eq!(s, Scan::Done(t.len()));
        assert_eq!(m.iter().map(|m| m.key.as_str()).collect::<Vec<_>>(), ["a", "c"]);
        assert_eq!(&t[m[0].start..m[0].start + 1], b"[");
        for cut in 0..t.len() {
            let (m, s) = object_members(&t[..cut], 0);
            assert_eq!(s, Scan::Incomplete, "cut at {cut}");
            assert!(m.len() <= 2);
        }
        assert_eq!(scan_value(b"12", 0), Scan::Incomplete);
        assert_eq!(scan_value(b"12,", 0), Scan::Done(2));
        assert_eq!(scan_value(b"x", 0), Scan::Invalid);
        assert_eq!(object_members(b"{\"a\" 1}", 0).1, Scan::Invalid);
        let (e, s) = array_elements(b"[ {\"x\":1} , 2 ]", 0);
        assert_eq!((e, s), (vec![2, 12], Scan::Done(15)));
        assert_eq!(array_elements(b"[ {\"x\":1} , ", 0), (vec![2], Scan::Incomplete));
        assert_eq!(array_elements(b"[]", 0), (vec![], Scan::Done(2)));
    }
}
