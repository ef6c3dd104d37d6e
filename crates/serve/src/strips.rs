//! One baseline JPEG encoded by several threads at once: the picture is cut
//! into strips of whole MCU rows, each strip is a JPEG of its own (same
//! quality, libjpeg-turbo's standard Huffman tables), and the strips'
//! entropy-coded data are joined with restart markers under the first strip's
//! headers, its height set to the picture's and a restart interval of one
//! strip (DRI). A restart resets the DC predictions exactly where each strip's
//! own encode began with them reset, so the joined file decodes to the very
//! pixels one encode of the whole picture gives, in any JPEG decoder.
//! On loopback at 60 frames/s a 1080p frame took 13–15 ms from taken to
//! decoded, its encode on one thread a good part of it; in strips 10–12 ms
//! (docs/streaming.md, bench-28).

use anyhow::{ensure, Context, Result};
use turbojpeg::{Compressor, Subsamp, YuvPlanesImage};

/// The least picture worth cutting: below it a thread's start costs more than it saves.
const LEAST_PIXELS: usize = 640 * 360;
/// 4:2:0's MCU height: strips hold whole MCU rows.
const MCU: usize = 16;

/// Full-range I420 planes of a `width` x `height` picture (chroma half each way,
/// rounded up; luma rows to an even count, as libjpeg-turbo reads 4:2:0).
pub struct Planes<'a> {
    /// Luma, `y_stride` bytes a row.
    pub y: &'a [u8],
    /// Blue and red difference, `c_stride` bytes a row.
    pub u: &'a [u8],
    /// See `u`.
    pub v: &'a [u8],
    /// Bytes a luma row.
    pub y_stride: usize,
    /// Bytes a chroma row.
    pub c_stride: usize,
    /// Pixels a row.
    pub width: usize,
    /// Rows.
    pub height: usize,
}

/// How a picture is cut into strips ([`cut`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cut {
    /// How many strips.
    pub strips: usize,
    /// The rows each holds (the last fewer).
    pub rows: usize,
}

/// How a `width` x `height` picture is cut into strips with `threads` to spare.
pub fn cut(width: usize, height: usize, threads: usize) -> Cut {
    let mcu_rows = height.div_ceil(MCU);
    if width * height < LEAST_PIXELS || threads < 2 {
        return Cut { strips: 1, rows: height };
    }
    let rows = mcu_rows.div_ceil(threads.min(mcu_rows)) * MCU;
    Cut { strips: height.div_ceil(rows), rows }
}

/// JPEG (4:2:0) at `quality` of `planes`, encoded in strips by `compressors`
/// (one per strip, made as needed); one encode when the picture is small or
/// one compressor is wanted.
pub fn jpeg(
    compressors: &mut Vec<Compressor>,
    planes: &Planes,
    quality: u8,
    threads: usize,
) -> Result<Vec<u8>> {
    let Cut { strips, rows } = cut(planes.width, planes.height, threads);
    while compressors.len() < strips {
        compressors.push(Compressor::new()?);
    }
    let quality = i32::from(quality.clamp(1, 100));
    let encode = |c: &mut Compressor, strip: usize| -> Result<Vec<u8>> {
        c.set_quality(quality)?;
        Ok(c.compress_yuv_planes_to_vec(&strip_of(planes, strip * rows, rows))?)
    };
    if strips == 1 {
        return encode(&mut compressors[0], 0);
    }
    let parts: Vec<Result<Vec<u8>>> =
        std::thread::scope(|s| {
            let (first, rest) = compressors[..strips].split_at_mut(1);
            let handles: Vec<_> =
                rest.iter_mut().enumerate().map(|(i, c)| s.spawn(move || encode(c, i + 1))).collect();
            let mut parts = vec![encode(&mut first[0], 0)];
            parts.extend(handles.into_iter().map(|h| {
                h.join().unwrap_or_else(|_| Err(anyhow::anyhow!("a JPEG strip's thread panicked")))
            }));
            parts
        });
    let parts = parts.into_iter().collect::<Result<Vec<_>>>()?;
    let interval = planes.width.div_ceil(MCU) * (rows / MCU);
    join(&parts, planes.height, interval)
}

/// The `rows` rows of `planes` from row `top` (fewer at the bottom).
fn strip_of<'a>(planes: &Planes<'a>, top: usize, rows: usize) -> YuvPlanesImage<&'a [u8]> {
    let height = rows.min(planes.height - top);
    let (c_top, c_rows) = (top / 2, height.div_ceil(2));
    YuvPlanesImage {
        y_plane: &planes.y[top * planes.y_stride..(top + height.div_ceil(2) * 2) * planes.y_stride],
        u_plane: &planes.u[c_top * planes.c_stride..(c_top + c_rows) * planes.c_stride],
        v_plane: &planes.v[c_top * planes.c_stride..(c_top + c_rows) * planes.c_stride],
        width: planes.width,
        height,
        y_stride: planes.y_stride,
        u_stride: planes.c_stride,
        v_stride: planes.c_stride,
        subsamp: Subsamp::Sub2x2,
    }
}

/// A JPEG's parts: the headers before its scan (SOS's own included) and the
/// scan's entropy-coded data (up to EOI), with where its frame header (SOF)
/// and its scan header (SOS) begin.
struct Parsed<'a> {
    headers: &'a [u8],
    sof: usize,
    sos: usize,
    scan: &'a [u8],
}

fn parse(jpeg: &[u8]) -> Result<Parsed<'_>> {
    ensure!(jpeg.starts_with(&[0xFF, 0xD8]) && jpeg.ends_with(&[0xFF, 0xD9]), "not a whole JPEG");
    let (mut at, mut sof) = (2, None);
    loop {
        let head = jpeg.get(at..at + 4).context("a JPEG header runs past its end")?;
        let length = usize::from(u16::from_be_bytes([head[2], head[3]]));
        ensure!(
            head[0] == 0xFF && length >= 2 && at + 2 + length <= jpeg.len(),
            "a JPEG header is malformed"
        );
        match head[1] {
            0xC0..=0xC2 => sof = Some(at),
            0xDA => {
                let end = at + 2 + length;
                let sof = sof.context("a JPEG without a frame header")?;
                return Ok(Parsed { headers: &jpeg[..end], sof, sos: at, scan: &jpeg[end..jpeg.len() - 2] });
            }
            0xDD => anyhow::bail!("a JPEG strip already has restart markers"),
            _ => {}
        }
        at += 2 + length;
    }
}

/// The strips joined into one JPEG `height` rows tall, a restart every `interval` MCUs.
fn join(parts: &[Vec<u8>], height: usize, interval: usize) -> Result<Vec<u8>> {
    let parsed = parts.iter().map(|p| parse(p)).collect::<Result<Vec<_>>>()?;
    let first = &parsed[0];
    // Every strip's tables are the first's (same quality, standard Huffman tables):
    // its headers, but for the height, are byte for byte the first's.
    let same = |p: &Parsed| {
        p.headers.len() == first.headers.len()
            && p.headers[..p.sof + 5] == first.headers[..first.sof + 5]
            && p.headers[p.sof + 7..] == first.headers[first.sof + 7..]
    };
    ensure!(parsed.iter().all(same), "JPEG strips were encoded with different tables");
    let interval =
        u16::try_from(interval).context("a JPEG strip holds more MCUs than a restart interval counts")?;
    let height = u16::try_from(height).context("a JPEG is at most 65535 rows")?;
    let total: usize = parsed.iter().map(|p| p.scan.len() + 2).sum();
    let mut out = Vec::with_capacity(first.headers.len() + 6 + total + 2);
    let sos = first.sos;
    out.extend_from_slice(&first.headers[..sos]);
    out[first.sof + 5..first.sof + 7].copy_from_slice(&height.to_be_bytes());
    out.extend_from_slice(&[0xFF, 0xDD, 0x00, 0x04]);
    out.extend_from_slice(&interval.to_be_bytes());
    out.extend_from_slice(&first.headers[sos..]);
    for (i, p) in parsed.iter().enumerate() {
        if i > 0 {
            out.extend_from_slice(&[0xFF, 0xD0 + ((i - 1) % 8) as u8]);
        }
        out.extend_from_slice(p.scan);
    }
    out.extend_from_slice(&[0xFF, 0xD9]);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A picture's three planes.
    struct Yuv {
        y: Vec<u8>,
        u: Vec<u8>,
        v: Vec<u8>,
    }

    /// Full-range I420 of a picture with detail everywhere (rings and noise), laid
    /// out as the readback's (rows to an even count, luma rows to 8 bytes).
    fn planes(w: usize, h: usize) -> Yuv {
        let (w, h) = (w.div_ceil(8) * 8, h.div_ceil(2) * 2);
        let (cw, ch) = (w / 2, h / 2);
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut noise = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed % 24) as f64
        };
        let ring = |x: usize, y: usize, k: f64| {
            let (dx, dy) = (x as f64 - w as f64 / 2.0, y as f64 - h as f64 / 3.0);
            ((dx * dx + dy * dy).sqrt() / k).sin() * 100.0 + 120.0
        };
        let y = (0..w * h).map(|i| (ring(i % w, i / w, 7.0) + noise()) as u8).collect();
        let u = (0..cw * ch).map(|i| (ring(2 * (i % cw), 2 * (i / cw), 19.0) * 0.6 + 40.0) as u8).collect();
        let v = (0..cw * ch).map(|i| (255.0 - ring(2 * (i % cw), 2 * (i / cw), 11.0)) as u8).collect();
        Yuv { y, u, v }
    }

    fn decoded(jpeg: &[u8]) -> turbojpeg::Image<Vec<u8>> {
        turbojpeg::decompress(jpeg, turbojpeg::PixelFormat::RGB).expect("a JPEG any decoder reads")
    }

    #[test]
    fn strips_joined_decode_to_the_pixels_of_one_encode() {
        for (w, h, threads) in
            [(1920, 1080, 4), (1277, 719, 3), (1919, 1079, 8), (640, 368, 2), (1280, 720, 16)]
        {
            let Yuv { y, u, v } = planes(w, h);
            let y_stride = w.div_ceil(8) * 8;
            let p = Planes { y: &y, u: &u, v: &v, y_stride, c_stride: y_stride / 2, width: w, height: h };
            let mut compressors = Vec::new();
            let whole = jpeg(&mut compressors, &p, 80, 1).unwrap();
            let cut_up = jpeg(&mut compressors, &p, 80, threads).unwrap();
            let Cut { strips, rows } = cut(w, h, threads);
            assert!(strips > 1 && rows % MCU == 0, "{w}x{h}: {strips} strips of {rows} rows");
            assert_ne!(whole, cut_up, "{w}x{h}: the strips' file has restart markers");
            let (a, b) = (decoded(&whole), decoded(&cut_up));
            assert_eq!((b.width, b.height), (w, h));
            assert!(a.pixels == b.pixels, "{w}x{h} in {strips} strips: pixels differ from one encode");
            // A restart marker and a DC value anew per strip: a few bytes more.
            assert!(cut_up.len() < whole.len() + 64 * strips, "{} against {}", cut_up.len(), whole.len());
        }
    }

    #[test]
    fn a_small_picture_or_one_thread_is_one_encode() {
        assert_eq!(cut(640, 352, 8), Cut { strips: 1, rows: 352 });
        assert_eq!(cut(1920, 1080, 1), Cut { strips: 1, rows: 1080 });
        // 68 MCU rows in 4 strips of 17; in 3 of 23 (the last 22).
        assert_eq!(cut(1920, 1080, 4), Cut { strips: 4, rows: 272 });
        assert_eq!(cut(1920, 1080, 3), Cut { strips: 3, rows: 368 });
        // More threads than MCU rows: a strip each.
        assert_eq!(cut(4000, 100, 16), Cut { strips: 7, rows: 16 });
    }

    #[test]
    fn a_file_that_is_not_a_jpeg_is_an_error_not_a_panic() {
        for bad in [&[][..], &[0xFF, 0xD8, 0xFF, 0xD9], &[0xFF, 0xD8, 0xFF, 0xDB, 0xFF, 0xFF, 0xFF, 0xD9]] {
            assert!(parse(bad).is_err(), "{bad:?}");
        }
    }
}
