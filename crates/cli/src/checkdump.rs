//! `vkcuda check-dump DIR --frames F [--dump-every K]`: whether a dump folder
//! is whole, the last step of a farm job. Frame g of a run of F frames
//! dumped every K is `frame_{g:06}.png` (8-bit formats) or `.exr` (float
//! formats) for g = 0, K, 2K, … below F, numbered in the whole run, so the
//! shards of `--shard` merge into one folder that this checks. Whole: every
//! expected frame present once and decodable, all of one size, and no
//! temporary file a killed run left (`.frame_*.tmp`).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use anyhow::{Context, Result};
use ash::vk::Extent2D;

use vkcuda::Format;
use vkcuda_run::output::frame_file::decode_frame;
use vkcuda_run::UsageError;

/// What the check found.
#[derive(Debug, Default)]
pub struct Verdict {
    /// Frames expected.
    pub expected: u64,
    /// Expected frames present and decodable.
    pub good: u64,
    /// Expected frames with no file.
    pub missing: Vec<u64>,
    /// Files that do not decode, with why.
    pub undecodable: Vec<(String, String)>,
    /// Frames with both a PNG and an EXR file.
    pub doubled: Vec<u64>,
    /// Decoded frames by size.
    pub sizes: BTreeMap<(u32, u32), u64>,
    /// Temporary files a killed run left.
    pub leftovers: Vec<String>,
}

impl Verdict {
    /// Whether the folder is whole.
    pub fn whole(&self) -> bool {
        self.missing.is_empty()
            && self.undecodable.is_empty()
            && self.doubled.is_empty()
            && self.leftovers.is_empty()
            && self.sizes.len() <= 1
    }
}

/// Checks `dir` for frames `0, every, 2·every, …` below `frames`.
pub fn check(dir: &Path, frames: u64, every: u64) -> Result<Verdict> {
    if every == 0 {
        return Err(UsageError::new("--dump-every 0 dumps no frame: nothing to check").into());
    }
    let names: BTreeSet<String> = std::fs::read_dir(dir)
        .map_err(|e| UsageError::new(format!("{}: {e}", dir.display())))?
        .filter_map(|e| e.ok().and_then(|e| e.file_name().into_string().ok()))
        .collect();
    let leftovers =
        names.iter().filter(|n| n.starts_with(".frame_") && n.ends_with(".tmp")).cloned().collect();
    let mut v = Verdict { leftovers, ..Verdict::default() };
    for g in (0..frames).step_by(usize::try_from(every).unwrap_or(usize::MAX)) {
        v.expected += 1;
        let [png, exr] = ["png", "exr"].map(|e| format!("frame_{g:06}.{e}"));
        let name = match (names.contains(&png), names.contains(&exr)) {
            (false, false) => {
                v.missing.push(g);
                continue;
            }
            (true, true) => {
                v.doubled.push(g);
                continue;
            }
            (true, false) => png,
            (false, true) => exr,
        };
        match decode(&dir.join(&name)) {
            Ok(size) => {
                v.good += 1;
                *v.sizes.entry((size.width, size.height)).or_default() += 1;
            }
            Err(e) => v.undecodable.push((name, format!("{e:#}"))),
        }
    }
    Ok(v)
}

/// A frame file's size, if it decodes as vkcuda writes it (PNG: 8-bit RGBA; EXR: any float format).
fn decode(path: &Path) -> Result<Extent2D> {
    let bytes = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    let formats: &[Format] = match path.extension().is_some_and(|e| e == "exr") {
        true => &[Format::Rgba32f, Format::Rgba16f, Format::R32f],
        false => &[Format::Rgba8],
    };
    let mut last = None;
    for f in formats {
        match decode_frame(&bytes, *f) {
            Ok(decoded) => return Ok(decoded.size),
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| anyhow::anyhow!("no format to decode")))
}

/// The verdict as lines for people: the counts, then each problem (the first 20 of a kind).
pub fn report(dir: &Path, v: &Verdict) -> String {
    let mut out = format!(
        "vkcuda: {}: {} of {} frames present and decodable{}\n",
        dir.display(),
        v.good,
        v.expected,
        if v.whole() { ": whole" } else { ": NOT whole" }
    );
    let list = |items: Vec<String>| {
        let more = items.len().saturating_sub(20);
        let mut s = items.into_iter().take(20).collect::<Vec<_>>().join(", ");
        if more > 0 {
            s.push_str(&format!(" and {more} more"));
        }
        s
    };
    if !v.missing.is_empty() {
        out += &format!(
            "  missing: {} frames: {}\n",
            v.missing.len(),
            list(v.missing.iter().map(u64::to_string).collect())
        );
    }
    for (name, why) in v.undecodable.iter().take(20) {
        out += &format!("  undecodable: {name}: {why}\n");
    }
    if !v.doubled.is_empty() {
        out += &format!("  both PNG and EXR: {}\n", list(v.doubled.iter().map(u64::to_string).collect()));
    }
    if v.sizes.len() > 1 {
        let sizes: Vec<String> = v.sizes.iter().map(|((w, h), n)| format!("{w}x{h} ({n})")).collect();
        out += &format!("  frames of different sizes: {}\n", sizes.join(", "));
    }
    if !v.leftovers.is_empty() {
        out += &format!("  temporary files a killed run left: {}\n", list(v.leftovers.clone()));
    }
    out
}
