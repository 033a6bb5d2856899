//! The chart linked from the report, written by hand as SVG: one horizontal bar per compared
//! scenario for its timing delta, drawn over its noise band (light: ± the threshold; darker: ± the
//! measured A/A spread), with a dot at the instruction-count delta where one was counted.

use super::format::fmt_pct;
use super::rows::{Row, TimeVerdict};
use std::fmt::Write;

const WIDTH: f64 = 960.0;
const LABEL_W: f64 = 440.0;
const VALUE_W: f64 = 70.0;
const ROW_H: f64 = 22.0;
const TOP: f64 = 56.0;
const BOTTOM: f64 = 40.0;

/// The chart of every row with a timing delta, in the rows' order.
pub fn render(rows: &[Row], title: &str) -> String {
    let drawn: Vec<&Row> = rows.iter().filter(|r| r.delta.is_some()).collect();
    let height = TOP + ROW_H * drawn.len().max(1) as f64 + BOTTOM;
    let scale = Scale::fit(&drawn);
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" viewBox="0 0 {WIDTH} {height}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(s, r#"<rect x="0" y="0" width="{WIDTH}" height="{height}" fill="white"/>"#);
    let _ = writeln!(s, r#"<text x="10" y="20" font-size="15" font-weight="bold">{}</text>"#, escape(title));
    let _ = writeln!(
        s,
        r##"<text x="10" y="40" fill="#555">bar: timing delta (change vs base); light band: ± threshold; dark band: ± A/A spread; dot: instruction delta</text>"##
    );
    for (i, r) in drawn.iter().enumerate() {
        draw_row(&mut s, &scale, r, TOP + ROW_H * i as f64);
    }
    axis(&mut s, &scale, TOP, TOP + ROW_H * drawn.len().max(1) as f64);
    let _ = writeln!(s, "</svg>");
    s
}

/// Maps a relative change to an x coordinate, symmetric around 0.
struct Scale {
    max: f64,
    x0: f64,
    half: f64,
}

impl Scale {
    fn fit(rows: &[&Row]) -> Scale {
        let mut max = 0.10f64;
        for r in rows {
            max = max.max(r.delta.unwrap_or(0.0).abs()).max(r.threshold.value);
            if let Some(d) = r.counter.as_ref().and_then(|c| c.delta) {
                max = max.max(d.abs());
            }
        }
        let half = (WIDTH - LABEL_W - VALUE_W - 20.0) / 2.0;
        Scale { max: nice_ceiling(max), x0: LABEL_W + 10.0 + half, half }
    }

    fn x(&self, v: f64) -> f64 {
        self.x0 + v.clamp(-self.max, self.max) / self.max * self.half
    }
}

/// The smallest of 1, 2, 2.5, 5 times a power of ten that is >= x, so the ticks read well.
fn nice_ceiling(x: f64) -> f64 {
    let mut p = 10f64.powf(x.log10().floor());
    loop {
        for m in [1.0, 2.0, 2.5, 5.0] {
            if m * p >= x {
                return m * p;
            }
        }
        p *= 10.0;
    }
}

fn draw_row(s: &mut String, sc: &Scale, r: &Row, y: f64) {
    let d = r.delta.unwrap_or(0.0);
    let thr = r.threshold.value;
    let band = |s: &mut String, half: f64, fill: &str, class: &str| {
        let (a, b) = (sc.x(-half), sc.x(half));
        let _ = writeln!(s, r#"<rect class="{class}" x="{a:.1}" y="{:.1}" width="{:.1}" height="{:.1}" fill="{fill}"/>"#, y + 2.0, b - a, ROW_H - 4.0);
    };
    band(s, thr, "#e6e6e6", "band");
    if let Some(spread) = r.threshold.spread {
        band(s, spread, "#c8c8c8", "spread");
    }
    let color = match r.time {
        TimeVerdict::Regression => "#d73027",
        TimeVerdict::Improvement => "#1a9850",
        _ => "#4575b4",
    };
    let (a, b) = (sc.x(0.0).min(sc.x(d)), sc.x(0.0).max(sc.x(d)));
    let _ = writeln!(
        s,
        r#"<rect class="bar" x="{a:.1}" y="{:.1}" width="{:.1}" height="{:.1}" fill="{color}"><title>{}: {}</title></rect>"#,
        y + 6.0,
        (b - a).max(1.0),
        ROW_H - 12.0,
        escape(&r.scenario),
        fmt_pct(d)
    );
    if let Some(id) = r.counter.as_ref().and_then(|c| c.delta) {
        let _ = writeln!(s, r##"<circle class="instr" cx="{:.1}" cy="{:.1}" r="3.5" fill="#fdae61" stroke="#333"/>"##, sc.x(id), y + ROW_H / 2.0);
    }
    let _ = writeln!(s, r#"<text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"#, LABEL_W, y + 15.0, escape(&r.scenario));
    let _ = writeln!(s, r#"<text x="{:.1}" y="{:.1}">{}</text>"#, WIDTH - VALUE_W, y + 15.0, fmt_pct(d));
}

fn axis(s: &mut String, sc: &Scale, top: f64, bottom: f64) {
    let _ = writeln!(s, r##"<line x1="{0:.1}" y1="{top:.1}" x2="{0:.1}" y2="{bottom:.1}" stroke="#333"/>"##, sc.x(0.0));
    for v in [-sc.max, -sc.max / 2.0, 0.0, sc.max / 2.0, sc.max] {
        let x = sc.x(v);
        let _ = writeln!(s, r##"<line x1="{x:.1}" y1="{bottom:.1}" x2="{x:.1}" y2="{:.1}" stroke="#333"/>"##, bottom + 4.0);
        let _ = writeln!(s, r#"<text x="{x:.1}" y="{:.1}" text-anchor="middle">{}</text>"#, bottom + 16.0, fmt_pct(v));
    }
}

/// Escapes the five XML specials for text and attribute content.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            _ => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn c_bench_001_chart_scale_ends_on_a_round_number() {
        assert_eq!(super::nice_ceiling(0.105), 0.2);
        assert_eq!(super::nice_ceiling(0.3), 0.5);
        assert_eq!(super::nice_ceiling(0.25), 0.25);
        assert_eq!(super::nice_ceiling(1.07), 2.0);
        assert_eq!(super::nice_ceiling(6.0), 10.0);
    }
}
