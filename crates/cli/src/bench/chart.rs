//! `vkcuda bench --chart`: frames per second of every variant as horizontal
//! bars, one panel per load, one group of bars per size. Plain SVG written by
//! hand: no fonts or native libraries needed, and it renders in any browser
//! and on GitHub.

use std::fmt::Write;

use super::report::{Load, Report, Row};
use vkcuda::types::QueueKind;

const WIDTH: f64 = 900.0;
const LABEL: f64 = 190.0;
const BAR: f64 = 16.0;
const GAP: f64 = 10.0;
const COLORS: [&str; 8] =
    ["#1b9e77", "#d95f02", "#7570b3", "#e7298a", "#66a61e", "#e6ab02", "#a6761d", "#666666"];

fn escape(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
}

/// The chart of `report` as an SVG document: a panel per queue and load, then the legend.
pub fn svg(report: &Report) -> String {
    let mut canvas = Canvas { body: String::new(), y: 50.0 };
    let variants: Vec<String> = report.variants.iter().map(|(v, _)| v.to_string()).collect();
    let color = |v: &str| COLORS[variants.iter().position(|x| x == v).unwrap_or(0) % COLORS.len()];
    let mut queues: Vec<QueueKind> = Vec::new();
    for r in &report.rows {
        if !queues.contains(&r.queue) {
            queues.push(r.queue);
        }
    }
    for (queue, load) in
        queues.iter().flat_map(|q| [(*q, Load::Cheap), (*q, Load::Balanced), (*q, Load::Kernel)])
    {
        let rows: Vec<_> = report.rows.iter().filter(|r| r.load == load && r.queue == queue).collect();
        if !rows.is_empty() {
            canvas.panel(queue, load, &rows, &color);
        }
    }
    // The legend: every variant in one line, as in the table and docs (circles: only bars are rects).
    for (v, what) in &report.variants {
        let name = v.to_string();
        let y = canvas.y;
        let _ = writeln!(
            canvas.body,
            r#"<circle cx="16" cy="{}" r="6" fill="{}"/><text x="28" y="{}" font-size="11">{}: {}</text>"#,
            y + 6.0,
            color(&name),
            y + 10.0,
            escape(&name),
            escape(what)
        );
        canvas.y += 16.0;
    }
    let title = format!(
        "vkcuda bench: {} ({}), {}, median of {} repeats",
        report.device, report.driver, report.date, report.repeats
    );
    format!(
        r##"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{h}" viewBox="0 0 {WIDTH} {h}" font-family="sans-serif">
<rect width="100%" height="100%" fill="#fff"/>
<text x="10" y="24" font-size="16">{t}</text>
{body}</svg>
"##,
        h = canvas.y + 10.0,
        body = canvas.body,
        t = escape(&title)
    )
}

/// The SVG body written so far, and where the next line goes.
struct Canvas {
    body: String,
    y: f64,
}

impl Canvas {
    /// One queue and load: its title, then a bar per row, grouped by size. Each
    /// panel has its own scale: the fastest variant spans the width.
    fn panel(&mut self, queue: QueueKind, load: Load, rows: &[&Row], color: &dyn Fn(&str) -> &'static str) {
        let max = rows.iter().filter_map(|r| r.fps).fold(1.0, f64::max);
        let title = match load {
            Load::Cheap => format!("{queue} queue, cheap load (gradient, one copy): the pattern's own cost"),
            Load::Balanced => format!("{queue} queue, balanced load (CUDA time ≈ Vulkan time ≈ 0.5 ms)"),
            Load::Kernel => format!("{queue} queue, your kernel, one copy"),
        };
        let y = self.y;
        let _ = writeln!(
            self.body,
            r#"<text x="10" y="{y}" font-size="15" font-weight="bold">{}</text>"#,
            escape(&title)
        );
        self.y += 12.0;
        let mut size = "";
        for r in rows {
            if r.size != size {
                size = &r.size;
                self.y += GAP;
                let y = self.y + 12.0;
                let _ = writeln!(
                    self.body,
                    r#"<text x="10" y="{y}" font-size="13" font-weight="bold">{size}</text>"#
                );
                self.y += 18.0;
            }
            let label = match load {
                Load::Balanced => format!("{} ({} it, {} copies)", r.variant, r.cost, r.copies),
                Load::Cheap => r.variant.to_string(),
                Load::Kernel => format!("{} ({})", r.variant, r.scene),
            };
            self.bar(&label, r, max, color(&r.variant.to_string()));
        }
        self.y += 2.0 * GAP;
    }

    /// A row's label and bar (scaled to `max`), or why it has none.
    fn bar(&mut self, label: &str, r: &Row, max: f64, fill: &str) {
        let (y, text_y) = (self.y, self.y + 12.0);
        let _ = writeln!(
            self.body,
            r#"<text x="{}" y="{text_y}" font-size="12" text-anchor="end">{}</text>"#,
            LABEL - 6.0,
            escape(label)
        );
        match r.fps {
            Some(fps) => {
                let w = (fps / max * (WIDTH - LABEL - 90.0)).max(1.0);
                let _ = writeln!(
                    self.body,
                    r#"<rect x="{LABEL}" y="{y}" width="{w:.1}" height="{BAR}" fill="{fill}"/>"#
                );
                let x = LABEL + w + 5.0;
                let _ = writeln!(
                    self.body,
                    r#"<text x="{x:.1}" y="{text_y}" font-size="12">{fps:.0} fps</text>"#
                );
            }
            None => {
                let why = r.skipped.as_deref().map_or("no frames".into(), |w| format!("skipped: {w}"));
                let _ = writeln!(
                    self.body,
                    r##"<text x="{LABEL}" y="{text_y}" font-size="12" fill="#888">{}</text>"##,
                    escape(&why)
                );
            }
        }
        self.y += BAR + 4.0;
    }
}
