//! The viewer under a real Wayland compositor: Debian's weston with its
//! headless backend and pixman renderer (no GPU needed), screenshots through
//! `weston-screenshooter` (weston's `--debug`). The window is fullscreen, so
//! a screenshot is the window; Wayland has no tool to resize another
//! client's window, so the size test follows the compositor's configure
//! (`--size window`) instead.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::scene::{Scene, SceneKind};

use crate::common::*;
use crate::window::{compare_window, Capture};

const SOCKET: &str = "vkcuda-wayland";

/// A headless weston, with its own runtime folder.
struct Weston {
    child: Child,
    runtime: PathBuf,
}

impl Weston {
    fn start(width: u32, height: u32) -> Result<Self, String> {
        use std::os::unix::fs::PermissionsExt;
        let runtime = tmp("weston-runtime");
        std::fs::create_dir_all(&runtime).map_err(|e| e.to_string())?;
        std::fs::set_permissions(&runtime, std::fs::Permissions::from_mode(0o700))
            .map_err(|e| e.to_string())?;
        // No panel: weston 14's desktop shell draws it over fullscreen windows.
        let config = runtime.join("weston.ini");
        std::fs::write(&config, "[shell]\npanel-position=none\n").map_err(|e| e.to_string())?;
        let child = Command::new("weston")
            .args(["--backend=headless-backend.so", "--use-pixman", "--debug", "--idle-time=0"])
            .arg(format!("--config={}", config.display()))
            .args([format!("--socket={SOCKET}"), format!("--width={width}"), format!("--height={height}")])
            .env("XDG_RUNTIME_DIR", &runtime)
            .env_remove("DISPLAY")
            .env_remove("WAYLAND_DISPLAY")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("weston: {e}"))?;
        let this = Self { child, runtime };
        // Ready once its socket is there (bounded).
        let deadline = Instant::now() + Duration::from_secs(20);
        while !this.runtime.join(SOCKET).exists() {
            if Instant::now() > deadline {
                return Err("weston's socket did not appear in 20 s".into());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(this)
    }

    /// The viewer on this compositor (no X display), its output captured.
    fn viewer(&self, args: &[&str]) -> Result<Child, String> {
        Command::new(bin())
            .args(args)
            .env("XDG_RUNTIME_DIR", &self.runtime)
            .env("WAYLAND_DISPLAY", SOCKET)
            .env_remove("DISPLAY")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| e.to_string())
    }

    /// The whole output, as RGB.
    fn screenshot(&self) -> Result<Capture, String> {
        let dir = self.runtime.join("shots");
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
        let o = Command::new("weston-screenshooter")
            .current_dir(&dir)
            .env("XDG_RUNTIME_DIR", &self.runtime)
            .env("WAYLAND_DISPLAY", SOCKET)
            .output()
            .map_err(|e| e.to_string())?;
        let file = std::fs::read_dir(&dir)
            .map_err(|e| e.to_string())?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .find(|p| p.extension().is_some_and(|x| x == "png"))
            .ok_or_else(|| {
                format!("weston-screenshooter wrote no PNG: {}", String::from_utf8_lossy(&o.stderr))
            })?;
        let reader = std::io::BufReader::new(std::fs::File::open(&file).map_err(|e| e.to_string())?);
        let mut reader = png::Decoder::new(reader).read_info().map_err(|e| e.to_string())?;
        let mut buf = vec![0; reader.output_buffer_size().ok_or("no size")?];
        let info = reader.next_frame(&mut buf).map_err(|e| e.to_string())?;
        let channels = info.color_type.samples();
        let rgb = buf.chunks_exact(channels).map(|p| [p[0], p[1], p[2]]).collect();
        Ok(Capture { width: info.width, height: info.height, rgb })
    }
}

impl Drop for Weston {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.runtime);
    }
}

/// Why the Wayland tests cannot run here, if they cannot.
pub fn no_weston() -> Option<String> {
    let missing: Vec<&str> = ["weston", "weston-screenshooter"]
        .into_iter()
        .filter(|t| {
            !Command::new("sh")
                .args(["-c", &format!("command -v {t}")])
                .output()
                .is_ok_and(|o| o.status.success())
        })
        .collect();
    (!missing.is_empty()).then(|| format!("{} not installed", missing.join(", ")))
}

/// The gradient repeats every 256 ticks: the tick (mod 256) whose reference the
/// capture matches best, with (fraction of pixels within 4 levels, max difference).
fn best_match(cap: &Capture, scene: &Scene) -> (u32, f64, f64) {
    (0..256)
        .map(|t| {
            let (fraction, max) = compare_window(cap, scene, t);
            (t, fraction, max)
        })
        .fold((0, -1.0, 0.0), |best, m| if m.1 > best.1 { m } else { best })
}

/// The fullscreen viewer's screenshots until one matches the reference (the
/// frame letterboxed into the output and filtered as drawn), then SIGINT:
/// exit 130, the summary, no validation message.
fn matches_then_sigint(mode: &[&str], frame: (u32, u32), output: (u32, u32)) -> Outcome {
    let weston = Weston::start(output.0, output.1)?;
    let mut args = vec!["--producer", "cpu", "--validate", "--fullscreen", "--scene", "gradient"];
    args.extend(mode);
    let child = weston.viewer(&args)?;
    let scene = Scene { kind: SceneKind::Gradient, width: frame.0, height: frame.1, cost: 64 };
    let result = (|| -> Outcome {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let cap = weston.screenshot()?;
            let (tick, fraction, max) = best_match(&cap, &scene);
            if (cap.width, cap.height) == output && fraction >= 0.99 {
                println!(
                    "  wayland {}x{} vs reference ({}x{} frame, tick {tick} mod 256): {:.3}% of pixels within 4 levels, max diff {max:.0}",
                    output.0, output.1, frame.0, frame.1, 100.0 * fraction
                );
                break;
            }
            if Instant::now() > deadline {
                return Err(format!(
                    "no screenshot matched in 30 s; the last: {:.1}% within 4 levels",
                    100.0 * fraction
                ));
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        send_signal(child.id(), "INT")
    })();
    let o = wait_bounded(child, 30)?;
    ended_by_signal(&o, result, 2).map(|_| ())
}

/// Why the CPU-present path cannot be checked on this weston, if it cannot:
/// weston 10 (Debian 12) shows this client's shm buffers as white (its
/// protocol trace is clean: buffers attached, damaged, committed, released);
/// weston 14 (Debian 13) shows them right.
fn no_weston_for_shm() -> Option<String> {
    no_weston().or_else(|| {
        let o = Command::new("weston").arg("--version").output().ok()?;
        let text = String::from_utf8_lossy(&o.stdout).to_string();
        let major: u32 = text.split_whitespace().nth(1)?.split('.').next()?.parse().ok()?;
        (major < 12)
            .then(|| format!("{} shows softbuffer's shm frames as white (weston 14 does not)", text.trim()))
    })
}

/// Registers this area's tests.
pub fn register(tests: &mut Tests) {
    tests.push(gated("wayland_window_matches_reference_and_stops_on_sigint", no_weston, || {
        matches_then_sigint(&["--size", "240x100"], (240, 100), (480, 320))
    }));
    tests.push(gated("wayland_size_follows_the_compositor", no_weston, || {
        matches_then_sigint(&["--size", "window"], (400, 240), (400, 240))
    }));
    tests.push(gated("wayland_cpu_present_matches_reference_and_stops_on_sigint", no_weston_for_shm, || {
        matches_then_sigint(&["--size", "240x100", "--present", "cpu"], (240, 100), (480, 320))
    }));
}
