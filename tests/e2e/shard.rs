//! `--shard K/N`: shards' folders merge into exactly the folder one
//! unsharded run writes (byte-equal files), on any device.

use std::collections::BTreeMap;
use std::path::Path;

use crate::bad_input::usage_error;
use crate::common::*;

pub fn register(t: &mut Tests) {
    for (frames, n, extra) in [("7", 3, &["--dump-every", "2"][..]), ("10", 4, &["--format", "rgba16f"][..])]
    {
        let name = format!("shards_of_{frames}_frames_in_{n}_merge_into_the_single_run_{}", extra.join("_"));
        t.push((name, Box::new(move || pass(shards_merge(frames, n, extra)))));
    }
    t.push(("shard_bad_input".into(), Box::new(|| pass(shard_bad_input()))));
}

fn shards_merge(frames: &str, n: u64, extra: &[&str]) -> Outcome {
    let single = tmp(&format!("shard-single-{frames}-{n}"));
    let base =
        ["--headless", "--producer", "cpu", "--size", "61x33", "--frames", frames, "--verify", "--validate"];
    let dump = |out: &Path, more: &[&str]| -> Outcome {
        let mut args = base.to_vec();
        args.extend_from_slice(extra);
        args.extend_from_slice(more);
        args.extend(["--out", out.to_str().ok_or("path")?]);
        let o = run(&args);
        let (stdout, stderr) = text(&o);
        if !o.status.success()
            || !stdout.contains("validation: 0 errors, 0 warnings")
            || !stdout.contains(" 0 mismatches")
        {
            return Err(format!("{more:?}: exit {:?}\n{stdout}{stderr}", o.status.code()));
        }
        Ok(())
    };
    dump(&single, &[])?;
    let want = files(&single)?;
    let mut merged = BTreeMap::new();
    for k in 0..n {
        let dir = tmp(&format!("shard-{frames}-{k}-of-{n}"));
        dump(&dir, &["--shard", &format!("{k}/{n}")])?;
        for (name, bytes) in files(&dir)? {
            if merged.insert(name.clone(), bytes).is_some() {
                return Err(format!("{name} was written by two shards"));
            }
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
    if merged != want {
        let (a, b): (Vec<_>, Vec<_>) = (merged.keys().collect(), want.keys().collect());
        return Err(format!("the shards' files {a:?} differ from the single run's {b:?} (names or bytes)"));
    }
    let _ = std::fs::remove_dir_all(&single);
    Ok(())
}

fn shard_bad_input() -> Outcome {
    usage_error(&["--shard", "4/4"], "0 <= K < N")?;
    usage_error(&["--shard", "1/0"], "0 <= K < N")?;
    usage_error(&["--shard", "x"], "K/N")?;
    // More shards than frames: an empty shard renders nothing and says so.
    let out = tmp("shard-empty");
    let o = run(&[
        "--headless",
        "--producer",
        "cpu",
        "--frames",
        "2",
        "--shard",
        "0/3",
        "--out",
        out.to_str().ok_or("path")?,
    ]);
    let (stdout, stderr) = text(&o);
    if !o.status.success() || !stdout.contains("shard 0/3 of 2 frames has none") || out.exists() {
        return Err(format!("empty shard: exit {:?}\n{stdout}{stderr}", o.status.code()));
    }
    Ok(())
}
