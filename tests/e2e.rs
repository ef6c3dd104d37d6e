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
    // Counted messages only: the layer's reports of its own timeline bug are listed apart.
    if stderr.contains("validation error") || stderr.contains("validation warning") {
        return Err(format!("validation messages on stderr:\n{stderr}"));
    }
    let scene = Scene { kind, width: w, height: h, cost: 48 };
    check_pngs(&out, scene, &(0..frames).collect::<Vec<_>>())?;
    let _ = std::fs::remove_dir_all(&out);
    Ok(())
}

/// `frames` frames with `--dump-every every`: exactly `expected` are written
/// and match the reference; with none expected, `--out` is not even created.
fn dump_every(frames: u64, every: u64, expected: &[u64]) -> Outcome {
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

/// A run that must fail with exit code 2, a one-line message, and no files.
fn usage_error(args: &[&str], needle: &str) -> Outcome {
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
    if out.exists() {
        return Err(format!("{} was left behind", out.display()));
    }
    Ok(())
}

/// `vkcuda bench` at small sizes: a table, JSON with every measure, an SVG
/// chart, and the README table script on that JSON. `cuda` says whether the
/// CUDA variants must run (else they must say "skipped: no CUDA device").
fn bench(cuda: bool) -> Outcome {
    let dir = tmp(if cuda { "bench-cuda" } else { "bench" });
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let (json, chart) = (dir.join("bench.json"), dir.join("bench.svg"));
    let variants = "split-1,split-2,shared-2,staging,cpu";
    let o = run(&[
        "--validate",
        "bench",
        "--variants",
        variants,
        "--sizes",
        "96x64,128x72",
        "--queues",
        "compute,transfer",
        "--repeats",
        "2",
        "--seconds",
        "0.1",
        "--warmup",
        "0.05",
        "--json",
        json.to_str().ok_or("path")?,
        "--chart",
        chart.to_str().ok_or("path")?,
    ]);
    let (stdout, stderr) = text(&o);
    if !o.status.success() || stderr.contains("panicked") {
        return Err(format!("exit {:?}\n{stdout}{stderr}", o.status.code()));
    }
    let report: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).map_err(|e| e.to_string())?)
        .map_err(|e| e.to_string())?;
    let rows = report["rows"].as_array().ok_or("no rows")?;
    if rows.len() != 2 * 2 * 2 * 5 {
        return Err(format!("{} rows, expected 40", rows.len()));
    }
    let mut measured = 0;
    for r in rows {
        let needs_cuda = r["variant"] != "cpu";
        if needs_cuda && !cuda {
            if r["skipped"] != "no CUDA device" {
                return Err(format!("{r} was not skipped"));
            }
            continue;
        }
        for key in [
            "fps",
            "us_per_frame",
            "render_us",
            "vulkan_us",
            "producer_cpu_us",
            "consumer_cpu_us",
            "latency_us",
        ] {
            let v = r[key].as_f64().ok_or_else(|| format!("{key} missing in {r}"))?;
            if !(v > 0.0 && v < 1e7) {
                return Err(format!("{key} = {v} in {r}"));
            }
        }
        let fps = r["fps"].as_f64().unwrap_or(0.0);
        let us = r["us_per_frame"].as_f64().unwrap_or(0.0);
        if (fps * us - 1e6).abs() > 1.0 || r["fps_repeats"].as_array().map(Vec::len) != Some(2) {
            return Err(format!("inconsistent row {r}"));
        }
        if r["load"] == "balanced" && r["copies"].as_u64().unwrap_or(0) < 1 {
            return Err(format!("balanced row without copies: {r}"));
        }
        measured += 1;
        let want = [&r["queue"], &r["variant"], &r["size"]].map(|v| v.as_str().unwrap_or("?").to_string());
        let found = stdout.lines().any(|l| {
            let words: Vec<&str> = l.split_whitespace().collect();
            words.len() > 4 && words[..3] == want && words[4].parse::<f64>().is_ok()
        });
        if !found {
            return Err(format!("the table lacks a row for {want:?}:\n{stdout}"));
        }
    }
    if !stdout.contains("validation: 0 errors, 0 warnings") {
        return Err(format!("validation messages:\n{stdout}{stderr}"));
    }
    let svg = std::fs::read_to_string(&chart).map_err(|e| e.to_string())?;
    if !svg.starts_with("<svg")
        || !svg.trim_end().ends_with("</svg>")
        || svg.matches("<rect").count() != measured + 1
    {
        return Err(format!(
            "chart has {} bars for {measured} measured rows",
            svg.matches("<rect").count() - 1
        ));
    }
    // The README table script, on a copy of a README with the markers.
    let readme = dir.join("README.md");
    std::fs::write(
        &readme,
        "# x
<!-- bench-table:begin -->
old
<!-- bench-table:end -->
tail
",
    )
    .map_err(|e| e.to_string())?;
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/bench-table.py");
    let o = Command::new("python3")
        .arg(&script)
        .arg(&json)
        .arg("--readme")
        .arg(&readme)
        .output()
        .map_err(|e| format!("python3: {e}"))?;
    let table = std::fs::read_to_string(&readme).map_err(|e| e.to_string())?;
    let cpu_rows = table.lines().filter(|l| l.contains("| cpu |")).count();
    if !o.status.success() || table.contains("\nold\n") || !table.ends_with("tail\n") || cpu_rows != 8 {
        return Err(format!("bench-table.py: {:?}\n{table}", text(&o)));
    }
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

/// Bad bench input: exit 2, one line naming the problem, no file written.
fn bench_usage_error(args: &[&str], needle: &str) -> Outcome {
    let mut all = vec!["bench", "--sizes", "32x32", "--repeats", "1", "--seconds", "0.01"];
    all.extend(args);
    let o = run(&all);
    let (stdout, stderr) = text(&o);
    if o.status.code() != Some(2) || !stderr.to_lowercase().contains(&needle.to_lowercase()) {
        return Err(format!("exit {:?}, expected 2 naming '{needle}'\n{stdout}{stderr}", o.status.code()));
    }
    if stderr.contains("panicked") || !stdout.is_empty() {
        return Err(format!("panicked or printed a table: {stdout}{stderr}"));
    }
    Ok(())
}

/// SIGINT during a bench: exit 130 and no JSON (never a partial one).
fn bench_interrupt() -> Outcome {
    let dir = tmp("bench-sigint");
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let json = dir.join("b.json");
    let child = Command::new(bin())
        .args(["bench", "--variants", "cpu", "--sizes", "64x64", "--seconds", "1", "--repeats", "20"])
        .arg("--json")
        .arg(&json)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .map_err(|e| e.to_string())?;
    std::thread::sleep(std::time::Duration::from_millis(2500));
    Command::new("kill").args(["-INT", &child.id().to_string()]).status().map_err(|e| e.to_string())?;
    let o = child.wait_with_output().map_err(|e| e.to_string())?;
    let (stdout, stderr) = text(&o);
    let left: Vec<_> = std::fs::read_dir(&dir).map_err(|e| e.to_string())?.collect();
    if o.status.code() != Some(130) || !left.is_empty() || !stderr.contains("interrupted by signal 2") {
        return Err(format!("exit {:?}, {} files left\n{stdout}{stderr}", o.status.code(), left.len()));
    }
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

/// A run that should have gone well (`result`, what the test did meanwhile)
/// and ended with exit 0, its summary containing every one of `needles`.
fn ended_cleanly(o: &Output, result: Outcome, needles: &[&str]) -> Outcome {
    let (stdout, stderr) = text(o);
    result.map_err(|e| format!("{e}\n{stdout}{stderr}"))?;
    if o.status.code() != Some(0) || !needles.iter().all(|n| stdout.contains(n)) {
        return Err(format!("exit {:?}, expected 0 and {needles:?}\n{stdout}{stderr}", o.status.code()));
    }
    Ok(())
}

/// Waits for `child` at most `secs` seconds (then kills it) and collects its output.
fn wait_bounded(mut child: std::process::Child, secs: u64) -> Result<Output, String> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(secs);
    while child.try_wait().map_err(|e| e.to_string())?.is_none() {
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    child.wait_with_output().map_err(|e| e.to_string())
}

/// A test that needs what `gate` checks for: "skipped: <reason>" without it.
fn gated(
    name: &str,
    gate: fn() -> Option<String>,
    test: impl Fn() -> Outcome + 'static,
) -> (String, Box<dyn Fn() -> Verdict>) {
    (name.to_string(), Box::new(move || gate().map_or_else(|| pass(test()), Verdict::Skip)))
}

fn pass(r: Outcome) -> Verdict {
    r.map_or_else(Verdict::Fail, |()| Verdict::Pass)
}

/// A run that must fail at run time (exit 1) with one line naming `needle`,
/// leaving no --out behind. `env` is set for the child.
fn runtime_error(args: &[&str], env: &[(&str, &str)], needle: &str) -> Outcome {
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
fn with_tmpfs(name: &str, opts: &str, f: impl FnOnce(&Path) -> Outcome) -> Verdict {
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
fn full_filesystem(dir: &Path) -> Outcome {
    let out = dir.join("frames");
    let o = Command::new(bin())
        .args(["--headless", "--producer", "cpu", "--frames", "200", "--size", "320x180", "--out"])
        .arg(&out)
        .output()
        .map_err(|e| e.to_string())?;
    let (stdout, stderr) = text(&o);
    if o.status.code() != Some(1) || !stderr.contains("No space left") || stderr.contains("panicked") {
        return Err(format!("exit {:?}\n{stdout}{stderr}", o.status.code()));
    }
    let mut frames = Vec::new();
    for e in std::fs::read_dir(&out).map_err(|e| e.to_string())? {
        let name = e.map_err(|e| e.to_string())?.file_name().to_string_lossy().into_owned();
        let f = name.strip_prefix("frame_").and_then(|n| n.strip_suffix(".png")).and_then(|n| n.parse().ok());
        frames.push(f.ok_or_else(|| format!("partial or stray file {name} left in --out"))?);
    }
    if frames.is_empty() {
        return Err("the filesystem filled up before any frame: make it larger".into());
    }
    frames.sort_unstable();
    let scene = Scene { kind: SceneKind::Gradient, width: 320, height: 180, cost: 64 };
    check_pngs(&out, scene, &frames)
}

/// A long validated run on lavapipe: 0 validation messages, every dumped
/// frame equal to the reference, resident memory stable after warm-up.
fn soak(frames: u64) -> Outcome {
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
fn no_nvrtc() -> Verdict {
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
fn cuda_fault() -> Outcome {
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
        "--fault-at",
        "20",
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

/// SIGINT mid-run: exit 130, a summary, and every PNG in --out decodes.
/// Waits (up to `secs` seconds) until `dir` holds at least `n` finished PNGs.
fn wait_for_pngs(dir: &Path, n: usize, secs: u64) -> Outcome {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(secs);
    loop {
        let done = std::fs::read_dir(dir)
            .map(|d| {
                d.filter_map(|e| e.ok()).filter(|e| !e.file_name().to_string_lossy().starts_with('.')).count()
            })
            .unwrap_or(0);
        if done >= n {
            return Ok(());
        }
        if std::time::Instant::now() > deadline {
            return Err(format!("{secs} s after start, {} holds {done} PNGs, not {n}", dir.display()));
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// Hazards between a host producer and the consumer depend on timing: one
/// clean short run proves nothing. 3,000 validated frames, every 100th
/// verified, so a hazard that shows once in a few hundred frames cannot hide.
fn hunt(producer: &str, sync: &str, buffers: &str, extra: &[&str]) -> Outcome {
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

/// A graceful stop (SIGINT) at a random point, 30 times, each under
/// validation: the stop consumes what the producer made beyond it, a race
/// between the two sides that one run cannot cover.
fn stop_repeatedly(producer: &str) -> Outcome {
    for run in 0..30 {
        let out = tmp(&format!("stop-{producer}-{run}"));
        let child = Command::new(bin())
            .args([
                "--headless",
                "--producer",
                producer,
                "--frames",
                "1000000",
                "--size",
                "64x36",
                "--validate",
            ])
            .args(["--buffers", ["1", "2", "3"][run % 3], "--sync", ["split", "shared"][run % 2]])
            .args(["--dump-every", "1", "--out", out.to_str().ok_or("path")?])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .map_err(|e| e.to_string())?;
        // Vary the stop point: after 1 to 15 frames were written.
        let result = wait_for_pngs(&out, 1 + (run * 7) % 15, 30);
        let _ = Command::new("kill").args(["-INT", &child.id().to_string()]).status();
        let o = wait_bounded(child, 30)?;
        let (stdout, stderr) = text(&o);
        let _ = std::fs::remove_dir_all(&out);
        result?;
        if o.status.code() != Some(130) || !stdout.contains("validation: 0 errors, 0 warnings") {
            return Err(format!("stop {run}: exit {:?}\n{stdout}{stderr}", o.status.code()));
        }
    }
    Ok(())
}

fn interrupt(producer: &str, signal: &str, number: i32) -> Outcome {
    let out = tmp(&format!("{signal}-{producer}"));
    let child = Command::new(bin())
        .args(["--headless", "--producer", producer, "--frames", "1000000", "--size", "160x90", "--validate"])
        .args(["--out", out.to_str().ok_or("path")?])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .map_err(|e| e.to_string())?;
    // Stop it mid-run: once frames are flowing (the first whole PNG is there), not after a time.
    wait_for_pngs(&out, 1, 30)?;
    let killed = Command::new("kill")
        .args([&format!("-{signal}"), &child.id().to_string()])
        .status()
        .map_err(|e| e.to_string())?;
    if !killed.success() {
        return Err(format!("kill -{signal} failed"));
    }
    let o = child.wait_with_output().map_err(|e| e.to_string())?;
    let (stdout, stderr) = text(&o);
    if o.status.code() != Some(128 + number) || !stdout.contains(&format!("interrupted by signal {number}")) {
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
    // Every consumed frame was dumped, and the summary counts exactly those.
    let said = format!("stopped after {} frames", frames.len());
    if !stdout.contains(&said) {
        return Err(format!("{} PNGs, but the summary does not say '{said}':\n{stdout}", frames.len()));
    }
    let scene = Scene { kind: SceneKind::Gradient, width: 160, height: 90, cost: 64 };
    check_pngs(&out, scene, &frames)?;
    let _ = std::fs::remove_dir_all(&out);
    Ok(())
}

/// An X screen of our own (Xvfb), killed on drop.
struct Xvfb {
    child: std::process::Child,
    display: String,
}

impl Xvfb {
    fn start() -> Result<Self, String> {
        use std::io::BufRead;
        // -displayfd: Xvfb picks a free display and writes its number once it accepts clients.
        let mut child = Command::new("Xvfb")
            .args(["-displayfd", "1", "-screen", "0", "1024x768x24", "-nolisten", "tcp"])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .map_err(|e| format!("Xvfb: {e}"))?;
        let mut line = String::new();
        let stdout = child.stdout.take().ok_or("no Xvfb stdout")?;
        std::io::BufReader::new(stdout).read_line(&mut line).map_err(|e| e.to_string())?;
        let n: u32 = line.trim().parse().map_err(|_| format!("Xvfb said '{line}'"))?;
        Ok(Self { child, display: format!(":{n}") })
    }

    /// Starts the viewer on this display with `args`, its output captured.
    fn viewer(&self, args: &[&str]) -> Result<std::process::Child, String> {
        Command::new(bin())
            .args(args)
            .env("DISPLAY", &self.display)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .map_err(|e| e.to_string())
    }

    /// The viewer's window, once it exists (waits up to 20 s).
    fn window_id(&self) -> Result<String, String> {
        let ids = self.cmd("timeout", &["20", "xdotool", "search", "--sync", "--name", "^vkcuda"])?;
        Ok(ids.lines().next().ok_or("no window")?.to_string())
    }

    /// The window's title once `ready(title)` holds, polled for up to `secs` seconds.
    fn title_when(
        &self,
        id: &str,
        secs: u64,
        what: &str,
        ready: impl Fn(&str) -> bool,
    ) -> Result<String, String> {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(secs);
        loop {
            let title = self.cmd("xdotool", &["getwindowname", id])?;
            if ready(&title) {
                return Ok(title);
            }
            if std::time::Instant::now() > deadline {
                return Err(format!("{what}: not after {secs} s; the title says '{title}'"));
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
    }

    /// Presses `key` until the title shows its effect (`done(title)`): a key sent
    /// before the window takes keyboard focus is lost, so one press proves nothing.
    /// Each press waits up to 3 s for its effect; all of them together, 15 s.
    fn press_until(&self, id: &str, key: &str, done: impl Fn(&str) -> bool) -> Result<String, String> {
        for _ in 0..5 {
            self.cmd("xdotool", &["windowfocus", "--sync", id])?;
            self.cmd("xdotool", &["key", key])?;
            if let Ok(title) = self.title_when(id, 3, key, &done) {
                return Ok(title);
            }
        }
        let title = self.cmd("xdotool", &["getwindowname", id])?;
        Err(format!("pressing {key} 5 times never took effect; the title says '{title}'"))
    }

    fn cmd(&self, program: &str, args: &[&str]) -> Result<String, String> {
        let o = Command::new(program)
            .args(args)
            .env("DISPLAY", &self.display)
            .output()
            .map_err(|e| e.to_string())?;
        if !o.status.success() {
            return Err(format!("{program} {args:?}: {}", String::from_utf8_lossy(&o.stderr)));
        }
        Ok(String::from_utf8_lossy(&o.stdout).trim().to_string())
    }
}

impl Drop for Xvfb {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Why the window tests cannot run here, if they cannot.
fn no_x_tools() -> Option<String> {
    let missing: Vec<&str> = ["Xvfb", "xdotool", "xwd"]
        .into_iter()
        .filter(|t| {
            Command::new("sh")
                .args(["-c", &format!("command -v {t}")])
                .output()
                .map_or(true, |o| !o.status.success())
        })
        .collect();
    (!missing.is_empty()).then(|| format!("missing {}", missing.join(", ")))
}

/// A window capture as RGB rows.
struct Capture {
    width: u32,
    height: u32,
    rgb: Vec<[u8; 3]>,
}

/// Parses an XWD file (ZPixmap, 24/32 bits per pixel, as xwd writes for a TrueColor window).
fn parse_xwd(data: &[u8]) -> Result<Capture, String> {
    let field = |i: usize| -> Result<u32, String> {
        let b = data.get(i * 4..i * 4 + 4).ok_or("truncated XWD header")?;
        Ok(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    };
    let (header, format, width, height) = (field(0)? as usize, field(2)?, field(4)?, field(5)?);
    let (byte_order, bpp, line, ncolors) = (field(7)?, field(11)?, field(12)? as usize, field(19)? as usize);
    let (rmask, gmask, bmask) = (field(14)?, field(15)?, field(16)?);
    if format != 2 || bpp != 32 {
        return Err(format!("unsupported XWD: format {format}, {bpp} bits per pixel"));
    }
    let start = header + ncolors * 12;
    let shift = |m: u32| m.trailing_zeros();
    let mut rgb = Vec::with_capacity((width * height) as usize);
    for y in 0..height as usize {
        for x in 0..width as usize {
            let o = start + y * line + x * 4;
            let b = data.get(o..o + 4).ok_or("truncated XWD pixels")?;
            let p = if byte_order == 0 {
                u32::from_le_bytes([b[0], b[1], b[2], b[3]])
            } else {
                u32::from_be_bytes([b[0], b[1], b[2], b[3]])
            };
            rgb.push([
                ((p & rmask) >> shift(rmask)) as u8,
                ((p & gmask) >> shift(gmask)) as u8,
                ((p & bmask) >> shift(bmask)) as u8,
            ]);
        }
    }
    Ok(Capture { width, height, rgb })
}

/// What the window should show: the frame letterboxed into the window and
/// sampled bilinearly (clamp to edge), as the present pass draws it.
fn expected_window(frame: &[u8], fw: u32, fh: u32, ww: u32, wh: u32) -> Vec<Option<[f64; 3]>> {
    use ash::vk::Extent2D;
    let r = vkcuda::present::window::letterbox(
        Extent2D { width: ww, height: wh },
        Extent2D { width: fw, height: fh },
    );
    let (x0, y0, rw, rh) =
        (r.offset.x as f64, r.offset.y as f64, r.extent.width as f64, r.extent.height as f64);
    let texel = |x: i64, y: i64, c: usize| {
        let (x, y) = (x.clamp(0, fw as i64 - 1) as usize, y.clamp(0, fh as i64 - 1) as usize);
        f64::from(frame[(y * fw as usize + x) * 4 + c])
    };
    let mut out = Vec::with_capacity((ww * wh) as usize);
    for py in 0..wh {
        for px in 0..ww {
            let (fx, fy) = (f64::from(px) + 0.5 - x0, f64::from(py) + 0.5 - y0);
            if fx < 0.0 || fy < 0.0 || fx > rw || fy > rh {
                out.push(Some([0.0; 3])); // the letterbox bars
                continue;
            }
            // Skip the rectangle's edge pixels: coverage there is the rasterizer's call.
            if fx < 1.0 || fy < 1.0 || fx > rw - 1.0 || fy > rh - 1.0 {
                out.push(None);
                continue;
            }
            let (u, v) = (fx / rw * f64::from(fw) - 0.5, fy / rh * f64::from(fh) - 0.5);
            let (ix, iy) = (u.floor() as i64, v.floor() as i64);
            let (ax, ay) = (u - u.floor(), v - v.floor());
            let mut p = [0.0; 3];
            for (c, v) in p.iter_mut().enumerate() {
                let top = texel(ix, iy, c) * (1.0 - ax) + texel(ix + 1, iy, c) * ax;
                let bottom = texel(ix, iy + 1, c) * (1.0 - ax) + texel(ix + 1, iy + 1, c) * ax;
                *v = top * (1.0 - ay) + bottom * ay;
            }
            out.push(Some(p));
        }
    }
    out
}

/// Parses "… julia 320x180 tick 57 cost 48 …" out of the window title (F1 stats).
fn title_spec(title: &str) -> Result<Scene, String> {
    let words: Vec<&str> = title.split_whitespace().collect();
    let at = |key: &str| {
        words
            .iter()
            .position(|w| *w == key)
            .and_then(|i| words.get(i + 1))
            .ok_or(format!("no '{key}' in title '{title}'"))
    };
    let kind = if title.contains("julia") { SceneKind::Julia } else { SceneKind::Gradient };
    let size = words
        .iter()
        .find_map(|w| w.split_once('x').and_then(|(a, b)| Some((a.parse().ok()?, b.parse().ok()?))));
    let (width, height) = size.ok_or(format!("no size in title '{title}'"))?;
    let cost = at("cost")?.parse().map_err(|_| format!("bad cost in '{title}'"))?;
    Ok(Scene { kind, width, height, cost })
}

fn title_tick(title: &str) -> Result<u32, String> {
    let words: Vec<&str> = title.split_whitespace().collect();
    let i = words.iter().position(|w| *w == "tick").ok_or(format!("no tick in title '{title}'"))?;
    words.get(i + 1).and_then(|t| t.parse().ok()).ok_or(format!("bad tick in '{title}'"))
}

/// Compares a capture with the expected window; returns (fraction within 4 levels, max difference).
fn compare_window(cap: &Capture, scene: &Scene, tick: u32) -> (f64, f64) {
    let mut frame = vec![0u8; (scene.width * scene.height * 4) as usize];
    render_cpu(scene, &FrameArgs::new(scene, tick), &mut frame, 2);
    let want = expected_window(&frame, scene.width, scene.height, cap.width, cap.height);
    if let Some(path) = std::env::var_os("VKCUDA_EXPECTED") {
        let bytes: Vec<u8> =
            want.iter().flat_map(|p| p.unwrap_or([255.0, 0.0, 255.0]).map(|c| c.round() as u8)).collect();
        if let Ok(file) = std::fs::File::create(path) {
            let mut enc = png::Encoder::new(std::io::BufWriter::new(file), cap.width, cap.height);
            enc.set_color(png::ColorType::Rgb);
            let _ = enc.write_header().and_then(|mut w| w.write_image_data(&bytes));
        }
    }
    let (mut close, mut counted, mut max) = (0u64, 0u64, 0.0f64);
    for (got, want) in cap.rgb.iter().zip(&want) {
        let Some(want) = want else { continue };
        let d = (0..3).map(|c| (f64::from(got[c]) - want[c]).abs()).fold(0.0, f64::max);
        counted += 1;
        close += u64::from(d <= 4.0);
        max = max.max(d);
    }
    (close as f64 / counted.max(1) as f64, max)
}

/// The viewer in a real X window on whatever Vulkan device is there (lavapipe in CI).
fn window_test() -> Outcome {
    let x = Xvfb::start()?;
    let out = tmp("window");
    let child = {
        let out = out.to_str().ok_or("path")?;
        x.viewer(&[
            "--producer",
            "cpu",
            "--validate",
            "--verify",
            "--size",
            "320x180",
            "--scene",
            "gradient",
            "--cost",
            "48",
            "--out",
            out,
        ])?
    };
    let result = (|| -> Outcome {
        let id = x.window_id()?;
        // Resize while it runs: the swapchain must follow.
        x.cmd("xdotool", &["windowsize", &id, "560", "400"])?;
        // F1 shows the stats (scene, size, tick) in the title; Space pauses.
        x.press_until(&id, "F1", |t| t.contains(" tick "))?;
        let title = x.press_until(&id, "space", |t| t.contains("(paused)"))?;
        let (scene, tick) = (title_spec(&title)?, title_tick(&title)?);
        let grab = |name: &str| -> Result<Capture, String> {
            let file = out.with_extension(name);
            x.cmd("xwd", &["-id", &id, "-silent", "-out", file.to_str().ok_or("path")?])?;
            parse_xwd(&std::fs::read(&file).map_err(|e| e.to_string())?)
        };
        // Wait for the state: the window is 560x400 and shows the paused frame (the swapchain
        // follows the resize at the viewer's next frame).
        let shows = |name: &str, scene: &Scene, tick: u32| -> Result<Capture, String> {
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(15);
            loop {
                let cap = grab(name)?;
                let (fraction, max) = compare_window(&cap, scene, tick);
                if (cap.width, cap.height) == (560, 400) && fraction >= 0.99 {
                    println!("  window 560x400 vs reference ({} tick {tick}): {:.3}% of pixels within 4 levels, max diff {max:.0}", scene.kind, 100.0 * fraction);
                    return Ok(cap);
                }
                if std::time::Instant::now() > deadline {
                    return Err(format!(
                        "after 15 s the {}x{} window matches {} tick {tick} in only {:.2}% of pixels (max diff {max:.0})",
                        cap.width, cap.height, scene.kind, 100.0 * fraction
                    ));
                }
                std::thread::sleep(std::time::Duration::from_millis(100));
            }
        };
        let first = shows("first.xwd", &scene, tick)?;
        // Paused: the viewer keeps presenting, and every present shows the same frame.
        for _ in 0..5 {
            if grab("second.xwd")?.rgb != first.rgb {
                return Err("two captures of a paused animation differ".into());
            }
        }
        // S saves the shown (paused) frame through the PNG writer; --verify checks it.
        x.cmd("xdotool", &["key", "s"])?;
        check_pngs_any(&out, scene, tick)?;
        let title = x.press_until(&id, "Right", |t| t.contains("julia"))?;
        let third = shows("third.xwd", &title_spec(&title)?, title_tick(&title)?)?;
        if third.rgb == first.rgb {
            return Err(format!("switching scene changed nothing (title '{title}')"));
        }
        if let Some(path) = std::env::var_os("VKCUDA_SCREENSHOT") {
            let file = std::fs::File::create(path).map_err(|e| e.to_string())?;
            let mut enc = png::Encoder::new(std::io::BufWriter::new(file), third.width, third.height);
            enc.set_color(png::ColorType::Rgb);
            let bytes: Vec<u8> = third.rgb.iter().flatten().copied().collect();
            enc.write_header().and_then(|mut w| w.write_image_data(&bytes)).map_err(|e| e.to_string())?;
        }
        // V cycles the present mode (shown in the title): the swapchain is recreated while
        // frames flow, and a frame after that is presented.
        let mode =
            |t: &str| ["fifo", "mailbox", "immediate"].into_iter().find(|m| t.contains(&format!("| {m} |")));
        let before = mode(&title).ok_or(format!("no present mode in '{title}'"))?;
        x.press_until(&id, "v", |t| mode(t).is_some_and(|m| m != before))?;
        x.cmd("xdotool", &["key", "Escape"])?;
        Ok(())
    })();
    let o = wait_bounded(child, 20)?;
    let (stdout, stderr) = text(&o);
    for f in ["first.xwd", "second.xwd", "third.xwd"] {
        let _ = std::fs::remove_file(out.with_extension(f));
    }
    result.map_err(|e| format!("{e}\n{stdout}{stderr}"))?;
    let saved = stdout.contains("PNG files written: 1 ")
        && stdout.contains("verify: 1 frames compared, 0 mismatches");
    if o.status.code() != Some(0) || !stdout.contains("validation: 0 errors, 0 warnings") || !saved {
        return Err(format!("exit {:?}\n{stdout}{stderr}", o.status.code()));
    }
    let _ = std::fs::remove_dir_all(&out);
    Ok(())
}

/// The one PNG the viewer saved shows `scene` at `tick`.
fn check_pngs_any(dir: &Path, scene: Scene, tick: u32) -> Outcome {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let names: Vec<_> = std::fs::read_dir(dir)
            .map(|d| d.filter_map(|e| e.ok()).map(|e| e.file_name().to_string_lossy().into_owned()).collect())
            .unwrap_or_default();
        // The writer writes ".frame_N.png.tmp" and renames it: wait for the rename.
        let writing = names.iter().any(|n| n.starts_with('.') && n.ends_with(".tmp"));
        if let ([name], false) = (names.as_slice(), writing) {
            let frame: u64 = name
                .strip_prefix("frame_")
                .and_then(|n| n.strip_suffix(".png"))
                .and_then(|n| n.parse().ok())
                .ok_or(format!("unexpected file {name}"))?;
            // The file is named by frame number; its pixels must be the paused tick's.
            let file = std::fs::File::open(dir.join(name)).map_err(|e| e.to_string())?;
            let mut reader = png::Decoder::new(std::io::BufReader::new(file))
                .read_info()
                .map_err(|e| format!("{name}: {e}"))?;
            let mut buf = vec![0; reader.output_buffer_size().ok_or("no size")?];
            reader.next_frame(&mut buf).map_err(|e| format!("{name}: {e}"))?;
            let mut want = vec![0u8; buf.len()];
            render_cpu(&scene, &FrameArgs::new(&scene, tick), &mut want, 2);
            let d = Diff::between(&buf, &want);
            return if d.differing == 0 {
                Ok(())
            } else {
                Err(format!("saved frame {frame}: {} pixels differ", d.differing))
            };
        }
        if std::time::Instant::now() > deadline {
            return Err(format!("after S, --out holds {names:?}"));
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

/// `--size window`: the shared images follow the window through two resizes.
/// The viewer for 1500 frames under validation while the window is resized
/// (swapchain recreated each time, at least 3 times) and then ends by
/// itself: exit 0, 1500 frames, 0 validation messages including teardown.
fn window_1000_frames() -> Outcome {
    let x = Xvfb::start()?;
    let mut child = x.viewer(&[
        "--producer",
        "cpu",
        "--validate",
        "--size",
        "160x90",
        "--frames",
        "1500",
        "--present-mode",
        "immediate",
    ])?;
    let mut resized = 0;
    let result = (|| -> Outcome {
        let id = x.window_id()?;
        for (w, h) in [(400, 300), (240, 320), (320, 180), (500, 200), (300, 300), (200, 400)] {
            std::thread::sleep(std::time::Duration::from_millis(100));
            if child.try_wait().map_err(|e| e.to_string())?.is_some() {
                break;
            }
            // The window may be gone by now; a failed resize is not the viewer's error.
            if x.cmd("xdotool", &["windowsize", &id, &w.to_string(), &h.to_string()]).is_ok() {
                resized += 1;
            }
        }
        match resized {
            3.. => Ok(()),
            n => Err(format!("only {n} resizes happened before the viewer ended")),
        }
    })();
    let o = wait_bounded(child, 120)?;
    ended_cleanly(&o, result, &["vkcuda: 1500 frames", "validation: 0 errors, 0 warnings"])
}

fn window_follow_test() -> Outcome {
    let x = Xvfb::start()?;
    let mut child = x.viewer(&["--producer", "cpu", "--validate", "--size", "window", "--buffers", "3"])?;
    let result = (|| -> Outcome {
        let id = x.window_id()?;
        // F1 shows the size in the title.
        x.press_until(&id, "F1", |t| t.contains(" tick "))?;
        // Each resize rebuilds the interop (a graceful stop, new images and timelines) and the
        // swapchain: 12 of them, since a hazard there depends on timing.
        let sizes = [(400, 300), (300, 200), (500, 260), (260, 180), (320, 320), (420, 240)];
        for (w, h) in sizes.into_iter().chain(sizes).chain([(240, 320)]) {
            x.cmd("xdotool", &["windowsize", &id, &w.to_string(), &h.to_string()])?;
            // Rebuilding the interop under validation on 2 CPU cores can take a while.
            x.title_when(&id, 20, &format!("the frames following the window to {w}x{h}"), |t| {
                t.contains(&format!(" {w}x{h} "))
            })?;
        }
        x.cmd("xdotool", &["key", "Escape"])?;
        Ok(())
    })();
    if result.is_err() {
        let _ = child.kill();
    }
    let o = wait_bounded(child, 30)?;
    ended_cleanly(&o, result, &["validation: 0 errors, 0 warnings", "240x320"])
}

fn main() {
    let filter: Option<String> = std::env::args().skip(1).find(|a| !a.starts_with('-'));
    let mut tests: Vec<(String, Box<dyn Fn() -> Verdict>)> = Vec::new();

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
    tests.push(("graceful_stop_30_times_validated_cpu".into(), Box::new(|| pass(stop_repeatedly("cpu")))));
    tests.push(gated("cuda_graceful_stop_30_times_validated", no_nvidia, || stop_repeatedly("cuda")));
    tests.push(("sigint_stops_cleanly_cpu".into(), Box::new(|| pass(interrupt("cpu", "INT", 2)))));
    tests.push(("sigterm_stops_cleanly_cpu".into(), Box::new(|| pass(interrupt("cpu", "TERM", 15)))));
    tests.push(gated("sigint_stops_cleanly_cuda", no_nvidia, || interrupt("cuda", "INT", 2)));
    tests.push(gated("sigterm_stops_cleanly_cuda", no_nvidia, || interrupt("cuda", "TERM", 15)));

    tests.push(gated("window_resize_pause_switch_matches_reference", no_x_tools, window_test));

    tests.push(gated("window_1000_frames_with_resizes_validated", no_x_tools, window_1000_frames));
    tests.push(gated("window_size_follows_the_window", no_x_tools, window_follow_test));

    // With an NVIDIA GPU every variant must run; without, the CUDA ones must say why not.
    tests.push((
        "bench_writes_table_json_chart_and_readme_table".into(),
        Box::new(|| pass(bench(no_nvidia().is_none()))),
    ));
    tests.push(("bench_sigint_writes_nothing".into(), Box::new(|| pass(bench_interrupt()))));
    let bad_bench: Vec<(Vec<&'static str>, &'static str)> = vec![
        (vec!["--chart", "/tmp/vkcuda-chart.png"], "svg"),
        (vec!["--variants", "split-9"], "split-9"),
        (vec!["--variants", "teapot"], "teapot"),
        (vec!["--seconds=-1"], "seconds"),
        (vec!["--sizes", "10"], "WIDTHxHEIGHT"),
        (vec!["--queues", "video"], "video"),
        (vec!["--json", "/proc/vkcuda-no/b.json"], "cannot write"),
        (vec!["--json", "/tmp"], "folder"),
    ];
    for (args, needle) in bad_bench {
        let name = format!("bad_bench_input_{}", args.join("_").replace(['/', '-', '.'], ""));
        tests.push((name, Box::new(move || pass(bench_usage_error(&args, needle)))));
    }
    tests.push(gated("cuda_staging_baseline_matches_reference", no_nvidia, || {
        headless("staging", "split", "2", SceneKind::Julia, &[])
    }));

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
    ];
    for (args, needle) in bad {
        let name = format!("bad_input_{}", args.join("_").replace(['/', '-'], ""));
        tests.push((name, Box::new(move || pass(usage_error(&args, needle)))));
    }

    tests.push((
        "bad_input_read_only_out".into(),
        Box::new(|| {
            with_tmpfs("ro", "size=1m,ro", |dir| {
                usage_error(&["--out", &dir.join("f").to_string_lossy()], "read-only file system")
            })
        }),
    ));
    tests.push((
        "full_filesystem_is_a_clear_error_without_partial_files".into(),
        Box::new(|| with_tmpfs("full", "size=256k", full_filesystem)),
    ));
    tests.push((
        "no_vulkan_loader_is_a_clear_error".into(),
        Box::new(|| {
            pass(runtime_error(&[], &[("VKCUDA_LIBVULKAN", "/nonexistent/libvulkan.so.1")], "Vulkan loader"))
        }),
    ));
    tests.push((
        "no_vulkan_driver_is_a_clear_error".into(),
        Box::new(|| {
            let none = [("VK_ICD_FILENAMES", "/nonexistent.json"), ("VK_DRIVER_FILES", "/nonexistent.json")];
            pass(runtime_error(&[], &none, "no Vulkan 1.3 driver"))
        }),
    ));
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
