//! Prices the CPU reference (what `--verify` renders on each PNG worker, and
//! what the CPU producer renders) at 1920x1080 on one thread, per scene and
//! format, beside the two loops it replaced, timed in the same process:
//! - `f6b1a43`: RGBA8 only, `pixel` per pixel (before the formats came);
//! - `ba71e6b`: `store(format, pixel(..))` per pixel (5× slower on RGBA8).
//!
//! Then what `--verify` costs a worker per frame (equal frames): `verify`,
//! the reference rendered row by row as it is compared
//! (`Diff::against_scene`), beside rendering it whole and then comparing
//! (`render + compare`, `Diff::between_as`). Medians of `ROUNDS` rounds
//! after one warm-up.
//!
//!   cargo run --release -p vkcuda-run --example cpu_reference [-- WIDTHxHEIGHT]

use std::time::{Duration, Instant};

use anyhow::{anyhow, Result};
use vkcuda::Format;
use vkcuda_run::base::size::Size;
use vkcuda_run::scene::{pixel, render_cpu_as, store, Diff, FrameArgs, Scene, SceneKind};

const ROUNDS: usize = 9;

/// The median time of `ROUNDS` calls of `f`, after one more.
fn timed(mut f: impl FnMut()) -> Duration {
    f();
    let mut times: Vec<Duration> = (0..ROUNDS)
        .map(|_| {
            let started = Instant::now();
            f();
            started.elapsed()
        })
        .collect();
    times.sort();
    times[ROUNDS / 2]
}

/// f6b1a43's reference: RGBA8, one `pixel` per 4-byte chunk.
fn f6b1a43(scene: &Scene, args: &FrameArgs, out: &mut [u8]) {
    let row = scene.width as usize * 4;
    for (y, line) in out.chunks_exact_mut(row).enumerate() {
        for (x, px) in line.chunks_exact_mut(4).enumerate() {
            px.copy_from_slice(&pixel(scene, args, x as u32, y as u32));
        }
    }
}

/// ba71e6b's reference: `store` of `pixel` per pixel, the stride a variable.
fn ba71e6b(scene: &Scene, args: &FrameArgs, format: Format, out: &mut [u8]) {
    let bpp = format.bytes_per_pixel() as usize;
    let row = scene.width as usize * bpp;
    for (y, line) in out.chunks_exact_mut(row).enumerate() {
        for (x, px) in line.chunks_exact_mut(bpp).enumerate() {
            store(format, pixel(scene, args, x as u32, y as u32), px);
        }
    }
}

/// The frame size the first argument names (`WIDTHxHEIGHT`), 1920x1080 without one.
fn size() -> Result<Size> {
    let Some(arg) = std::env::args().nth(1) else { return Ok(Size { width: 1920, height: 1080 }) };
    let (w, h) = arg.split_once('x').ok_or_else(|| anyhow!("expected WIDTHxHEIGHT, got {arg}"))?;
    Ok(Size { width: w.parse()?, height: h.parse()? })
}

fn main() -> Result<()> {
    let Size { width, height } = size()?;
    println!("CPU reference, {width}x{height}, one thread, median of {ROUNDS} (ms)");
    println!(
        "{:<9} {:<11} {:>8} {:>8} {:>8} {:>8} {:>8}",
        "scene", "format", "now", "ba71e6b", "f6b1a43", "compare", "verify"
    );
    for kind in SceneKind::ALL {
        let scene = Scene { kind, width, height, cost: 64 };
        let args = FrameArgs::new(&scene, 7);
        for format in Format::ALL {
            let bytes = (width * height * format.bytes_per_pixel()) as usize;
            let (mut got, mut want) = (vec![0u8; bytes], vec![0u8; bytes]);
            let now = timed(|| render_cpu_as(&scene, &args, format, &mut got, 1));
            let before = timed(|| ba71e6b(&scene, &args, format, &mut want));
            if got != want {
                return Err(anyhow!("{kind} {format}: the renderer differs from ba71e6b's loop"));
            }
            let plain = match format {
                Format::Rgba8 => format!("{:>8.3}", ms(timed(|| f6b1a43(&scene, &args, &mut want)))),
                _ => format!("{:>8}", "-"),
            };
            let compare = timed(|| assert_eq!(Diff::between_as(format, &got, &want).differing, 0));
            let verify = timed(|| assert_eq!(Diff::against_scene(&scene, &args, format, &got).differing, 0));
            println!(
                "{:<9} {:<11} {:>8.3} {:>8.3} {plain} {:>8.3} {:>8.3}",
                kind.to_string(),
                format.to_string(),
                ms(now),
                ms(before),
                ms(compare),
                ms(verify)
            );
        }
    }
    Ok(())
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}
