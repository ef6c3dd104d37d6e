//! Output files the app writes besides PNGs (bench JSON, chart, headline,
//! a headless run's JSON summary): refused before anything runs when they
//! cannot be written, and written whole or not at all.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use crate::UsageError;

/// Refuses an output path that cannot be written, before anything runs.
pub fn check_output(path: &Path, ext: Option<&str>) -> Result<(), UsageError> {
    let bad = |why: String| UsageError::new(format!("{}: {why}", path.display()));
    if let Some(ext) = ext {
        if path.extension().and_then(|e| e.to_str()) != Some(ext) {
            return Err(bad(format!("the chart is written as SVG: name it *.{ext}")));
        }
    }
    if path.is_dir() {
        return Err(bad("is a folder".into()));
    }
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let probe = dir.join(format!(".vkcuda-probe-{}", std::process::id()));
    std::fs::write(&probe, b"probe").map_err(|e| bad(format!("cannot write into {}: {e}", dir.display())))?;
    let _ = std::fs::remove_file(&probe);
    Ok(())
}

/// Writes `bytes` to a temporary file beside `path`, then renames it: never a partial file.
pub fn write_atomically(path: &Path, bytes: &[u8]) -> Result<()> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(format!(".tmp{}", std::process::id()));
    let tmp = PathBuf::from(tmp);
    std::fs::write(&tmp, bytes)
        .and_then(|()| std::fs::rename(&tmp, path))
        .inspect_err(|_| {
            let _ = std::fs::remove_file(&tmp);
        })
        .with_context(|| format!("writing {}", path.display()))
}
