//! The protocol diagram of docs/sync.md (`assets/sync-timeline.svg`),
//! generated from [`FramePlan`] so it cannot drift from the code: a test
//! regenerates it and fails if the committed file differs
//! (`VKCUDA_BLESS=1 cargo test diagram` rewrites it).
//!
//! Each panel schedules frames `0..frames` as soon as the plan allows, every
//! step taking one time unit: a producer step starts once the producer's
//! previous step is done and its wait point is signalled; likewise the
//! consumer. Arrows go from the step whose signal satisfies a wait to the
//! step that waits.

use std::fmt::Write;

use vkcuda::sync::{FramePlan, Step, SyncScheme};

const COL: f64 = 120.0;
const BOX_W: f64 = 112.0;
const BOX_H: f64 = 54.0;
const LEFT: f64 = 96.0;

/// The time unit at which each step of a frame starts, on either side
/// (indexed by frame).
#[derive(Debug, PartialEq, Eq)]
pub struct Schedule {
    /// The producer's steps.
    pub producer: Vec<u64>,
    /// The consumer's steps.
    pub consumer: Vec<u64>,
}

/// The time unit at which each step of frames `0..frames` starts, for the
/// producer and the consumer (as-soon-as-possible, one unit per step).
pub fn schedule(plan: &FramePlan, frames: u64) -> Schedule {
    let (mut prod, mut cons): (Vec<u64>, Vec<u64>) = (Vec::new(), Vec::new());
    // Which step signals a point: (is_producer, frame), found among the steps scheduled so far.
    let signaller = |plan: &FramePlan, wait: vkcuda::sync::TimelinePoint, prod: &[u64], cons: &[u64]| {
        let done = |side: &[u64], step: &dyn Fn(u64) -> Step| {
            (0..side.len() as u64)
                .find(|&g| {
                    let s = step(g).signal;
                    s.timeline == wait.timeline && s.value >= wait.value
                })
                .map(|g| side[g as usize] + 1)
        };
        let p = done(prod, &|g| plan.producer(g));
        let c = done(cons, &|g| plan.consumer(g));
        p.into_iter().chain(c).min()
    };
    // Alternate until both sides have scheduled every frame (each wait refers to earlier steps).
    while prod.len() < frames as usize || cons.len() < frames as usize {
        let mut progressed = false;
        if prod.len() < frames as usize {
            let g = prod.len() as u64;
            let after = prod.last().map_or(0, |t| t + 1);
            let ready = plan.producer(g).wait.map(|w| signaller(plan, w, &prod, &cons));
            if let Some(t) = match ready {
                None => Some(after),
                Some(Some(t)) => Some(after.max(t)),
                Some(None) => None,
            } {
                prod.push(t);
                progressed = true;
            }
        }
        if cons.len() < frames as usize && cons.len() < prod.len() {
            let g = cons.len() as u64;
            let after = cons.last().map_or(0, |t| t + 1);
            if let Some(Some(t)) = plan.consumer(g).wait.map(|w| signaller(plan, w, &prod, &cons)) {
                cons.push(after.max(t));
                progressed = true;
            }
        }
        assert!(progressed, "the plan deadlocks");
    }
    Schedule { producer: prod, consumer: cons }
}

fn step_box(svg: &mut String, plan: &FramePlan, x: f64, y: f64, g: u64, step: Step, fill: &str) {
    let names = plan.timeline_names();
    let point = |p: vkcuda::sync::TimelinePoint, op: &str| format!("{} {op} {}", names[p.timeline], p.value);
    let wait = step.wait.map_or("no wait".to_string(), |w| format!("wait {}", point(w, "≥")));
    let _ = writeln!(
        svg,
        r##"<rect x="{x}" y="{y}" width="{BOX_W}" height="{BOX_H}" rx="4" fill="{fill}" stroke="#444"/>"##
    );
    for (i, line) in
        [format!("frame {g} · image {}", step.image), wait, format!("signal {}", point(step.signal, "="))]
            .iter()
            .enumerate()
    {
        let _ = writeln!(
            svg,
            r#"<text x="{}" y="{}" font-size="11" text-anchor="middle">{line}</text>"#,
            x + BOX_W / 2.0,
            y + 16.0 + 15.0 * i as f64
        );
    }
}

/// One panel: the plan's schedule for frames `0..frames`, at vertical offset `top`.
fn panel(svg: &mut String, plan: &FramePlan, frames: u64, top: f64) -> f64 {
    let Schedule { producer: prod, consumer: cons } = schedule(plan, frames);
    let (py, cy) = (top + 30.0, top + 30.0 + BOX_H + 40.0);
    let title = format!("--sync {} --buffers {}", plan.scheme(), plan.images());
    let _ =
        writeln!(svg, r#"<text x="8" y="{}" font-size="14" font-weight="bold">{title}</text>"#, top + 18.0);
    let _ = writeln!(svg, r#"<text x="8" y="{}" font-size="12">producer</text>"#, py + 24.0);
    let _ = writeln!(svg, r#"<text x="8" y="{}" font-size="12">(CUDA)</text>"#, py + 38.0);
    let _ = writeln!(svg, r#"<text x="8" y="{}" font-size="12">consumer</text>"#, cy + 24.0);
    let _ = writeln!(svg, r#"<text x="8" y="{}" font-size="12">(Vulkan)</text>"#, cy + 38.0);
    let x = |t: u64| LEFT + COL * t as f64;
    for g in 0..frames {
        let fill = ["#d8ecf7", "#fbe3c8", "#dff2d8"][plan.image(g) % 3];
        step_box(svg, plan, x(prod[g as usize]), py, g, plan.producer(g), fill);
        step_box(svg, plan, x(cons[g as usize]), cy, g, plan.consumer(g), fill);
    }
    // Arrows: from the end of each signalling step to the start of the step its signal frees.
    for g in 0..frames {
        let c = x(cons[g as usize]);
        let p_end = x(prod[g as usize]) + BOX_W;
        let _ = writeln!(
            svg,
            r##"<line x1="{}" y1="{}" x2="{}" y2="{cy}" stroke="#1b6ca8" marker-end="url(#arrow)"/>"##,
            p_end - 8.0,
            py + BOX_H,
            c + 8.0
        );
        if let Some(w) = plan.producer(g).wait {
            let freed_by = (0..g).find(|&f| {
                let s = plan.consumer(f).signal;
                s.timeline == w.timeline && s.value >= w.value
            });
            if let Some(f) = freed_by {
                let _ = writeln!(
                    svg,
                    r##"<line x1="{}" y1="{cy}" x2="{}" y2="{}" stroke="#c0392b" marker-end="url(#arrow)"/>"##,
                    x(cons[f as usize]) + BOX_W - 8.0,
                    x(prod[g as usize]) + 8.0,
                    py + BOX_H
                );
            }
        }
    }
    cy + BOX_H + 24.0
}

/// The diagram of docs/sync.md: split and shared, 2 and 3 images, frames 0..=6.
pub fn sync_timeline_svg() -> String {
    let frames = 7;
    let plans =
        [(SyncScheme::Split, 2), (SyncScheme::Split, 3), (SyncScheme::Shared, 2), (SyncScheme::Shared, 3)];
    let mut body = String::new();
    let mut top = 40.0;
    let mut width: f64 = 0.0;
    for (scheme, images) in plans {
        let Ok(plan) = FramePlan::new(scheme, images, 0, frames) else { continue };
        let Schedule { producer: prod, consumer: cons } = schedule(&plan, frames);
        let last = prod.iter().chain(&cons).max().copied().unwrap_or(0);
        width = width.max(LEFT + COL * (last + 1) as f64 + 8.0);
        top = panel(&mut body, &plan, frames, top);
    }
    format!(
        r##"<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{top}" viewBox="0 0 {width} {top}" font-family="sans-serif">
<defs><marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" orient="auto"><path d="M0,0 L10,5 L0,10 z" fill="#555"/></marker></defs>
<rect width="100%" height="100%" fill="#fff"/>
<text x="8" y="22" font-size="15">vkcuda frame plan, frames 0..6: each step as soon as its wait allows (one time unit per step). Blue: rendered → consumer; red: released → producer reusing the image. Colour = image.</text>
{body}</svg>
"##
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_overlaps_and_shared_alternates() {
        let split = FramePlan::new(SyncScheme::Split, 2, 0, 7).unwrap();
        let Schedule { producer: p, consumer: c } = schedule(&split, 7);
        // The producer renders frame 1 while the consumer consumes frame 0.
        assert_eq!((p[1], c[0]), (1, 1));
        let shared = FramePlan::new(SyncScheme::Shared, 2, 0, 7).unwrap();
        let Schedule { producer: p, consumer: c } = schedule(&shared, 7);
        // Strict alternation: producer g at 2g, consumer g at 2g + 1.
        assert!((0..7).all(|g| p[g] == 2 * g as u64 && c[g] == 2 * g as u64 + 1), "{p:?} {c:?}");
    }

    #[test]
    fn diagram_in_assets_matches_the_plan() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../assets/sync-timeline.svg");
        let svg = sync_timeline_svg();
        if std::env::var_os("VKCUDA_BLESS").is_some() {
            std::fs::write(&path, &svg).unwrap();
        }
        let committed = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(committed == svg, "{} is stale: run VKCUDA_BLESS=1 cargo test diagram", path.display());
    }
}
