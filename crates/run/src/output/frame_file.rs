//! Encoding a frame in memory: PNG for 8-bit formats, OpenEXR for float
//! formats; the dump's encoder, alone, so that examples/png_encode.rs
//! measures the very same code.

use anyhow::Result;
use ash::vk::Extent2D;

/// The row filter the dump uses, for every row: instead of `Compression::Fast`'s
/// adaptive choice (all five tried per row), Paeth, which gives files as small
/// or smaller and encodes faster on both scenes (measured by
/// examples/png_encode.rs: docs/results/2026-11-24-dump/README.md).
pub const PNG_FILTER: png::Filter = png::Filter::Paeth;

/// Encodes RGBA8 `pixels` of `size` as PNG in memory: fdeflate
/// (`Compression::Fast`), every row with `filter`.
pub fn encode_png(pixels: &[u8], size: Extent2D, filter: png::Filter) -> Result<Vec<u8>> {
    let mut png_bytes = Vec::with_capacity(pixels.len() / 2);
    let mut enc = png::Encoder::new(&mut png_bytes, size.width, size.height);
    enc.set_color(png::ColorType::Rgba);
    enc.set_depth(png::BitDepth::Eight);
    enc.set_compression(png::Compression::Fast);
    enc.set_filter(filter);
    let mut writer = enc.write_header()?;
    writer.write_image_data(pixels)?;
    writer.finish()?;
    Ok(png_bytes)
}

/// The file extension of a dumped frame of `format`: `png` for 8-bit
/// formats, `exr` for float formats (lossless, as the GPU wrote them).
pub fn extension(format: vkcuda::Format) -> &'static str {
    match format.is_float() {
        true => "exr",
        false => "png",
    }
}

/// What writes frames of `format`, for messages: "PNG writer" or "OpenEXR writer".
pub fn writer_name(format: vkcuda::Format) -> &'static str {
    match format.is_float() {
        true => "OpenEXR writer",
        false => "PNG writer",
    }
}

/// Encodes a packed frame of `format` and `size` in memory: PNG
/// for 8-bit formats (BGRA8 reordered to RGBA; sRGB marked as such), OpenEXR
/// for float formats (RGBA16F as half, RGBA32F as float, R32F as one float
/// channel `R`): every value as the GPU wrote it.
pub fn encode_frame(pixels: &[u8], size: Extent2D, format: vkcuda::Format) -> Result<Vec<u8>> {
    use vkcuda::Format;
    let expected = size.width as usize * size.height as usize * format.bytes_per_pixel() as usize;
    anyhow::ensure!(pixels.len() == expected, "frame holds {} bytes, not {expected}", pixels.len());
    match format {
        Format::Rgba8 => encode_png(pixels, size, PNG_FILTER),
        Format::Rgba8Srgb => {
            let mut png_bytes = encode_png(pixels, size, PNG_FILTER)?;
            insert_srgb_chunk(&mut png_bytes);
            Ok(png_bytes)
        }
        Format::Bgra8 => {
            let rgba: Vec<u8> = pixels.chunks_exact(4).flat_map(|p| [p[2], p[1], p[0], p[3]]).collect();
            encode_png(&rgba, size, PNG_FILTER)
        }
        Format::Rgba16f | Format::Rgba32f | Format::R32f => encode_exr(pixels, size, format),
    }
}

/// Puts an `sRGB` chunk (perceptual intent) right after IHDR.
fn insert_srgb_chunk(png_bytes: &mut Vec<u8>) {
    // Signature (8) + IHDR (4 length + 4 type + 13 data + 4 CRC).
    const AFTER_IHDR: usize = 8 + 25;
    let mut chunk = vec![0, 0, 0, 1, b's', b'R', b'G', b'B', 0];
    let crc = crc32(&chunk[4..]);
    chunk.extend_from_slice(&crc.to_be_bytes());
    png_bytes.splice(AFTER_IHDR..AFTER_IHDR, chunk);
}

/// The CRC-32 of PNG chunks (ISO 3309).
fn crc32(bytes: &[u8]) -> u32 {
    let mut c = 0xffff_ffffu32;
    for &b in bytes {
        c ^= u32::from(b);
        for _ in 0..8 {
            c = if c & 1 != 0 { 0xedb8_8320 ^ (c >> 1) } else { c >> 1 };
        }
    }
    !c
}

fn encode_exr(pixels: &[u8], size: Extent2D, format: vkcuda::Format) -> Result<Vec<u8>> {
    use exr::prelude::*;
    let (w, bpp) = (size.width as usize, format.bytes_per_pixel() as usize);
    let at = move |x: usize, y: usize| &pixels[(y * w + x) * bpp..][..bpp];
    let f32_at = |p: &[u8], i: usize| f32::from_le_bytes([p[i], p[i + 1], p[i + 2], p[i + 3]]);
    let size = (w, size.height as usize);
    let mut out = std::io::Cursor::new(Vec::with_capacity(pixels.len() / 2));
    let written = match format {
        vkcuda::Format::Rgba16f => {
            let h = |p: &[u8], i: usize| half::f16::from_le_bytes([p[i], p[i + 1]]);
            let channels = SpecificChannels::rgba(|Vec2(x, y)| {
                let p = at(x, y);
                (h(p, 0), h(p, 2), h(p, 4), h(p, 6))
            });
            Image::from_encoded_channels(size, Encoding::FAST_LOSSLESS, channels)
                .write()
                .to_buffered(&mut out)
        }
        vkcuda::Format::Rgba32f => {
            let channels = SpecificChannels::rgba(|Vec2(x, y)| {
                let p = at(x, y);
                (f32_at(p, 0), f32_at(p, 4), f32_at(p, 8), f32_at(p, 12))
            });
            Image::from_encoded_channels(size, Encoding::FAST_LOSSLESS, channels)
                .write()
                .to_buffered(&mut out)
        }
        _ => {
            let channels = SpecificChannels::build()
                .with_channel("R")
                .with_pixel_fn(|Vec2(x, y)| (f32_at(at(x, y), 0),));
            Image::from_encoded_channels(size, Encoding::FAST_LOSSLESS, channels)
                .write()
                .to_buffered(&mut out)
        }
    };
    written.map_err(|e| anyhow::anyhow!("encoding OpenEXR: {e}"))?;
    Ok(out.into_inner())
}

/// A frame file decoded ([`decode_frame`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Decoded {
    /// The picture's size.
    pub size: Extent2D,
    /// Its packed rows.
    pub pixels: Vec<u8>,
}

/// Decodes a frame file written by [`encode_frame`] back into packed pixels
/// of `format`.
pub fn decode_frame(bytes: &[u8], format: vkcuda::Format) -> Result<Decoded> {
    if format.is_float() {
        return decode_exr(bytes, format);
    }
    let mut reader = png::Decoder::new(std::io::Cursor::new(bytes)).read_info()?;
    let (color, depth) = reader.output_color_type();
    anyhow::ensure!(
        (color, depth) == (png::ColorType::Rgba, png::BitDepth::Eight),
        "a {color:?} PNG of {depth:?}-bit samples, not 8-bit RGBA"
    );
    let mut pixels = vec![0; reader.output_buffer_size().ok_or_else(|| anyhow::anyhow!("PNG too large"))?];
    let info = reader.next_frame(&mut pixels)?;
    pixels.truncate(info.buffer_size());
    if format == vkcuda::Format::Bgra8 {
        pixels.chunks_exact_mut(4).for_each(|p| p.swap(0, 2)); // the PNG holds RGBA
    }
    Ok(Decoded { size: Extent2D { width: info.width, height: info.height }, pixels })
}

/// Decodes an OpenEXR file that [`encode_frame`] wrote for `format` back into
/// the packed bytes the GPU wrote (for the tests' round trip and checks).
#[allow(dead_code)] // the tests and examples use it (they include this file)
pub fn decode_exr(bytes: &[u8], format: vkcuda::Format) -> Result<Decoded> {
    use exr::prelude::*;
    let image = read()
        .no_deep_data()
        .largest_resolution_level()
        .all_channels()
        .first_valid_layer()
        .all_attributes()
        .from_buffered(std::io::Cursor::new(bytes))
        .map_err(|e| anyhow::anyhow!("decoding OpenEXR: {e}"))?;
    let size = image.layer_data.size;
    let channels = &image.layer_data.channel_data.list;
    let named = |name: &str| {
        channels.iter().find(|c| c.name.eq(name)).ok_or_else(|| anyhow::anyhow!("no channel {name}"))
    };
    let names: &[&str] = if format == vkcuda::Format::R32f { &["R"] } else { &["R", "G", "B", "A"] };
    anyhow::ensure!(channels.len() == names.len(), "{} channels, not {}", channels.len(), names.len());
    let mut out = vec![0u8; size.0 * size.1 * format.bytes_per_pixel() as usize];
    for (c, name) in names.iter().enumerate() {
        let samples = &named(name)?.sample_data;
        for i in 0..size.0 * size.1 {
            match (format, samples) {
                (vkcuda::Format::Rgba16f, FlatSamples::F16(v)) => {
                    out[i * 8 + c * 2..][..2].copy_from_slice(&v[i].to_le_bytes())
                }
                (vkcuda::Format::Rgba32f, FlatSamples::F32(v)) => {
                    out[i * 16 + c * 4..][..4].copy_from_slice(&v[i].to_le_bytes())
                }
                (vkcuda::Format::R32f, FlatSamples::F32(v)) => {
                    out[i * 4..][..4].copy_from_slice(&v[i].to_le_bytes())
                }
                _ => anyhow::bail!("channel {name} has the wrong sample type for {format}"),
            }
        }
    }
    Ok(Decoded { size: Extent2D { width: size.0 as u32, height: size.1 as u32 }, pixels: out })
}
