//! Bad input and missing pieces: exit code 2 (or 1), one clear line, nothing written.

use std::path::Path;
use std::process::Command;

use crate::common::scene::{Scene, SceneKind};

use crate::common::*;

/// A run that must fail with exit code 2, a one-line message, and no files.
pub fn usage_error(args: &[&str], needle: &str) -> Outcome {
    let out = tmp("usage");
    let mut all = vec!["--headless", "--frames", "3"];
    if !args.contains(&"--producer") {
        all.extend(["--producer", "cpu"]);
    }
    if !args.contains(&"--size") {
        all.extend(["--size", "32x32"]);
    }
    all.extend(args);
    if !args.contains(&"--out") {
        all.extend(["--out", out.to_str().ok_or("path")?]);
    }
    let o = run(&all);
    let (stdout, stderr) = text(&o);
    if o.status.code() != Some(2) {
        return Err(format!("exit {:?}, expected 2\n{stdout}{stderr}", o.status.code()));
    }
    if !stderr.to_lowercase().contains(&needle.to_lowercase()) {
        return Err(format!("stderr lacks '{needle}': {stderr}"));
    }
    if stderr.contains("panicked") {
        return Err(format!("panicked: {stderr}"));
    }
    no_source_locations(&stderr)?;
    if out.exists() {
        return Err(format!("{} was left behind", out.display()));
    }
    Ok(())
}

/// A run that must fail at run time (exit 1) with one line naming `needle`,
/// leaving no --out behind. `env` is set for the child.
pub fn runtime_error(args: &[&str], env: &[(&str, &str)], needle: &str) -> Outcome {
    let out = tmp("runtime-error");
    let o = Command::new(bin())
        .args(["--headless", "--frames", "3", "--size", "32x32", "--out"])
        .arg(&out)
        .args(args)
        .envs(env.iter().copied())
        .output()
        .map_err(|e| e.to_string())?;
    let (stdout, stderr) = text(&o);
    let lines: Vec<&str> = stderr.lines().filter(|l| l.starts_with("vkcuda: error")).collect();
    if o.status.code() != Some(1)
        || lines.len() != 1
        || !lines[0].contains(needle)
        || stderr.contains("panicked")
    {
        return Err(format!(
            "exit {:?}, expected 1 and one error naming '{needle}'\n{stdout}{stderr}",
            o.status.code()
        ));
    }
    if out.exists() {
        return Err(format!("{} was left behind", out.display()));
    }
    Ok(())
}

/// Runs `f` with a fresh tmpfs of `size` mounted (options `opts`) at a temporary folder.
pub fn with_tmpfs(name: &str, opts: &str, f: impl FnOnce(&Path) -> Outcome) -> Verdict {
    let dir = tmp(name);
    if std::fs::create_dir_all(&dir).is_err() {
        return Verdict::Skip("cannot create a mount point".into());
    }
    let mounted = Command::new("mount").args(["-t", "tmpfs", "-o", opts, "tmpfs"]).arg(&dir).output();
    if !mounted.as_ref().is_ok_and(|o| o.status.success()) {
        let _ = std::fs::remove_dir(&dir);
        return Verdict::Skip("cannot mount a tmpfs here (needs root and CAP_SYS_ADMIN)".into());
    }
    let result = f(&dir);
    let _ = Command::new("umount").arg(&dir).status();
    let _ = std::fs::remove_dir(&dir);
    pass(result)
}

/// --out on a filesystem that fills up mid-run: exit 1 naming the cause, no
/// partial or temporary file left, every PNG there whole.
/// A message a person reads names no source file of ours or a dependency's.
pub fn no_source_locations(stderr: &str) -> Outcome {
    let located = stderr.split(".rs:").skip(1).any(|after| after.starts_with(|c: char| c.is_ascii_digit()));
    match located {
        true => Err(format!("a source location in a message: {stderr}")),
        false => Ok(()),
    }
}

/// Fills the tmpfs at `dir` part-way through a validated, verified dump
/// with `sync` and `buffers`: exit 1, one error line naming the full disk,
/// no validation message, only whole frames left, each equal to the reference.
pub fn full_filesystem(dir: &Path, sync: &str, buffers: &str) -> Outcome {
    let out = dir.join("frames");
    let o = Command::new(bin())
        .args([
            "--headless",
            "--producer",
            "cpu",
            "--frames",
            "200",
            "--size",
            "320x180",
            "--dump-every",
            "1",
        ])
        .args(["--verify", "--validate", "--sync", sync, "--buffers", buffers, "--out"])
        .arg(&out)
        .output()
        .map_err(|e| e.to_string())?;
    stopped_validly(&o, "No space left")?;
    let mut frames = whole_frames(&out)?;
    if frames.is_empty() {
        return Err("the filesystem filled up before any frame: make it larger".into());
    }
    frames.sort_unstable();
    let scene = Scene { kind: SceneKind::Gradient, width: 320, height: 180, cost: 64 };
    check_pngs(&out, scene, &frames)
}

/// The --out folder becomes read-only part-way through a validated dump
/// (the tmpfs at `dir` remounted read-only once the first frames are
/// there): exit 1, one error line naming it, no validation message, only
/// whole frames left.
pub fn read_only_part_way(dir: &Path) -> Outcome {
    let out = dir.join("frames");
    let child = Command::new(bin())
        .args([
            "--headless",
            "--producer",
            "cpu",
            "--frames",
            "100000",
            "--size",
            "64x48",
            "--dump-every",
            "1",
        ])
        .args(["--validate", "--buffers", "1", "--out"])
        .arg(&out)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .map_err(|e| e.to_string())?;
    // A state, not a time: frames are being written; then the remount (which is
    // refused while a file is open for writing: try again until it takes).
    let remounted = wait_for_pngs(&out, 3, 30).and_then(|()| {
        for _ in 0..2000 {
            let o = Command::new("mount").args(["-o", "remount,ro"]).arg(dir).output();
            if o.as_ref().is_ok_and(|o| o.status.success()) {
                return Ok(());
            }
        }
        Err("the tmpfs could not be remounted read-only".into())
    });
    let o = wait_bounded(child, 60)?;
    let _ = Command::new("mount").args(["-o", "remount,rw"]).arg(dir).status();
    remounted?;
    stopped_validly(&o, "Read-only file system")?;
    whole_frames(&out).map(|_| ())
}

/// A run that failed part-way and stopped validly: exit 1, exactly one error
/// line, naming `needle`, no panic, no validation message, no source location.
fn stopped_validly(o: &std::process::Output, needle: &str) -> Outcome {
    let (stdout, stderr) = text(o);
    let errors = stderr.lines().filter(|l| l.starts_with("vkcuda: error")).count();
    if o.status.code() != Some(1)
        || errors != 1
        || !stderr.contains(needle)
        || stderr.contains("panicked")
        || stderr.contains("validation error")
        || stderr.contains("validation warning")
    {
        return Err(format!("exit {:?}, {errors} error lines\n{stdout}{stderr}", o.status.code()));
    }
    no_source_locations(&stderr)
}

/// The frame numbers in `--out`: every file there must be a whole frame (no
/// partial or stray file).
fn whole_frames(out: &Path) -> Result<Vec<u64>, String> {
    let mut frames = Vec::new();
    for e in std::fs::read_dir(out).map_err(|e| e.to_string())? {
        let name = e.map_err(|e| e.to_string())?.file_name().to_string_lossy().into_owned();
        let f = name.strip_prefix("frame_").and_then(|n| n.strip_suffix(".png")).and_then(|n| n.parse().ok());
        frames.push(f.ok_or_else(|| format!("partial or stray file {name} left in --out"))?);
    }
    Ok(frames)
}

/// Registers this area's tests.
pub fn register(tests: &mut Tests) {
    // Bad input: exit code 2, one clear line, nothing written.
    let bad: Vec<(Vec<&'static str>, &'static str)> = vec![
        (vec!["--size", "0x10"], "zero"),
        (vec!["--size", "100000x10"], "exceeds the device's limit"),
        (vec!["--size", "10"], "WIDTHxHEIGHT"),
        (vec!["--size", "axb"], "whole number"),
        (vec!["--size", "window"], "--size window needs the viewer"),
        (vec!["--frames", "0"], "--frames"),
        (vec!["--frames=-3"], "--frames"),
        (vec!["--frames", "many"], "--frames"),
        (vec!["--buffers", "0"], "--buffers"),
        (vec!["--buffers", "9"], "--buffers"),
        (vec!["--dump-every", "x"], "--dump-every"),
        (vec!["--dump-every", "0", "--verify"], "--verify checks dumped frames"),
        (vec!["--cost", "0"], "--cost"),
        (vec!["--cost", "100001"], "--cost"),
        (vec!["--scene", "teapot"], "teapot"),
        (vec!["--producer", "gpu"], "gpu"),
        (vec!["--sync", "both"], "both"),
        (vec!["--present-mode", "vsync"], "vsync"),
        (vec!["--queue", "video"], "video"),
        (vec!["--gpu", "99"], "names no device"),
        (vec!["--gpu", "ffffffff-nope"], "names no device"),
        (vec!["--out", "/proc/version"], "not a folder"),
        (vec!["--out", "/proc/vkcuda-cannot-exist"], "cannot create"),
        (vec!["--sync", "shared", "--timeline-base", "18446744073709551610"], "overflow"),
        (vec!["--unknown-option"], "unexpected argument"),
        (vec!["--consume", "paint"], "paint"),
        (vec!["--consume", "draw", "--queue", "transfer"], "--queue compute or graphics"),
        (vec!["--target-size", "64x64"], "--target-size is the size"),
        (vec!["--latency", "low"], "--latency paces the viewer's producer to its screen"),
        (vec!["--producer-process", "child", "--producer", "staging"], "drop --producer staging"),
        (vec!["--producer-process", "child", "--producer", "cpu"], "add --layout buffer"),
        (vec!["--consume", "draw", "--target-size", "100000x10"], "exceeds the device's limit"),
    ];
    for (args, needle) in bad {
        let name = format!("bad_input_{}", args.join("_").replace(['/', '-'], ""));
        tests.push((name, Box::new(move || pass(usage_error(&args, needle)))));
    }

    tests.push(("readme_keys_are_the_helps".into(), Box::new(|| pass(readme_keys_are_the_helps()))));
    tests.push((
        "bad_input_read_only_out".into(),
        Box::new(|| {
            with_tmpfs("ro", "size=1m,ro", |dir| {
                usage_error(&["--out", &dir.join("f").to_string_lossy()], "read-only file system")
            })
        }),
    ));
    tests.push((
        "out_made_read_only_part_way_stops_validly_6_times".into(),
        Box::new(|| {
            (0..6)
                .map(|_| with_tmpfs("ro-part-way", "size=64m", read_only_part_way))
                .find(|v| !matches!(v, Verdict::Pass))
                .unwrap_or(Verdict::Pass)
        }),
    ));
    // The stop after the disk fills is as valid as the steady state: both schemes,
    // 1 and 2 images, 6 runs each (a 1-in-6 hazard cannot hide), no validation message.
    for (sync, buffers) in [("split", "1"), ("split", "2"), ("shared", "1"), ("shared", "2")] {
        tests.push((
            format!("full_filesystem_{sync}_{buffers}_stops_validly_6_times"),
            Box::new(move || {
                (0..6)
                    .map(|_| with_tmpfs("full", "size=256k", |dir| full_filesystem(dir, sync, buffers)))
                    .find(|v| !matches!(v, Verdict::Pass))
                    .unwrap_or(Verdict::Pass)
            }),
        ));
    }
    tests.push((
        "no_vulkan_loader_is_a_clear_error".into(),
        Box::new(|| {
            let env = [("VKCUDA_LIBVULKAN", "/nonexistent/libvulkan.so.1")];
            pass(runtime_error(&[], &env, "Vulkan loader").and(runtime_error(
                &[],
                &env,
                "run `vkcuda doctor`",
            )))
        }),
    ));
    tests.push((
        "no_validation_layer_is_a_clear_error".into(),
        Box::new(|| {
            let env = [("VK_LAYER_PATH", "/nonexistent")];
            pass(runtime_error(&["--validate"], &env, "validation needs the Khronos validation layer"))
        }),
    ));
    tests.push((
        "no_vulkan_driver_is_a_clear_error".into(),
        Box::new(|| {
            let none = [("VK_ICD_FILENAMES", "/nonexistent.json"), ("VK_DRIVER_FILES", "/nonexistent.json")];
            // The cure names the variable that hides every driver, and where to look further.
            let cure = "VK_DRIVER_FILES=/nonexistent.json names no driver manifest that exists";
            pass(
                runtime_error(&[], &none, "no Vulkan 1.3 driver")
                    .and(runtime_error(&[], &none, cure))
                    .and(runtime_error(&[], &none, "run `vkcuda doctor`")),
            )
        }),
    ));
    tests.push((
        "doctor_names_every_piece_and_exits_as_far_as_it_gets".into(),
        Box::new(|| pass(doctor_here())),
    ));
    tests.push((
        "doctor_without_a_driver_names_it_and_exits_2".into(),
        Box::new(|| pass(doctor_without_driver())),
    ));
}

/// `vkcuda doctor` with `env`: its exit code and standard output.
fn doctor(env: &[(&str, &str)]) -> Result<(Option<i32>, String), String> {
    let o =
        Command::new(bin()).arg("doctor").envs(env.iter().copied()).output().map_err(|e| e.to_string())?;
    let (stdout, stderr) = text(&o);
    if stderr.contains("panicked") {
        return Err(format!("panicked: {stderr}"));
    }
    Ok((o.status.code(), stdout))
}

/// Every piece has its line; 0 where CUDA renders (an NVIDIA GPU), 1 where only the CPU does.
fn doctor_here() -> Outcome {
    let (code, out) = doctor(&[])?;
    let pieces = [
        // After the mark ("[ok]", "[no]", "[!] " and a space).
        " Vulkan loader: ",
        " glvnd (NVIDIA's Vulkan driver opens it): ",
        " Vulkan drivers (ICD files): ",
        " Vulkan devices: ",
        " CUDA: ",
        " NVRTC (your own kernels): ",
        " validation layer: ",
        " display: ",
        "What works here:",
        "--headless (CUDA)",
        "--kernel",
        "--validate",
    ];
    if let Some(missing) = pieces.iter().find(|p| !out.contains(*p)) {
        return Err(format!("no line with '{missing}':\n{out}"));
    }
    let expected = if no_nvidia().is_none() { 0 } else { 1 };
    if code != Some(expected) {
        return Err(format!("exit {code:?}, expected {expected}:\n{out}"));
    }
    if !out.contains("[ok] Vulkan devices: ") || !out.contains("--headless --producer cpu  yes") {
        return Err(format!("no device found, or the CPU producer's verdict not yes:\n{out}"));
    }
    Ok(())
}

/// With every driver hidden: 2, the ICD line says none was found and what hid them, with a cure.
fn doctor_without_driver() -> Outcome {
    let none = [("VK_ICD_FILENAMES", "/nonexistent.json"), ("VK_DRIVER_FILES", "/nonexistent.json")];
    let (code, out) = doctor(&none)?;
    let needles = [
        "[no] Vulkan drivers (ICD files): 0 found, 0 whose library loads",
        "VK_DRIVER_FILES=/nonexistent.json (replaces the loader's search)",
        "[no] Vulkan devices: no instance: ",
        "-> VK_DRIVER_FILES=/nonexistent.json names no driver manifest that exists",
        "--headless --producer cpu  no ",
    ];
    if let Some(missing) = needles.iter().find(|n| !out.contains(*n)) {
        return Err(format!("no '{missing}':\n{out}"));
    }
    if code != Some(2) {
        return Err(format!("exit {code:?}, expected 2:\n{out}"));
    }
    Ok(())
}

/// The viewer's keys in `vkcuda --help` and in the README's table are the same keys.
pub fn readme_keys_are_the_helps() -> Outcome {
    let o = run(&["--help"]);
    let (help, _) = text(&o);
    let listed = help.split("Viewer keys:").nth(1).ok_or("--help lists no viewer keys")?;
    // "  Esc        quit ...": the key is what comes before the run of spaces.
    let key = |line: &str| line.trim().split("  ").next().unwrap_or("").replace(' ', "");
    let mut in_help: Vec<String> = listed.lines().filter(|l| l.starts_with("  ")).map(key).collect();
    let readme = std::fs::read_to_string(crate_root().join("README.md")).map_err(|e| e.to_string())?;
    let table = readme.split("| key | action |").nth(1).ok_or("the README has no key table")?;
    // "| Esc, or closing the window | quit ... |": the key is the first cell up to a comma.
    let mut in_readme: Vec<String> = table
        .lines()
        .skip(2)
        .take_while(|l| l.starts_with('|'))
        .map(|l| l.trim_start_matches('|').split(['|', ',']).next().unwrap_or("").replace(' ', ""))
        .collect();
    in_help.sort();
    in_readme.sort();
    match in_help == in_readme && in_help.len() >= 8 {
        true => Ok(()),
        false => Err(format!("--help lists {in_help:?}, the README {in_readme:?}")),
    }
}
