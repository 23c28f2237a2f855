//! Statistics, the result rows, the printed table and the JSON report.

use serde_json::{json, Value};
use std::time::{Duration, Instant};

/// Median of a sample (mean of the two middle values for an even count); NaN when empty.
pub fn median(values: &[f64]) -> f64 {
    percentile(values, 50.0)
}

/// Arithmetic mean of a sample; NaN when empty.
pub fn mean(values: &[f64]) -> f64 {
    values.iter().sum::<f64>() / values.len() as f64
}

/// Linear-interpolated percentile `p` (0..=100) of a sample; NaN when empty.
pub fn percentile(values: &[f64], p: f64) -> f64 {
    if values.is_empty() {
        return f64::NAN;
    }
    let mut sorted = values.to_vec();
    sorted.sort_by(|a, b| a.total_cmp(b));
    let rank = (p / 100.0) * (sorted.len() - 1) as f64;
    let low = rank.floor() as usize;
    let high = rank.ceil() as usize;
    sorted[low] + (sorted[high] - sorted[low]) * (rank - low as f64)
}

pub fn micros(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

pub fn millis(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// Which direction is better for a row's metric.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Better {
    Lower,
    Higher,
}

/// The Python store's figure for a row (PYTHON_STORE.md §4), in the row's unit.
#[derive(Debug, Clone)]
pub struct Python {
    /// The value the ratio is computed against: for a range, the end most favourable to Python.
    pub value: f64,
    pub p95: Option<f64>,
    /// As PYTHON_STORE.md states it.
    pub text: String,
}

impl Python {
    pub fn new(value: f64, text: &str) -> Python {
        Python { value, p95: None, text: text.to_string() }
    }

    pub fn with_p95(mut self, p95: f64) -> Python {
        self.p95 = Some(p95);
        self
    }
}

/// What plain SQLite or a bare process needs for the same work: the floor a row's figure is
/// compared with (in the row's unit).
#[derive(Debug, Clone)]
pub struct Floor {
    pub value: f64,
    /// What the floor does, e.g. `bare commits, same rows`.
    pub what: String,
}

impl Floor {
    pub fn new(value: f64, what: impl Into<String>) -> Floor {
        Floor { value, what: what.into() }
    }
}

/// One line of the table.
#[derive(Debug, Clone)]
pub struct Row {
    /// Workload letter and case, e.g. `a fork chain D=1000`.
    pub workload: String,
    /// What is measured, e.g. `per fork`.
    pub metric: String,
    pub unit: &'static str,
    pub better: Better,
    pub value: f64,
    pub p95: Option<f64>,
    pub python: Option<Python>,
    pub floor: Option<Floor>,
    pub note: Option<String>,
}

impl Row {
    pub fn new(workload: impl Into<String>, metric: impl Into<String>, unit: &'static str) -> Row {
        Row {
            workload: workload.into(),
            metric: metric.into(),
            unit,
            better: Better::Lower,
            value: f64::NAN,
            p95: None,
            python: None,
            floor: None,
            note: None,
        }
    }

    pub fn value(mut self, value: f64) -> Row {
        self.value = value;
        self
    }

    pub fn p95(mut self, p95: f64) -> Row {
        self.p95 = Some(p95);
        self
    }

    pub fn higher_is_better(mut self) -> Row {
        self.better = Better::Higher;
        self
    }

    pub fn python(mut self, python: Python) -> Row {
        self.python = Some(python);
        self
    }

    pub fn floor(mut self, floor: Floor) -> Row {
        self.floor = Some(floor);
        self
    }

    pub fn note(mut self, note: impl Into<String>) -> Row {
        self.note = Some(note.into());
        self
    }

    /// How many times better memctl is than the Python store (> 1: memctl is better).
    fn speedup(&self, memctl: f64, python: f64) -> f64 {
        match self.better {
            Better::Lower => python / memctl,
            Better::Higher => memctl / python,
        }
    }

    pub fn ratio(&self) -> Option<f64> {
        let python = self.python.as_ref()?;
        let ratio = self.speedup(self.value, python.value);
        ratio.is_finite().then_some(ratio)
    }

    /// memctl's cost over the floor's (1 = as cheap as the floor; for rates, floor / memctl).
    pub fn over_floor(&self) -> Option<f64> {
        let floor = self.floor.as_ref()?;
        let ratio = 1.0 / self.speedup(self.value, floor.value);
        ratio.is_finite().then_some(ratio)
    }

    pub fn ratio_p95(&self) -> Option<f64> {
        let python = self.python.as_ref()?;
        let ratio = self.speedup(self.p95?, python.p95?);
        ratio.is_finite().then_some(ratio)
    }

    pub fn to_json(&self) -> Value {
        json!({
            "workload": self.workload,
            "metric": self.metric,
            "unit": self.unit,
            "better": match self.better { Better::Lower => "lower", Better::Higher => "higher" },
            "memctl": finite(self.value),
            "memctl_p95": self.p95.and_then(finite),
            "python": self.python.as_ref().map(|p| p.value),
            "python_p95": self.python.as_ref().and_then(|p| p.p95),
            "python_text": self.python.as_ref().map(|p| p.text.clone()),
            "speedup": self.ratio(),
            "speedup_p95": self.ratio_p95(),
            "floor": self.floor.as_ref().map(|f| f.value),
            "floor_what": self.floor.as_ref().map(|f| f.what.clone()),
            "over_floor": self.over_floor(),
            "note": self.note,
        })
    }
}

fn finite(x: f64) -> Option<f64> {
    x.is_finite().then_some(x)
}

/// A number with precision suited to its size.
pub fn fmt_num(x: f64) -> String {
    if !x.is_finite() {
        return "-".into();
    }
    let a = x.abs();
    if a >= 10_000.0 {
        group_thousands(x.round() as i64)
    } else if a >= 100.0 {
        format!("{x:.0}")
    } else if a >= 10.0 {
        format!("{x:.1}")
    } else if a >= 1.0 {
        format!("{x:.2}")
    } else {
        format!("{x:.3}")
    }
}

fn group_thousands(n: i64) -> String {
    let digits = n.unsigned_abs().to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    if n < 0 {
        format!("-{out}")
    } else {
        out
    }
}

fn with_unit(x: f64, unit: &str) -> String {
    if !x.is_finite() {
        return "-".into();
    }
    match unit {
        // Counts.
        "" if x.fract() == 0.0 => group_thousands(x as i64),
        "" => fmt_num(x),
        "x" => format!("{}x", fmt_num(x)),
        "/s" => format!("{}/s", fmt_num(x)),
        _ => format!("{} {unit}", fmt_num(x)),
    }
}

/// The aligned table: workload, metric, memctl median and p95, the Python figure, the speedup,
/// the floor and memctl's cost over it; the floors' descriptions follow as notes.
pub fn table(rows: &[Row]) -> String {
    let header =
        ["workload", "metric", "memctl", "memctl p95", "Python store", "speedup", "floor", "/ floor"];
    let mut cells: Vec<[String; 8]> = vec![header.map(String::from)];
    for row in rows {
        let python = row.python.as_ref().map_or("-".to_string(), |p| p.text.clone());
        let ratio = match (row.ratio(), row.ratio_p95()) {
            (Some(r), Some(r95)) => format!("{}x (p95 {}x)", fmt_num(r), fmt_num(r95)),
            (Some(r), None) => format!("{}x", fmt_num(r)),
            _ => "-".into(),
        };
        cells.push([
            row.workload.clone(),
            row.metric.clone(),
            with_unit(row.value, row.unit),
            row.p95.map_or("-".into(), |p| with_unit(p, row.unit)),
            python,
            ratio,
            row.floor.as_ref().map_or("-".into(), |f| with_unit(f.value, row.unit)),
            row.over_floor().map_or("-".into(), |r| format!("{}x", fmt_num(r))),
        ]);
    }
    let widths: Vec<usize> =
        (0..8).map(|c| cells.iter().map(|r| r[c].chars().count()).max().unwrap_or(0)).collect();
    let mut out = String::new();
    for (i, row) in cells.iter().enumerate() {
        let line: Vec<String> = row
            .iter()
            .enumerate()
            .map(|(c, text)| {
                let pad = widths[c] - text.chars().count();
                // Text columns left-aligned, figures right-aligned.
                if c < 2 || c == 4 {
                    format!("{text}{}", " ".repeat(pad))
                } else {
                    format!("{}{text}", " ".repeat(pad))
                }
            })
            .collect();
        out.push_str(line.join("  ").trim_end());
        out.push('\n');
        if i == 0 {
            let rule: Vec<String> = widths.iter().map(|w| "-".repeat(*w)).collect();
            out.push_str(&rule.join("  "));
            out.push('\n');
        }
    }
    let floors = floor_notes(rows);
    if !floors.is_empty() {
        out.push_str("\nfloors:\n");
        out.push_str(&floors.join("\n"));
        out.push('\n');
    }
    let notes: Vec<String> =
        rows.iter().filter_map(|r| r.note.as_ref().map(|n| format!("  {}: {n}", r.workload))).collect();
    if !notes.is_empty() {
        out.push_str("\nnotes:\n");
        out.push_str(&notes.join("\n"));
        out.push('\n');
    }
    out
}

/// One line per workload and floor, saying what the floor is; where a workload's rows have
/// floors of more than one kind, each line names the rows its floor is for.
fn floor_notes(rows: &[Row]) -> Vec<String> {
    // (workload, what, metrics), in the order of the rows.
    let mut kinds: Vec<(&str, &str, Vec<&str>)> = Vec::new();
    for row in rows {
        let Some(floor) = &row.floor else { continue };
        match kinds.iter_mut().find(|(w, what, _)| *w == row.workload && *what == floor.what) {
            Some((_, _, metrics)) => metrics.push(&row.metric),
            None => kinds.push((&row.workload, &floor.what, vec![&row.metric])),
        }
    }
    kinds
        .iter()
        .map(|(workload, what, metrics)| {
            if kinds.iter().filter(|(w, ..)| w == workload).count() > 1 {
                format!("  {workload} ({}): {what}", metrics.join("; "))
            } else {
                format!("  {workload}: {what}")
            }
        })
        .collect()
}

/// Runs `f` and times it.
pub fn timed<T>(f: impl FnOnce() -> memctl_core::Result<T>) -> anyhow::Result<(T, Duration)> {
    let start = Instant::now();
    let value = f()?;
    Ok((value, start.elapsed()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
        assert_eq!(percentile(&[1.0, 2.0, 3.0, 4.0, 5.0], 100.0), 5.0);
        assert!(median(&[]).is_nan());
    }

    #[test]
    fn ratios_point_the_right_way() {
        let slower = Row::new("w", "m", "ms").value(2.0).python(Python::new(20.0, "20 ms"));
        assert_eq!(slower.ratio(), Some(10.0));
        let rate =
            Row::new("w", "m", "/s").value(5000.0).higher_is_better().python(Python::new(500.0, "500/s"));
        assert_eq!(rate.ratio(), Some(10.0));
        assert_eq!(fmt_num(1_234_567.0), "1,234,567");
        let floored =
            Row::new("w", "m", "/s").value(500.0).higher_is_better().floor(Floor::new(1000.0, "bare"));
        assert_eq!(floored.over_floor(), Some(2.0));
        let timed = Row::new("w", "m", "ms").value(3.0).floor(Floor::new(2.0, "bare"));
        assert_eq!(timed.over_floor(), Some(1.5));
        let text = table(&[slower, rate, floored, timed]);
        assert!(text.contains("10.0x") && text.contains("2.00x") && text.contains("  w: bare"));
    }

    #[test]
    fn a_workload_with_floors_of_several_kinds_names_their_rows() {
        let rows = [
            Row::new("w", "total", "s").value(1.0).floor(Floor::new(1.0, "plain")),
            Row::new("w", "a, median", "µs").value(1.0).floor(Floor::new(1.0, "commit")),
            Row::new("w", "b, median", "µs").value(1.0).floor(Floor::new(1.0, "commit")),
            Row::new("v", "total", "s").value(1.0).floor(Floor::new(1.0, "plain")),
        ];
        assert_eq!(
            floor_notes(&rows),
            ["  w (total): plain", "  w (a, median; b, median): commit", "  v: plain"]
        );
    }
}
