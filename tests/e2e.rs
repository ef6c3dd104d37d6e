//! End-to-end tests of the `vkcuda` binary: headless runs on whatever Vulkan
//! device is there (lavapipe in CI), bad input, and, where an NVIDIA GPU
//! exists, the CUDA producer. A test that needs what the machine lacks is
//! reported as "skipped: <reason>", never as passed.
//!
//! Custom harness (`harness = false`): prints one line per test and closes
//! with "e2e: N passed, N failed, N skipped". `VKCUDA_BIN` overrides the
//! binary (scripts/gpu-test.sh runs a carried one); a name filter may follow.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use vkcuda::scene::{render_cpu, Diff, FrameArgs, Scene, SceneKind};

type Outcome = Result<(), String>;

enum Verdict {
    Pass,
    Fail(String),
    Skip(String),
}

fn bin() -> PathBuf {
    std::env::var_os("VKCUDA_BIN").map(PathBuf::from).unwrap_or_else(|| env!("CARGO_BIN_EXE_vkcuda").into())
}

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("vkcuda-e2e-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

fn run(args: &[&str]) -> Output {
    Command::new(bin()).args(args).output().expect("cannot start the vkcuda binary")
}

fn text(o: &Output) -> (String, String) {
    (String::from_utf8_lossy(&o.stdout).into_owned(), String::from_utf8_lossy(&o.stderr).into_owned())
}

/// Why CUDA tests cannot run here, if they cannot.
fn no_nvidia() -> Option<String> {
    let present = ["/dev/nvidiactl", "/proc/driver/nvidia/version"].iter().any(|p| Path::new(p).exists());
    (!present).then(|| "no NVIDIA GPU".to_string())
}

/// Decodes every PNG in `dir` and compares it with the CPU reference.
fn check_pngs(dir: &Path, scene: Scene, expected: &[u64]) -> Outcome {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?
        .map(|e| e.map(|e| e.file_name().to_string_lossy().into_owned()))
        .collect::<Result<_, _>>()
        .map_err(|e| e.to_string())?;
    names.sort();
    let want: Vec<String> = expected.iter().map(|f| vkcuda::sink::frame_file_name(*f)).collect();
    if names != want {
        return Err(format!("files {names:?}, expected {want:?}"));
    }
    for (name, &frame) in names.iter().zip(expected) {
        let file = std::fs::File::open(dir.join(name)).map_err(|e| e.to_string())?;
        let mut reader = png::Decoder::new(std::io::BufReader::new(file))
            .read_info()
            .map_err(|e| format!("{name}: {e}"))?;
        let mut buf = vec![0; reader.output_buffer_size().ok_or("no size")?];
        let info = reader.next_frame(&mut buf).map_err(|e| format!("{name}: {e}"))?;
        if (info.width, info.height) != (scene.width, scene.height) {
            return Err(format!("{name} is {}x{}", info.width, info.height));
        }
        let mut reference = vec![0u8; buf.len()];
        render_cpu(&scene, &FrameArgs::new(&scene, frame as u32), &mut reference, 2);
        let d = Diff::between(&buf, &reference);
        if !d.within_tolerance() {
            return Err(format!("{name}: {} pixels differ, max {}", d.differing, d.max));
        }
    }
    Ok(())
}

/// A verified, validated headless run; checks exit code, summary and every PNG.
fn headless(producer: &str, sync: &str, buffers: &str, kind: SceneKind, extra: &[&str]) -> Outcome {
    let out = tmp(&format!("{producer}-{sync}-{buffers}-{kind}"));
    let (w, h, frames) = (160, 90, 24u64);
    let size = format!("{w}x{h}");
    let mut args = vec!["--headless", "--producer", producer, "--sync", sync, "--buffers", buffers];
    let scene_name = kind.to_string();
    let frames_s = frames.to_string();
    args.extend(["--scene", &scene_name, "--size", &size, "--frames", &frames_s, "--validate", "--verify"]);
    args.extend(["--out", out.to_str().ok_or("path")?, "--cost", "48"]);
    args.extend(extra);
    let o = run(&args);
    let (stdout, stderr) = text(&o);
    if !o.status.success() {
        return Err(format!("exit {:?}\n{stdout}{stderr}", o.status.code()));
    }
    for needle in [
        "verify: 24 frames compared, 0 mismatches",
        "validation: 0 errors, 0 warnings",
        "PNG files written: 24",
    ] {
        if !stdout.contains(needle) {
            return Err(format!("summary lacks '{needle}':\n{stdout}"));
        }
    }
    if stderr.contains("validation") {
        return Err(format!("validation messages on stderr:\n{stderr}"));
    }
    let scene = Scene { kind, width: w, height: h, cost: 48 };
    check_pngs(&out, scene, &(0..frames).collect::<Vec<_>>())?;
    let _ = std::fs::remove_dir_all(&out);
    Ok(())
}

/// A run that must fail with exit code 2, a one-line message, and no files.
fn usage_error(args: &[&str], needle: &str) -> Outcome {
    let out = tmp("usage");
    let mut all = vec!["--headless", "--frames", "3", "--producer", "cpu"];
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
    if out.exists() {
        return Err(format!("{} was left behind", out.display()));
    }
    Ok(())
}

/// SIGINT mid-run: exit 130, a summary, and every PNG in --out decodes.
fn interrupt(producer: &str) -> Outcome {
    let out = tmp(&format!("sigint-{producer}"));
    let child = Command::new(bin())
        .args(["--headless", "--producer", producer, "--frames", "1000000", "--size", "160x90", "--validate"])
        .args(["--out", out.to_str().ok_or("path")?])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .map_err(|e| e.to_string())?;
    std::thread::sleep(std::time::Duration::from_millis(1500));
    let killed =
        Command::new("kill").args(["-INT", &child.id().to_string()]).status().map_err(|e| e.to_string())?;
    if !killed.success() {
        return Err("kill -INT failed".into());
    }
    let o = child.wait_with_output().map_err(|e| e.to_string())?;
    let (stdout, stderr) = text(&o);
    if o.status.code() != Some(130) || !stdout.contains("interrupted by signal 2") {
        return Err(format!("exit {:?}\n{stdout}{stderr}", o.status.code()));
    }
    if !stdout.contains("validation: 0 errors, 0 warnings") {
        return Err(format!("validation messages:\n{stdout}{stderr}"));
    }
    let mut frames: Vec<u64> = Vec::new();
    for e in std::fs::read_dir(&out).map_err(|e| e.to_string())? {
        let name = e.map_err(|e| e.to_string())?.file_name().to_string_lossy().into_owned();
        let frame =
            name.strip_prefix("frame_").and_then(|n| n.strip_suffix(".png")).and_then(|n| n.parse().ok());
        frames.push(frame.ok_or_else(|| format!("stray file {name} in --out"))?);
    }
    frames.sort_unstable();
    if frames.is_empty() {
        return Err("no frame written before the signal".into());
    }
    if frames.iter().enumerate().any(|(i, &f)| f != i as u64) {
        return Err(format!("frames missing: {} files up to frame {:?}", frames.len(), frames.last()));
    }
    let scene = Scene { kind: SceneKind::Gradient, width: 160, height: 90, cost: 64 };
    check_pngs(&out, scene, &frames)?;
    let _ = std::fs::remove_dir_all(&out);
    Ok(())
}

fn main() {
    let filter: Option<String> = std::env::args().skip(1).find(|a| !a.starts_with('-'));
    let mut tests: Vec<(String, Box<dyn Fn() -> Verdict>)> = Vec::new();
    let pass = |r: Outcome| r.map_or_else(Verdict::Fail, |()| Verdict::Pass);

    // The CPU producer on any Vulkan device: both schemes, 2 and 3 buffers, both scenes.
    for sync in ["split", "shared"] {
        for buffers in ["1", "2", "3"] {
            for kind in SceneKind::ALL {
                tests.push((
                    format!("cpu_{sync}_{buffers}_{kind}"),
                    Box::new(move || pass(headless("cpu", sync, buffers, kind, &[]))),
                ));
            }
        }
    }
    tests.push((
        "timelines_starting_near_2_pow_63".into(),
        Box::new(move || {
            pass(headless(
                "cpu",
                "shared",
                "2",
                SceneKind::Gradient,
                &["--timeline-base", "9223372036854775000"],
            ))
        }),
    ));
    tests.push((
        "dump_every_k_writes_only_those_frames".into(),
        Box::new(|| {
            pass((|| {
                let out = tmp("every");
                let o = run(&[
                    "--headless",
                    "--producer",
                    "cpu",
                    "--frames",
                    "11",
                    "--size",
                    "48x40",
                    "--dump-every",
                    "5",
                    "--verify",
                    "--out",
                    out.to_str().ok_or("path")?,
                ]);
                if !o.status.success() {
                    return Err(format!("{:?}", text(&o)));
                }
                let scene = Scene { kind: SceneKind::Gradient, width: 48, height: 40, cost: 64 };
                check_pngs(&out, scene, &[0, 5, 10])?;
                let _ = std::fs::remove_dir_all(&out);
                Ok(())
            })())
        }),
    ));
    tests.push((
        "dump_every_0_writes_nothing".into(),
        Box::new(|| {
            pass((|| {
                let out = tmp("none");
                let o = run(&[
                    "--headless",
                    "--producer",
                    "cpu",
                    "--frames",
                    "20",
                    "--size",
                    "48x40",
                    "--dump-every",
                    "0",
                    "--out",
                    out.to_str().ok_or("path")?,
                ]);
                let (stdout, _) = text(&o);
                if !o.status.success() || !stdout.contains("20 frames") {
                    return Err(format!("{:?}", text(&o)));
                }
                if out.exists() {
                    return Err("--dump-every 0 created --out".into());
                }
                Ok(())
            })())
        }),
    ));

    tests.push(("sigint_stops_cleanly_cpu".into(), Box::new(|| pass(interrupt("cpu")))));
    tests.push((
        "sigint_stops_cleanly_cuda".into(),
        Box::new(|| match no_nvidia() {
            Some(why) => Verdict::Skip(why),
            None => pass(interrupt("cuda")),
        }),
    ));

    // Bad input: exit code 2, one clear line, nothing written.
    let bad: Vec<(Vec<&'static str>, &'static str)> = vec![
        (vec!["--size", "0x10"], "zero"),
        (vec!["--size", "100000x10"], "exceeds the device's limit"),
        (vec!["--buffers", "4"], "buffers"),
        (vec!["--scene", "teapot"], "teapot"),
        (vec!["--sync", "both"], "both"),
        (vec!["--gpu", "99"], "names no device"),
        (vec!["--out", "/proc/version"], "not a folder"),
        (vec!["--out", "/proc/vkcuda-cannot-exist"], "--out"),
    ];
    for (args, needle) in bad {
        let name = format!("bad_input_{}", args.join("_").replace(['/', '-'], ""));
        tests.push((name, Box::new(move || pass(usage_error(&args, needle)))));
    }

    // CUDA: where there is none, asking for it must be a clear error, not a panic.
    tests.push((
        "producer_cuda_without_nvidia_is_a_clear_error".into(),
        Box::new(|| {
            if no_nvidia().is_none() {
                return Verdict::Skip("an NVIDIA GPU is present".into());
            }
            let o = run(&[
                "--headless",
                "--producer",
                "cuda",
                "--frames",
                "2",
                "--size",
                "32x32",
                "--dump-every",
                "0",
            ]);
            let (_, stderr) = text(&o);
            pass(
                if o.status.code() == Some(1) && stderr.contains("libcuda") && !stderr.contains("panicked") {
                    Ok(())
                } else {
                    Err(format!("exit {:?}: {stderr}", o.status.code()))
                },
            )
        }),
    ));
    for sync in ["split", "shared"] {
        for buffers in ["2", "3"] {
            for kind in SceneKind::ALL {
                tests.push((
                    format!("cuda_{sync}_{buffers}_{kind}"),
                    Box::new(move || match no_nvidia() {
                        Some(why) => Verdict::Skip(why),
                        None => pass(headless("cuda", sync, buffers, kind, &[])),
                    }),
                ));
            }
        }
    }
    tests.push((
        "cuda_recovers_from_a_corrupt_ptx_cache".into(),
        Box::new(|| match no_nvidia() {
            Some(why) => Verdict::Skip(why),
            None => pass((|| {
                let cache = tmp("ptx");
                let c = cache.to_str().ok_or("path")?;
                headless("cuda", "split", "2", SceneKind::Julia, &["--ptx-cache", c])?;
                for e in std::fs::read_dir(&cache).map_err(|e| e.to_string())? {
                    let p = e.map_err(|e| e.to_string())?.path();
                    std::fs::write(&p, "// vkcuda-ptx checksum 0000000000000000\ngarbage")
                        .map_err(|e| e.to_string())?;
                }
                headless("cuda", "split", "2", SceneKind::Julia, &["--ptx-cache", c])?;
                let _ = std::fs::remove_dir_all(&cache);
                Ok(())
            })()),
        }),
    ));

    let (mut passed, mut failed, mut skipped) = (0, 0, 0);
    for (name, test) in &tests {
        if filter.as_ref().is_some_and(|f| !name.contains(f.as_str())) {
            continue;
        }
        match test() {
            Verdict::Pass => {
                passed += 1;
                println!("test {name} ... ok");
            }
            Verdict::Skip(why) => {
                skipped += 1;
                println!("test {name} ... skipped: {why}");
            }
            Verdict::Fail(why) => {
                failed += 1;
                println!("test {name} ... FAILED\n{why}");
            }
        }
    }
    println!("e2e: {passed} passed, {failed} failed, {skipped} skipped");
    std::process::exit(i32::from(failed > 0));
}
