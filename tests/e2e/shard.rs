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
    t.push((
        "check_dump_verdicts_on_whole_gapped_corrupted_and_leftover_folders".into(),
        Box::new(|| pass(check_dump())),
    ));
}

/// `vkcuda check-dump`'s exit code and words on `dir` for `frames` dumped `every`.
fn verdict(dir: &Path, frames: &str, every: &str) -> Result<(Option<i32>, String), String> {
    let o = run(&["check-dump", dir.to_str().ok_or("path")?, "--frames", frames, "--dump-every", every]);
    let (stdout, stderr) = text(&o);
    Ok((o.status.code(), format!("{stdout}{stderr}")))
}

fn check_dump() -> Outcome {
    let dir = tmp("check-dump");
    let o = run(&[
        "--headless",
        "--producer",
        "cpu",
        "--size",
        "61x33",
        "--frames",
        "7",
        "--dump-every",
        "2",
        "--validate",
        "--out",
        dir.to_str().ok_or("path")?,
    ]);
    if !o.status.success() {
        return Err(format!("dump: {:?}", text(&o)));
    }
    let expect = |what: &str, code: i32, words: &[&str]| -> Outcome {
        let (got, said) = verdict(&dir, "7", "2")?;
        if got != Some(code) || !words.iter().all(|w| said.contains(w)) {
            return Err(format!("{what}: exit {got:?}, wanted {code} and {words:?}:\n{said}"));
        }
        println!("  check-dump, {what}: exit {code}: {}", said.trim().replace('\n', " | "));
        Ok(())
    };
    expect("whole", 0, &["4 of 4 frames present and decodable: whole"])?;
    let frame4 = dir.join("frame_000004.png");
    let kept = std::fs::read(&frame4).map_err(|e| e.to_string())?;
    std::fs::remove_file(&frame4).map_err(|e| e.to_string())?;
    expect("gapped", 3, &["3 of 4", "NOT whole", "missing: 1 frames: 4"])?;
    std::fs::write(&frame4, &kept[..10]).map_err(|e| e.to_string())?;
    expect("corrupted", 3, &["undecodable: frame_000004.png"])?;
    std::fs::write(&frame4, &kept).map_err(|e| e.to_string())?;
    std::fs::write(dir.join(".frame_000006.png.tmp"), b"half").map_err(|e| e.to_string())?;
    expect("a killed run's leftover", 3, &["temporary files a killed run left: .frame_000006.png.tmp"])?;
    std::fs::remove_file(dir.join(".frame_000006.png.tmp")).map_err(|e| e.to_string())?;
    expect("whole again", 0, &["whole"])?;
    // Float frames are OpenEXR.
    let exr = tmp("check-dump-exr");
    let o = run(&[
        "--headless",
        "--producer",
        "cpu",
        "--size",
        "17x9",
        "--frames",
        "3",
        "--format",
        "rgba16f",
        "--out",
        exr.to_str().ok_or("path")?,
    ]);
    let (code, said) = verdict(&exr, "3", "1")?;
    if !o.status.success() || code != Some(0) || !said.contains("3 of 3") {
        return Err(format!("EXR dump: exit {code:?}:\n{said}"));
    }
    // Bad input: exit 2, one line.
    for (args, words) in [
        (vec!["check-dump", "/nonexistent/dump", "--frames", "3"], "/nonexistent/dump"),
        (
            vec!["check-dump", exr.to_str().ok_or("path")?, "--frames", "3", "--dump-every", "0"],
            "--dump-every 0",
        ),
    ] {
        let o = run(&args);
        let (stdout, stderr) = text(&o);
        if o.status.code() != Some(2) || !stderr.contains(words) || stderr.trim().lines().count() != 1 {
            return Err(format!("{args:?}: exit {:?}\n{stdout}{stderr}", o.status.code()));
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_dir_all(&exr);
    Ok(())
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
