//! `target/bench/depth.svg`: how the per-call costs grow with the depth of a branch (workloads a
//! and e), beside the Python store's figures, on log-log axes. A plain SVG, no dependencies.

use crate::report::Row;
use std::fmt::Write;

/// One line of the chart: points `(depth, microseconds)`.
struct Series {
    name: &'static str,
    color: &'static str,
    dashed: bool,
    points: Vec<(f64, f64)>,
}

const DEPTHS: [u32; 3] = [10, 100, 1000];
const PYTHON_READ_MS: [f64; 3] = [0.21, 2.4, 26.0];
const PYTHON_RENDER_MS: [f64; 3] = [0.40, 2.4, 31.0];

/// The chart, or None when the run measured neither workload.
pub fn depth_svg(rows: &[Row]) -> Option<String> {
    let measured = |workload: &str, metric: &str, micros_per_unit: f64| -> Vec<(f64, f64)> {
        DEPTHS
            .iter()
            .filter_map(|&d| {
                let row =
                    rows.iter().find(|r| r.workload == format!("{workload}{d}") && r.metric == metric)?;
                row.value.is_finite().then_some((f64::from(d), row.value * micros_per_unit))
            })
            .collect()
    };
    let python = |ms: [f64; 3]| DEPTHS.iter().zip(ms).map(|(&d, ms)| (f64::from(d), ms * 1e3)).collect();
    let series = vec![
        Series {
            name: "memctl render",
            color: "#1f77b4",
            dashed: false,
            points: measured("e chain D=", "render, budget 4000 chars", 1e3),
        },
        Series {
            name: "memctl read",
            color: "#2ca02c",
            dashed: false,
            points: measured("e chain D=", "read: core, 20 events, 8 records", 1e3),
        },
        Series {
            name: "memctl fork",
            color: "#9467bd",
            dashed: false,
            points: measured("a fork chain D=", "per fork", 1.0),
        },
        Series { name: "Python render", color: "#1f77b4", dashed: true, points: python(PYTHON_RENDER_MS) },
        Series { name: "Python read", color: "#2ca02c", dashed: true, points: python(PYTHON_READ_MS) },
    ];
    if series.iter().take(3).all(|s| s.points.is_empty()) {
        return None;
    }
    Some(render(&series))
}

fn render(series: &[Series]) -> String {
    let (width, height) = (640.0, 400.0);
    let (left, right, top, bottom) = (70.0, 150.0, 30.0, 50.0);
    let (plot_w, plot_h) = (width - left - right, height - top - bottom);
    // Decades of microseconds that hold every point.
    let all = series.iter().flat_map(|s| s.points.iter().map(|p| p.1));
    let (low, high) = all.fold((f64::INFINITY, 0.0f64), |(lo, hi), v| (lo.min(v), hi.max(v)));
    let (y_min, y_max) = (low.log10().floor(), high.log10().ceil().max(low.log10().floor() + 1.0));
    let x = |depth: f64| left + (depth.log10() - 1.0) / 2.0 * plot_w;
    let y = |micros: f64| top + (y_max - micros.log10()) / (y_max - y_min) * plot_h;

    let mut svg = String::new();
    let _ = write!(
        svg,
        r##"<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif" font-size="12">
<rect width="100%" height="100%" fill="white"/>
<text x="{}" y="18" text-anchor="middle" font-size="14">Time per call by branch depth (log-log)</text>
"##,
        left + plot_w / 2.0
    );
    for depth in DEPTHS {
        let px = x(f64::from(depth));
        let _ = writeln!(
            svg,
            r##"<line x1="{px}" y1="{top}" x2="{px}" y2="{}" stroke="#ddd"/><text x="{px}" y="{}" text-anchor="middle">{depth}</text>"##,
            top + plot_h,
            top + plot_h + 18.0
        );
    }
    for decade in (y_min as i32)..=(y_max as i32) {
        let micros = 10f64.powi(decade);
        let py = y(micros);
        let label = if micros >= 1e3 { format!("{} ms", micros / 1e3) } else { format!("{micros} µs") };
        let _ = writeln!(
            svg,
            r##"<line x1="{left}" y1="{py}" x2="{}" y2="{py}" stroke="#ddd"/><text x="{}" y="{}" text-anchor="end">{label}</text>"##,
            left + plot_w,
            left - 6.0,
            py + 4.0
        );
    }
    let _ = writeln!(
        svg,
        r##"<text x="{}" y="{}" text-anchor="middle">branch depth</text>"##,
        left + plot_w / 2.0,
        height - 12.0
    );
    for (i, s) in series.iter().filter(|s| !s.points.is_empty()).enumerate() {
        let dash = if s.dashed { r#" stroke-dasharray="6 4""# } else { "" };
        let points: Vec<String> =
            s.points.iter().map(|&(d, us)| format!("{:.1},{:.1}", x(d), y(us))).collect();
        let _ = writeln!(
            svg,
            r#"<polyline points="{}" fill="none" stroke="{}" stroke-width="2"{dash}/>"#,
            points.join(" "),
            s.color
        );
        for &(d, us) in &s.points {
            let _ = writeln!(svg, r#"<circle cx="{:.1}" cy="{:.1}" r="3" fill="{}"/>"#, x(d), y(us), s.color);
        }
        let ly = top + 10.0 + 20.0 * i as f64;
        let lx = left + plot_w + 15.0;
        let _ = writeln!(
            svg,
            r#"<line x1="{lx}" y1="{ly}" x2="{}" y2="{ly}" stroke="{}" stroke-width="2"{dash}/><text x="{}" y="{}">{}</text>"#,
            lx + 24.0,
            s.color,
            lx + 30.0,
            ly + 4.0,
            s.name
        );
    }
    svg.push_str("</svg>\n");
    svg
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn draws_the_measured_series() {
        let rows: Vec<Row> = DEPTHS
            .iter()
            .map(|d| Row::new(format!("e chain D={d}"), "render, budget 4000 chars", "ms").value(0.1))
            .collect();
        let svg = depth_svg(&rows).expect("a chart");
        assert!(svg.starts_with("<svg") && svg.contains("memctl render") && svg.ends_with("</svg>\n"));
        assert_eq!(svg.matches("<polyline").count(), 3, "render plus the two Python lines");
        assert!(depth_svg(&[]).is_none());
    }
}
