//! Times what a PNG worker does with one frame, on one thread, for each scene
//! at 1920x1080: the CPU reference (`--verify`), the comparison, and PNG
//! encoding with each row filter the format defines (the dump's encoder,
//! `encode_png`: fdeflate), with the file size each gives. The medians of 9
//! rounds; the dump's filter choice (`PNG_FILTER`) rests on these.
//!
//!   cargo run --release -p vkcuda-run --example png_encode

use std::time::{Duration, Instant};

use anyhow::Result;
// The dump's encoder and the CPU reference, from the run layer.
use vkcuda_run::output::frame_file::encode_png;
use vkcuda_run::scene::{render_cpu, Diff, FrameArgs, Scene, SceneKind};

const ROUNDS: usize = 9;

/// What [`timed`] measured.
struct Timed<T> {
    /// The median time of a call.
    median: Duration,
    /// What the last call returned.
    last: T,
}

/// The median time of `ROUNDS` calls of `f`, and its last result.
fn timed<T>(mut f: impl FnMut() -> Result<T>) -> Result<Timed<T>> {
    let mut times = Vec::with_capacity(ROUNDS);
    let mut last = None;
    for _ in 0..ROUNDS {
        let started = Instant::now();
        last = Some(f()?);
        times.push(started.elapsed());
    }
    times.sort();
    let last = last.ok_or_else(|| anyhow::anyhow!("no rounds"))?;
    Ok(Timed { median: times[ROUNDS / 2], last })
}

fn main() -> Result<()> {
    let (w, h) = (1920, 1080);
    for kind in SceneKind::ALL {
        let scene = Scene { kind, width: w, height: h, cost: 64 };
        let args = FrameArgs::new(&scene, 7);
        let mut frame = vec![0u8; (w * h * 4) as usize];
        render_cpu(&scene, &args, &mut frame, 1);
        let mut want = frame.clone();
        let render = timed(|| {
            render_cpu(&scene, &args, &mut want, 1);
            Ok(())
        })?
        .median;
        let Timed { median: compare, last: diff } = timed(|| Ok(Diff::between(&frame, &want)))?;
        println!("{kind} {w}x{h}: reference {render:.2?}, compare {compare:.2?} ({} differ)", diff.differing);
        use png::Filter::*;
        for (name, filter) in [
            ("adaptive", Adaptive),
            ("none", NoFilter),
            ("sub", Sub),
            ("up", Up),
            ("avg", Avg),
            ("paeth", Paeth),
        ] {
            let size = ash::vk::Extent2D { width: w, height: h };
            let Timed { median: took, last: bytes } = timed(|| Ok(encode_png(&frame, size, filter)?.len()))?;
            println!("  encode {name:>8}: {took:>9.2?}, {bytes:>8} bytes");
        }
    }
    Ok(())
}
