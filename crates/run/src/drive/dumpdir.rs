//! A dump folder as a run of frames `first..end` finds it: the frame files
//! already there, and the temporary files a killed run left. Frames are
//! written to `.frame_NNNNNN.EXT.tmp` and renamed, so a frame file is whole
//! or absent; a temporary file belongs to the run writing that frame, and
//! only a run of the same frames may remove it (shards share one folder).

use std::collections::BTreeSet;
use std::ops::Range;
use std::path::Path;

use anyhow::{Context, Result};

use crate::drive::sink::frame_file_name;
use vkcuda::Format;

/// The frames of a range to render again, and those already there.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Survey {
    /// Dumped frames of the range whose file is there (kept).
    pub kept: u64,
    /// Runs of frames to render, global numbers: each starts and ends at a
    /// missing dumped frame.
    pub missing: Vec<Range<u64>>,
}

impl Survey {
    /// Frames the missing runs hold.
    pub fn to_render(&self) -> u64 {
        self.missing.iter().map(|r| r.end - r.start).sum()
    }
}

/// The frame a temporary file name is for (`.frame_000012.png.tmp` → 12).
pub fn leftover_frame(name: &str) -> Option<u64> {
    let rest = name.strip_prefix(".frame_")?.strip_suffix(".tmp")?;
    let digits = rest.split('.').next()?;
    digits.parse().ok()
}

/// Removes the temporary files of `frames` that a killed run left in `dir`
/// (none if `dir` does not exist); returns how many.
pub fn remove_leftovers(dir: &Path, frames: Range<u64>) -> Result<usize> {
    let Ok(entries) = std::fs::read_dir(dir) else { return Ok(0) };
    let mut removed = 0;
    for entry in entries.filter_map(|e| e.ok()) {
        let name = entry.file_name().to_string_lossy().into_owned();
        if leftover_frame(&name).is_some_and(|f| frames.contains(&f)) {
            std::fs::remove_file(entry.path())
                .with_context(|| format!("removing {}", entry.path().display()))?;
            removed += 1;
        }
    }
    Ok(removed)
}

/// Which dumped frames of `frames` (every `every`-th of the whole run) have
/// a `format` file in `dir`, and the runs of frames to render for the rest.
pub fn survey(dir: &Path, frames: Range<u64>, every: u64, format: Format) -> Result<Survey> {
    let Range { start: first, end } = frames;
    let names: BTreeSet<String> = match std::fs::read_dir(dir) {
        Ok(entries) => entries.filter_map(|e| e.ok()?.file_name().into_string().ok()).collect(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => BTreeSet::new(),
        Err(e) => return Err(e).with_context(|| format!("reading {}", dir.display())),
    };
    let mut survey = Survey::default();
    let start = first.div_ceil(every.max(1)) * every.max(1);
    let mut run: Option<Range<u64>> = None;
    for g in (start..end).step_by(usize::try_from(every.max(1)).unwrap_or(usize::MAX)) {
        if names.contains(&frame_file_name(g, format)) {
            survey.kept += 1;
            survey.missing.extend(run.take());
            continue;
        }
        run = Some(run.map_or(g..g + 1, |r| r.start..g + 1));
    }
    survey.missing.extend(run);
    Ok(survey)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn folder(name: &str, files: &[&str]) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("vkcuda-dumpdir-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        for f in files {
            std::fs::write(dir.join(f), b"x").unwrap();
        }
        dir
    }

    #[test]
    #[allow(clippy::single_range_in_vec_init)] // a list of runs of frames, here of one
    fn missing_frames_make_runs_between_kept_ones() {
        let dir =
            folder("runs", &["frame_000000.png", "frame_000001.png", "frame_000004.png", "frame_000007.png"]);
        let s = survey(&dir, 0..9, 1, Format::Rgba8).unwrap();
        assert_eq!(s, Survey { kept: 4, missing: vec![2..4, 5..7, 8..9] });
        assert_eq!(s.to_render(), 5);
        // A shard's range, and another format's files (EXR) do not count for PNG frames.
        let s = survey(&dir, 4..8, 1, Format::Rgba8).unwrap();
        assert_eq!(s, Survey { kept: 2, missing: vec![5..7] });
        let s = survey(&dir, 0..2, 1, Format::Rgba32f).unwrap();
        assert_eq!(s, Survey { kept: 0, missing: vec![0..2] });
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    #[allow(clippy::single_range_in_vec_init)] // a list of runs of frames, here of one
    fn only_dumped_frames_are_looked_for() {
        // Every 5th frame of the run: 0, 5, 10, 15 in 3..17; 10 is there.
        let dir = folder("every", &["frame_000010.png"]);
        let s = survey(&dir, 3..17, 5, Format::Rgba8).unwrap();
        assert_eq!(s, Survey { kept: 1, missing: vec![5..6, 15..16] });
        let none = survey(&dir.join("absent"), 0..3, 1, Format::Rgba8).unwrap();
        assert_eq!(none.missing, vec![0..3]);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn leftovers_of_the_range_only_are_removed() {
        let files = [".frame_000002.png.tmp", ".frame_000009.exr.tmp", "frame_000001.png", ".other.tmp"];
        let dir = folder("leftovers", &files);
        assert_eq!(leftover_frame(".frame_000012.png.tmp"), Some(12));
        assert_eq!(leftover_frame("frame_000012.png"), None);
        assert_eq!(remove_leftovers(&dir, 0..5).unwrap(), 1);
        let mut left: Vec<_> =
            std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
        left.sort();
        assert_eq!(left, [".frame_000009.exr.tmp", ".other.tmp", "frame_000001.png"]);
        assert_eq!(remove_leftovers(&dir.join("absent"), 0..5).unwrap(), 0);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
