//! PNG encoding of an RGBA8 frame in memory: the dump's encoder, alone, so
//! that examples/png_encode.rs measures the very same code.

use anyhow::Result;

/// The row filter the dump uses, for every row: instead of `Compression::Fast`'s
/// adaptive choice (all five tried per row), Paeth gave files as small or
/// smaller and encoded 1.7–2.3× faster on both scenes
/// (examples/png_encode.rs; docs/results-h100.md).
pub const PNG_FILTER: png::Filter = png::Filter::Paeth;

/// Encodes RGBA8 `pixels` of `(width, height)` as PNG in memory: fdeflate
/// (`Compression::Fast`), every row with `filter`.
pub fn encode_png(pixels: &[u8], (width, height): (u32, u32), filter: png::Filter) -> Result<Vec<u8>> {
    let mut png_bytes = Vec::with_capacity(pixels.len() / 2);
    let mut enc = png::Encoder::new(&mut png_bytes, width, height);
    enc.set_color(png::ColorType::Rgba);
    enc.set_depth(png::BitDepth::Eight);
    enc.set_compression(png::Compression::Fast);
    enc.set_filter(filter);
    let mut writer = enc.write_header()?;
    writer.write_image_data(pixels)?;
    writer.finish()?;
    Ok(png_bytes)
}
