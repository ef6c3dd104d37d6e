//! The browser view's codec, chosen by measurement: consecutive 1920x1080
//! frames of the julia and gradient scenes (the run layer's CPU references),
//! converted to I420 as the view's compute pass does it, encoded in real
//! time by VP8 and VP9 (libvpx) at a sweep of bitrates and by JPEG
//! (libjpeg-turbo) at a sweep of qualities, decoded, and compared with the
//! exact RGB frames. Per codec and scene: the bytes a
//! frame takes at the PSNR of JPEG q80 (interpolated between the sweep's
//! points), and the encoder's median time per frame there, on `THREADS`
//! threads. The stream nearest that PSNR is written to `OUT` for the
//! decode test in Chromium (decode.html).
//!
//! H.264 (OpenH264) and AV1 (rav1e) were measured by the same sweep; their
//! encoders are not the view's dependencies, so their code stays at commit
//! 9712a98 (docs/results/2026-11-27-links/codecs/) with the figures in
//! docs/streaming.md. Built and linted with the workspace:
//!   cargo run --release -p vkcuda-codecs -- FRAMES THREADS OUT
//!
//!   codecs FRAMES THREADS OUT [julia|gradient]

// A measurement harness over libvpx's C API, not the product: its unsafe blocks
// are whole encode and decode sessions (the view's own encoder, vkcuda-serve's
// vp8.rs, keeps the workspace's one-operation, one-SAFETY-line rule).
#![allow(clippy::undocumented_unsafe_blocks, clippy::multiple_unsafe_ops_per_block)]

use std::io::Write;
use std::mem::MaybeUninit;
use std::time::Instant;

use vkcuda::Format;
use vkcuda_run::scene::{render_cpu_as, FrameArgs, Scene, SceneKind};
use vkcuda_serve::encode::jpeg_of_rgba;
use vkcuda_serve::vp8::Vp8;

const W: usize = 1920;
const H: usize = 1080;

/// One encoded frame.
struct Packet {
    /// Its bytes.
    data: Vec<u8>,
    /// It is a key frame.
    key: bool,
}

/// One frame through an encoder ([`point`]).
struct Encoded {
    packet: Packet,
    /// The decoded frame's PSNR, dB.
    psnr: f64,
    /// The encode's time, ms.
    ms: f64,
}

/// A decoded picture's plane: its bytes, and the bytes of a row.
#[derive(Clone, Copy)]
struct Plane<'a> {
    bytes: &'a [u8],
    stride: usize,
}

/// The bytes a frame takes at a PSNR ([`at_psnr`]), and the sweep point nearest it.
struct AtPsnr<'a> {
    bytes: f64,
    nearest: &'a Point,
}

/// A sweep point: mean bytes and PSNR per frame, median encode ms, and the stream.
struct Point {
    setting: f64,
    bytes: f64,
    psnr: f64,
    ms: f64,
    stream: Vec<Packet>,
}

fn frames(kind: SceneKind, n: usize) -> Vec<Vec<u8>> {
    frames_every(kind, n, 1)
}

/// `n` frames `step` ticks apart (the view sends every `step`-th frame of a fast producer).
fn frames_every(kind: SceneKind, n: usize, step: usize) -> Vec<Vec<u8>> {
    let scene = Scene { kind, width: W as u32, height: H as u32, cost: 64 };
    (0..n)
        .map(|t| {
            let mut out = vec![0u8; W * H * 4];
            render_cpu_as(&scene, &FrameArgs::new(&scene, (t * step) as u32), Format::Rgba8, &mut out, 16);
            out
        })
        .collect()
}

/// BT.601 I420 of RGBA in integers, as shaders/draw.wgsl writes it (`full`: JPEG's range).
fn i420(rgba: &[u8], full: bool) -> Vec<u8> {
    let (cw, ch) = (W / 2, H / 2);
    let mut out = vec![0u8; W * H + 2 * cw * ch];
    let px = |x: usize, y: usize| {
        let p = &rgba[(y * W + x) * 4..];
        [i32::from(p[0]), i32::from(p[1]), i32::from(p[2])]
    };
    for y in 0..H {
        for x in 0..W {
            let c = px(x, y);
            out[y * W + x] = match full {
                true => (77 * c[0] + 150 * c[1] + 29 * c[2] + 128) >> 8,
                false => ((66 * c[0] + 129 * c[1] + 25 * c[2] + 128) >> 8) + 16,
            } as u8;
        }
    }
    for y in 0..ch {
        for x in 0..cw {
            let s = [(0, 0), (1, 0), (0, 1), (1, 1)].iter().fold([0; 3], |s, &(dx, dy)| {
                let c = px(2 * x + dx, 2 * y + dy);
                [s[0] + c[0], s[1] + c[1], s[2] + c[2]]
            });
            let c = s.map(|v| (v + 2) / 4);
            let (u, v) = match full {
                true => (
                    (-43 * c[0] - 85 * c[1] + 128 * c[2] + 128) >> 8,
                    (128 * c[0] - 107 * c[1] - 21 * c[2] + 128) >> 8,
                ),
                false => (
                    (-38 * c[0] - 74 * c[1] + 112 * c[2] + 128) >> 8,
                    (112 * c[0] - 94 * c[1] - 18 * c[2] + 128) >> 8,
                ),
            };
            out[W * H + y * cw + x] = (u + 128).clamp(0, 255) as u8;
            out[W * H + cw * ch + y * cw + x] = (v + 128).clamp(0, 255) as u8;
        }
    }
    out
}

/// PSNR (RGB) of decoded limited-range I420 planes against the exact frame
/// (`v` has `u`'s stride).
fn psnr_i420(rgba: &[u8], y: Plane<'_>, u: Plane<'_>, v: &[u8]) -> f64 {
    let mut se = 0f64;
    for j in 0..H {
        for i in 0..W {
            let yy = f64::from(y.bytes[j * y.stride + i]) - 16.0;
            let c = (j / 2) * u.stride + i / 2;
            let (uu, vv) = (f64::from(u.bytes[c]) - 128.0, f64::from(v[c]) - 128.0);
            let rgb =
                [1.164 * yy + 1.596 * vv, 1.164 * yy - 0.392 * uu - 0.813 * vv, 1.164 * yy + 2.017 * uu];
            for (c, want) in rgb.iter().zip(&rgba[(j * W + i) * 4..(j * W + i) * 4 + 3]) {
                let d = c.round().clamp(0.0, 255.0) - f64::from(*want);
                se += d * d;
            }
        }
    }
    10.0 * (255.0f64 * 255.0 / (se / (W * H * 3) as f64)).log10()
}

fn psnr_rgb(a: &[u8], b: &[u8]) -> f64 {
    let mut se = 0f64;
    for i in 0..W * H {
        for c in 0..3 {
            let d = f64::from(a[i * 4 + c]) - f64::from(b[i * 4 + c]);
            se += d * d;
        }
    }
    10.0 * (255.0f64 * 255.0 / (se / (W * H * 3) as f64)).log10()
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

/// Encodes every frame with `encode` (input, frame number → packet, decoded PSNR) into a point.
fn point(setting: f64, frames: &[Vec<u8>], mut encode: impl FnMut(&[u8], usize) -> Encoded) -> Point {
    let (mut bytes, mut psnr, mut ms, mut stream) = (0.0, 0.0, Vec::new(), Vec::new());
    for (n, f) in frames.iter().enumerate() {
        let Encoded { packet, psnr: p, ms: took } = encode(f, n);
        bytes += packet.data.len() as f64;
        psnr += p;
        ms.push(took);
        stream.push(packet);
    }
    let n = frames.len() as f64;
    Point { setting, bytes: bytes / n, psnr: psnr / n, ms: median(ms), stream }
}

fn jpeg(frames: &[Vec<u8>], quality: i32) -> Point {
    point(f64::from(quality), frames, |f, _| {
        let image = turbojpeg::Image {
            pixels: f,
            width: W,
            pitch: W * 4,
            height: H,
            format: turbojpeg::PixelFormat::RGBA,
        };
        let t = Instant::now();
        let data = turbojpeg::compress(image, quality, turbojpeg::Subsamp::Sub2x2).expect("JPEG").to_vec();
        let ms = t.elapsed().as_secs_f64() * 1e3;
        let back: turbojpeg::Image<Vec<u8>> =
            turbojpeg::decompress(&data, turbojpeg::PixelFormat::RGBA).expect("decoded");
        let psnr = psnr_rgb(f, &back.pixels);
        Encoded { packet: Packet { data, key: true }, psnr, ms }
    })
}

/// The packets of the frame just encoded: its bytes, and whether it is a key frame.
///
/// # Safety
/// `ctx` is an initialised libvpx encoder context.
unsafe fn packets(ctx: &mut vpx_sys::vpx_codec_ctx_t) -> Packet {
    use vpx_sys::*;
    let (mut it, mut data, mut key) = (std::ptr::null(), Vec::new(), false);
    loop {
        // SAFETY: the caller's context; the packet lives until the next call on it.
        let pkt = unsafe { vpx_codec_get_cx_data(ctx, &mut it) };
        if pkt.is_null() {
            return Packet { data, key };
        }
        // SAFETY: a packet libvpx owns; a frame packet's `frame` member is the one written.
        unsafe {
            if (*pkt).kind == vpx_codec_cx_pkt_kind::VPX_CODEC_CX_FRAME_PKT {
                let fr = (*pkt).data.frame;
                data.extend_from_slice(std::slice::from_raw_parts(fr.buf as *const u8, fr.sz as usize));
                key |= fr.flags & VPX_FRAME_IS_KEY != 0;
            }
        }
    }
}

/// Decodes `data` with `dctx` and scores the picture against `rgba`.
///
/// # Safety
/// `dctx` is an initialised libvpx decoder context of the stream `data` belongs to.
unsafe fn decoded_psnr(dctx: &mut vpx_sys::vpx_codec_ctx_t, data: &[u8], rgba: &[u8]) -> f64 {
    use vpx_sys::*;
    // SAFETY (all of this function): the caller's context; the picture lives until the next decode.
    unsafe {
        vpx_codec_decode(dctx, data.as_ptr(), data.len() as u32, std::ptr::null_mut(), 0);
        let mut dit = std::ptr::null();
        let d = &*vpx_codec_get_frame(dctx, &mut dit);
        let (ys, cs) = (d.stride[0] as usize, d.stride[1] as usize);
        let y = std::slice::from_raw_parts(d.planes[0], ys * H);
        let u = std::slice::from_raw_parts(d.planes[1], cs * H / 2);
        let v = std::slice::from_raw_parts(d.planes[2], cs * H / 2);
        psnr_i420(rgba, Plane { bytes: y, stride: ys }, Plane { bytes: u, stride: cs }, v)
    }
}

fn vpx(frames: &[Vec<u8>], kbps: u32, vp9: bool, threads: u32) -> Point {
    vpx_at(frames, kbps, vp9, threads, if vp9 { 9 } else { 10 }, 60)
}

/// `vpx` at a libvpx speed and a frame rate (the rate control's frames a second).
/// `speed`: 0–16 real time, libvpx choosing the speed from the time each frame
/// took (`cpu_used` its floor); 100 + N real time at the fixed speed N (libvpx
/// reads a negative `cpu_used` so); -N good-quality mode at speed N.
fn vpx_at(frames: &[Vec<u8>], kbps: u32, vp9: bool, threads: u32, speed: i32, fps: i32) -> Point {
    use vpx_sys::*;
    // SAFETY (all of this function): libvpx's documented use, one context per stream, buffers outliving each call.
    unsafe {
        let iface = if vp9 { vpx_codec_vp9_cx() } else { vpx_codec_vp8_cx() };
        let mut cfg = MaybeUninit::<vpx_codec_enc_cfg_t>::zeroed();
        vpx_codec_enc_config_default(iface, cfg.as_mut_ptr(), 0);
        let mut cfg = cfg.assume_init();
        (cfg.g_w, cfg.g_h, cfg.g_threads, cfg.g_lag_in_frames) = (W as u32, H as u32, threads, 0);
        cfg.g_timebase = vpx_rational { num: 1, den: fps };
        (cfg.rc_end_usage, cfg.rc_target_bitrate, cfg.rc_dropframe_thresh) = (vpx_rc_mode::VPX_CBR, kbps, 0);
        (cfg.rc_min_quantizer, cfg.rc_max_quantizer, cfg.kf_mode) = (2, 56, vpx_kf_mode::VPX_KF_DISABLED);
        (cfg.rc_buf_sz, cfg.rc_buf_initial_sz, cfg.rc_buf_optimal_sz) = (600, 400, 500);
        let mut ctx = MaybeUninit::<vpx_codec_ctx_t>::zeroed();
        vpx_codec_enc_init_ver(ctx.as_mut_ptr(), iface, &cfg, 0, VPX_ENCODER_ABI_VERSION as i32);
        let mut ctx = ctx.assume_init();
        if vp9 {
            vpx_codec_control_(
                &mut ctx,
                vp8e_enc_control_id::VP8E_SET_CPUUSED as i32,
                if speed >= 100 { 100 - speed } else { speed.abs() },
            );
            vpx_codec_control_(&mut ctx, vp8e_enc_control_id::VP9E_SET_ROW_MT as i32, 1u32);
            vpx_codec_control_(&mut ctx, vp8e_enc_control_id::VP9E_SET_TILE_COLUMNS as i32, 2i32);
        } else {
            vpx_codec_control_(
                &mut ctx,
                vp8e_enc_control_id::VP8E_SET_CPUUSED as i32,
                if speed >= 100 { 100 - speed } else { speed.abs() },
            );
            vpx_codec_control_(&mut ctx, vp8e_enc_control_id::VP8E_SET_TOKEN_PARTITIONS as i32, 3i32);
        }
        let dface = if vp9 { vpx_codec_vp9_dx() } else { vpx_codec_vp8_dx() };
        let mut dctx = MaybeUninit::<vpx_codec_ctx_t>::zeroed();
        vpx_codec_dec_init_ver(dctx.as_mut_ptr(), dface, std::ptr::null(), 0, VPX_DECODER_ABI_VERSION as i32);
        let mut dctx = dctx.assume_init();
        let p = point(f64::from(kbps), frames, |f, n| {
            let mut planes = i420(f, false);
            let mut img = MaybeUninit::<vpx_image_t>::zeroed();
            vpx_img_wrap(
                img.as_mut_ptr(),
                vpx_img_fmt::VPX_IMG_FMT_I420,
                W as u32,
                H as u32,
                1,
                planes.as_mut_ptr(),
            );
            let flags = if n == 0 { VPX_EFLAG_FORCE_KF as i64 } else { 0 };
            let t = Instant::now();
            let deadline = if speed < 0 { VPX_DL_GOOD_QUALITY } else { VPX_DL_REALTIME };
            vpx_codec_encode(&mut ctx, img.as_ptr(), n as i64, 1, flags, deadline as _);
            let packet = packets(&mut ctx);
            let ms = t.elapsed().as_secs_f64() * 1e3;
            let psnr = decoded_psnr(&mut dctx, &packet.data, f);
            Encoded { packet, psnr, ms }
        });
        vpx_codec_destroy(&mut ctx);
        vpx_codec_destroy(&mut dctx);
        p
    }
}

/// Bytes a frame takes at `target` PSNR, interpolated (log bytes) between the sweep's points.
fn at_psnr(points: &[Point], target: f64) -> Option<AtPsnr<'_>> {
    let mut sorted: Vec<&Point> = points.iter().collect();
    sorted.sort_by(|a, b| a.psnr.total_cmp(&b.psnr));
    let nearest =
        *sorted.iter().min_by(|a, b| (a.psnr - target).abs().total_cmp(&(b.psnr - target).abs()))?;
    for pair in sorted.windows(2) {
        let (lo, hi) = (pair[0], pair[1]);
        if lo.psnr <= target && target <= hi.psnr && hi.psnr > lo.psnr {
            let a = (target - lo.psnr) / (hi.psnr - lo.psnr);
            return Some(AtPsnr { bytes: (lo.bytes.ln() * (1.0 - a) + hi.bytes.ln() * a).exp(), nearest });
        }
    }
    None.or(Some(AtPsnr { bytes: f64::NAN, nearest }))
}

fn write_stream(out: &str, name: &str, stream: &[Packet]) {
    let mut file = std::fs::File::create(format!("{out}/{name}.bin")).expect("a stream file");
    for Packet { data, key } in stream {
        file.write_all(&(data.len() as u32).to_le_bytes()).expect("written");
        file.write_all(&[u8::from(*key)]).expect("written");
        file.write_all(data).expect("written");
    }
}

/// The encoder's speed against its bytes, on julia frames `step` ticks apart at
/// `fps` (the link bench's case: a producer far faster than the stream):
/// PSNR at each bitrate beside JPEG q80's, and the median encode ms.
///   codecs tune FRAMES THREADS STEP FPS [vp8-2|vp8104|vp910|...: one speed]
fn tune(args: &[String]) {
    let arg = |i: usize, d: usize| args.get(i).and_then(|a| a.parse().ok()).unwrap_or(d);
    let (n, threads, step, fps) = (arg(2, 30), arg(3, 4), arg(4, 85), arg(5, 30));
    let frames = frames_every(SceneKind::Julia, n, step);
    let q80 = jpeg(&frames, 80);
    println!("julia 1920x1080, {n} frames {step} ticks apart, {threads} threads, {fps} frames/s");
    println!("jpeg q80: {:.0} bytes, {:.2} dB, {:.1} ms", q80.bytes, q80.psnr, q80.ms);
    let kbps = [12_000u32, 16_000, 20_000, 24_000, 32_000];
    let only = args.get(6).map(String::as_str);
    let runs: Vec<(&str, bool, Vec<i32>)> = vec![
        ("vp8", false, vec![10, 8, 6, 4, -4, -3, -2, -1, 116, 112, 108, 106, 104, 103, 102, 101]),
        ("vp9", true, vec![9, 8, 7, 6, 5, -5, -4, -3]),
    ];
    for (codec, vp9, speeds) in runs {
        for speed in speeds {
            if only.is_some_and(|o| o != format!("{codec}{speed}")) {
                continue;
            }
            let points: Vec<Point> =
                kbps.iter().map(|&k| vpx_at(&frames, k, vp9, threads as u32, speed, fps as i32)).collect();
            let bytes = at_psnr(&points, q80.psnr).expect("points").bytes;
            let row: Vec<String> = points
                .iter()
                .map(|p| format!("{:.0}k:{:.2}dB/{:.0}B/{:.1}ms", p.setting, p.psnr, p.bytes, p.ms))
                .collect();
            println!(
                "{codec} speed {speed}: at q80's PSNR {bytes:.0} B ({:.2}x q80) | {}",
                bytes / q80.bytes,
                row.join(" ")
            );
        }
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let sub: Option<fn(&[String])> = match args.get(1).map(String::as_str) {
        Some("tune") => Some(tune),
        Some("pace") => Some(pace),
        Some("rate") => Some(rate),
        Some("dump") => Some(dump),
        Some("psnr") => Some(psnr_file),
        Some("weights") => Some(weights),
        _ => None,
    };
    if let Some(sub) = sub {
        return sub(&args);
    }
    let n: usize = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(60);
    let threads: usize = args.get(2).and_then(|a| a.parse().ok()).unwrap_or(4);
    let out = args.get(3).cloned().unwrap_or_else(|| "codec-streams".into());
    let only = args.get(4).cloned();
    std::fs::create_dir_all(&out).expect("the output folder");
    println!("1920x1080, {n} frames a scene, {threads} encoder threads, 60 frames/s rate control");
    println!("| scene | codec | bytes/frame at JPEG q80's PSNR | vs JPEG | encode ms/frame | PSNR of the sweep (dB) |");
    println!("|---|---|---|---|---|---|");
    for (scene, kind) in [("julia", SceneKind::Julia), ("gradient", SceneKind::Gradient)] {
        if only.as_deref().is_some_and(|o| o != scene) {
            continue;
        }
        let frames = frames(kind, n);
        let jpegs: Vec<Point> = [95, 90, 80, 70, 60, 50, 40, 30].iter().map(|&q| jpeg(&frames, q)).collect();
        let q80 = jpegs.iter().find(|p| p.setting == 80.0).expect("q80");
        let target = q80.psnr;
        write_stream(&out, &format!("jpeg-{scene}"), &q80.stream);
        let kbps = [1_000u32, 2_000, 4_000, 8_000, 16_000, 32_000, 64_000, 120_000];
        let sweeps: Vec<(&str, Vec<Point>)> = vec![
            ("vp8", kbps.iter().map(|&k| vpx(&frames, k, false, threads as u32)).collect()),
            ("vp9", kbps.iter().map(|&k| vpx(&frames, k, true, threads as u32)).collect()),
        ];
        println!(
            "| {scene} | jpeg q80 (libjpeg-turbo) | {:.0} | 1.00 | {:.2} | {target:.2} |",
            q80.bytes, q80.ms
        );
        for (codec, points) in &sweeps {
            let AtPsnr { bytes, nearest } = at_psnr(points, target).expect("points");
            let unit = "k";
            let range: Vec<String> =
                points.iter().map(|p| format!("{:.0}{unit}:{:.1}", p.setting, p.psnr)).collect();
            println!(
                "| {scene} | {codec} | {bytes:.0} | {:.2} | {:.2} | {} |",
                bytes / q80.bytes,
                nearest.ms,
                range.join(" ")
            );
            write_stream(&out, &format!("{codec}-{scene}"), &nearest.stream);
        }
    }
}

/// The link bench's frames again (ticks from a trace), through the view's VP8
/// encoder at the trace's bitrates: how far frames overshoot their budget,
/// as libvpx alone (`base`) and with the encoder's quantizer floor at CAP times
/// the frame's budget (`actCAP`: crates/serve/src/vp8/guard.rs). VERBOSE=1: a
/// line a frame.
///   codecs pace TRACE FROM_MS TO_MS THREADS base|actCAP
fn pace(args: &[String]) {
    let trace = std::fs::read_to_string(&args[2]).expect("trace");
    let (from, to): (f64, f64) = (args[3].parse().expect("FROM_MS"), args[4].parse().expect("TO_MS"));
    let threads: u32 = args[5].parse().expect("THREADS");
    let variant = args[6].as_str();
    let (mut ticks, mut rates) = (Vec::new(), Vec::new());
    let num = |l: &str, k: &str| -> Option<f64> {
        let i = l.find(&format!("\"{k}\":"))? + k.len() + 3;
        l[i..].split([',', '}']).next()?.parse().ok()
    };
    for l in trace.lines() {
        let at = num(l, "at").unwrap_or(0.0);
        if l.contains("\"status\"") {
            if let Some(b) = num(l, "bitrate").filter(|&b| b > 0.0) {
                rates.push((at, b));
            }
        } else if l.contains("\"kind\":2") && at >= from && at < to && l.contains("\"size\":[1920,1080]") {
            ticks.push((at, num(l, "frame").expect("a frame number") as u32));
        }
    }
    let rate_at = |at: f64| rates.iter().rev().find(|r| r.0 <= at).map_or(20e6, |r| r.1);
    let r = replay(&ticks, rate_at, 30.0, threads, variant, false);
    println!(
        "{variant}: {} frames, bytes/budget {:.2}, >2x {}, >3x {}, excess over 2x {:.0} KB, PSNR {:.2}",
        r.n,
        r.bytes_over_budget,
        r.over2,
        r.over3,
        r.excess / 1e3,
        r.psnr
    );
}

/// What a replay gave, over its frames after the first (a key frame).
struct Replay {
    n: usize,
    bytes_over_budget: f64,
    over2: usize,
    over3: usize,
    excess: f64,
    psnr: f64,
    /// JPEG q80's PSNR on the same frames (when asked).
    q80: f64,
    kb: f64,
    quantizer: f64,
}

/// Julia frames at `ticks` (with the time each was sent, ms) through the view's
/// own VP8 encoder (crates/serve's `Vp8`) at `fps` and the bitrate `rate_at`
/// gives at that time: libvpx alone (`base`: no cap) or with the encoder's
/// quantizer floor at CAP times the frame's budget (`actCAP`).
fn replay(
    ticks: &[(f64, u32)],
    rate_at: impl Fn(f64) -> f64,
    fps: f64,
    threads: u32,
    variant: &str,
    with_q80: bool,
) -> Replay {
    use vpx_sys::*;
    let scene = Scene { kind: SceneKind::Julia, width: W as u32, height: H as u32, cost: 64 };
    let cap_share = match variant {
        "base" => f64::INFINITY,
        v => v.strip_prefix("act").and_then(|c| c.parse().ok()).expect("base or actCAP"),
    };
    let extent = ash::vk::Extent2D { width: W as u32, height: H as u32 };
    let mut bitrate = ticks.first().map_or(20e6, |t| rate_at(t.0)) as u32;
    let mut vp8 = Vp8::new(extent, bitrate, threads).expect("the view's VP8 encoder");
    let mut decoder: Option<vpx_codec_ctx_t> = None;
    let (mut over2, mut over3, mut excess, mut total, mut budget_sum, mut psnr_sum, mut n) =
        (0, 0, 0.0, 0.0, 0.0, 0.0, 0);
    let (mut q80_sum, mut q_sum) = (0.0, 0.0);
    for (i, &(at, tick)) in ticks.iter().enumerate() {
        let rate = rate_at(at);
        if rate as u32 != bitrate {
            bitrate = rate as u32;
            vp8.set_bitrate(bitrate).expect("a bitrate");
        }
        let budget = rate / 8.0 / fps;
        let mut rgba = vec![0u8; W * H * 4];
        render_cpu_as(&scene, &FrameArgs::new(&scene, tick), Format::Rgba8, &mut rgba, 16);
        let millis = (i as f64 * 1000.0 / fps) as i64;
        let frame = vp8.encode(&i420(&rgba, false), millis, i == 0, cap_share * budget).expect("a frame");
        let bytes = frame.data.len() as f64;
        if i > 0 {
            total += bytes;
            budget_sum += budget;
            over2 += usize::from(bytes > 2.0 * budget);
            over3 += usize::from(bytes > 3.0 * budget);
            excess += (bytes - 2.0 * budget).max(0.0);
            n += 1;
        }
        // SAFETY: libvpx's documented use: a decoder made once, fed this stream in order.
        let psnr = unsafe {
            let mut dctx = decoder.take().unwrap_or_else(|| {
                let mut d = MaybeUninit::<vpx_codec_ctx_t>::zeroed();
                let iface = vpx_codec_vp8_dx();
                vpx_codec_dec_init_ver(
                    d.as_mut_ptr(),
                    iface,
                    std::ptr::null(),
                    0,
                    VPX_DECODER_ABI_VERSION as i32,
                );
                d.assume_init()
            });
            let psnr = decoded_psnr(&mut dctx, &frame.data, &rgba);
            decoder = Some(dctx);
            psnr
        };
        if i > 0 {
            psnr_sum += psnr;
            q_sum += f64::from(frame.quantizer);
            if with_q80 {
                q80_sum += jpeg(std::slice::from_ref(&rgba), 80).psnr;
            }
        }
        if std::env::var("VERBOSE").is_ok() {
            let q = frame.quantizer;
            println!("{at:8.1} t{tick:6} q{q:2} {bytes:7.0} B budget {budget:6.0} ({:.1}x)", bytes / budget);
        }
    }
    let m = n.max(1) as f64;
    Replay {
        n,
        bytes_over_budget: total / budget_sum,
        over2,
        over3,
        excess,
        psnr: psnr_sum / m,
        q80: q80_sum / m,
        kb: total / m / 1e3,
        quantizer: q_sum / m,
    }
}

/// The bench's julia (its producer at ~3,450 ticks a second) sent at each frame
/// rate over the same seconds at one bitrate: what a frame rate given up buys
/// in PSNR, beside JPEG q80's on the same frames.
///   codecs rate KBPS FROM_TICK SECONDS THREADS VARIANT FPS...
fn rate(args: &[String]) {
    let kbps: f64 = args[2].parse().expect("KBPS");
    let (from, secs): (f64, f64) = (args[3].parse().expect("FROM_TICK"), args[4].parse().expect("SECONDS"));
    let threads: u32 = args[5].parse().expect("THREADS");
    let variant = args[6].as_str();
    for fps in args[7..].iter().map(|a| a.parse::<f64>().expect("FPS")) {
        let ticks: Vec<(f64, u32)> = (0..(secs * fps) as usize)
            .map(|k| (k as f64 * 1e3 / fps, (from + k as f64 * 3450.0 / fps) as u32))
            .collect();
        let r = replay(&ticks, |_| kbps * 1e3, fps, threads, variant, true);
        println!(
            "{kbps} kbit/s {fps} frames/s {variant}: {} frames, {:.1} KB a frame ({:.2} of the budget), quantizer {:.1}, PSNR {:.2}, q80 {:.2}, difference {:+.2} dB",
            r.n, r.kb, r.bytes_over_budget, r.quantizer, r.psnr, r.q80, r.psnr - r.q80
        );
    }
}

/// JPEG's weight at each quality over its weight at q80 (julia `n` frames `step`
/// ticks apart, its detail swinging, and the gradient): the ratio of the sums
/// over the frames (what an average of frames weighed at several qualities
/// sees), the mean of each frame's ratio, and its range; beside the ladder's
/// model (`vkcuda_serve::ladder::jpeg_weight`).
/// `codecs weights FRAMES STEP [WxH]`
fn weights(args: &[String]) {
    let arg = |i: usize, d: usize| args.get(i).and_then(|a| a.parse().ok()).unwrap_or(d);
    let (n, step) = (arg(2, 40), arg(3, 53));
    let (w, h) = args
        .get(4)
        .and_then(|s| s.split_once('x'))
        .and_then(|(w, h)| Some((w.parse().ok()?, h.parse().ok()?)))
        .unwrap_or((W, H));
    let qualities: [u8; 13] = [20, 25, 30, 35, 40, 45, 50, 55, 60, 65, 70, 75, 80];
    for (name, kind, n) in [("julia", SceneKind::Julia, n), ("gradient", SceneKind::Gradient, 3)] {
        let scene = Scene { kind, width: w as u32, height: h as u32, cost: 64 };
        let mut sums = vec![0.0; qualities.len()];
        let mut ratios = vec![Vec::new(); qualities.len()];
        let mut q80s = Vec::new();
        for t in 0..n {
            let mut f = vec![0u8; w * h * 4];
            render_cpu_as(&scene, &FrameArgs::new(&scene, (t * step) as u32), Format::Rgba8, &mut f, 16);
            let size = |q| {
                jpeg_of_rgba(&f, ash::vk::Extent2D { width: w as u32, height: h as u32 }, q)
                    .expect("JPEG")
                    .len() as f64
            };
            let q80 = size(80);
            q80s.push(q80);
            for ((sum, r), &q) in sums.iter_mut().zip(ratios.iter_mut()).zip(&qualities) {
                let bytes = size(q);
                *sum += bytes;
                r.push(bytes / q80);
            }
        }
        let (lo, hi) = q80s.iter().fold((f64::MAX, 0f64), |(a, b), &v| (a.min(v), b.max(v)));
        let total: f64 = q80s.iter().sum();
        println!(
            "{name} {w}x{h}: {n} frames, q80 {:.0}-{:.0} KB, mean {:.0}",
            lo / 1e3,
            hi / 1e3,
            total / n as f64 / 1e3
        );
        for ((sum, r), &q) in sums.iter().zip(ratios.iter_mut()).zip(&qualities) {
            r.sort_by(|a, b| a.total_cmp(b));
            let mean = r.iter().sum::<f64>() / r.len() as f64;
            let model = vkcuda_serve::ladder::jpeg_weight(q);
            println!(
                "  q{q}: sums {:.3} (model {model:.3}), frames' mean {mean:.3}, min {:.3}, max {:.3}",
                sum / total,
                r[0],
                r[r.len() - 1]
            );
        }
    }
}

/// `dump N STEP DIR`: `N` julia frames `STEP` ticks apart as DIR/julia.y4m (limited-range
/// I420, as the view's VP8 input) and DIR/julia.rgba (the exact frames), for encoders
/// outside this crate (ffmpeg's: ../av1.sh); prints JPEG q80's bytes and PSNR on them.
fn dump(args: &[String]) {
    let arg = |i: usize, d: usize| args.get(i).and_then(|a| a.parse().ok()).unwrap_or(d);
    let (n, step) = (arg(2, 45), arg(3, 85));
    let dir = std::path::PathBuf::from(args.get(4).map_or("/tmp", String::as_str));
    let frames = frames_every(SceneKind::Julia, n, step);
    let mut y4m = std::fs::File::create(dir.join("julia.y4m")).expect("julia.y4m");
    writeln!(y4m, "YUV4MPEG2 W{W} H{H} F30:1 Ip A1:1 C420jpeg XCOLORRANGE=LIMITED").expect("y4m");
    let mut raw = std::fs::File::create(dir.join("julia.rgba")).expect("julia.rgba");
    let (mut bytes, mut psnr) = (0.0, 0.0);
    for f in &frames {
        writeln!(y4m, "FRAME").expect("y4m");
        y4m.write_all(&i420(f, false)).expect("y4m");
        raw.write_all(f).expect("rgba");
        let jpeg =
            jpeg_of_rgba(f, ash::vk::Extent2D { width: W as u32, height: H as u32 }, 80).expect("JPEG");
        let back = turbojpeg::decompress(&jpeg, turbojpeg::PixelFormat::RGBA).expect("decoded");
        (bytes, psnr) = (bytes + jpeg.len() as f64, psnr + psnr_rgb(&back.pixels, f));
    }
    let n = frames.len() as f64;
    println!("jpeg q80: {:.0} B/frame, {:.2} dB", bytes / n, psnr / n);
}

/// `psnr DIR DECODED SKIP`: the mean RGB PSNR of a decoded raw yuv420p file against
/// DIR/julia.rgba, past its first `SKIP` frames (rate control settling).
fn psnr_file(args: &[String]) {
    let dir = std::path::PathBuf::from(&args[2]);
    let decoded = std::fs::read(&args[3]).expect("the decoded frames");
    let raw = std::fs::read(dir.join("julia.rgba")).expect("julia.rgba");
    let size = W * H * 3 / 2;
    let n = (decoded.len() / size).min(raw.len() / (W * H * 4));
    let skip: usize = args.get(4).and_then(|a| a.parse().ok()).unwrap_or(0);
    let mut sum = 0.0;
    for i in skip..n {
        let (y, uv) = decoded[i * size..(i + 1) * size].split_at(W * H);
        let (u, v) = uv.split_at(W * H / 4);
        let (y, u) = (Plane { bytes: y, stride: W }, Plane { bytes: u, stride: W / 2 });
        sum += psnr_i420(&raw[i * W * H * 4..(i + 1) * W * H * 4], y, u, v);
    }
    println!("{} frames: {:.2} dB", n - skip, sum / (n - skip) as f64);
}
