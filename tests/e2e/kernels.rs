//! Your own kernel: `vkcuda check-kernel` (NVRTC, no GPU: PyPI's
//! nvidia-cuda-nvrtc in CI), golden-image runs (`--compare-to`, on any
//! device), and `--kernel` on the H100.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::bad_input::usage_error;
use crate::common::frame_file;
use crate::common::*;
use vkcuda::Format;

pub fn register(t: &mut Tests) {
    t.push(gated("kernel_check_accepts_every_shipped_kernel", no_nvrtc, || {
        let mut files = kernel_files("shaders/examples")?;
        files.push(crate_root().join("tests/kernels/includes.cu"));
        for file in files {
            let o = check_kernel(&[file.to_str().ok_or("path")?], &[]);
            let (stdout, stderr) = text(&o);
            if o.status.code() != Some(0) || !stdout.is_empty() || !stderr.is_empty() {
                return Err(format!("{}: exit {:?}\n{stdout}{stderr}", file.display(), o.status.code()));
            }
        }
        Ok(())
    }));
    t.push(gated("kernel_check_names_file_and_line", no_nvrtc, || {
        let file = "tests/kernels/syntax_error.cu";
        refused(&[file], 2, &format!("{file}:8: error: expected a \";\""))
    }));
    t.push(gated("kernel_check_refuses_a_wrong_entry_point", no_nvrtc, || {
        refused(
            &["tests/kernels/wrong_signature.cu"],
            2,
            "`render` must take one vk_frame by value (96 bytes",
        )?;
        refused(
            &["shaders/examples/plasma.cu", "--entry", "main"],
            2,
            "no extern \"C\" __global__ function `main`",
        )?;
        refused(&["tests/kernels/missing.cu"], 2, "reading the kernel tests/kernels/missing.cu")
    }));
    t.push(gated("kernel_check_without_nvrtc_says_what_to_install", nvrtc_in_system_path, || {
        let o = check_kernel(&["shaders/examples/plasma.cu"], &[("LD_LIBRARY_PATH", "")]);
        one_error_line(&o, 1, "libnvrtc.so (the CUDA run-time compiler) was not found")
    }));
    t.push((
        "golden_compare_passes_fails_and_names_frames".into(),
        Box::new(|| pass(golden_cpu(Format::Rgba8))),
    ));
    t.push(("golden_compare_of_float_dumps".into(), Box::new(|| pass(golden_cpu(Format::Rgba16f)))));
    t.push(("golden_and_kernel_bad_input".into(), Box::new(|| pass(kernel_bad_input()))));
    t.push(gated("kernel_without_cuda_says_so", has_nvidia, || {
        let o = run(&[
            "--headless",
            "--kernel",
            "shaders/examples/plasma.cu",
            "--frames",
            "2",
            "--out",
            "/nonexistent/x",
        ]);
        one_error_line(&o, 1, "--kernel runs your kernel with CUDA, and no CUDA device matches")
    }));
    t.push((
        "headless_producer_stall_gives_up_after_10s".into(),
        Box::new(|| {
            let args = ["--producer", "cpu", "--inject", "producer-stall@5"];
            pass(headless_ends(&args, 30, "timed out after 10s waiting for the producer to submit frame 5"))
        }),
    ));
    t.push((
        "headless_producer_stall_ended_by_sigint".into(),
        Box::new(|| {
            pass(headless_stuck_then_sigint(
                &["--producer", "cpu", "--inject", "producer-stall@5"],
                "injected producer stall",
            ))
        }),
    ));
    t.push(gated("cuda_headless_endless_kernel_ended_by_sigint", no_cuda_kernels, || {
        let said = "a kernel is still running on the CUDA stream (the run gave up on it";
        headless_stuck_then_sigint(&["--kernel", "tests/kernels/endless.cu"], said)
    }));
    t.push(gated("cuda_headless_faulting_kernel", no_cuda_kernels, || {
        headless_ends(&["--kernel", "tests/kernels/trap.cu"], 60, "CUDA_ERROR_")
    }));
    t.push(gated("cuda_headless_endless_kernel", no_cuda_kernels, || {
        let said = "a kernel is still running on the CUDA stream (the run gave up on it";
        headless_ends(&["--kernel", "tests/kernels/endless.cu"], 60, said)
    }));
    t.push(gated("cuda_bench_runs_your_kernel_beside_the_builtin_gradient", no_cuda_kernels, bench_kernel));
    t.push(gated("cuda_your_kernel_goes_through_the_ptx_cache", no_cuda_kernels, cached_kernel));
    t.push(gated(
        "cuda_kernels_repeat_their_dumps_and_match_the_builtin_gradient",
        no_cuda_kernels,
        cuda_kernels,
    ));
}

/// A validated headless run with `extra` that fails: it ends within `secs`
/// (no hang) with exit 1, one error line with `needle`, no validation
/// message, no panic.
fn headless_ends(extra: &[&str], secs: u64, needle: &str) -> Outcome {
    let (child, out) = headless_child(extra)?;
    let started = std::time::Instant::now();
    let o = wait_bounded(child, secs)?;
    let _ = std::fs::remove_dir_all(&out);
    failed_cleanly(&o, needle).map_err(|e| format!("after {:.1?}: {e}", started.elapsed()))
}

/// A validated headless run with `extra` that gets stuck: once it says a
/// frame is held up, SIGINT ends it within 5 s, with exit 1, one error line
/// with `needle` (and saying it was interrupted), no validation message.
fn headless_stuck_then_sigint(extra: &[&str], needle: &str) -> Outcome {
    use std::io::BufRead;
    let (mut child, out) = headless_child(extra)?;
    let stderr = child.stderr.take().ok_or("no stderr")?;
    // Read stderr on a thread: the test waits for the notice (a state), then signals.
    let (tx, rx) = std::sync::mpsc::channel();
    let reader = std::thread::spawn(move || {
        let mut all = String::new();
        for line in std::io::BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = tx.send(line.contains("is held up for over 2s"));
            all += &line;
            all.push('\n');
        }
        all
    });
    let noticed = loop {
        match rx.recv_timeout(std::time::Duration::from_secs(60)) {
            Ok(true) => break true,
            Ok(false) => {}
            Err(_) => break false,
        }
    };
    let signalled = noticed.then(|| (send_signal(child.id(), "INT"), std::time::Instant::now()));
    let mut o = wait_bounded(child, 30)?;
    o.stderr = reader.join().map_err(|_| "the stderr reader panicked")?.into_bytes();
    let _ = std::fs::remove_dir_all(&out);
    let (stdout, stderr) = text(&o);
    let Some((sent, at)) = signalled else {
        return Err(format!("no 'held up' notice within 60 s\n{stdout}{stderr}"));
    };
    sent?;
    if at.elapsed() > std::time::Duration::from_secs(5) {
        return Err(format!("ended {:.1?} after SIGINT\n{stdout}{stderr}", at.elapsed()));
    }
    failed_cleanly(&o, needle)?;
    match stderr.contains("interrupted by signal 2") {
        true => Ok(()),
        false => Err(format!("the error does not say it was interrupted\n{stderr}")),
    }
}

/// Starts a validated headless run of 20 frames with `extra`, output piped; and its --out folder.
fn headless_child(extra: &[&str]) -> Result<(std::process::Child, PathBuf), String> {
    let out = tmp("headless-ends");
    let child = Command::new(bin())
        .current_dir(crate_root())
        .args(["--headless", "--frames", "20", "--size", "64x48", "--validate", "--out"])
        .arg(&out)
        .args(extra)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .map_err(|e| e.to_string())?;
    Ok((child, out))
}

/// Exit 1, one error line with `needle`, no validation message, no panic.
fn failed_cleanly(o: &std::process::Output, needle: &str) -> Outcome {
    let (stdout, stderr) = text(o);
    if stderr.contains("validation error") || stderr.contains("validation warning") {
        return Err(format!("validation messages\n{stdout}{stderr}"));
    }
    one_error_line(o, 1, needle)
}

/// Why check-kernel cannot run here: no loadable libnvrtc.
fn no_nvrtc() -> Option<String> {
    let dirs = std::env::var("LD_LIBRARY_PATH").unwrap_or_default();
    let found = dirs.split(':').filter(|d| !d.is_empty()).any(|d| has_nvrtc(Path::new(d)))
        || nvrtc_in_system_path().is_some();
    (!found).then(|| "no libnvrtc (pip install nvidia-cuda-nvrtc, its nvidia/cu13/lib in LD_LIBRARY_PATH: scripts/test.sh does)".into())
}

/// Some when libnvrtc is in the system's library path (then it cannot be hidden from a child).
fn nvrtc_in_system_path() -> Option<String> {
    let cache = Command::new("ldconfig").arg("-p").output().ok()?;
    String::from_utf8_lossy(&cache.stdout)
        .contains("libnvrtc.so")
        .then(|| "libnvrtc is in the system library path".into())
}

fn has_nvrtc(dir: &Path) -> bool {
    std::fs::read_dir(dir)
        .map(|d| d.filter_map(|e| e.ok()).any(|e| e.file_name().to_string_lossy().starts_with("libnvrtc.so")))
        .unwrap_or(false)
}

fn has_nvidia() -> Option<String> {
    no_nvidia().is_none().then(|| "an NVIDIA GPU is here".into())
}

fn no_cuda_kernels() -> Option<String> {
    no_nvidia().or_else(no_nvrtc)
}

fn kernel_files(dir: &str) -> Result<Vec<PathBuf>, String> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(crate_root().join(dir))
        .map_err(|e| format!("{dir}: {e}"))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "cu"))
        .collect();
    files.sort();
    if files.len() < 3 {
        return Err(format!("{dir} holds {} kernels, expected at least 3", files.len()));
    }
    Ok(files)
}

fn check_kernel(args: &[&str], env: &[(&str, &str)]) -> std::process::Output {
    Command::new(bin())
        .current_dir(crate_root())
        .arg("check-kernel")
        .args(args)
        .envs(env.iter().copied())
        .output()
        .expect("cannot start the vkcuda binary")
}

/// check-kernel must exit `code` with `needle` on stderr and nothing on stdout.
fn refused(args: &[&str], code: i32, needle: &str) -> Outcome {
    let o = check_kernel(args, &[]);
    let (stdout, stderr) = text(&o);
    if o.status.code() != Some(code)
        || !stderr.contains(needle)
        || !stdout.is_empty()
        || stderr.contains("panicked")
    {
        return Err(format!(
            "{args:?}: exit {:?}, expected {code} with '{needle}'\n{stdout}{stderr}",
            o.status.code()
        ));
    }
    Ok(())
}

fn one_error_line(o: &std::process::Output, code: i32, needle: &str) -> Outcome {
    let (stdout, stderr) = text(o);
    let lines: Vec<&str> = stderr.lines().filter(|l| l.starts_with("vkcuda: error")).collect();
    if o.status.code() != Some(code)
        || lines.len() != 1
        || !lines[0].contains(needle)
        || stderr.contains("panicked")
    {
        return Err(format!(
            "exit {:?}, expected {code} and one error with '{needle}'\n{stdout}{stderr}",
            o.status.code()
        ));
    }
    Ok(())
}

/// A headless dump of 6 frames at 61x33 with `extra`; returns its output.
fn dump(out: &Path, extra: &[&str]) -> std::process::Output {
    let mut args =
        vec!["--headless", "--size", "61x33", "--frames", "6", "--out", out.to_str().unwrap_or("")];
    args.extend_from_slice(extra);
    run(&args)
}

/// A golden dump with the CPU producer, compared with itself, then changed:
/// two pixels of frame 3 by 40 and 2 levels, frame 5 removed.
fn golden_cpu(format: Format) -> Outcome {
    let (golden, out) = (tmp(&format!("golden-{format}")), tmp(&format!("compared-{format}")));
    let fmt = format.to_string();
    let base = ["--producer", "cpu", "--format", fmt.as_str()];
    let o = dump(&golden, &base);
    if !o.status.success() {
        return Err(format!("the golden dump failed: {:?}", text(&o)));
    }
    let compare = |extra: &[&str]| {
        let _ = std::fs::remove_dir_all(&out);
        let mut args = base.to_vec();
        args.extend(["--compare-to", golden.to_str().unwrap_or("")]);
        args.extend_from_slice(extra);
        dump(&out, &args)
    };
    let o = compare(&[]);
    let (stdout, stderr) = text(&o);
    let said = format!("compare: 6 frames compared with {}, 0 differ", golden.display());
    if !o.status.success() || !stdout.contains(&said) {
        return Err(format!(
            "same frames: exit {:?}, expected 0 and '{said}'\n{stdout}{stderr}",
            o.status.code()
        ));
    }
    // Two pixels of frame 3 changed by 40 and by 2 levels (channel 0).
    let name = |f: u32| golden.join(format!("frame_{f:06}.{}", frame_file::extension(format)));
    let bytes = std::fs::read(name(3)).map_err(|e| e.to_string())?;
    let decoded = frame_file::decode_frame(&bytes, format).map_err(|e| format!("{e:#}"))?;
    let (size, mut pixels) = (decoded.size, decoded.pixels);
    nudge(format, &mut pixels, 5 * 61 + 5, 40.0);
    nudge(format, &mut pixels, 5 * 61 + 6, 2.0);
    let changed = frame_file::encode_frame(&pixels, size, format).map_err(|e| format!("{e:#}"))?;
    std::fs::write(name(3), changed).map_err(|e| e.to_string())?;
    let o = compare(&[]);
    one_error_line(&o, 3, "1 frames differ from")?;
    one_error_line(&o, 3, "frame 3: 2 of 2013 pixels, largest difference 40")?;
    let o = compare(&["--tolerance", "40"]);
    if !o.status.success() {
        return Err(format!("--tolerance 40 must accept it: {:?}", text(&o)));
    }
    std::fs::remove_file(name(5)).map_err(|e| e.to_string())?;
    let o = compare(&["--tolerance", "40"]);
    one_error_line(&o, 3, "frame 5: 2013 of 2013 pixels, largest difference 255")?;
    let _ = (std::fs::remove_dir_all(&golden), std::fs::remove_dir_all(&out));
    Ok(())
}

/// Adds `levels` (8-bit levels: float formats by levels / 255) to channel 0 of pixel `i`.
fn nudge(format: Format, pixels: &mut [u8], i: usize, levels: f32) {
    let bpp = format.bytes_per_pixel() as usize;
    let p = &mut pixels[i * bpp..];
    match format {
        Format::Rgba16f => {
            let v = half::f16::from_le_bytes([p[0], p[1]]).to_f32() + levels / 255.0;
            p[..2].copy_from_slice(&half::f16::from_f32(v).to_le_bytes());
        }
        _ => p[0] = p[0].wrapping_add(levels as u8),
    }
}

fn kernel_bad_input() -> Outcome {
    let golden = tmp("golden-bad");
    std::fs::create_dir_all(&golden).map_err(|e| e.to_string())?;
    let g = golden.to_str().ok_or("path")?;
    usage_error(&["--compare-to", g, "--out", g], "would overwrite its reference")?;
    usage_error(&["--compare-to", "/nonexistent/golden"], "no such folder")?;
    usage_error(&["--compare-to", g, "--verify"], "choose one reference")?;
    usage_error(&["--kernel", "k.cu", "--verify"], "--compare-to")?;
    usage_error(&["--kernel", "k.cu", "--producer", "cpu"], "runs on the CUDA producer")?;
    let nine: Vec<&str> = (0..9).flat_map(|_| ["--param", "1"]).collect();
    let mut args = vec!["--kernel", "k.cu"];
    args.extend(nine);
    usage_error(&args, "at most 8 values")?;
    usage_error(&["--kernel", "k.cu", "--block", "64x32"], "at most 1024 threads")?;
    let o = run(&["bench", "--loads", "kernel", "--sizes", "32x32"]);
    let (stdout, stderr) = text(&o);
    if o.status.code() != Some(2) || !stderr.contains("--loads kernel runs your kernel: add --kernel FILE") {
        return Err(format!("bench --loads kernel: exit {:?}\n{stdout}{stderr}", o.status.code()));
    }
    let _ = std::fs::remove_dir_all(&golden);
    Ok(())
}

/// `--kernel` in `vkcuda bench`: the kernel load runs your kernel in the
/// interop variants (and skips the others, saying why); the cheap load still
/// runs the built-in gradient; both measured.
fn bench_kernel() -> Outcome {
    let json = tmp("bench-kernel.json");
    let o = run(&[
        "--kernel",
        "shaders/examples/gradient.cu",
        "bench",
        "--loads",
        "cheap",
        "--variants",
        "split-3,staging",
        "--queues",
        "compute",
        "--sizes",
        "320x200",
        "--repeats",
        "1",
        "--seconds",
        "0.2",
        "--json",
        json.to_str().ok_or("path")?,
    ]);
    let (stdout, stderr) = text(&o);
    let report = std::fs::read_to_string(&json).map_err(|e| format!("{e}\n{stdout}{stderr}"))?;
    let _ = std::fs::remove_file(&json);
    let report: serde_json::Value = serde_json::from_str(&report).map_err(|e| e.to_string())?;
    let rows = report["rows"].as_array().ok_or("no rows")?;
    let row = |variant: &str, load: &str| {
        rows.iter()
            .find(|r| r["variant"] == variant && r["load"] == load)
            .ok_or(format!("no {variant} {load} row"))
    };
    let (builtin, yours) = (row("split-3", "cheap")?, row("split-3", "kernel")?);
    let measured = |r: &serde_json::Value| r["fps"].as_f64().is_some_and(|f| f > 0.0);
    if !o.status.success()
        || !measured(builtin)
        || !measured(yours)
        || builtin["scene"] != "gradient"
        || yours["scene"] != "gradient.cu"
        || !measured(row("staging", "cheap")?)
        || !row("staging", "kernel")?["skipped"].as_str().is_some_and(|s| s.contains("CUDA producer"))
    {
        return Err(format!("exit {:?}\n{report:#}\n{stdout}{stderr}", o.status.code()));
    }
    Ok(())
}

/// On the H100: every shipped kernel dumps the same frames twice (validated),
/// and the gradient kernel the same frames as the built-in gradient scene.
fn cuda_kernels() -> Outcome {
    for file in kernel_files("shaders/examples")? {
        let stem = file.file_stem().and_then(|s| s.to_str()).unwrap_or("k").to_string();
        let (first, second) = (tmp(&format!("kernel-{stem}-1")), tmp(&format!("kernel-{stem}-2")));
        let format = if stem == "hdr" { "rgba16f" } else { "rgba8" };
        let k = file.to_str().ok_or("path")?;
        let args = ["--producer", "cuda", "--kernel", k, "--format", format, "--validate"];
        let o = dump(&first, &args);
        if !o.status.success() {
            return Err(format!("{stem}: {:?}", text(&o)));
        }
        let mut again = args.to_vec();
        again.extend(["--compare-to", first.to_str().ok_or("path")?]);
        let o = dump(&second, &again);
        let (stdout, stderr) = text(&o);
        if !o.status.success()
            || !stdout.contains(", 0 differ")
            || !stdout.contains("validation: 0 errors, 0 warnings")
        {
            return Err(format!("{stem} twice: exit {:?}\n{stdout}{stderr}", o.status.code()));
        }
        if stem == "gradient" {
            let builtin = tmp("kernel-builtin-gradient");
            let o = dump(&builtin, &["--producer", "cuda", "--scene", "gradient"]);
            if !o.status.success() {
                return Err(format!("built-in gradient: {:?}", text(&o)));
            }
            let o = dump(
                &tmp("kernel-vs-builtin"),
                &["--producer", "cuda", "--kernel", k, "--compare-to", builtin.to_str().ok_or("path")?],
            );
            if !o.status.success() || !text(&o).0.contains(", 0 differ") {
                return Err(format!("gradient.cu vs --scene gradient: {:?}", text(&o)));
            }
        }
    }
    Ok(())
}

/// Your kernel is compiled once into the PTX cache and loaded from it the
/// next time; one that includes files of its own is compiled every time.
fn cached_kernel() -> Outcome {
    let cache = tmp("user-ptx");
    let c = cache.to_str().ok_or("path")?;
    for (file, cached) in [("shaders/examples/plasma.cu", true), ("tests/kernels/includes.cu", false)] {
        for round in 0..2 {
            let o = dump(
                &tmp("user-ptx-out"),
                &["--producer", "cuda", "--kernel", file, "--ptx-cache", c, "--validate"],
            );
            let (stdout, stderr) = text(&o);
            let compiled = stderr.contains(&format!("vkcuda: compiled {file} "));
            if !o.status.success() || compiled != (round == 0 || !cached) {
                return Err(format!(
                    "{file}, run {round}: exit {:?}, compiled {compiled}\n{stdout}{stderr}",
                    o.status.code()
                ));
            }
        }
        let stem = file.rsplit('/').next().and_then(|n| n.strip_suffix(".cu")).ok_or("name")?;
        let entries: Vec<String> = std::fs::read_dir(&cache)
            .map_err(|e| e.to_string())?
            .filter_map(|e| e.ok()?.file_name().into_string().ok())
            .filter(|n| n.starts_with(&format!("{stem}-")))
            .collect();
        if entries.len() != usize::from(cached) {
            return Err(format!("{file}: cache entries {entries:?}"));
        }
    }
    let _ = std::fs::remove_dir_all(&cache);
    Ok(())
}
