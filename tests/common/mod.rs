//! Helpers shared by the end-to-end tests: running the binary, temporary
//! folders, checking PNGs against the CPU reference, bounded waits, and the
//! verdicts of the custom harness.

pub mod browser;
pub mod link;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

// The CPU reference and the frame encoder (OpenEXR decoding for float dumps)
// of the run layer, the library the binary is built on.
pub use vkcuda_run::output::frame_file;
pub use vkcuda_run::scene;

use scene::{drawn_reference, render_cpu_as, Diff, FrameArgs, Scene};
use vkcuda::Format;

/// What a test body returns: `Err` says what went wrong.
pub type Outcome = Result<(), String>;

/// A test's verdict.
pub enum Verdict {
    Pass,
    Fail(String),
    Skip(String),
}

/// The registered tests, in the order they run.
pub type Tests = Vec<(String, Box<dyn Fn() -> Verdict>)>;

/// The crate's root at run time: `VKCUDA_ROOT`, else the current folder if it
/// holds this crate (cargo runs tests there; scripts/gpu-test.sh runs from
/// the checkout), else the folder the tests were built in.
pub fn crate_root() -> PathBuf {
    if let Some(root) = std::env::var_os("VKCUDA_ROOT") {
        return root.into();
    }
    let here = std::env::current_dir().unwrap_or_default();
    if here.join("scripts/bench-table.py").is_file() {
        return here;
    }
    // This package is crates/cli: the repository is two folders up.
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

pub fn bin() -> PathBuf {
    std::env::var_os("VKCUDA_BIN").map(PathBuf::from).unwrap_or_else(|| env!("CARGO_BIN_EXE_vkcuda").into())
}

/// Every file of `dir`, by name, with its bytes.
pub fn files(dir: &Path) -> Result<std::collections::BTreeMap<String, Vec<u8>>, String> {
    let mut all = std::collections::BTreeMap::new();
    for e in std::fs::read_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))? {
        let e = e.map_err(|e| e.to_string())?;
        let bytes = std::fs::read(e.path()).map_err(|e| e.to_string())?;
        all.insert(e.file_name().to_string_lossy().into_owned(), bytes);
    }
    Ok(all)
}

pub fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("vkcuda-e2e-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

pub fn run(args: &[&str]) -> Output {
    Command::new(bin()).args(args).output().expect("cannot start the vkcuda binary")
}

pub fn text(o: &Output) -> (String, String) {
    (String::from_utf8_lossy(&o.stdout).into_owned(), String::from_utf8_lossy(&o.stderr).into_owned())
}

/// Why CUDA tests cannot run here, if they cannot.
pub fn no_nvidia() -> Option<String> {
    let present = ["/dev/nvidiactl", "/proc/driver/nvidia/version"].iter().any(|p| Path::new(p).exists());
    (!present).then(|| "no NVIDIA GPU".to_string())
}

/// Decodes every PNG in `dir` and compares it with the CPU reference.
pub fn check_pngs(dir: &Path, scene: Scene, expected: &[u64]) -> Outcome {
    check_pngs_drawn(dir, scene, None, expected)
}

/// [`check_pngs`] for frames drawn by the draw pass into a `target`-sized
/// image (letterboxed, filtered), or as rendered when `target` is `None`.
pub fn check_pngs_drawn(dir: &Path, scene: Scene, target: Option<(u32, u32)>, expected: &[u64]) -> Outcome {
    check_frames(dir, scene, Format::Rgba8, target, expected)
}

/// Decodes every dumped frame in `dir` (PNG, or OpenEXR for float formats:
/// as the GPU wrote them) and compares it with the CPU reference in
/// `format`; drawn frames (`target`) are RGBA8 PNGs of the target's size.
pub fn check_frames(
    dir: &Path,
    scene: Scene,
    format: Format,
    target: Option<(u32, u32)>,
    expected: &[u64],
) -> Outcome {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?
        .map(|e| e.map(|e| e.file_name().to_string_lossy().into_owned()))
        .collect::<Result<_, _>>()
        .map_err(|e| e.to_string())?;
    names.sort();
    let pixels = if target.is_some() { Format::Rgba8 } else { format };
    let ext = frame_file::extension(pixels);
    let want: Vec<String> = expected.iter().map(|f| format!("frame_{f:06}.{ext}")).collect();
    if names != want {
        return Err(format!("files {names:?}, expected {want:?}"));
    }
    for (name, &frame) in names.iter().zip(expected) {
        let data = std::fs::read(dir.join(name)).map_err(|e| e.to_string())?;
        let decoded = frame_file::decode_frame(&data, pixels).map_err(|e| format!("{name}: {e:#}"))?;
        let (width, height, buf) = (decoded.size.width, decoded.size.height, decoded.pixels);
        if (width, height) != target.unwrap_or((scene.width, scene.height)) {
            return Err(format!("{name} is {width}x{height}"));
        }
        let bytes = scene.width as usize * scene.height as usize * format.bytes_per_pixel() as usize;
        let mut reference = vec![0u8; bytes];
        render_cpu_as(&scene, &FrameArgs::new(&scene, frame as u32), format, &mut reference, 2);
        let d = match target {
            None => Diff::between_as(format, &buf, &reference),
            Some(t) => {
                let size = ash::vk::Extent2D { width: scene.width, height: scene.height };
                let target = ash::vk::Extent2D { width: t.0, height: t.1 };
                Diff::drawn(&buf, &drawn_reference(&reference, format, size, target))
            }
        };
        if !d.within_tolerance() {
            return Err(format!("{name}: {} pixels differ, max {}", d.differing, d.max));
        }
    }
    Ok(())
}

/// A run that should have gone well (`result`, what the test did meanwhile)
/// and ended with exit 0, its summary containing every one of `needles`.
pub fn ended_cleanly(o: &Output, result: Outcome, needles: &[&str]) -> Outcome {
    let (stdout, stderr) = text(o);
    result.map_err(|e| format!("{e}\n{stdout}{stderr}"))?;
    if o.status.code() != Some(0) || !needles.iter().all(|n| stdout.contains(n)) {
        return Err(format!("exit {:?}, expected 0 and {needles:?}\n{stdout}{stderr}", o.status.code()));
    }
    Ok(())
}

/// Sends `kill -SIGNAL` to the process `pid`.
pub fn send_signal(pid: u32, signal: &str) -> Outcome {
    let killed = Command::new("kill").args([&format!("-{signal}"), &pid.to_string()]).status();
    match killed.map_err(|e| e.to_string())?.success() {
        true => Ok(()),
        false => Err(format!("kill -{signal} {pid} failed")),
    }
}

/// A run stopped by signal `number` while `result` (what the test did
/// meanwhile) went well: exit 128 + number, the summary says so, and no
/// validation message. Returns its stdout and stderr.
pub fn ended_by_signal(o: &Output, result: Outcome, number: i32) -> Result<(String, String), String> {
    let (stdout, stderr) = text(o);
    result.map_err(|e| format!("{e}\n{stdout}{stderr}"))?;
    let stopped = stdout.contains(&format!("interrupted by signal {number}"))
        && stdout.contains("validation: 0 errors, 0 warnings");
    if o.status.code() != Some(128 + number) || !stopped {
        return Err(format!("exit {:?}, expected {}\n{stdout}{stderr}", o.status.code(), 128 + number));
    }
    Ok((stdout, stderr))
}

/// Waits for `child` at most `secs` seconds (then kills it) and collects its output.
pub fn wait_bounded(mut child: std::process::Child, secs: u64) -> Result<Output, String> {
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
pub fn gated(
    name: &str,
    gate: fn() -> Option<String>,
    test: impl Fn() -> Outcome + 'static,
) -> (String, Box<dyn Fn() -> Verdict>) {
    (name.to_string(), Box::new(move || gate().map_or_else(|| pass(test()), Verdict::Skip)))
}

pub fn pass(r: Outcome) -> Verdict {
    r.map_or_else(Verdict::Fail, |()| Verdict::Pass)
}

/// Waits (up to `secs` seconds) until `dir` holds at least `n` finished PNGs.
/// Polls `done` every 100 ms for up to `secs` seconds.
/// What `stream` (a child's stdout or stderr) says, as it says it: read on a
/// thread of its own until it closes.
pub fn collected(
    mut stream: impl std::io::Read + Send + 'static,
) -> std::sync::Arc<std::sync::Mutex<String>> {
    let said = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
    let to = said.clone();
    std::thread::spawn(move || {
        let mut buf = [0u8; 4096];
        while let Ok(n @ 1..) = stream.read(&mut buf) {
            to.lock().unwrap_or_else(|p| p.into_inner()).push_str(&String::from_utf8_lossy(&buf[..n]));
        }
    });
    said
}

pub fn wait_for(secs: u64, what: &str, done: impl Fn() -> Result<bool, String>) -> Outcome {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(secs);
    while !done()? {
        if std::time::Instant::now() > deadline {
            return Err(format!("{what}: not after {secs} s"));
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    Ok(())
}

pub fn wait_for_pngs(dir: &Path, n: usize, secs: u64) -> Outcome {
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
