//! VP8 through libvpx (linked statically; `env-libvpx-sys` binds it): the
//! browser view's video codec. Royalty-free (Google's irrevocable patent
//! licence for VP8; libvpx is BSD-licensed), decoded by every browser's
//! WebCodecs, and fast enough on CPU cores for a stream per client
//! (docs/streaming.md has the measurements that chose it over H.264, VP9
//! and AV1). Real-time settings: no lag, constant bitrate, no dropped
//! frames (the view decides which frames to send), a key frame only when
//! asked (a client joins, resizes, or its decoder asks).

use std::ffi::CStr;
use std::mem::MaybeUninit;

use anyhow::{bail, Result};
use ash::vk;
use vpx_sys::{
    vp8e_enc_control_id, vpx_codec_control_, vpx_codec_ctx_t, vpx_codec_cx_pkt_kind, vpx_codec_destroy,
    vpx_codec_enc_cfg_t, vpx_codec_enc_config_default, vpx_codec_enc_config_set, vpx_codec_enc_init_ver,
    vpx_codec_encode, vpx_codec_err_t, vpx_codec_error, vpx_codec_get_cx_data, vpx_codec_iter_t,
    vpx_codec_vp8_cx, vpx_enc_pass, vpx_image_t, vpx_img_fmt, vpx_img_wrap, vpx_rational, vpx_rc_mode,
    VPX_DL_REALTIME, VPX_EFLAG_FORCE_KF, VPX_ENCODER_ABI_VERSION,
};

use vkcuda_run::present::readback::I420;

mod guard;

/// libvpx's speed for real-time VP8 (0–16: higher is faster and coarser).
/// `vkcuda-codecs tune` (bench-19, 2026-11-28): every real-time speed gives
/// the same PSNR for its bytes; good quality is too slow (52–65 ms a frame).
const CPU_USED: i32 = 10;
/// Timestamps are in milliseconds.
const TIMEBASE: i32 = 1000;
/// The coarsest quantizer a frame gets (of 63): coarser frames are blocks of
/// colour. libvpx's real-time example's (examples/vpx_temporal_svc_encoder.c).
pub const MAX_QUANTIZER: u32 = 56;
/// The finest quantizer a frame gets (libvpx's default is 4): key frames, and
/// inter frames the guard leaves free. libvpx's real-time example's, as [`MAX_QUANTIZER`].
pub(crate) const FINEST_QUANTIZER: u32 = 2;
/// VP8's quantizer scale is 0–63.
const QUANTIZER_SCALE: i32 = 63;
/// How far rate control may under- and overshoot the target, per cent:
/// libvpx's real-time example's (its default is 100). Like the rest of the
/// rate control here, design: WebRTC's VP8 rate control in its place changed
/// nothing measurable (bench-10, 2026-11-28).
const UNDERSHOOT_PCT: u32 = 50;
const OVERSHOOT_PCT: u32 = 50;
/// Rate control's buffer, ms: its size, its level at the start, the level it
/// aims at: a tenth of libvpx's defaults (6000, 4000, 5000: vp8_cx_iface.c).
/// Design, as [`UNDERSHOOT_PCT`] (bench-10).
const BUFFER_MS: u32 = 600;
const BUFFER_INITIAL_MS: u32 = 400;
const BUFFER_OPTIMAL_MS: u32 = 500;
/// Token partitions, as a power of two (3: 8, VP8's most): they let the
/// threads share a frame's entropy coding.
const TOKEN_PARTITIONS: u32 = 3;
/// The threads one encoder takes at most: one a token partition. bench-13
/// (2026-11-28, `-tr3`): 8 threads a client against 4 changed nothing.
pub(crate) const MAX_THREADS: u32 = 1 << TOKEN_PARTITIONS;
/// The threshold under which libvpx treats a macroblock as static (skipped):
/// 0, its default: none is.
const STATIC_THRESHOLD: i32 = 0;
/// The least target rate libvpx is given, kbit/s. Design: a floor, under the
/// ladder's least bitrate (100 kbit/s).
const LEAST_KBPS: u32 = 50;

/// libvpx's target for `bitrate` bits a second: kbit/s, at least [`LEAST_KBPS`].
fn kbps(bitrate: u32) -> u32 {
    (bitrate / 1000).max(LEAST_KBPS)
}

/// A VP8 frame out of the encoder.
#[derive(Debug)]
pub struct Frame {
    /// The compressed frame.
    pub data: Vec<u8>,
    /// Whether it is a key frame (decodable alone).
    pub key: bool,
    /// Its quantizer, 0–63 (higher: coarser).
    pub quantizer: u8,
}

/// A VP8 encoder for frames of one size.
pub struct Vp8 {
    ctx: Box<vpx_codec_ctx_t>,
    cfg: vpx_codec_enc_cfg_t,
    /// The frames' size.
    pub extent: vk::Extent2D,
    last_pts: i64,
    guard: guard::Guard,
}

// SAFETY: a libvpx encoder context may move between threads; it is used by one at a time (&mut self).
unsafe impl Send for Vp8 {}

/// `Err` with libvpx's words when `err` is not OK.
fn check(ctx: Option<&mut vpx_codec_ctx_t>, err: vpx_codec_err_t, what: &str) -> Result<()> {
    if err == vpx_codec_err_t::VPX_CODEC_OK {
        return Ok(());
    }
    let detail = match ctx {
        Some(ctx) => {
            // SAFETY: an initialised context.
            let text = unsafe { vpx_codec_error(ctx) };
            // SAFETY: libvpx returns a static or context-owned C string, read at once.
            unsafe { CStr::from_ptr(text) }.to_string_lossy().into_owned()
        }
        None => format!("{err:?}"),
    };
    bail!("VP8: {what}: {detail}")
}

impl Vp8 {
    /// An encoder of `extent` frames at `bitrate` bits a second on `threads` threads.
    pub fn new(extent: vk::Extent2D, bitrate: u32, threads: u32) -> Result<Self> {
        let mut cfg = MaybeUninit::<vpx_codec_enc_cfg_t>::zeroed();
        // SAFETY: libvpx's static description of its VP8 encoder.
        let vp8 = unsafe { vpx_codec_vp8_cx() };
        // SAFETY: a static interface; `cfg` is written in full by the call.
        let err = unsafe { vpx_codec_enc_config_default(vp8, cfg.as_mut_ptr(), 0) };
        check(None, err, "default configuration")?;
        // SAFETY: written in full by vpx_codec_enc_config_default above.
        let mut cfg = unsafe { cfg.assume_init() };
        (cfg.g_w, cfg.g_h) = (extent.width, extent.height);
        cfg.g_timebase = vpx_rational { num: 1, den: TIMEBASE };
        cfg.g_threads = threads.clamp(1, MAX_THREADS);
        cfg.g_lag_in_frames = 0;
        cfg.g_pass = vpx_enc_pass::VPX_RC_ONE_PASS;
        cfg.g_error_resilient = 0;
        cfg.rc_end_usage = vpx_rc_mode::VPX_CBR;
        cfg.rc_target_bitrate = kbps(bitrate);
        cfg.rc_dropframe_thresh = 0;
        cfg.rc_min_quantizer = FINEST_QUANTIZER;
        cfg.rc_max_quantizer = MAX_QUANTIZER;
        (cfg.rc_undershoot_pct, cfg.rc_overshoot_pct) = (UNDERSHOOT_PCT, OVERSHOOT_PCT);
        cfg.rc_buf_sz = BUFFER_MS;
        cfg.rc_buf_initial_sz = BUFFER_INITIAL_MS;
        cfg.rc_buf_optimal_sz = BUFFER_OPTIMAL_MS;
        // Key frames only when asked.
        cfg.kf_mode = vpx_sys::vpx_kf_mode::VPX_KF_DISABLED;
        let mut ctx = Box::new(MaybeUninit::<vpx_codec_ctx_t>::zeroed());
        let abi = VPX_ENCODER_ABI_VERSION as i32;
        // SAFETY: `ctx` is zeroed memory for the context; `cfg` is a valid configuration.
        let err = unsafe { vpx_codec_enc_init_ver(ctx.as_mut_ptr(), vp8, &cfg, 0, abi) };
        check(None, err, "starting the encoder")?;
        // SAFETY: initialised by vpx_codec_enc_init_ver above (it succeeded).
        let ctx = unsafe { Box::from_raw(Box::into_raw(ctx).cast::<vpx_codec_ctx_t>()) };
        let mut this = Self { ctx, cfg, extent, last_pts: -1, guard: guard::Guard::default() };
        this.control(vp8e_enc_control_id::VP8E_SET_CPUUSED, CPU_USED)?;
        // Token partitions let the threads share a frame's entropy coding.
        this.control(vp8e_enc_control_id::VP8E_SET_TOKEN_PARTITIONS, TOKEN_PARTITIONS as i32)?;
        this.control(vp8e_enc_control_id::VP8E_SET_STATIC_THRESHOLD, STATIC_THRESHOLD)?;
        Ok(this)
    }

    fn control(&mut self, id: vp8e_enc_control_id, value: i32) -> Result<()> {
        // SAFETY: an initialised context; these controls take an int.
        let err = unsafe { vpx_codec_control_(&mut *self.ctx, id as i32, value) };
        check(Some(&mut self.ctx), err, "a setting")
    }

    /// The bitrate from the next frame on.
    pub fn set_bitrate(&mut self, bitrate: u32) -> Result<()> {
        let kbps = kbps(bitrate);
        if kbps == self.cfg.rc_target_bitrate {
            return Ok(());
        }
        self.cfg.rc_target_bitrate = kbps;
        // SAFETY: an initialised context and a configuration it was made with, but for the rate.
        let err = unsafe { vpx_codec_enc_config_set(&mut *self.ctx, &self.cfg) };
        check(Some(&mut self.ctx), err, "a new bitrate")
    }

    /// The quantizer (0–63) of the frame encoded last.
    fn last_quantizer(&mut self) -> Result<u8> {
        let mut q: i32 = 0;
        // SAFETY: an initialised context; this control writes an int.
        let err = unsafe {
            vpx_codec_control_(
                &mut *self.ctx,
                vp8e_enc_control_id::VP8E_GET_LAST_QUANTIZER_64 as i32,
                &mut q as *mut i32,
            )
        };
        check(Some(&mut self.ctx), err, "reading the quantizer")?;
        Ok(q.clamp(0, QUANTIZER_SCALE) as u8)
    }

    /// The finest quantizer frames may have from the next one on (libvpx's rate control chooses above it).
    fn set_finest(&mut self, quantizer: u32) -> Result<()> {
        if quantizer == self.cfg.rc_min_quantizer {
            return Ok(());
        }
        self.cfg.rc_min_quantizer = quantizer;
        // SAFETY: an initialised context and a configuration it was made with, but for the floor.
        let err = unsafe { vpx_codec_enc_config_set(&mut *self.ctx, &self.cfg) };
        check(Some(&mut self.ctx), err, "a quantizer floor")
    }

    /// Encodes one I420 frame laid out as [`I420::of`] its extent says, taken at
    /// `millis` (its time: rate control spaces frames by it); `key`: a key frame;
    /// `cap`: the bytes an inter frame should not exceed (its quantizer is held
    /// coarse enough where the frame's detail says it would: the `guard` module).
    pub fn encode(&mut self, planes: &[u8], millis: i64, key: bool, cap: f64) -> Result<Frame> {
        let layout = I420::of(self.extent);
        if planes.len() < layout.bytes {
            bail!(
                "VP8: {} bytes of I420, a {}x{} frame has {}",
                planes.len(),
                self.extent.width,
                self.extent.height,
                layout.bytes
            );
        }
        let (w, h) = (self.extent.width, self.extent.height);
        let floor = self.guard.floor(&planes[..layout.u], layout.y_stride, w as usize, h as usize, cap);
        self.set_finest(if key { FINEST_QUANTIZER } else { floor })?;
        let mut image = MaybeUninit::<vpx_image_t>::zeroed();
        // SAFETY: `planes` holds the frame (checked above) and outlives the encode below, which
        // copies it (no lag); libvpx only reads it, though its descriptor wants a mutable pointer.
        let wrapped = unsafe {
            vpx_img_wrap(
                image.as_mut_ptr(),
                vpx_img_fmt::VPX_IMG_FMT_I420,
                w,
                h,
                8,
                planes.as_ptr().cast_mut(),
            )
        };
        if wrapped.is_null() {
            bail!("VP8: a {w}x{h} frame cannot be described");
        }
        // SAFETY: initialised by vpx_img_wrap above.
        let image = unsafe { image.assume_init_mut() };
        // The planes where the view put them (vpx_img_wrap computes the same; this says so).
        let base = planes.as_ptr().cast_mut();
        // SAFETY: offsets within `planes` (its length was checked against the layout).
        image.planes[1] = unsafe { base.add(layout.u) };
        // SAFETY: as above.
        image.planes[2] = unsafe { base.add(layout.v) };
        image.stride[0] = layout.y_stride as i32;
        (image.stride[1], image.stride[2]) = (layout.c_stride as i32, layout.c_stride as i32);
        // Strictly increasing timestamps, whatever the clock said.
        let pts = millis.max(self.last_pts + 1);
        self.last_pts = pts;
        let flags = if key { VPX_EFLAG_FORCE_KF as i64 } else { 0 };
        let deadline = VPX_DL_REALTIME as _;
        // SAFETY: an initialised context and a valid image over live memory.
        let err = unsafe { vpx_codec_encode(&mut *self.ctx, image, pts, 1, flags, deadline) };
        check(Some(&mut self.ctx), err, "encoding")?;
        let mut out = Frame { data: Vec::new(), key: false, quantizer: 0 };
        let mut iter: vpx_codec_iter_t = std::ptr::null();
        loop {
            // SAFETY: an initialised context; the packet lives until the next call on it.
            let packet = unsafe { vpx_codec_get_cx_data(&mut *self.ctx, &mut iter) };
            // SAFETY: null or a packet libvpx owns until the next call.
            let Some(packet) = (unsafe { packet.as_ref() }) else { break };
            if packet.kind != vpx_codec_cx_pkt_kind::VPX_CODEC_CX_FRAME_PKT {
                continue;
            }
            // SAFETY: a frame packet's `frame` member is the one written.
            let frame = unsafe { packet.data.frame };
            // SAFETY: libvpx's buffer of `sz` bytes, valid until the next call on the context.
            let bytes = unsafe { std::slice::from_raw_parts(frame.buf.cast::<u8>(), frame.sz as usize) };
            out.data.extend_from_slice(bytes);
            out.key |= frame.flags & vpx_sys::VPX_FRAME_IS_KEY != 0;
        }
        out.quantizer = self.last_quantizer()?;
        if out.data.is_empty() {
            bail!("VP8: the encoder gave no frame");
        }
        self.guard.encoded(out.data.len(), out.quantizer, out.key);
        Ok(out)
    }
}

impl Drop for Vp8 {
    fn drop(&mut self) {
        // SAFETY: an initialised context, destroyed once.
        unsafe { vpx_codec_destroy(&mut *self.ctx) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A `w`x`h` I420 frame: a gradient that moves with `t`.
    fn frame(extent: vk::Extent2D, t: u32) -> Vec<u8> {
        let l = I420::of(extent);
        let mut p = vec![128u8; l.bytes];
        for y in 0..l.rows {
            for x in 0..l.y_stride {
                p[y * l.y_stride + x] = ((x as u32 + y as u32 + 3 * t) % 220 + 16) as u8;
            }
        }
        p
    }

    #[test]
    fn frames_of_odd_sizes_encode_and_key_frames_come_when_asked() {
        for extent in [vk::Extent2D { width: 333, height: 187 }, vk::Extent2D { width: 64, height: 48 }] {
            let mut vp8 = Vp8::new(extent, 1_000_000, 2).unwrap();
            let first = vp8.encode(&frame(extent, 0), 0, true, f64::INFINITY).unwrap();
            assert!(first.key && first.data.len() > 10);
            let next = vp8.encode(&frame(extent, 1), 16, false, f64::INFINITY).unwrap();
            assert!(!next.key);
            assert!(vp8.encode(&frame(extent, 2), 16, true, 1.0).unwrap().key, "same millis: still encoded");
            vp8.set_bitrate(200_000).unwrap();
            assert!(vp8.encode(&frame(extent, 3), 40, false, 1.0).unwrap().quantizer <= 63);
            assert!(vp8.encode(&[0u8; 10], 50, false, 1.0).is_err(), "too few bytes");
        }
    }

    /// Frame `t` of a picture whose detail jumps (a fractal's parameter moving on).
    fn jumpy(extent: vk::Extent2D, t: u32, busy_from: u32) -> Vec<u8> {
        let l = I420::of(extent);
        let mut p = vec![128u8; l.bytes];
        let span = (l.y_stride + l.rows) as u32 + 100;
        for y in 0..l.rows {
            for x in 0..l.y_stride {
                p[y * l.y_stride + x] = (16 + (x as u32 + y as u32 + t) * 200 / span) as u8;
            }
        }
        // Fine noise over the ramp: faint, then from `busy_from` on, strong.
        let amplitude = if t >= busy_from { 32 } else { 4 };
        let mut seed = 0x9e37_79b9u32.wrapping_mul(t + 1);
        for v in &mut p[..l.u] {
            seed ^= seed << 13;
            seed ^= seed >> 17;
            seed ^= seed << 5;
            *v = v.saturating_add((seed % amplitude) as u8).min(235);
        }
        p
    }

    #[test]
    fn a_frame_whose_detail_jumps_stays_near_its_budget() {
        let extent = vk::Extent2D { width: 320, height: 240 };
        let (bitrate, fps) = (1_000_000u32, 30.0);
        let cap = crate::encode::OVER_BUDGET * f64::from(bitrate) / 8.0 / fps;
        // The first busy frame and the two after it, with the guard (`cap`) and without.
        let busy = |cap: f64| -> Vec<usize> {
            let mut vp8 = Vp8::new(extent, bitrate, 1).unwrap();
            (0..24u32)
                .map(|t| {
                    vp8.encode(&jumpy(extent, t, 20), i64::from(t) * 33, t == 0, cap).unwrap().data.len()
                })
                .skip(20)
                .take(3)
                .collect()
        };
        let (guarded, free) = (busy(cap), busy(f64::INFINITY));
        assert!(
            guarded[0] * 2 < free[0] && guarded[0] as f64 <= 3.0 * cap,
            "the first busy frame: {} bytes with the guard, {} without, the cap {cap:.0}",
            guarded[0],
            free[0]
        );
        let (g, f): (usize, usize) = (guarded.iter().sum(), free.iter().sum());
        assert!(g < f, "the busy frames with the guard ({guarded:?}) against without ({free:?})");
    }
}
