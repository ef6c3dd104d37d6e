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
    for (signal, number) in [("TERM", 15), ("KILL", 9)] {
        let name = format!("sig{}_then_resume_3_times_is_byte_equal_to_one_run", signal.to_lowercase());
        t.push((name, Box::new(move || pass(resume_after(signal, number)))));
    }
    t.push((
        "sigterm_at_4k_float_writes_the_frames_in_flight_and_exits_143_within_30_s".into(),
        Box::new(|| pass(sigterm_at_4k_float())),
    ));
    t.push(("resume_bad_input".into(), Box::new(|| pass(resume_bad_input()))));
    t.push((
        "a_run_removes_the_leftovers_of_its_own_frames_only".into(),
        Box::new(|| pass(leftovers_of_its_own_frames())),
    ));
    t.push(("an_exr_write_error_names_the_openexr_writer".into(), Box::new(|| pass(exr_write_error()))));
}

/// A run (no --resume) into a folder where a killed run left temporary
/// files: those of its own frames go, and the summary says so; another
/// shard's stay (it may be writing them now).
fn leftovers_of_its_own_frames() -> Outcome {
    let dir = tmp("leftovers");
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    for name in [".frame_000001.png.tmp", ".frame_000007.png.tmp"] {
        std::fs::write(dir.join(name), b"half a frame").map_err(|e| e.to_string())?;
    }
    let o = run(&[
        "--headless",
        "--producer",
        "cpu",
        "--size",
        "61x33",
        "--frames",
        "8",
        "--shard",
        "0/2",
        "--validate",
        "--out",
        dir.to_str().ok_or("path")?,
    ]);
    let (stdout, stderr) = text(&o);
    let left: Vec<String> = files(&dir)?.into_keys().filter(|n| n.ends_with(".tmp")).collect();
    let _ = std::fs::remove_dir_all(&dir);
    if !o.status.success() || !stdout.contains("removed 1 temporary files a killed run left") {
        return Err(format!("exit {:?}\n{stdout}{stderr}", o.status.code()));
    }
    if left != [".frame_000007.png.tmp"] {
        return Err(format!("left in the folder: {left:?} (frame 7 is shard 1's)"));
    }
    Ok(())
}

/// A float dump that cannot write its file: the error names the OpenEXR
/// writer and the .exr file, not a PNG writer.
fn exr_write_error() -> Outcome {
    let dir = tmp("exr-write-error");
    let o = run(&[
        "--headless",
        "--producer",
        "cpu",
        "--size",
        "64x36",
        "--format",
        "rgba16f",
        "--frames",
        "20",
        "--inject",
        "png-write@3",
        "--validate",
        "--out",
        dir.to_str().ok_or("path")?,
    ]);
    let (stdout, stderr) = text(&o);
    let _ = std::fs::remove_dir_all(&dir);
    let said = stderr.lines().find(|l| l.starts_with("vkcuda: error")).unwrap_or_default();
    if o.status.code() != Some(1) || !said.contains("OpenEXR writer: writing") || !said.contains(".exr") {
        return Err(format!("exit {:?}, error line {said:?}\n{stdout}{stderr}", o.status.code()));
    }
    Ok(())
}

/// The frames of the resume tests: long enough that a stop lands mid-run.
const RESUMED: [&str; 14] = [
    "--headless",
    "--producer",
    "cpu",
    "--size",
    "160x90",
    "--scene",
    "julia",
    "--cost",
    "400",
    "--frames",
    "300",
    "--verify",
    "--validate",
    "--out",
];

/// A run stopped the way Slurm preempts a task (SIGTERM: frames in flight
/// are written, exit 143) or killed outright (SIGKILL: temporary files may
/// stay), after 5, 40 and 90 frames, then run again with `--resume`: the
/// frames there are kept, leftovers removed, only the missing rendered, and
/// the folder ends byte-equal to one uninterrupted run's.
fn resume_after(signal: &str, number: i32) -> Outcome {
    let single = tmp(&format!("resume-single-{signal}"));
    let o = run(&[&RESUMED[..], &[single.to_str().ok_or("path")?]].concat());
    if !o.status.success() {
        return Err(format!("the single run: {:?}", text(&o)));
    }
    let want = files(&single)?;
    for after in [5, 40, 90] {
        let dir = tmp(&format!("resume-{signal}-{after}"));
        let path = dir.to_str().ok_or("path")?;
        let child = std::process::Command::new(bin())
            .args(RESUMED)
            .arg(path)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .map_err(|e| e.to_string())?;
        let stopped = wait_for_pngs(&dir, after, 30).and_then(|()| send_signal(child.id(), signal));
        let o = wait_bounded(child, 30)?;
        match number {
            9 => stopped.map_err(|e| format!("{e}: {:?}", text(&o)))?,
            _ => drop(ended_by_signal(&o, stopped, number)?),
        }
        let before = files(&dir)?;
        let kept = before.keys().filter(|n| n.starts_with("frame_")).count();
        let leftovers = before.keys().filter(|n| n.ends_with(".tmp")).count();
        let o = run(&[&RESUMED[..], &[path, "--resume"]].concat());
        let (stdout, stderr) = text(&o);
        let said = format!("resumed: {kept} dumped frames kept, {} frames rendered", 300 - kept);
        let clean = ["validation: 0 errors, 0 warnings", " 0 mismatches", &said];
        if !o.status.success() || !clean.iter().all(|w| stdout.contains(w)) {
            return Err(format!(
                "resume after {after} ({kept} kept): exit {:?}\n{stdout}{stderr}",
                o.status.code()
            ));
        }
        if leftovers > 0 && !stdout.contains(&format!("removed {leftovers} temporary files")) {
            return Err(format!("{leftovers} leftovers, the summary does not say they went:\n{stdout}"));
        }
        if files(&dir)? != want {
            return Err(format!("resumed after {after}: the folder differs from the single run's"));
        }
        println!(
            "  SIG{signal} after {after}: {kept} frames kept, {leftovers} leftovers removed, byte-equal"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
    let _ = std::fs::remove_dir_all(&single);
    Ok(())
}

/// SIGTERM as a scheduler sends it, to a 4K RGBA32F dump: the frames in
/// flight are finished and written (the folder is whole for the frames the
/// summary counts), and the run exits 143 well within Slurm's KillWait (30 s).
fn sigterm_at_4k_float() -> Outcome {
    let dir = tmp("sigterm-4k-float");
    let path = dir.to_str().ok_or("path")?;
    let child = std::process::Command::new(bin())
        .args(["--headless", "--producer", "cpu", "--size", "3840x2160", "--format", "rgba32f", "--validate"])
        .args(["--frames", "1000000", "--out", path])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .map_err(|e| e.to_string())?;
    let sent = wait_for_pngs(&dir, 1, 60).and_then(|()| send_signal(child.id(), "TERM"));
    let at = std::time::Instant::now();
    let o = wait_bounded(child, 60)?;
    let took = at.elapsed();
    let (stdout, _) = ended_by_signal(&o, sent, 15)?;
    let frames: u64 = stdout
        .split("stopped after ")
        .nth(1)
        .and_then(|r| r.split(' ').next()?.parse().ok())
        .ok_or_else(|| format!("no frame count in:\n{stdout}"))?;
    let (code, said) = verdict(&dir, &frames.to_string(), "1")?;
    let _ = std::fs::remove_dir_all(&dir);
    if code != Some(0) || took.as_secs() >= 30 {
        return Err(format!("exit 143 after {took:?}; check-dump exit {code:?}:\n{said}"));
    }
    println!(
        "  SIGTERM at 4K RGBA32F: exit 143 {:.1} s after the signal, {frames} frames whole",
        took.as_secs_f64()
    );
    Ok(())
}

fn resume_bad_input() -> Outcome {
    usage_error(&["--resume", "--dump-every", "0"], "--resume renders the frames --out lacks")
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
