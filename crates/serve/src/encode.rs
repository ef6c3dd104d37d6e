//! A drawn frame encoded for the wire (the `header` module's `Header`, then
//! the image): JPEG (libjpeg-turbo) straight from the I420 planes the GPU
//! drew, VP8 from the same planes, PNG (lossless) or raw RGBA rows from an
//! RGBA8 drawing. A client's [`Stream`] keeps what encoding it needs between
//! frames: VP8's reference frames, the JPEG compressor.

use anyhow::{bail, ensure, Result};
use bytes::Bytes;
use turbojpeg::{Compressor, PixelFormat, Subsamp};

use crate::header::{Header, Kind, HEADER};
use crate::ladder::{Codec, SHARE};
use crate::strips;
use crate::vp8::Vp8;
use vkcuda_run::present::readback::{Pixels, ReadFrame, I420};

/// How long a VP8 inter frame at the guard's cap (`vp8::guard`) takes to cross
/// the link at its capacity, in frame times. `vkcuda-codecs pace` and bench-25,
/// 2026-11-29 (`act1.5`: 1.5 shares of the bitrate at the ladder's 0.8):
/// offline 21–24 frames over twice the budget against 53–55, none over three
/// times; on the H200 20 Mbit/s p95 103–120 ms against 126–154.
const CAP_CROSSING: f64 = 1.2;
/// How far above its share of the bitrate a VP8 inter frame may go: the cap
/// that crosses in [`CAP_CROSSING`] frame times at the ladder's [`SHARE`] (1.5).
pub(crate) const OVER_BUDGET: f64 = CAP_CROSSING / SHARE;

/// A frame encoded for one client.
#[derive(Clone, Debug)]
pub struct Encoded {
    /// The run's frame.
    pub frame: u64,
    /// Header and payload.
    pub bytes: Bytes,
    /// How it was encoded.
    pub codec: Codec,
    /// Its VP8 quantizer (0–63), when video.
    pub quantizer: Option<u8>,
    /// A key frame (VP8), or a frame that needs none (every other codec).
    pub key: bool,
}

/// One client's encoder state.
#[derive(Default)]
pub struct Stream {
    vp8: Option<Vp8>,
    /// JPEG compressors, one per strip encoded at once ([`crate::strips`]).
    jpeg: Vec<Compressor>,
    /// The next VP8 frame must be a key frame (the page asked, or none was sent yet).
    pub key_due: bool,
    /// Threads for its VP8 encoder (1 unless set: the hub sets its client's
    /// share before each encode), read when one is made (the first VP8 frame, a
    /// new size); a JPEG is encoded in as many strips at once.
    pub threads: u32,
    /// The next VP8 frame's time, ms.
    vp8_at: i64,
    /// The run's number of the last frame VP8 encoded.
    vp8_frame: Option<u64>,
}

impl Stream {
    /// A stream whose first frame is a key frame.
    pub fn new() -> Self {
        Self { threads: 1, key_due: true, ..Self::default() }
    }

    /// Encodes `frame` (drawn as the codec takes it: I420 for JPEG and VP8, RGBA8 for
    /// PNG and raw) as `codec` in a stream of `fps` frames a second, stamped `stamp`
    /// (µs since the Unix epoch). `None`: VP8 encoded a newer frame already (two
    /// frames drawn for a client may reach their encoder threads out of order: the
    /// older one, encoded after, would leave the next frames predicted from a frame
    /// the page never gets).
    pub fn encode(
        &mut self,
        frame: &ReadFrame,
        codec: Codec,
        fps: f64,
        stamp: u64,
    ) -> Result<Option<Encoded>> {
        let extent = frame.shot.extent;
        let (w, h) = (extent.width, extent.height);
        let pixels = (*frame.pixels).as_ref();
        ensure!(
            pixels.len() >= frame.shot.bytes(),
            "frame {} has {} bytes, not {w}x{h}",
            frame.frame,
            pixels.len()
        );
        let header = |kind: Kind, key: bool, quality: u8| Header {
            kind,
            key,
            quality,
            frame: frame.frame,
            width: w,
            height: h,
            stamp,
        };
        let (kind, key, quality, quantizer, payload) = match (codec, frame.shot.pixels) {
            (Codec::Raw, Pixels::Rgba8) => {
                (Kind::Raw, true, 100, None, pixels[..frame.shot.bytes()].to_vec())
            }
            (Codec::Png, Pixels::Rgba8) => (Kind::Png, true, 100, None, png(pixels, extent)?),
            (Codec::Jpeg { quality }, Pixels::I420 { full_range: true }) => {
                (Kind::Jpeg, true, quality, None, self.jpeg(pixels, extent, quality)?)
            }
            (Codec::Vp8 { .. }, _) if self.vp8_frame.is_some_and(|f| frame.frame <= f) => return Ok(None),
            (Codec::Vp8 { bitrate }, Pixels::I420 { full_range: false }) => {
                self.vp8_frame = Some(frame.frame);
                // Frames are timed at the stream's rate, not as they come: rate control then
                // gives each a rate's share of the bitrate. (Timed as they came, frames a slow
                // encode spaced out would each get more bits, and take longer still.)
                self.vp8_at += (1000.0 / fps.max(1.0)).round() as i64;
                let key = self.prepare_vp8(extent, bitrate)?;
                let vp8 = self.vp8.as_mut().ok_or_else(|| anyhow::anyhow!("no VP8 encoder"))?;
                // An inter frame's bytes held near its share of the bitrate (VP8's own
                // rate control lets one frame take several times that: vp8::guard).
                let cap = OVER_BUDGET * f64::from(bitrate) / 8.0 / fps.max(1.0);
                let out = vp8.encode(pixels, self.vp8_at, key, cap)?;
                (Kind::Vp8, out.key, out.quantizer, Some(out.quantizer), out.data)
            }
            (codec, drawn) => {
                bail!("frame {} was drawn as {drawn:?}, not as {codec:?} takes it", frame.frame)
            }
        };
        let mut out = Vec::with_capacity(HEADER + payload.len());
        out.extend_from_slice(&header(kind, key, quality).write());
        out.extend_from_slice(&payload);
        Ok(Some(Encoded { frame: frame.frame, bytes: Bytes::from(out), codec, quantizer, key }))
    }

    /// Readies the VP8 encoder for `extent` frames at `bitrate` (a new one for a new
    /// size); whether the next frame must be a key frame.
    fn prepare_vp8(&mut self, extent: ash::vk::Extent2D, bitrate: u32) -> Result<bool> {
        if self.vp8.as_ref().is_none_or(|v| v.extent != extent) {
            self.vp8 = None;
            self.vp8 = Some(Vp8::new(extent, bitrate, self.threads)?);
            self.key_due = true;
        }
        if let Some(vp8) = &mut self.vp8 {
            vp8.set_bitrate(bitrate)?;
        }
        Ok(std::mem::take(&mut self.key_due))
    }

    /// JPEG (4:2:0) of full-range I420 planes, in strips on the client's threads.
    fn jpeg(&mut self, planes: &[u8], size: ash::vk::Extent2D, quality: u8) -> Result<Vec<u8>> {
        let (w, h) = (size.width, size.height);
        let l = I420::of(size);
        let planes = strips::Planes {
            y: &planes[..l.u],
            u: &planes[l.u..l.v],
            v: &planes[l.v..l.bytes],
            y_stride: l.y_stride,
            c_stride: l.c_stride,
            width: w as usize,
            height: h as usize,
        };
        strips::jpeg(&mut self.jpeg, &planes, quality, self.threads as usize)
    }
}

/// PNG of RGBA8 rows of `size`: fast deflate (the frame must go out while it is current).
pub fn png(rgba: &[u8], size: ash::vk::Extent2D) -> Result<Vec<u8>> {
    let (w, h) = (size.width, size.height);
    let mut out = Vec::with_capacity(rgba.len() / 2);
    let mut encoder = png::Encoder::new(&mut out, w, h);
    encoder.set_color(png::ColorType::Rgba);
    encoder.set_depth(png::BitDepth::Eight);
    encoder.set_compression(png::Compression::Fast);
    let mut writer = encoder.write_header()?;
    writer.write_image_data(&rgba[..(w * h * 4) as usize])?;
    writer.finish()?;
    Ok(out)
}

/// JPEG of RGBA8 rows (the tests' and the examples' frames).
pub fn jpeg_of_rgba(rgba: &[u8], size: ash::vk::Extent2D, quality: u8) -> Result<Vec<u8>> {
    let (width, height) = (size.width as usize, size.height as usize);
    let image = turbojpeg::Image { pixels: rgba, width, pitch: width * 4, height, format: PixelFormat::RGBA };
    Ok(turbojpeg::compress(image, i32::from(quality.clamp(1, 100)), Subsamp::Sub2x2)?.to_vec())
}

/// A fast 64-bit digest of a frame's bytes: whether the picture changed.
pub fn digest(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0x9e37_79b9_7f4a_7c15 ^ bytes.len() as u64;
    let mut words = bytes.chunks_exact(8);
    for w in &mut words {
        let v = u64::from_le_bytes(w.try_into().unwrap_or([0; 8]));
        h = (h ^ v).wrapping_mul(0xff51_afd7_ed55_8ccd).rotate_left(29);
    }
    for &b in words.remainder() {
        h = (h ^ u64::from(b)).wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;
    use vkcuda::Format;
    use vkcuda_run::present::readback::Shot;

    fn i420(frame: u64, fill: u8) -> ReadFrame {
        let extent = ash::vk::Extent2D { width: 64, height: 48 };
        let shot =
            Shot { extent, format: Format::Rgba8, pixels: Pixels::I420 { full_range: false }, first: 0 };
        let pixels = vec![fill; shot.bytes()];
        ReadFrame { frame, shot, pixels: Box::new(pixels), recorded: Instant::now() }
    }

    #[test]
    fn vp8_frames_go_in_order_and_an_older_one_is_not_encoded() {
        let mut stream = Stream::new();
        let vp8 = Codec::Vp8 { bitrate: 1_000_000 };
        let first = stream.encode(&i420(5, 60), vp8, 30.0, 0).unwrap().unwrap();
        assert!(first.key && first.frame == 5);
        // Frame 4 reached its encoder thread after 5: encoded now, it would be the
        // reference of the next frame, and the page never gets it.
        assert!(stream.encode(&i420(4, 70), vp8, 30.0, 0).unwrap().is_none());
        assert!(stream.encode(&i420(5, 70), vp8, 30.0, 0).unwrap().is_none());
        let next = stream.encode(&i420(6, 80), vp8, 30.0, 0).unwrap().unwrap();
        assert!(!next.key && next.frame == 6);
        // JPEG frames have no references: any order.
        let jpeg = Codec::Jpeg { quality: 80 };
        let mut stream = Stream::new();
        let frame = |f| ReadFrame {
            shot: Shot { pixels: Pixels::I420 { full_range: true }, ..i420(f, 1).shot },
            ..i420(f, 90)
        };
        assert!(stream.encode(&frame(9), jpeg, 30.0, 0).unwrap().is_some());
        assert!(stream.encode(&frame(8), jpeg, 30.0, 0).unwrap().is_some());
    }
}
