//! Number formatting shared by the report and the chart.

/// A time in ns as the original system printed it: ns below 1 µs, then µs, ms, s.
pub fn fmt_ns(ns: f64) -> String {
    if ns < 1e3 {
        format!("{ns:.1} ns")
    } else if ns < 1e6 {
        format!("{:.2} µs", ns / 1e3)
    } else if ns < 1e9 {
        format!("{:.2} ms", ns / 1e6)
    } else {
        format!("{:.2} s", ns / 1e9)
    }
}

/// A signed relative change with one decimal: `+12.3%`.
pub fn fmt_pct(x: f64) -> String {
    format!("{:+.1}%", round_to(x * 100.0, 1))
}

/// A signed relative change with two decimals, for instruction counts: `+0.52%`.
pub fn fmt_pct2(x: f64) -> String {
    format!("{:+.2}%", round_to(x * 100.0, 2))
}

/// `x` rounded to `decimals`, with a result of zero always +0 so that a count equal up to float
/// rounding (a per-call mean read back from JSON) prints `+0.00%`, never `-0.00%`.
fn round_to(x: f64, decimals: i32) -> f64 {
    let scale = 10f64.powi(decimals);
    let r = (x * scale).round() / scale;
    if r == 0.0 {
        0.0
    } else {
        r
    }
}

/// An unsigned fraction as a percentage: `12.3%`.
pub fn fmt_frac(x: f64) -> String {
    format!("{:.1}%", x * 100.0)
}

/// A count rounded to an integer with thousands separators: `12,815,675`.
pub fn fmt_count(n: f64) -> String {
    let digits = format!("{:.0}", n.abs());
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    if n < 0.0 {
        out.insert(0, '-');
    }
    out
}
