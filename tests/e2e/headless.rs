//! Headless runs: the CPU producer on any Vulkan device, the CUDA producer and
//! the staging baseline where an NVIDIA GPU is, long validated hunts, the soak,
//! PNG dumping, and what happens without CUDA or NVRTC.

use std::process::Command;

use crate::common::scene::{Scene, SceneKind};

use crate::common::*;

/// A verified, validated headless run; checks exit code, summary and every PNG.
pub fn headless(producer: &str, sync: &str, buffers: &str, kind: SceneKind, extra: &[&str]) -> Outcome {
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
        "PNG writer, median per frame in one of its",
    ] {
        if !stdout.contains(needle) {
            return Err(format!("summary lacks '{needle}':\n{stdout}"));
        }
    }
    readback_pool_is_bounded(&stdout, 4)?;
    // Counted messages only: the layer's reports of its own timeline bug are listed apart.
    if stderr.contains("validation error") || stderr.contains("validation warning") {
        return Err(format!("validation messages on stderr:\n{stderr}"));
    }
    let scene = Scene { kind, width: w, height: h, cost: 48 };
    // `--consume draw --target-size WxH`: the frames were drawn into that size.
    let target = extra.iter().position(|a| *a == "--target-size").and_then(|i| extra.get(i + 1));
    let target =
        target.and_then(|t| t.split_once('x')).and_then(|(a, b)| Some((a.parse().ok()?, b.parse().ok()?)));
    check_pngs_drawn(&out, scene, target, &(0..frames).collect::<Vec<_>>())?;
    let _ = std::fs::remove_dir_all(&out);
    Ok(())
}

/// The summary says the workers read the readback buffers in place, and the
/// pool stayed within its bound: one buffer per frame slot (`slots`) plus two
/// per PNG worker.
pub fn readback_pool_is_bounded(stdout: &str, slots: usize) -> Outcome {
    let number_after = |key: &str| {
        let at = stdout.find(key)? + key.len();
        stdout[at..].split(|c: char| !c.is_ascii_digit()).next()?.parse::<usize>().ok()
    };
    let workers = number_after("in one of its ").ok_or_else(|| format!("no worker count:\n{stdout}"))?;
    let buffers =
        number_after("(no host copy; ").ok_or_else(|| format!("no readback buffer count:\n{stdout}"))?;
    if !(slots..=slots + 2 * workers).contains(&buffers) {
        return Err(format!("{buffers} readback buffers for {slots} slots and {workers} workers:\n{stdout}"));
    }
    Ok(())
}

/// `frames` frames with `--dump-every every`: exactly `expected` are written
/// and match the reference; with none expected, `--out` is not even created.
pub fn dump_every(frames: u64, every: u64, expected: &[u64]) -> Outcome {
    let out = tmp(&format!("every-{every}"));
    let (frames_s, every_s) = (frames.to_string(), every.to_string());
    let mut args = vec!["--headless", "--producer", "cpu", "--frames", &frames_s, "--size", "48x40"];
    args.extend(["--dump-every", &every_s, "--out", out.to_str().ok_or("path")?]);
    if every > 0 {
        args.push("--verify");
    }
    let o = run(&args);
    let (stdout, _) = text(&o);
    if !o.status.success() || !stdout.contains(&format!("{frames} frames")) {
        return Err(format!("{:?}", text(&o)));
    }
    if expected.is_empty() {
        return if out.exists() { Err(format!("--dump-every {every} created --out")) } else { Ok(()) };
    }
    let scene = Scene { kind: SceneKind::Gradient, width: 48, height: 40, cost: 64 };
    check_pngs(&out, scene, expected)?;
    let _ = std::fs::remove_dir_all(&out);
    Ok(())
}

/// A long validated run on lavapipe: 0 validation messages, every dumped
/// frame equal to the reference, resident memory stable after warm-up.
pub fn soak(frames: u64) -> Outcome {
    let out = tmp("soak");
    let n = frames.to_string();
    let o = run(&[
        "--headless",
        "--producer",
        "cpu",
        "--frames",
        &n,
        "--size",
        "64x64",
        "--dump-every",
        "100",
        "--verify",
        "--validate",
        "--out",
        out.to_str().ok_or("path")?,
    ]);
    let (stdout, stderr) = text(&o);
    let need = [format!("{frames} frames"), "0 mismatches".into(), "validation: 0 errors, 0 warnings".into()];
    if !o.status.success() || need.iter().any(|n| !stdout.contains(n.as_str())) {
        return Err(format!("exit {:?}\n{stdout}{stderr}", o.status.code()));
    }
    // "memory after warm-up → half-way → end: resident 69.9 → 70.1 → 70.1 MB"
    let line = stdout.lines().find(|l| l.contains("resident")).ok_or("no memory line")?;
    let resident = line.split("resident").nth(1).and_then(|r| r.split("MB").next()).unwrap_or_default();
    let mb: Vec<f64> = resident.split_whitespace().filter_map(|w| w.parse::<f64>().ok()).collect();
    let [start, half, end] = mb[..] else { return Err(format!("cannot read '{line}'")) };
    if end - half > 2.0 || end - start > 16.0 {
        return Err(format!("resident memory grew {start} → {half} → {end} MB over {frames} frames"));
    }
    println!("  {}", line.trim());
    let _ = std::fs::remove_dir_all(&out);
    Ok(())
}

/// `--producer cuda` where NVRTC cannot be loaded: every libnvrtc the loader
/// could find (ldconfig's cache, LD_LIBRARY_PATH) is hidden under /dev/null
/// in a private mount namespace. Exit 1, one line naming libnvrtc.
pub fn no_nvrtc() -> Verdict {
    if !Command::new("unshare").args(["-m", "true"]).status().is_ok_and(|s| s.success()) {
        return Verdict::Skip("cannot make a mount namespace here (unshare -m needs root)".into());
    }
    let script = r#"set -e
libs=$(ldconfig -p | awk '/libnvrtc/ {print $NF}')
for d in $(echo "${LD_LIBRARY_PATH:-}" | tr ':' ' '); do libs="$libs $(ls "$d"/libnvrtc* 2>/dev/null || true)"; done
for f in $libs; do mount --bind /dev/null "$f"; done
exec "$@""#;
    let o = Command::new("unshare")
        .args(["-m", "sh", "-c", script, "sh"])
        .arg(bin())
        .args(["--headless", "--producer", "cuda", "--frames", "3", "--size", "32x32", "--dump-every", "0"])
        .args(["--ptx-cache", "/tmp/vkcuda-e2e-no-nvrtc"])
        .output();
    pass(o.map_err(|e| e.to_string()).and_then(|o| {
        let (stdout, stderr) = text(&o);
        let errors: Vec<&str> = stderr.lines().filter(|l| l.starts_with("vkcuda: error")).collect();
        match o.status.code() == Some(1) && errors.len() == 1 && errors[0].contains("libnvrtc") {
            true => Ok(()),
            false => Err(format!("exit {:?}\n{stdout}{stderr}", o.status.code())),
        }
    }))
}

/// A CUDA kernel that traps: exit 1 with the CUDA error's name, within the
/// wait timeout, and no hang on the Vulkan side. (Under `--validate` the
/// abort's host signals on the CUDA-signalled timeline draw
/// VUID-VkSemaphoreSignalInfo-value-03259 from the 1.3.239 layer, which never
/// sees CUDA's signals; the run has failed by then, so they are not checked.)
pub fn cuda_fault() -> Outcome {
    let started = std::time::Instant::now();
    let o = run(&[
        "--headless",
        "--producer",
        "cuda",
        "--frames",
        "200",
        "--size",
        "320x180",
        "--dump-every",
        "0",
        "--inject",
        "cuda-fault@20",
        "--validate",
    ]);
    let (stdout, stderr) = text(&o);
    let took = started.elapsed();
    if o.status.code() != Some(1)
        || !stderr.contains("CUDA_ERROR")
        || stderr.contains("panicked")
        || took.as_secs() > 30
    {
        return Err(format!("exit {:?} after {took:?}\n{stdout}{stderr}", o.status.code()));
    }
    println!(
        "  {} ({took:.1?})",
        stderr.lines().find(|l| l.contains("CUDA_ERROR")).unwrap_or_default().trim()
    );
    Ok(())
}

/// Hazards between a host producer and the consumer depend on timing: one
/// clean short run proves nothing. 3,000 validated frames, every 100th
/// verified, so a hazard that shows once in a few hundred frames cannot hide.
pub fn hunt(producer: &str, sync: &str, buffers: &str, extra: &[&str]) -> Outcome {
    let out = tmp(&format!("hunt-{producer}-{sync}-{buffers}"));
    let mut args = vec!["--headless", "--producer", producer, "--sync", sync, "--buffers", buffers];
    args.extend(["--size", "64x36", "--frames", "3000", "--dump-every", "100", "--verify", "--validate"]);
    args.extend(["--out", out.to_str().ok_or("path")?]);
    args.extend(extra);
    let o = run(&args);
    let (stdout, stderr) = text(&o);
    let _ = std::fs::remove_dir_all(&out);
    let wanted = [
        "vkcuda: 3000 frames",
        "verify: 30 frames compared, 0 mismatches",
        "validation: 0 errors, 0 warnings",
    ];
    if !o.status.success() || !wanted.iter().all(|w| stdout.contains(w)) {
        return Err(format!("exit {:?}, expected {wanted:?}\n{stdout}{stderr}", o.status.code()));
    }
    Ok(())
}

/// Registers this area's tests.
/// Any frame and draw-target size works: random sizes (1 to 300 a side, with
/// sides of 1 to 4 as likely as any other), both schemes, 1 or 2 images, the
/// copy or the draw consumer; every frame dumped, verified by the binary,
/// decoded and compared here, under validation. A fixed seed: the same cases
/// every run.
fn random_sizes() -> Outcome {
    use proptest::prelude::*;
    use proptest::test_runner::{Config, RngAlgorithm, TestCaseError, TestRng, TestRunner};
    let config = Config { cases: 32, failure_persistence: None, ..Config::default() };
    let rng = TestRng::deterministic_rng(RngAlgorithm::ChaCha);
    let mut runner = TestRunner::new_with_rng(config, rng);
    let side = || prop_oneof![1u32..=4, 1u32..=300];
    let case = ((side(), side()), proptest::option::of((side(), side())), any::<bool>(), 1u32..=2);
    runner
        .run(&case, |((w, h), target, shared, buffers)| {
            let out = tmp(&format!("size-{w}x{h}"));
            let (size, buffers) = (format!("{w}x{h}"), buffers.to_string());
            let sync = if shared { "shared" } else { "split" };
            let mut args = vec!["--headless", "--producer", "cpu", "--size", &size, "--frames", "3"];
            args.extend([
                "--dump-every",
                "1",
                "--verify",
                "--validate",
                "--sync",
                sync,
                "--buffers",
                &buffers,
            ]);
            let target_size = target.map(|(tw, th)| format!("{tw}x{th}"));
            if let Some(t) = &target_size {
                args.extend(["--consume", "draw", "--target-size", t]);
            }
            let out_arg = out.to_string_lossy().into_owned();
            args.extend(["--out", &out_arg]);
            let o = run(&args);
            let (stdout, stderr) = text(&o);
            let scene = Scene { kind: SceneKind::Gradient, width: w, height: h, cost: 64 };
            let checked = match o.status.success() && stdout.contains("validation: 0 errors, 0 warnings") {
                true => check_pngs_drawn(&out, scene, target, &[0, 1, 2]),
                false => Err(format!("exit {:?}\n{stdout}{stderr}", o.status.code())),
            };
            let _ = std::fs::remove_dir_all(&out);
            checked.map_err(|e| TestCaseError::fail(format!("{}: {e}", args.join(" "))))
        })
        .map_err(|e| e.to_string())
}

/// The draw reads a buffer-layout frame as a storage buffer, or, past
/// the device's storage-buffer range, through an image it is copied into
/// (lavapipe's range is 128 MiB: a 4097x2048 RGBA32F frame is just past it);
/// drawn scaled (filtered) and at its own size (one texel per pixel). Each is
/// verified against the CPU reference, validated, and says which path it took.
/// On a graphics queue (the compute draw runs on any queue with compute; the
/// other draw tests use the default, a compute queue).
fn buffer_draw_paths() -> Outcome {
    let cases = [
        ("97x61", "rgba16f", "301x207"),
        ("97x61", "rgba8-srgb", "97x61"),
        ("4097x2048", "rgba32f", "301x207"),
    ];
    for (size, format, target) in cases {
        let out = tmp(&format!("buffer-draw-{size}"));
        let args = [
            "--headless",
            "--producer",
            "cpu",
            "--layout",
            "buffer",
            "--format",
            format,
            "--size",
            size,
            "--consume",
            "draw",
            "--queue",
            "graphics",
            "--target-size",
            target,
            "--frames",
            "3",
            "--dump-every",
            "1",
            "--verify",
            "--validate",
            "--out",
            out.to_str().ok_or("path")?,
        ];
        let o = run(&args);
        let (stdout, stderr) = text(&o);
        let _ = std::fs::remove_dir_all(&out);
        if !o.status.success() {
            return Err(format!("{size}: exit {:?}\n{stdout}{stderr}", o.status.code()));
        }
        for needle in ["verify: 3 frames compared, 0 mismatches", "validation: 0 errors, 0 warnings"] {
            if !stdout.contains(needle) {
                return Err(format!("{size}: summary lacks '{needle}':\n{stdout}"));
            }
        }
        let through_image = stderr.contains("beyond this device's storage-buffer range");
        if size == "97x61" && through_image {
            return Err(format!("a 97x61 frame went through an image:\n{stderr}"));
        }
        let path = if through_image { "through an image" } else { "read directly" };
        eprintln!("    {size} {format} into {target}: {path}");
    }
    Ok(())
}

pub fn register(tests: &mut Tests) {
    tests.push(("cpu_random_frame_and_target_sizes_32_cases".into(), Box::new(|| pass(random_sizes()))));
    tests.push((
        "buffer_frames_are_drawn_directly_or_past_the_storage_range_through_an_image".into(),
        Box::new(|| pass(buffer_draw_paths())),
    ));
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
        Box::new(|| pass(dump_every(11, 5, &[0, 5, 10]))),
    ));
    tests.push(("dump_every_0_writes_nothing".into(), Box::new(|| pass(dump_every(20, 0, &[])))));

    for sync in ["split", "shared"] {
        for buffers in ["1", "2"] {
            tests.push((
                format!("hunt_cpu_{sync}_{buffers}_3000_frames_validated"),
                Box::new(move || pass(hunt("cpu", sync, buffers, &[]))),
            ));
        }
    }
    // The viewer's draw pass, headless: a window-sized target (wider and taller than the frame).
    const DRAW: [&str; 4] = ["--consume", "draw", "--target-size", "200x150"];
    for (sync, buffers) in [("split", "2"), ("shared", "1")] {
        tests.push((
            format!("draw_consumer_{sync}_{buffers}_matches_letterboxed_reference"),
            Box::new(move || pass(headless("cpu", sync, buffers, SceneKind::Julia, &DRAW))),
        ));
        tests.push(gated(
            &format!("cuda_draw_consumer_{sync}_{buffers}_matches_letterboxed_reference"),
            no_nvidia,
            move || headless("cuda", sync, buffers, SceneKind::Julia, &DRAW),
        ));
    }
    // The public hand-over patterns `vkcuda bench` compares with: verified and
    // validated like vkcuda's own. host-wait (one timeline both APIs signal)
    // draws VUID-VkSubmitInfo2-semaphore-03882 from layer 1.4.309 (the
    // README's table says so), so its validation is checked there.
    for h in ["cpu-gated", "binary"] {
        tests.push(gated(&format!("cuda_handover_{h}_matches_reference"), no_nvidia, move || {
            headless("cuda", "split", "2", SceneKind::Julia, &["--handover", h])
        }));
    }
    tests.push(gated("cuda_handover_host_wait_matches_reference", no_nvidia, peer_host_wait));
    tests.push((
        "handover_peer_without_cuda_is_a_clear_error".into(),
        Box::new(|| {
            if no_nvidia().is_none() {
                return Verdict::Skip("an NVIDIA GPU is present".into());
            }
            let out = tmp("peer-no-cuda");
            let o = run(&["--headless", "--handover", "binary", "--frames", "2", "--size", "32x32", "--out"]
                .into_iter()
                .chain([out.to_str().unwrap_or("x")])
                .collect::<Vec<_>>());
            let (_, stderr) = text(&o);
            let ok = o.status.code() == Some(2)
                && stderr.contains("--handover binary is a CUDA pattern")
                && !stderr.contains("panicked")
                && !out.exists();
            pass(if ok { Ok(()) } else { Err(format!("exit {:?}: {stderr}", o.status.code())) })
        }),
    ));
    tests.push(gated("cuda_staging_baseline_matches_reference", no_nvidia, || {
        headless("staging", "split", "2", SceneKind::Julia, &[])
    }));
    tests.push((
        "non_utf8_out_path_works".into(),
        Box::new(|| {
            use std::os::unix::ffi::OsStrExt;
            let name = std::ffi::OsStr::from_bytes(b"vkcuda-e2e-\xff\xfe-frames");
            let out = std::env::temp_dir().join(name);
            let o = Command::new(bin())
                .args([
                    "--headless",
                    "--producer",
                    "cpu",
                    "--frames",
                    "4",
                    "--size",
                    "48x32",
                    "--verify",
                    "--out",
                ])
                .arg(&out)
                .output();
            let result = o.map_err(|e| e.to_string()).and_then(|o| match o.status.success() {
                true => check_pngs(
                    &out,
                    Scene { kind: SceneKind::Gradient, width: 48, height: 32, cost: 64 },
                    &[0, 1, 2, 3],
                ),
                false => Err(format!("{:?}", text(&o))),
            });
            let _ = std::fs::remove_dir_all(&out);
            pass(result)
        }),
    ));
    tests.push(("soak_3000_frames_validated_memory_stable".into(), Box::new(|| pass(soak(3000)))));
    tests.push(gated("cuda_kernel_fault_is_reported_without_hang", no_nvidia, cuda_fault));
    tests.push((
        "cuda_without_nvrtc_is_a_clear_error".into(),
        Box::new(|| match no_nvidia() {
            Some(why) => Verdict::Skip(why),
            None => no_nvrtc(),
        }),
    ));

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
                let name = format!("cuda_{sync}_{buffers}_{kind}");
                tests.push(gated(&name, no_nvidia, move || headless("cuda", sync, buffers, kind, &[])));
            }
        }
    }
    tests.push(gated("cuda_recovers_from_a_corrupt_ptx_cache", no_nvidia, || {
        (|| {
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
        })()
    }));
}

/// The host-wait pattern: every frame verified; under the validation layer
/// the only message allowed is the one the pattern itself draws from 1.4.309.
fn peer_host_wait() -> Outcome {
    let out = tmp("peer-host-wait");
    let o = run(&[
        "--headless",
        "--handover",
        "host-wait",
        "--scene",
        "julia",
        "--cost",
        "48",
        "--size",
        "320x200",
        "--frames",
        "240",
        "--dump-every",
        "10",
        "--verify",
        "--validate",
        "--out",
        out.to_str().ok_or("path")?,
    ]);
    let (stdout, stderr) = text(&o);
    if !stdout.contains("verify: 24 frames compared, 0 mismatches") {
        return Err(format!("exit {:?}\n{stdout}{stderr}", o.status.code()));
    }
    let other = stderr
        .lines()
        .filter(|l| l.contains("validation error") || l.contains("validation warning"))
        .find(|l| {
            !(l.contains("VUID-VkSubmitInfo2-semaphore-03882")
                || l.contains("smaller than the current value"))
        });
    if let Some(line) = other {
        return Err(format!("an unexpected validation message: {line}"));
    }
    let scene = Scene { kind: SceneKind::Julia, width: 320, height: 200, cost: 48 };
    check_pngs(&out, scene, &(0..240).step_by(10).collect::<Vec<_>>())?;
    let _ = std::fs::remove_dir_all(&out);
    Ok(())
}
