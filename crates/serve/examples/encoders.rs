//! Chooses the view's JPEG encoder: libjpeg-turbo (the turbojpeg crate, what
//! the view uses) beside jpeg-encoder (pure Rust, AVX2), on the frames the
//! H100 bench sends (the julia scene at 1920x1080 and 1280x720, RGBA8, as
//! the draw pass leaves them), quality 80, 4:2:0: the median of 21 encodes
//! after one, per encoder, in one process, alternating.
//!
//!   cargo run --release -p vkcuda-serve --example encoders

use std::time::{Duration, Instant};

use vkcuda::Format;
use vkcuda_run::scene::{render_cpu_as, FrameArgs, Scene, SceneKind};

fn main() -> anyhow::Result<()> {
    for (width, height) in [(1920u32, 1080u32), (1280, 720)] {
        let scene = Scene { kind: SceneKind::Julia, width, height, cost: 64 };
        let mut px = vec![0u8; (width * height * 4) as usize];
        render_cpu_as(&scene, &FrameArgs::new(&scene, 120), Format::Rgba8, &mut px, 4);
        let (w, h) = (width as usize, height as usize);
        let turbo = || -> anyhow::Result<usize> {
            let image = turbojpeg::Image {
                pixels: px.as_slice(),
                width: w,
                pitch: w * 4,
                height: h,
                format: turbojpeg::PixelFormat::RGBA,
            };
            Ok(turbojpeg::compress(image, 80, turbojpeg::Subsamp::Sub2x2)?.len())
        };
        let pure = || -> anyhow::Result<usize> {
            let mut out = Vec::new();
            let encoder = jpeg_encoder::Encoder::new(&mut out, 80);
            encoder.encode(&px, width as u16, height as u16, jpeg_encoder::ColorType::Rgba)?;
            Ok(out.len())
        };
        let (mut t, mut p) = (Vec::new(), Vec::new());
        let (mut tb, mut pb) = (turbo()?, pure()?);
        for _ in 0..21 {
            let started = Instant::now();
            tb = turbo()?;
            t.push(started.elapsed());
            let started = Instant::now();
            pb = pure()?;
            p.push(started.elapsed());
        }
        let median = |v: &mut Vec<Duration>| {
            v.sort();
            v[v.len() / 2].as_secs_f64() * 1e3
        };
        let (tm, pm) = (median(&mut t), median(&mut p));
        println!(
            "{width}x{height}: turbojpeg {tm:.2} ms ({} KB), jpeg-encoder {pm:.2} ms ({} KB): {:.2}x",
            tb / 1000,
            pb / 1000,
            pm / tm
        );
    }
    Ok(())
}
