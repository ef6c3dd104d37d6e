//! Floor 1, the scenes: what the producer draws, and the CPU reference of
//! every scene (here); the scene kernels NVRTC builds ([`kernels`]); the
//! [`director`] of scenes and ticks that the viewer's controls change. May
//! import the core and floor 1 alone.
//!
//!
//! The CUDA kernels in `shaders/scenes.cu` and [`render_cpu`] compute the
//! same integer arithmetic, and store it in every [`Format`] the same way
//! ([`store`]), so a correct pipeline reproduces the reference bit for bit. Anything that needs floating point (the Julia constant's
//! rotation) is computed once per frame on the host, in [`FrameArgs::new`],
//! and handed to both as integers.

pub mod director;
pub mod kernels;

use std::fmt;

use ash::vk;
use vkcuda::Format;

/// The scenes vkcuda can draw.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum SceneKind {
    /// Scrolling colour ramps and a checker: a few integer operations per pixel.
    Gradient,
    /// An animated Julia set in fixed point; `--cost` iterations per pixel, always.
    Julia,
}

impl SceneKind {
    /// Every scene, in the order the viewer cycles through them.
    pub const ALL: [SceneKind; 2] = [SceneKind::Gradient, SceneKind::Julia];

    /// The CUDA kernel's name in `shaders/scenes.cu`.
    pub fn kernel_name(self) -> &'static str {
        match self {
            SceneKind::Gradient => "gradient",
            SceneKind::Julia => "julia",
        }
    }
}

impl fmt::Display for SceneKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.kernel_name())
    }
}

/// A scene at a size: everything the pixels depend on, except the frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Scene {
    /// Which scene.
    pub kind: SceneKind,
    /// Width in pixels.
    pub width: u32,
    /// Height in pixels.
    pub height: u32,
    /// Iterations per pixel (Julia); ignored by the gradient.
    pub cost: u32,
}

/// The most iterations per pixel a scene may ask (`--cost`, the director's
/// doubling, the balanced load's calibration).
pub const MAX_COST: u32 = 100_000;

/// Fixed-point fraction bits of the Julia iteration (Q3.28 in 64-bit lanes).
pub const FRAC: u32 = 28;

/// The per-frame arguments, identical for the CUDA kernel and the CPU reference.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FrameArgs {
    /// Animation tick (the frame number, unless the viewer pauses).
    pub tick: u32,
    /// Julia constant, real part, in Q28.
    pub cr: i32,
    /// Julia constant, imaginary part, in Q28.
    pub ci: i32,
    /// Complex-plane distance between two pixels, in Q28.
    pub step: i32,
}

impl FrameArgs {
    /// The arguments of animation tick `tick`.
    pub fn new(scene: &Scene, tick: u32) -> Self {
        // Starts near -0.46 + 0.64i (a set with an inside) and circles |c| = 0.7885.
        let angle = 2.2 + f64::from(tick) * 0.01;
        let one = f64::from(1u32 << FRAC);
        Self {
            tick,
            cr: (0.7885 * angle.cos() * one).round() as i32,
            ci: (0.7885 * angle.sin() * one).round() as i32,
            // 3.2 units across the wider side, square pixels.
            step: (3.2 * one / f64::from(scene.width.max(scene.height))) as i32,
        }
    }
}

/// One pixel of the scene, RGBA8. The CUDA kernels mirror this line by line.
pub fn pixel(scene: &Scene, args: &FrameArgs, x: u32, y: u32) -> [u8; 4] {
    match scene.kind {
        SceneKind::Gradient => gradient(args.tick, x, y),
        SceneKind::Julia => julia(scene, args, x, y),
    }
}

fn gradient(t: u32, x: u32, y: u32) -> [u8; 4] {
    let r = x.wrapping_add(t.wrapping_mul(4));
    let g = y.wrapping_add(t.wrapping_mul(2));
    let b = (((x >> 5) ^ (y >> 5)) & 1).wrapping_mul(128).wrapping_add(t);
    [r as u8, g as u8, b as u8, 255]
}

fn julia(scene: &Scene, a: &FrameArgs, x: u32, y: u32) -> [u8; 4] {
    let step = i64::from(a.step);
    let mut zr = (i64::from(x) - i64::from(scene.width / 2)) * step;
    let mut zi = (i64::from(y) - i64::from(scene.height / 2)) * step;
    let (cr, ci) = (i64::from(a.cr), i64::from(a.ci));
    let four = 4i64 << FRAC;
    let mut escaped = scene.cost;
    // Always `cost` iterations: z freezes once it escapes, so the cost is exact.
    for k in 0..scene.cost {
        let zr2 = (zr * zr) >> FRAC;
        let zi2 = (zi * zi) >> FRAC;
        if escaped == scene.cost && zr2 + zi2 > four {
            escaped = k;
        }
        if escaped == scene.cost {
            zi = ((2 * zr * zi) >> FRAC) + ci;
            zr = zr2 - zi2 + cr;
        }
    }
    if escaped == scene.cost {
        return [16, 12, 40, 255];
    }
    let n = escaped.wrapping_mul(7).wrapping_add(a.tick);
    [n as u8, (n.wrapping_mul(3) >> 1) as u8, (255 - (n & 255)) as u8, 255]
}

/// Writes the RGBA8 pixel `px` into `out` (the format's bytes per pixel) as
/// `format` stores it; the kernels' `put` in `shaders/scenes.cu` mirrors it.
/// Float formats hold `channel / 255` (one IEEE division in `f32`, then for
/// RGBA16F rounded to nearest even into a half: what the GPU computes, so a
/// correct pipeline matches bit for bit); R32F keeps red; BGRA8 swaps red
/// and blue; sRGB holds the same (encoded) bytes as RGBA8.
pub fn store(format: Format, px: [u8; 4], out: &mut [u8]) {
    let unit = |b: u8| f32::from(b) / 255.0;
    match format {
        Format::Rgba8 | Format::Rgba8Srgb => out.copy_from_slice(&px),
        Format::Bgra8 => out.copy_from_slice(&[px[2], px[1], px[0], px[3]]),
        Format::Rgba16f => {
            for (c, o) in px.iter().zip(out.chunks_exact_mut(2)) {
                o.copy_from_slice(&half::f16::from_f32(unit(*c)).to_le_bytes());
            }
        }
        Format::Rgba32f => {
            for (c, o) in px.iter().zip(out.chunks_exact_mut(4)) {
                o.copy_from_slice(&unit(*c).to_le_bytes());
            }
        }
        Format::R32f => out.copy_from_slice(&unit(px[0]).to_le_bytes()),
    }
}

/// The channels of one stored pixel as floats (8-bit channels in 0–255,
/// float channels × 255, so both compare in 8-bit levels); R32F as (r, 0, 0, 1 × 255).
pub fn load(format: Format, px: &[u8]) -> [f32; 4] {
    let f32_at = |i: usize| px.get(i..i + 4).map_or(0.0, |b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]));
    match format {
        Format::Rgba8 | Format::Rgba8Srgb => [px[0], px[1], px[2], px[3]].map(f32::from),
        Format::Bgra8 => [px[2], px[1], px[0], px[3]].map(f32::from),
        Format::Rgba16f => {
            [0, 2, 4, 6].map(|i| half::f16::from_le_bytes([px[i], px[i + 1]]).to_f32() * 255.0)
        }
        Format::Rgba32f => [0, 4, 8, 12].map(|i| f32_at(i) * 255.0),
        Format::R32f => [f32_at(0) * 255.0, 0.0, 0.0, 255.0],
    }
}

/// Renders a whole frame into `out` (RGBA8, rows of `width * 4` bytes),
/// splitting the rows over `threads` CPU threads.
#[allow(dead_code)] // the tests and examples use it (they include this file)
pub fn render_cpu(scene: &Scene, args: &FrameArgs, out: &mut [u8], threads: usize) {
    render_cpu_as(scene, args, Format::Rgba8, out, threads);
}

/// Renders a whole frame in `format` into `out` (packed rows of `width ×
/// bytes per pixel`), splitting the rows over `threads` CPU threads.
pub fn render_cpu_as(scene: &Scene, args: &FrameArgs, format: Format, out: &mut [u8], threads: usize) {
    use rayon::prelude::*;
    let row = scene.width as usize * format.bytes_per_pixel() as usize;
    assert_eq!(out.len(), row * scene.height as usize, "render_cpu: wrong buffer size");
    if row == 0 {
        return;
    }
    let rows_per = (scene.height as usize).div_ceil(threads.max(1)).max(1);
    let fill = |chunk_index: usize, chunk: &mut [u8]| {
        // One RGBA8 row, reused: formats other than RGBA8 are converted from it.
        let mut rgba = Vec::new();
        for (i, line) in chunk.chunks_exact_mut(row).enumerate() {
            render_row(scene, args, (chunk_index * rows_per + i) as u32, format, line, &mut rgba);
        }
    };
    if threads <= 1 {
        // On the caller's thread (a PNG worker): going through rayon would
        // park this thread while one of rayon's does the same work.
        return fill(0, out);
    }
    // rayon's pool: its threads live as long as the process, so a frame spawns none (spawning
    // threads per frame made validation layer 1.3.239 stall: examples/host_wait_race.rs --spawn).
    out.par_chunks_mut(rows_per * row).enumerate().for_each(|(chunk_index, chunk)| fill(chunk_index, chunk));
}

/// Row `y` of the scene in `format` into `line`. The scene is rendered as
/// RGBA8 (straight into `line` for the 8-bit formats), then stored in the
/// format: each loop has a constant stride, so it is unrolled and vectorized
/// (a per-pixel `match` on the format and scene keeps it from being).
fn render_row(scene: &Scene, args: &FrameArgs, y: u32, format: Format, line: &mut [u8], rgba: &mut Vec<u8>) {
    match format {
        Format::Rgba8 | Format::Rgba8Srgb => scene_row::<false>(scene, args, y, line),
        Format::Bgra8 => scene_row::<true>(scene, args, y, line),
        Format::Rgba16f | Format::Rgba32f | Format::R32f => {
            rgba.resize(scene.width as usize * 4, 0);
            scene_row::<false>(scene, args, y, rgba);
            store_row(format, rgba, line);
        }
    }
}

/// Row `y` of the scene into `line` (`width × 4` bytes): [`pixel`] for every
/// x, as RGBA8, or BGRA8 with `BGRA`.
fn scene_row<const BGRA: bool>(scene: &Scene, args: &FrameArgs, y: u32, line: &mut [u8]) {
    let order = |[r, g, b, a]: [u8; 4]| if BGRA { [b, g, r, a] } else { [r, g, b, a] };
    match scene.kind {
        SceneKind::Gradient => {
            // `gradient` as one 32-bit word per pixel, what is constant along the row out of
            // the loop: written so, the loop is vectorized (written as bytes, it is not).
            let t = args.tick;
            let (r0, g, yb) = (t.wrapping_mul(4), y.wrapping_add(t.wrapping_mul(2)) & 255, y >> 5);
            let (r_at, b_at) = if BGRA { (16, 0) } else { (0, 16) };
            for (x, px) in line.chunks_exact_mut(4).enumerate() {
                let x = x as u32;
                let b = (((x >> 5) ^ yb) & 1).wrapping_mul(128).wrapping_add(t) & 255;
                let word = ((x.wrapping_add(r0) & 255) << r_at) | (g << 8) | (b << b_at) | (255 << 24);
                px.copy_from_slice(&word.to_le_bytes());
            }
        }
        SceneKind::Julia => {
            for (x, px) in line.chunks_exact_mut(4).enumerate() {
                px.copy_from_slice(&order(julia(scene, args, x as u32, y)));
            }
        }
    }
}

/// What [`store`] writes for each 8-bit level, by table: `level / 255` as
/// an `f32`, and that value as a half's bits.
struct Levels {
    unit: [f32; 256],
    half: [u16; 256],
}

static LEVELS: std::sync::LazyLock<Levels> = std::sync::LazyLock::new(|| {
    let unit: [f32; 256] = std::array::from_fn(|b| f32::from(b as u8) / 255.0);
    Levels { unit, half: unit.map(|u| half::f16::from_f32(u).to_bits()) }
});

/// An RGBA8 row stored as a float `format` (what [`store`] does, pixel by pixel).
fn store_row(format: Format, rgba: &[u8], line: &mut [u8]) {
    let levels = &*LEVELS;
    match format {
        // Each pixel as one word: written channel by channel, the loops are not vectorized.
        Format::Rgba16f => {
            let half = |c: u8| u64::from(levels.half[usize::from(c)]);
            for (px, out) in rgba.chunks_exact(4).zip(line.chunks_exact_mut(8)) {
                let word = half(px[0]) | half(px[1]) << 16 | half(px[2]) << 32 | half(px[3]) << 48;
                out.copy_from_slice(&word.to_le_bytes());
            }
        }
        Format::Rgba32f => {
            let unit = |c: u8| u128::from(levels.unit[usize::from(c)].to_bits());
            for (px, out) in rgba.chunks_exact(4).zip(line.chunks_exact_mut(16)) {
                let word = unit(px[0]) | unit(px[1]) << 32 | unit(px[2]) << 64 | unit(px[3]) << 96;
                out.copy_from_slice(&word.to_le_bytes());
            }
        }
        Format::R32f => {
            for (px, out) in rgba.chunks_exact(4).zip(line.chunks_exact_mut(4)) {
                out.copy_from_slice(&levels.unit[usize::from(px[0])].to_le_bytes());
            }
        }
        _ => {
            for (px, out) in
                rgba.chunks_exact(4).zip(line.chunks_exact_mut(format.bytes_per_pixel() as usize))
            {
                store(format, [px[0], px[1], px[2], px[3]], out);
            }
        }
    }
}

/// How far a frame is from its reference.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Diff {
    /// Pixels with any channel different (drawn frames: more than
    /// [`Diff::DRAWN_LEVELS`] different).
    pub differing: u64,
    /// Pixels in all (drawn frames: those compared).
    pub pixels: u64,
    /// The largest difference of one channel.
    pub max: u8,
    /// Whether this compares a drawn (filtered, letterboxed) frame.
    pub drawn: bool,
}

impl Diff {
    /// A picture of `size` that differs in every pixel by 255 (nothing to
    /// compare it with: a missing golden file, a frame with no reference).
    pub fn everywhere(size: vk::Extent2D) -> Self {
        let pixels = u64::from(size.width) * u64::from(size.height);
        Self { differing: pixels, pixels, max: 255, drawn: false }
    }

    /// Compares two RGBA8 frames of equal size.
    #[allow(dead_code)] // the tests and examples use it (they include this file)
    pub fn between(got: &[u8], want: &[u8]) -> Self {
        Self::between_as(Format::Rgba8, got, want)
    }

    /// Compares two frames of `format` and equal size, channel by channel in
    /// 8-bit levels (a float channel's difference × 255, rounded up: so the
    /// tolerance reads the same for every format).
    pub fn between_as(format: Format, got: &[u8], want: &[u8]) -> Self {
        let bpp = format.bytes_per_pixel() as usize;
        let mut d = Diff { pixels: (want.len() / bpp) as u64, ..Diff::default() };
        // Runs of equal bytes (nearly all of a good frame) are skipped at memcmp
        // speed; only runs that differ are compared pixel by pixel.
        let run = 4096 * bpp;
        for (got, want) in got.chunks(run).zip(want.chunks(run)).filter(|(a, b)| a != b) {
            for (a, b) in got.chunks_exact(bpp).zip(want.chunks_exact(bpp)).filter(|(a, b)| a != b) {
                let (a, b) = (load(format, a), load(format, b));
                let m = a.iter().zip(&b).map(|(x, y)| (x - y).abs()).fold(0.0f32, f32::max);
                // NaN or any difference counts; the size of it in whole levels, at least 1.
                let m = if m.is_nan() { 255.0 } else { m.ceil().clamp(1.0, 255.0) };
                d.differing += 1;
                d.max = d.max.max(m as u8);
            }
        }
        if got.len() != want.len() {
            d.differing = d.pixels;
            d.max = 255;
        }
        d
    }

    /// Compares a frame of `format` with the scene's reference, rendered a
    /// row at a time as it is compared: the same [`Diff`] as
    /// [`Diff::between_as`] against [`render_cpu_as`]'s frame, without
    /// writing and reading back a whole reference frame.
    pub fn against_scene(scene: &Scene, args: &FrameArgs, format: Format, got: &[u8]) -> Self {
        let row = scene.width as usize * format.bytes_per_pixel() as usize;
        let pixels = u64::from(scene.width) * u64::from(scene.height);
        if got.len() != row * scene.height as usize {
            return Diff { differing: pixels, pixels, max: 255, drawn: false };
        }
        let mut d = Diff { pixels, ..Diff::default() };
        let (mut want, mut rgba) = (vec![0u8; row], Vec::new());
        for (y, got) in got.chunks_exact(row.max(1)).enumerate() {
            render_row(scene, args, y as u32, format, &mut want, &mut rgba);
            if got != want {
                let r = Self::between_as(format, got, &want);
                d.differing += r.differing;
                d.max = d.max.max(r.max);
            }
        }
        d
    }

    /// How far a drawn pixel may be from the reference and still count as equal.
    pub const DRAWN_LEVELS: u8 = 4;

    /// Compares a drawn RGBA8 frame with its reference (RGB, `None`: not compared).
    pub fn drawn(got: &[u8], want: &[Option<[f64; 3]>]) -> Self {
        let mut d = Diff { drawn: true, ..Diff::default() };
        for (a, b) in got.chunks_exact(4).zip(want) {
            let Some(b) = b else { continue };
            let m = (0..3).map(|c| (f64::from(a[c]) - b[c]).abs()).fold(0.0, f64::max).round();
            let m = m.min(255.0) as u8;
            d.pixels += 1;
            d.differing += u64::from(m > Self::DRAWN_LEVELS);
            d.max = d.max.max(m);
        }
        if got.len() / 4 != want.len() {
            (d.differing, d.max) = (d.pixels.max(1), 255);
        }
        d
    }

    /// The project's tolerance: at most 1 LSB per channel and at least 99.9% of
    /// pixels exact; for a drawn frame (filtered by the GPU's sampler), at least
    /// 99.9% of pixels within [`Diff::DRAWN_LEVELS`] and none beyond 16.
    pub fn within_tolerance(&self) -> bool {
        match self.drawn {
            false => self.max <= 1 && self.differing * 1000 <= self.pixels,
            true => self.max <= 16 && self.differing * 1000 <= self.pixels,
        }
    }
}

/// The letterbox: the largest rectangle with the frame's aspect ratio,
/// centred in the window, in whole pixels.
pub fn letterbox(window: vk::Extent2D, frame: vk::Extent2D) -> vk::Rect2D {
    let (ww, wh) = (f64::from(window.width), f64::from(window.height));
    let (fw, fh) = (f64::from(frame.width.max(1)), f64::from(frame.height.max(1)));
    let scale = (ww / fw).min(wh / fh);
    let (w, h) = ((fw * scale).round().max(1.0) as u32, (fh * scale).round().max(1.0) as u32);
    vk::Rect2D {
        offset: vk::Offset2D {
            x: ((window.width - w.min(window.width)) / 2) as i32,
            y: ((window.height - h.min(window.height)) / 2) as i32,
        },
        extent: vk::Extent2D { width: w.min(window.width), height: h.min(window.height) },
    }
}

/// The frame pixel under window pixel (`x`, `y`) of a window showing the
/// frame letterboxed ([`letterbox`]); `None` off the frame.
pub fn frame_pixel(window: vk::Extent2D, frame: vk::Extent2D, (x, y): (f64, f64)) -> Option<(u32, u32)> {
    let bx = letterbox(window, frame);
    let u = (x - f64::from(bx.offset.x)) / f64::from(bx.extent.width);
    let v = (y - f64::from(bx.offset.y)) / f64::from(bx.extent.height);
    if !(0.0..1.0).contains(&u) || !(0.0..1.0).contains(&v) {
        return None;
    }
    Some(((u * f64::from(frame.width)) as u32, (v * f64::from(frame.height)) as u32))
}

/// What the draw pass shows of a stored pixel, before filtering: RGB in
/// 8-bit levels, in the space the sampler filters in (an sRGB frame is
/// decoded to linear; the pass encodes it again), R32F as grey.
fn sampled(format: Format, px: &[u8]) -> [f64; 3] {
    let [r, g, b, _] = load(format, px).map(f64::from);
    match format {
        Format::Rgba8Srgb => [r, g, b].map(|c| srgb_to_linear(c / 255.0) * 255.0),
        Format::R32f => [r, r, r],
        _ => [r, g, b],
    }
}

/// The sRGB transfer function, decoding (IEC 61966-2-1).
pub fn srgb_to_linear(c: f64) -> f64 {
    if c <= 0.04045 {
        c / 12.92
    } else {
        ((c + 0.055) / 1.055).powf(2.4)
    }
}

/// The sRGB transfer function, encoding.
pub fn linear_to_srgb(c: f64) -> f64 {
    if c <= 0.003_130_8 {
        c * 12.92
    } else {
        1.055 * c.powf(1.0 / 2.4) - 0.055
    }
}

/// What the draw pass should produce: the frame of `size` (stored in
/// `format`) letterboxed into a `target` of its size and sampled bilinearly
/// (clamp to edge), clamped to 0–255 (exposure 1), in RGB. `None` marks the
/// letterbox rectangle's edge pixels, whose coverage is the rasterizer's
/// call; the bars are black.
pub fn drawn_reference(
    frame: &[u8],
    format: Format,
    size: vk::Extent2D,
    target: vk::Extent2D,
) -> Vec<Option<[f64; 3]>> {
    drawn_reference_exposed(frame, format, 1.0, size, target)
}

/// [`drawn_reference`] with the viewer's `exposure` (colours are scaled by
/// it, in linear space, before they are clamped).
pub fn drawn_reference_exposed(
    frame: &[u8],
    format: Format,
    exposure: f64,
    size: vk::Extent2D,
    target: vk::Extent2D,
) -> Vec<Option<[f64; 3]>> {
    let (fw, fh) = (size.width, size.height);
    let (tw, th) = (target.width, target.height);
    let r = letterbox(target, size);
    let (x0, y0) = (f64::from(r.offset.x), f64::from(r.offset.y));
    let (rw, rh) = (f64::from(r.extent.width), f64::from(r.extent.height));
    let bpp = format.bytes_per_pixel() as usize;
    let texel = |x: i64, y: i64| {
        let (x, y) = (x.clamp(0, i64::from(fw) - 1) as usize, y.clamp(0, i64::from(fh) - 1) as usize);
        let i = (y * fw as usize + x) * bpp;
        sampled(format, &frame[i..i + bpp])
    };
    let shown = |c: f64| match format {
        Format::Rgba8Srgb => linear_to_srgb((c * exposure / 255.0).clamp(0.0, 1.0)) * 255.0,
        _ => (c * exposure).clamp(0.0, 255.0),
    };
    let mut out = Vec::with_capacity((tw * th) as usize);
    for py in 0..th {
        for px in 0..tw {
            let (fx, fy) = (f64::from(px) + 0.5 - x0, f64::from(py) + 0.5 - y0);
            if fx < 0.0 || fy < 0.0 || fx > rw || fy > rh {
                out.push(Some([0.0; 3]));
                continue;
            }
            if fx < 1.0 || fy < 1.0 || fx > rw - 1.0 || fy > rh - 1.0 {
                out.push(None);
                continue;
            }
            let (u, v) = (fx / rw * f64::from(fw) - 0.5, fy / rh * f64::from(fh) - 0.5);
            let (ix, iy) = (u.floor() as i64, v.floor() as i64);
            let (ax, ay) = (u - u.floor(), v - v.floor());
            let (t00, t10, t01, t11) =
                (texel(ix, iy), texel(ix + 1, iy), texel(ix, iy + 1), texel(ix + 1, iy + 1));
            let mut p = [0.0; 3];
            for (c, v) in p.iter_mut().enumerate() {
                let top = t00[c] * (1.0 - ax) + t10[c] * ax;
                let bottom = t01[c] * (1.0 - ax) + t11[c] * ax;
                *v = shown(top * (1.0 - ay) + bottom * ay);
            }
            out.push(Some(p));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn scene(kind: SceneKind) -> Scene {
        Scene { kind, width: 64, height: 48, cost: 32 }
    }

    /// The definition the row renderer must equal: [`store`] of [`pixel`], pixel by pixel.
    fn per_pixel(scene: &Scene, args: &FrameArgs, format: Format) -> Vec<u8> {
        let bpp = format.bytes_per_pixel() as usize;
        let mut out = vec![0u8; scene.width as usize * scene.height as usize * bpp];
        for (i, px) in out.chunks_exact_mut(bpp).enumerate() {
            let (x, y) = ((i % scene.width as usize) as u32, (i / scene.width as usize) as u32);
            store(format, pixel(scene, args, x, y), px);
        }
        out
    }

    #[test]
    fn rows_equal_the_per_pixel_definition_in_every_format() {
        for (width, height) in [(1, 1), (3, 5), (67, 29)] {
            for kind in SceneKind::ALL {
                let scene = Scene { kind, width, height, cost: 24 };
                for tick in [0, 77, 300] {
                    let args = FrameArgs::new(&scene, tick);
                    for format in Format::ALL {
                        let mut got = vec![0u8; per_pixel(&scene, &args, format).len()];
                        for threads in [1, 3] {
                            got.fill(0xAB);
                            render_cpu_as(&scene, &args, format, &mut got, threads);
                            let want = per_pixel(&scene, &args, format);
                            assert!(got == want, "{kind} {width}x{height} tick {tick} {format} x{threads}");
                        }
                    }
                }
            }
        }
    }

    /// The fastest of `rounds` calls of each of `a` and `b`, taken in turns
    /// (so both meet the same interference, and the minimum drops it).
    fn fastest_of(rounds: usize, mut a: impl FnMut(), mut b: impl FnMut()) -> (Duration, Duration) {
        let time = |f: &mut dyn FnMut()| {
            let started = std::time::Instant::now();
            f();
            started.elapsed()
        };
        (0..rounds)
            .fold((Duration::MAX, Duration::MAX), |(ta, tb), _| (ta.min(time(&mut a)), tb.min(time(&mut b))))
    }

    /// The reference once lost 5× its speed to a per-pixel `match` on the
    /// format. Against the plain per-pixel loop of RGBA8 (f6b1a43's
    /// reference, here not vectorized): the 8-bit formats render the
    /// gradient at least twice as fast, the float formats at least as fast
    /// per 4 bytes of output.
    #[test]
    fn the_reference_is_as_fast_as_the_plain_rgba8_loop_in_every_format() {
        if cfg!(debug_assertions) {
            eprintln!("skipped: timings need a release build (cargo test --release)");
            return;
        }
        let scene = Scene { kind: SceneKind::Gradient, width: 1280, height: 720, cost: 1 };
        let args = FrameArgs::new(&scene, 5);
        let mut plain = vec![0u8; 1280 * 720 * 4];
        for format in Format::ALL {
            let bpp = format.bytes_per_pixel();
            let mut out = vec![0u8; plain.len() / 4 * bpp as usize];
            let (now, loop_rgba8) = fastest_of(
                15,
                || {
                    render_cpu_as(std::hint::black_box(&scene), &args, format, &mut out, 1);
                    std::hint::black_box(&mut out);
                },
                || {
                    // As a caller has them: not constants the loop could be folded with.
                    let (scene, args) = std::hint::black_box((&scene, &args));
                    for (y, line) in plain.chunks_exact_mut(scene.width as usize * 4).enumerate() {
                        for (x, px) in line.chunks_exact_mut(4).enumerate() {
                            px.copy_from_slice(&pixel(scene, args, x as u32, y as u32));
                        }
                    }
                    std::hint::black_box(&mut plain);
                },
            );
            let allowed = match format.is_float() {
                false => loop_rgba8 / 2,
                true => loop_rgba8 * bpp / 4,
            };
            let said = format!("{format}: {now:?} per 720p frame, the plain RGBA8 loop {loop_rgba8:?}");
            eprintln!("{said}");
            assert!(now <= allowed, "{said}");
        }
    }

    #[test]
    fn comparing_row_by_row_counts_as_comparing_whole_frames() {
        for format in Format::ALL {
            let scene = Scene { kind: SceneKind::Julia, width: 37, height: 23, cost: 16 };
            let args = FrameArgs::new(&scene, 9);
            let mut want = vec![0u8; 37 * 23 * format.bytes_per_pixel() as usize];
            render_cpu_as(&scene, &args, format, &mut want, 1);
            let mut got = want.clone();
            assert_eq!(
                Diff::against_scene(&scene, &args, format, &got),
                Diff { pixels: 851, ..Diff::default() }
            );
            let bpp = format.bytes_per_pixel() as usize;
            for (pixel, flip) in [(0, 0x01), (400, 0x80), (850, 0x10)] {
                got[pixel * bpp] ^= flip;
            }
            let whole = Diff::between_as(format, &got, &want);
            assert_eq!(whole.differing, 3, "{format}");
            assert_eq!(Diff::against_scene(&scene, &args, format, &got), whole, "{format}");
            assert_eq!(Diff::against_scene(&scene, &args, format, &got[1..]).differing, 851, "{format}");
        }
    }

    #[test]
    fn threads_do_not_change_the_picture() {
        for kind in SceneKind::ALL {
            let s = scene(kind);
            let args = FrameArgs::new(&s, 17);
            let mut one = vec![0u8; 64 * 48 * 4];
            let mut many = vec![1u8; 64 * 48 * 4];
            render_cpu(&s, &args, &mut one, 1);
            render_cpu(&s, &args, &mut many, 5);
            assert_eq!(one, many, "{kind}");
        }
    }

    #[test]
    fn scenes_animate_and_differ() {
        let mut frames = Vec::new();
        for kind in SceneKind::ALL {
            for tick in [0, 40] {
                let s = scene(kind);
                let mut f = vec![0u8; 64 * 48 * 4];
                render_cpu(&s, &FrameArgs::new(&s, tick), &mut f, 2);
                frames.push(f);
            }
        }
        for i in 0..frames.len() {
            for j in i + 1..frames.len() {
                assert_ne!(frames[i], frames[j], "frames {i} and {j} are identical");
            }
        }
    }

    #[test]
    fn julia_has_inside_and_outside() {
        let s = Scene { kind: SceneKind::Julia, width: 160, height: 90, cost: 64 };
        let mut f = vec![0u8; 160 * 90 * 4];
        render_cpu(&s, &FrameArgs::new(&s, 0), &mut f, 2);
        let inside = f.chunks_exact(4).filter(|p| *p == [16, 12, 40, 255]).count();
        assert!(inside > 10 && inside < 160 * 90 - 10, "inside = {inside}");
    }

    #[test]
    fn diff_counts_and_tolerates() {
        let want = vec![10u8; 4000 * 4];
        let mut got = want.clone();
        assert_eq!(Diff::between(&got, &want), Diff { differing: 0, pixels: 4000, max: 0, drawn: false });
        got[0] = 11;
        got[4] = 9;
        got[8] = 9; // three pixels, 1 LSB: within 0.1% of 4000
        assert!(Diff::between(&got, &want).within_tolerance());
        got[12] = 9;
        got[16] = 9; // five pixels: over 0.1%
        assert!(!Diff::between(&got, &want).within_tolerance());
        let mut far = want.clone();
        far[3] = 12;
        let d = Diff::between(&far, &want);
        assert_eq!((d.differing, d.max), (1, 2));
        assert!(!d.within_tolerance());
        assert!(!Diff::between(&want[4..], &want).within_tolerance());
        // Differences in several runs of the equal-run skip, the last pixel included.
        let mut spread = want.clone();
        for (i, delta) in [(0, 1u8), (4099, 3), (9000, 7), (4000 * 4 - 1, 5)] {
            spread[i] = spread[i].wrapping_add(delta);
        }
        assert_eq!(Diff::between(&spread, &want), Diff { differing: 4, pixels: 4000, max: 7, drawn: false });
    }

    fn e(width: u32, height: u32) -> vk::Extent2D {
        vk::Extent2D { width, height }
    }

    #[test]
    fn letterbox_keeps_the_aspect_ratio() {
        // Wider window: bars left and right.
        let r = letterbox(e(800, 300), e(320, 180));
        assert_eq!((r.offset.x, r.offset.y, r.extent.width, r.extent.height), (133, 0, 533, 300));
        // Taller window: bars above and below.
        let r = letterbox(e(400, 400), e(320, 180));
        assert_eq!((r.offset.x, r.offset.y, r.extent.width, r.extent.height), (0, 87, 400, 225)); // 175 px of bars: 87 above, 88 below
                                                                                                  // Same ratio: fills the window.
        let r = letterbox(e(1280, 720), e(1920, 1080));
        assert_eq!((r.offset.x, r.offset.y, r.extent.width, r.extent.height), (0, 0, 1280, 720));
    }

    #[test]
    fn window_pixels_map_to_frame_pixels() {
        // 320x180 shown at 533x300 from x = 133 (bars left and right).
        let (w, f) = (e(800, 300), e(320, 180));
        assert_eq!(frame_pixel(w, f, (133.0, 0.0)), Some((0, 0)));
        assert_eq!(frame_pixel(w, f, (665.9, 299.9)), Some((319, 179)));
        assert_eq!(frame_pixel(w, f, (399.5, 150.0)), Some((160, 90)));
        assert_eq!(frame_pixel(w, f, (132.9, 10.0)), None, "on the bar");
        assert_eq!(frame_pixel(w, f, (666.0, 10.0)), None, "past the frame");
        assert_eq!(frame_pixel(w, f, (300.0, -1.0)), None, "above the window");
    }
}
