//! The viewer in a real X window (Xvfb): captures compared with the CPU
//! reference, keys, resizes, `--size window`, validation over 1,500 frames.

use std::path::Path;
use std::process::Command;

use crate::common::frame_file;
use crate::common::scene::{drawn_reference_exposed, render_cpu_as, Diff, FrameArgs, Scene, SceneKind};
use vkcuda::Format;

use crate::common::*;

/// An X screen of our own (Xvfb), killed on drop.
pub struct Xvfb {
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
            .current_dir(crate_root())
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

    /// Esc until the window is gone (a key sent before it has focus is lost).
    fn quit(&self, id: &str) {
        for _ in 0..5 {
            let _ = self.cmd("xdotool", &["windowfocus", "--sync", id]);
            let _ = self.cmd("xdotool", &["key", "Escape"]);
            if wait_for(2, "", || Ok(self.cmd("xdotool", &["getwindowname", id]).is_err())).is_ok() {
                break;
            }
        }
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
pub fn no_x_tools() -> Option<String> {
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
pub struct Capture {
    pub width: u32,
    pub height: u32,
    pub rgb: Vec<[u8; 3]>,
}

/// Parses an XWD file (ZPixmap, 24/32 bits per pixel, as xwd writes for a TrueColor window).
pub fn parse_xwd(data: &[u8]) -> Result<Capture, String> {
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

/// Parses "… julia 320x180 tick 57 cost 48 …" out of the window title (F1 stats).
pub fn title_spec(title: &str) -> Result<Scene, String> {
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

pub fn title_tick(title: &str) -> Result<u32, String> {
    let words: Vec<&str> = title.split_whitespace().collect();
    let i = words.iter().position(|w| *w == "tick").ok_or(format!("no tick in title '{title}'"))?;
    words.get(i + 1).and_then(|t| t.parse().ok()).ok_or(format!("bad tick in '{title}'"))
}

/// Compares a capture with the expected window; returns (fraction within 4 levels, max difference).
pub fn compare_window(cap: &Capture, scene: &Scene, tick: u32) -> (f64, f64) {
    compare_window_as(cap, scene, tick, (Format::Rgba8, 1.0))
}

/// [`compare_window`] for frames of `format` shown with `exposure`.
pub fn compare_window_as(
    cap: &Capture,
    scene: &Scene,
    tick: u32,
    (format, exposure): (Format, f64),
) -> (f64, f64) {
    let mut frame =
        vec![0u8; scene.width as usize * scene.height as usize * format.bytes_per_pixel() as usize];
    render_cpu_as(scene, &FrameArgs::new(scene, tick), format, &mut frame, 2);
    let want = drawn_reference_exposed(
        &frame,
        format,
        exposure,
        ash::vk::Extent2D { width: scene.width, height: scene.height },
        ash::vk::Extent2D { width: cap.width, height: cap.height },
    );
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

/// The frame format a mode asks for (`--format`), RGBA8 by default.
fn mode_format(mode: &[&str]) -> Format {
    let named = mode.windows(2).find(|w| w[0] == "--format").map(|w| w[1]);
    Format::ALL.into_iter().find(|f| Some(f.name()) == named).unwrap_or(Format::Rgba8)
}

/// The viewer in a real X window on whatever Vulkan device is there (lavapipe in CI).
pub fn window_test(mode: &[&str]) -> Outcome {
    let format = mode_format(mode);
    let x = Xvfb::start()?;
    let out = tmp(&format!("window{}", mode.join("")));
    let child = {
        let out = out.to_str().ok_or("path")?;
        x.viewer(
            &[
                mode,
                &[
                    "--validate",
                    "--verify",
                    "--size",
                    "317x179",
                    "--scene",
                    "gradient",
                    "--cost",
                    "48",
                    "--out",
                    out,
                ],
            ]
            .concat(),
        )?
    };
    let result = (|| -> Outcome {
        let id = x.window_id()?;
        // Resize while it runs, to odd sizes (frame and window): the swapchain must follow.
        x.cmd("xdotool", &["windowsize", &id, "561", "401"])?;
        // F1 shows the stats (scene, size, tick) in the title; Space pauses.
        x.press_until(&id, "F1", |t| t.contains(" tick "))?;
        let title = x.press_until(&id, "space", |t| t.contains("(paused)"))?;
        let (scene, tick) = (title_spec(&title)?, title_tick(&title)?);
        let grab = |name: &str| -> Result<Capture, String> {
            let file = out.with_extension(name);
            x.cmd("xwd", &["-id", &id, "-silent", "-out", file.to_str().ok_or("path")?])?;
            parse_xwd(&std::fs::read(&file).map_err(|e| e.to_string())?)
        };
        // Wait for the state: the window is 561x401 and shows the paused frame (the swapchain
        // follows the resize at the viewer's next frame).
        let exposure = std::cell::Cell::new(1.0);
        let shows = |name: &str, scene: &Scene, tick: u32| -> Result<Capture, String> {
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(15);
            loop {
                let cap = grab(name)?;
                let (fraction, max) = compare_window_as(&cap, scene, tick, (format, exposure.get()));
                if (cap.width, cap.height) == (561, 401) && fraction >= 0.99 {
                    println!("  window 561x401 vs reference ({} tick {tick}): {:.3}% of pixels within 4 levels, max diff {max:.0}", scene.kind, 100.0 * fraction);
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
        check_pngs_any(&out, scene, tick, format)?;
        if format.is_float() {
            // E doubles the exposure: the window shows the frame twice as bright, clamped.
            x.press_until(&id, "e", |t| t.contains("exposure 2 "))?;
            exposure.set(2.0);
            let brighter = shows("second.xwd", &scene, tick)?;
            if brighter.rgb == first.rgb {
                return Err("E changed nothing in the window".into());
            }
            x.press_until(&id, "d", |t| t.contains("exposure 1 "))?;
            exposure.set(1.0);
        }
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
        // (On the CPU-present path the title says "cpu" there, and V changes nothing.)
        let present_mode =
            |t: &str| ["fifo", "mailbox", "immediate"].into_iter().find(|m| t.contains(&format!("| {m} |")));
        if !title.contains("| cpu |") {
            let before = present_mode(&title).ok_or(format!("no present mode in '{title}'"))?;
            x.press_until(&id, "v", |t| present_mode(t).is_some_and(|m| m != before))?;
        }
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
    said_path(mode, &stderr)?;
    let _ = std::fs::remove_dir_all(&out);
    Ok(())
}

/// With `--present cpu` the viewer must say, once, that it presents through the CPU.
fn said_path(mode: &[&str], stderr: &str) -> Outcome {
    let cpu = mode.windows(2).any(|w| w == ["--present", "cpu"]);
    let said = stderr.matches("presenting through the CPU (softbuffer)").count();
    match (cpu, said) {
        (true, 1) | (false, _) => {}
        (true, n) => return Err(format!("'presenting through the CPU' said {n} times:\n{stderr}")),
    }
    match mode.windows(2).any(|w| w == ["--latency", "low"]) {
        true => paced_to_the_screen(stderr),
        false => Ok(()),
    }
}

/// `--latency low`: the producer started each frame once the one before was
/// on screen, so it was never more than one frame ahead of the screen (a
/// swapchain image counts as on screen once presented; the slots behind
/// the screen are not counted).
fn paced_to_the_screen(stderr: &str) -> Outcome {
    let lead = stderr
        .lines()
        .find_map(|l| l.strip_prefix("vkcuda: paced to the screen: the producer was at most "))
        .and_then(|rest| rest.split(' ').next()?.parse::<u64>().ok());
    match lead {
        Some(0 | 1) => Ok(()),
        Some(n) => Err(format!("paced to the screen, the producer ran {n} frames ahead:\n{stderr}")),
        None => Err(format!("no line on the pacing:\n{stderr}")),
    }
}

/// The one frame the viewer saved (PNG, or OpenEXR for float formats) shows `scene` at `tick`.
pub fn check_pngs_any(dir: &Path, scene: Scene, tick: u32, format: Format) -> Outcome {
    // The writer writes ".frame_N.png.tmp" and renames it: wait for the finished file.
    wait_for_pngs(dir, 1, 10)?;
    let names: Vec<_> = std::fs::read_dir(dir)
        .map_err(|e| e.to_string())?
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    let [name] = names.as_slice() else { return Err(format!("after S, --out holds {names:?}")) };
    let frame: u64 = name
        .strip_prefix("frame_")
        .and_then(|n| n.strip_suffix(&format!(".{}", frame_file::extension(format))))
        .and_then(|n| n.parse().ok())
        .ok_or(format!("unexpected file {name}"))?;
    // The file is named by frame number; its pixels must be the paused tick's.
    let data = std::fs::read(dir.join(name)).map_err(|e| e.to_string())?;
    let buf = match format.is_float() {
        true => frame_file::decode_exr(&data, format).map_err(|e| format!("{name}: {e:#}"))?.pixels,
        false => {
            let mut reader = png::Decoder::new(std::io::Cursor::new(&data))
                .read_info()
                .map_err(|e| format!("{name}: {e}"))?;
            let mut buf = vec![0; reader.output_buffer_size().ok_or("no size")?];
            reader.next_frame(&mut buf).map_err(|e| format!("{name}: {e}"))?;
            buf
        }
    };
    let mut want = vec![0u8; buf.len()];
    render_cpu_as(&scene, &FrameArgs::new(&scene, tick), format, &mut want, 2);
    let d = Diff::between_as(format, &buf, &want);
    match d.differing {
        0 => Ok(()),
        n => Err(format!("saved frame {frame}: {n} pixels differ")),
    }
}

/// `--size window`: the shared images follow the window through two resizes.
/// The viewer for 1500 frames under validation while the window is resized
/// (swapchain recreated each time, at least 3 times) and then ends by
/// itself: exit 0, 1500 frames, 0 validation messages including teardown.
pub fn window_1000_frames(mode: &[&str]) -> Outcome {
    let x = Xvfb::start()?;
    let mut child = x.viewer(
        &[mode, &["--validate", "--size", "160x90", "--frames", "1500", "--present-mode", "immediate"]]
            .concat(),
    )?;
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
    said_path(mode, &text(&o).1)?;
    ended_cleanly(&o, result, &["vkcuda: 1500 frames", "validation: 0 errors, 0 warnings"])
}

pub fn window_follow_test(mode: &[&str]) -> Outcome {
    let x = Xvfb::start()?;
    let mut child = x.viewer(&[mode, &["--validate", "--size", "window", "--buffers", "3"]].concat())?;
    let result = (|| -> Outcome {
        let id = x.window_id()?;
        // F1 shows the size in the title.
        x.press_until(&id, "F1", |t| t.contains(" tick "))?;
        // Each resize rebuilds the interop (a graceful stop, new images and timelines) and the
        // swapchain: 12 of them, since a hazard there depends on timing.
        // Odd sides too: row pitch and byte counts come from the extent, never the allocation.
        let sizes = [(400, 300), (301, 201), (500, 260), (263, 181), (320, 320), (419, 241)];
        for (w, h) in sizes.into_iter().chain(sizes).chain([(241, 321)]) {
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
    said_path(mode, &text(&o).1)?;
    ended_cleanly(&o, result, &["validation: 0 errors, 0 warnings", "241x321"])
}

/// SIGINT while frames flow: a graceful stop, exit 130, the summary, no validation message.
pub fn window_sigint_test(mode: &[&str]) -> Outcome {
    let x = Xvfb::start()?;
    let child = x.viewer(&[mode, &["--validate", "--size", "200x120"]].concat())?;
    let result = (|| -> Outcome {
        let id = x.window_id()?;
        // Frames flow once F1's stats show a frame rate.
        x.press_until(&id, "F1", |t| t.contains(" fps"))?;
        send_signal(child.id(), "INT")
    })();
    let o = wait_bounded(child, 30)?;
    let (_, stderr) = ended_by_signal(&o, result, 2)?;
    said_path(mode, &stderr)
}

/// The viewer without a usable display: exit 2, one clear line naming what
/// is missing, nothing written.
fn no_window(env: &[(&str, &str)], unset: &[&str], needle: &str) -> Outcome {
    let out = tmp("no-window");
    let mut cmd = Command::new(bin());
    cmd.args(["--producer", "cpu", "--out", out.to_str().ok_or("path")?]);
    unset.iter().for_each(|k| {
        cmd.env_remove(k);
    });
    let o = cmd.envs(env.iter().copied()).output().map_err(|e| e.to_string())?;
    let (stdout, stderr) = text(&o);
    let lines = stderr.lines().filter(|l| l.starts_with("vkcuda: error:")).count();
    if o.status.code() != Some(2) || !stderr.contains(needle) || lines != 1 || stderr.contains("panicked") {
        return Err(format!(
            "exit {:?}, expected 2 and one line with '{needle}'\n{stdout}{stderr}",
            o.status.code()
        ));
    }
    if out.exists() {
        return Err(format!("{} was created", out.display()));
    }
    crate::bad_input::no_source_locations(&stderr)
}

/// A window system library hidden behind a broken stub of the same name
/// (`LD_LIBRARY_PATH`): the viewer names it and its package instead of panicking.
fn missing_library(lib: &str, package: &str) -> Outcome {
    let x = Xvfb::start()?;
    let stubs = tmp(&format!("stub-{lib}"));
    std::fs::create_dir_all(&stubs).map_err(|e| e.to_string())?;
    std::fs::write(stubs.join(lib), b"not a library").map_err(|e| e.to_string())?;
    let path = stubs.to_str().ok_or("path")?;
    let result = no_window(
        &[("DISPLAY", &x.display), ("LD_LIBRARY_PATH", path)],
        &["WAYLAND_DISPLAY"],
        &format!("{lib} cannot be loaded (Debian/Ubuntu: apt install {package})"),
    );
    let _ = std::fs::remove_dir_all(&stubs);
    result
}

/// Registers this area's tests: each viewer test with the CPU producer on
/// whatever Vulkan device is there (lavapipe in CI: Vulkan presents), again
/// with `--present cpu`, and with the CUDA producer where an NVIDIA GPU is (on
/// Xvfb, which NVIDIA's Vulkan cannot present to: `auto` takes the CPU path).
/// A kernel file that fills the frame with one colour.
fn solid_kernel(rgb: [u8; 3]) -> String {
    let [r, g, b] = rgb;
    format!(
        "#include \"vkcuda.h\"\nextern \"C\" __global__ void render(vk_frame f)\n{{\n    VK_PIXEL(f, x, y);\n    \
         vk_put8(f.target, x, y, make_uchar4({r}, {g}, {b}, 255));\n}}\n"
    )
}

/// The viewer with `--kernel`: edits of the file (and R) swap new versions in
/// while it runs; a broken version keeps the last good one running and says
/// where it is broken; Esc still ends it cleanly and validly.
pub fn kernel_hot_reload_test(mode: &[&str]) -> Outcome {
    let x = Xvfb::start()?;
    let dir = tmp("hot-reload");
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let file = dir.join("k.cu");
    let write = |text: &str| std::fs::write(&file, text).map_err(|e| e.to_string());
    write(&solid_kernel([200, 0, 0]))?;
    let (k, out) = (file.to_str().ok_or("path")?, dir.join("out"));
    let args =
        [mode, &["--kernel", k, "--size", "96x64", "--validate", "--out", out.to_str().ok_or("path")?]]
            .concat();
    let child = x.viewer(&args)?;
    let result = (|| -> Outcome {
        let id = x.window_id()?;
        // The window's middle shows the frame (letterboxed): wait until it has `rgb`.
        let shows = |rgb: [u8; 3], what: &str| -> Outcome {
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(15);
            let grab = dir.join("grab.xwd");
            loop {
                x.cmd("xwd", &["-id", &id, "-silent", "-out", grab.to_str().ok_or("path")?])?;
                let cap = parse_xwd(&std::fs::read(&grab).map_err(|e| e.to_string())?)?;
                let mid = cap.rgb[(cap.height / 2 * cap.width + cap.width / 2) as usize];
                if mid.iter().zip(rgb).all(|(a, b)| a.abs_diff(b) <= 4) {
                    return Ok(());
                }
                if std::time::Instant::now() > deadline {
                    return Err(format!("{what}: the window shows {mid:?}, not {rgb:?}, after 15 s"));
                }
                std::thread::sleep(std::time::Duration::from_millis(100));
            }
        };
        x.title_when(&id, 30, "version 1", |t| t.contains("k.cu v1"))?;
        shows([200, 0, 0], "version 1")?;
        write(&solid_kernel([0, 200, 0]))?;
        x.title_when(&id, 30, "version 2 after an edit", |t| t.contains("k.cu v2"))?;
        shows([0, 200, 0], "version 2")?;
        // Broken: the title names the error's file and line; version 2 keeps running.
        write(&solid_kernel([0, 0, 200]).replace("make_uchar4", "make_uchar5"))?;
        x.title_when(&id, 30, "the compile error", |t| t.contains("k.cu v2") && t.contains("k.cu:5: error"))?;
        shows([0, 200, 0], "version 2 after the broken edit")?;
        write(&solid_kernel([0, 0, 200]))?;
        x.title_when(&id, 30, "version 3 after the fix", |t| t.contains("k.cu v3"))?;
        shows([0, 0, 200], "version 3")?;
        // R compiles the file again by hand.
        x.press_until(&id, "r", |t| t.contains("k.cu v4"))?;
        x.cmd("xdotool", &["key", "Escape"])?;
        Ok(())
    })();
    let o = wait_bounded(child, 20)?;
    let (stdout, stderr) = text(&o);
    result.map_err(|e| format!("{e}\n{stdout}{stderr}"))?;
    let said = stderr.contains("k.cu:5: error")
        && stderr.contains("the previous kernel keeps running")
        && ["v2", "v3", "v4"].iter().all(|v| stderr.contains(&format!("kernel {v} on screen")));
    if o.status.code() != Some(0) || !stdout.contains("validation: 0 errors, 0 warnings") || !said {
        return Err(format!("exit {:?}\n{stdout}{stderr}", o.status.code()));
    }
    if stderr.contains("presenting through the CPU") {
        swaps_paced_to_the_screen(&stderr)?;
    }
    old_versions_are_unloaded(&stderr)?;
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

/// A kernel that faults while the viewer runs it (its producer in a child
/// process): the window keeps the last good frame with the fault written over
/// its top (the CPU path, which NVIDIA under Xvfb takes), the title says it,
/// and the next save that compiles runs with no notice left; Esc then ends
/// the run cleanly, validated.
pub fn kernel_fault_notice_test() -> Outcome {
    let x = Xvfb::start()?;
    let dir = tmp("fault-notice");
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let file = dir.join("k.cu");
    let write = |text: &str| std::fs::write(&file, text).map_err(|e| e.to_string());
    write(&solid_kernel([0, 200, 0]))?;
    let k = file.to_str().ok_or("path")?;
    let child = x.viewer(&["--producer", "cuda", "--kernel", k, "--size", "96x64", "--validate"])?;
    let result = (|| -> Outcome {
        let id = x.window_id()?;
        let grab = |name: &str| -> Result<Capture, String> {
            let file = dir.join(name);
            x.cmd("xwd", &["-id", &id, "-silent", "-out", file.to_str().ok_or("path")?])?;
            parse_xwd(&std::fs::read(&file).map_err(|e| e.to_string())?)
        };
        let mid = |c: &Capture| c.rgb[(c.height / 2 * c.width + c.width / 2) as usize];
        // White text in the top 160 rows.
        let text =
            |c: &Capture| c.rgb.iter().take((160 * c.width) as usize).filter(|p| **p == [255; 3]).count();
        let near = |a: [u8; 3], b: [u8; 3]| a.iter().zip(b).all(|(x, y)| x.abs_diff(y) <= 4);
        x.title_when(&id, 30, "version 1", |t| t.contains("k.cu v1"))?;
        wait_for(15, "version 1 on screen", || Ok(near(mid(&grab("v1.xwd")?), [0, 200, 0])))?;
        write(
            &std::fs::read_to_string(crate_root().join("tests/kernels/trap.cu"))
                .map_err(|e| e.to_string())?,
        )?;
        x.title_when(&id, 30, "the fault", |t| t.contains("save a fix to go on"))?;
        let faulted = grab("fault.xwd")?;
        if let Some(keep) = std::env::var_os("VKCUDA_E2E_KEEP") {
            // The picture itself, for the docs (xwd's format).
            let _ =
                std::fs::copy(dir.join("fault.xwd"), std::path::Path::new(&keep).join("fault-notice.xwd"));
        }
        if text(&faulted) < 100 || !near(mid(&faulted), [0, 200, 0]) {
            return Err(format!(
                "after the fault: {} white pixels in the top rows (the notice), the middle {:?} (the last frame, green)",
                text(&faulted),
                mid(&faulted)
            ));
        }
        write(&solid_kernel([0, 0, 200]))?;
        x.title_when(&id, 30, "the fix", |t| t.contains("k.cu v3") && !t.contains("save a fix"))?;
        wait_for(15, "the fix on screen without the notice", || {
            let c = grab("fixed.xwd")?;
            Ok(near(mid(&c), [0, 0, 200]) && text(&c) == 0)
        })?;
        x.quit(&id);
        Ok(())
    })();
    let o = wait_bounded(child, 20)?;
    let (stdout, stderr) = text(&o);
    result.map_err(|e| format!("{e}\n{stdout}{stderr}"))?;
    let said = stderr.contains("the window keeps the last frame") && stderr.contains("the fix runs");
    if o.status.code() != Some(0) || !stdout.contains("validation: 0 errors, 0 warnings") || !said {
        return Err(format!("exit {:?}, expected 0, validated\n{stdout}{stderr}", o.status.code()));
    }
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

/// A swapped-out version is unloaded once its frames end: at each swap at
/// most the version just swapped out and one before it are still loaded
/// (each swap's line says how many), not every version since the start.
fn old_versions_are_unloaded(stderr: &str) -> Outcome {
    let swaps: Vec<&str> = stderr.lines().filter(|l| l.contains(" renders from frame ")).collect();
    for line in &swaps {
        let kept = line
            .split(" older versions loaded")
            .next()
            .and_then(|l| l.rsplit(' ').next())
            .and_then(|n| n.parse::<u32>().ok())
            .ok_or_else(|| format!("no count of older versions in '{line}'"))?;
        if kept > 2 {
            return Err(format!("old kernel versions stay loaded: '{line}'"));
        }
    }
    match swaps.len() {
        3.. => Ok(()),
        n => Err(format!("{n} swaps reported, 3 made")),
    }
}

/// With `--kernel` the viewer's producer is paced to the screen (`--latency
/// low`): it starts a frame once the one before is on screen, so a new
/// kernel's first frame is at most the 3rd frame to go on screen after its
/// compile ends (the one on its way, then the one the producer may have
/// started with the old kernel just before); through the CPU path, where a
/// frame is on screen as it is consumed. Each swap's line says which it was.
fn swaps_paced_to_the_screen(stderr: &str) -> Outcome {
    let lines: Vec<&str> =
        stderr.lines().filter(|l| l.starts_with("vkcuda: kernel v") && l.contains(" on screen ")).collect();
    for line in &lines {
        let nth = line
            .split("; the ")
            .nth(1)
            .and_then(|r| r.split(" frame shown since the compile").next())
            .and_then(|n| n.trim_end_matches(|c: char| c.is_alphabetic()).parse::<u32>().ok())
            .ok_or_else(|| format!("no frame count in '{line}'"))?;
        if !(1..=3).contains(&nth) {
            return Err(format!("a new kernel waited behind {} older frames: '{line}'", nth - 1));
        }
    }
    match lines.is_empty() {
        true => Err("no swap was reported".into()),
        false => Ok(()),
    }
}

/// The viewer tells a kernel where the pointer is and which buttons are held:
/// a kernel that paints the frame with the pointer's position (red: column,
/// green: row) and buttons (blue) shows the position the pointer was moved
/// to, and the left button while it is held.
pub fn kernel_pointer_test() -> Outcome {
    let x = Xvfb::start()?;
    let dir = tmp("pointer");
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let file = dir.join("pointer.cu");
    let kernel = "#include \"vkcuda.h\"\nextern \"C\" __global__ void render(vk_frame f)\n{\n    VK_PIXEL(f, x, y);\n    \
                  int r = f.mouse_x < 0 ? 0 : (int)(f.mouse_x * 255.0f / f.width);\n    \
                  int g = f.mouse_y < 0 ? 0 : (int)(f.mouse_y * 255.0f / f.height);\n    \
                  vk_put8(f.target, x, y, make_uchar4(r, g, f.buttons * 100, 255));\n}\n";
    std::fs::write(&file, kernel).map_err(|e| e.to_string())?;
    let child = x.viewer(&[
        "--producer",
        "cuda",
        "--kernel",
        file.to_str().ok_or("path")?,
        "--size",
        "96x64",
        "--validate",
    ])?;
    let result = (|| -> Outcome {
        let id = x.window_id()?;
        x.title_when(&id, 30, "the kernel", |t| t.contains("pointer.cu v1"))?;
        let grab = dir.join("grab.xwd");
        let capture = || -> Result<Capture, String> {
            x.cmd("xwd", &["-id", &id, "-silent", "-out", grab.to_str().ok_or("path")?])?;
            parse_xwd(&std::fs::read(&grab).map_err(|e| e.to_string())?)
        };
        // A window inside the screen (the default is wider than Xvfb's): odd sides.
        x.cmd("xdotool", &["windowsize", &id, "561", "401"])?;
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(15);
        let first = loop {
            let cap = capture()?;
            if (cap.width, cap.height) == (561, 401) {
                break cap;
            }
            if std::time::Instant::now() > deadline {
                return Err(format!("the window is {}x{}, not 561x401, after 15 s", cap.width, cap.height));
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        };
        // The frame's place in the window (letterboxed, as the viewer draws it).
        let (ww, wh) = (f64::from(first.width), f64::from(first.height));
        let scale = (ww / 96.0).min(wh / 64.0);
        let (bw, bh) = ((96.0 * scale).round(), (64.0 * scale).round());
        let (ox, oy) = (((ww - bw) / 2.0).floor(), ((wh - bh) / 2.0).floor());
        for (u, v, button) in [(0.25, 0.75, false), (0.8, 0.3, true), (0.8, 0.3, false)] {
            let (px, py) = (ox + u * bw, oy + v * bh);
            x.cmd("xdotool", &["mousemove", "--window", &id, &format!("{px:.0}"), &format!("{py:.0}")])?;
            x.cmd("xdotool", &[if button { "mousedown" } else { "mouseup" }, "1"])?;
            // The kernel's colour for that pixel: column and row of the frame pixel, at its centre.
            let (fx, fy) = (((px.round() - ox) / bw * 96.0).floor(), ((py.round() - oy) / bh * 64.0).floor());
            let want = [
                ((fx + 0.5) * 255.0 / 96.0) as u8,
                ((fy + 0.5) * 255.0 / 64.0) as u8,
                if button { 100 } else { 0 },
            ];
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(15);
            loop {
                let cap = capture()?;
                let mid = cap.rgb[(cap.height / 2 * cap.width + cap.width / 2) as usize];
                if mid.iter().zip(want).all(|(a, b)| a.abs_diff(b) <= 6) {
                    break;
                }
                if std::time::Instant::now() > deadline {
                    return Err(format!("pointer at ({px:.0}, {py:.0}), button {button}: the window shows {mid:?}, not {want:?}"));
                }
                std::thread::sleep(std::time::Duration::from_millis(100));
            }
        }
        // Esc until the window is gone (a key sent before the window has focus is lost).
        for _ in 0..5 {
            // Either fails once the window is gone, which is what the loop waits for.
            let _ = x.cmd("xdotool", &["windowfocus", "--sync", &id]);
            let _ = x.cmd("xdotool", &["key", "Escape"]);
            for _ in 0..20 {
                if x.cmd("xdotool", &["getwindowname", &id]).is_err() {
                    return Ok(());
                }
                std::thread::sleep(std::time::Duration::from_millis(100));
            }
        }
        Err("Esc did not close the window".into())
    })();
    let o = wait_bounded(child, 30)?;
    let (stdout, stderr) = text(&o);
    result.map_err(|e| format!("{e}\n{stdout}{stderr}"))?;
    let _ = std::fs::remove_dir_all(&dir);
    ended_cleanly(&o, Ok(()), &["validation: 0 errors, 0 warnings"])
}

/// How a stalled viewer is ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum End {
    /// Esc in the window.
    Escape,
    /// SIGINT.
    Sigint,
    /// Nothing: the viewer gives up by itself.
    GiveUp,
}

/// A frame that never comes (`stall`: the arguments that make one, an
/// injected producer stall or a kernel that does not end): the viewer says
/// so, keeps its window alive (the title's count of seconds goes on), and
/// `end` ends it promptly: Esc and SIGINT within 5 s, or the viewer itself
/// at its 10 s limit. Exit 1, one error line with `needle`, no validation
/// message, no panic.
pub fn window_stall_test(mode: &[&str], stall: &[&str], end: End, needle: &str) -> Outcome {
    let x = Xvfb::start()?;
    let mut child = x.viewer(&[mode, stall, &["--validate", "--size", "96x64"]].concat())?;
    let result = (|| -> Result<std::time::Instant, String> {
        let id = x.window_id()?;
        x.title_when(&id, 60, "the stall notice", |t| t.contains("not finished after 2 s"))?;
        // The event loop runs while the frame is stuck: the title keeps counting.
        x.title_when(&id, 10, "a later title", |t| t.contains("not finished after 3 s"))?;
        let asked = std::time::Instant::now();
        match end {
            // A key sent before the window has focus is lost: press until the viewer ends.
            End::Escape => {
                for _ in 0..5 {
                    // Either fails once the window is gone: the viewer's end is checked below.
                    let _ = x.cmd("xdotool", &["windowfocus", "--sync", &id]);
                    let _ = x.cmd("xdotool", &["key", "Escape"]);
                    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(1);
                    while std::time::Instant::now() < deadline {
                        if child.try_wait().map_err(|e| e.to_string())?.is_some() {
                            return Ok(asked);
                        }
                        std::thread::sleep(std::time::Duration::from_millis(20));
                    }
                }
            }
            End::Sigint => send_signal(child.id(), "INT")?,
            End::GiveUp => {}
        }
        Ok(asked)
    })();
    let o = wait_bounded(child, 40)?;
    let (stdout, stderr) = text(&o);
    let asked = result.map_err(|e| format!("{e}\n{stdout}{stderr}"))?;
    let (took, limit) = (asked.elapsed(), std::time::Duration::from_secs(end.prompt()));
    let errors: Vec<&str> = stderr.lines().filter(|l| l.starts_with("vkcuda: error")).collect();
    let notice = stderr.contains("has not finished after 2s (a kernel that does not end?)");
    if o.status.code() != Some(1)
        || took > limit
        || errors.len() != 1
        || !errors[0].contains(needle)
        || !notice
        || stderr.contains("panicked")
        || stderr.contains("validation error")
        || stderr.contains("validation warning")
    {
        return Err(format!(
            "{end:?}: exit {:?} {took:.1?} after, expected 1 within {limit:?} and one error with '{needle}'\n\
             {stdout}{stderr}",
            o.status.code()
        ));
    }
    Ok(())
}

impl End {
    /// How soon after the end was asked for (3 s into the stall) the viewer must have ended.
    fn prompt(self) -> u64 {
        match self {
            End::Escape | End::Sigint => 5,
            End::GiveUp => 15,
        }
    }

    fn name(self) -> &'static str {
        match self {
            End::Escape => "ended_by_esc",
            End::Sigint => "ended_by_sigint",
            End::GiveUp => "given_up",
        }
    }
}

/// The stall tests: a host producer that stops (any Vulkan device), and a
/// CUDA kernel that never ends (NVIDIA), each ended by Esc, SIGINT and the
/// viewer's own limit; and a kernel that faults.
fn register_stalls(tests: &mut Tests) {
    let gives_up = "did not finish in 10s (a kernel that does not end?)";
    for end in [End::Escape, End::Sigint, End::GiveUp] {
        let needle = match end {
            End::GiveUp => gives_up,
            _ => "injected producer stall at frame 5",
        };
        let paced: &[(&str, &[&str])] = &[
            ("low_latency_", &["--producer", "cpu", "--latency", "low"]),
            ("cpu_present_low_latency_", &["--producer", "cpu", "--present", "cpu", "--latency", "low"]),
        ];
        // Paced to the screen, the producer stalls outside its wait for the screen: the
        // stop paths are those of the other runs (the give-up, 10 s each, only there).
        let paced = if end == End::GiveUp { &[][..] } else { paced };
        for &(name, mode) in
            [("", &["--producer", "cpu"][..]), ("cpu_present_", &["--producer", "cpu", "--present", "cpu"])]
                .iter()
                .chain(paced)
        {
            tests.push(gated(
                &format!("{name}window_producer_stall_{}", end.name()),
                no_x_tools,
                move || window_stall_test(mode, &["--inject", "producer-stall@5"], end, needle),
            ));
        }
        // The kernel in the viewer's process, and in a child (`--kernel`'s default):
        // each stop says what it left behind, in its own words.
        let stuck = match end {
            End::GiveUp => gives_up,
            _ => "a kernel is still running on the CUDA stream (the run gave up on it",
        };
        let killed = match end {
            End::GiveUp => gives_up,
            _ => "the producer's process did not finish its frames (a kernel that does not end?): killed it",
        };
        for (name, place, needle) in [("", "same", stuck), ("child_", "child", killed)] {
            tests.push(gated(
                &format!("cuda_window_endless_kernel_{name}{}", end.name()),
                || no_nvidia().or_else(no_x_tools),
                move || {
                    window_stall_test(
                        &["--producer", "cuda", "--producer-process", place],
                        &["--kernel", "tests/kernels/endless.cu"],
                        end,
                        needle,
                    )
                },
            ));
        }
    }
    tests.push(gated("cuda_window_faulting_kernel", || no_nvidia().or_else(no_x_tools), window_fault_test));
}

/// A kernel that faults on its first frame with the producer in the
/// viewer's process (`--producer-process same`: nothing to go on with): the
/// viewer quits with one line naming CUDA's error, exit 1, no validation
/// message. (In a child process the window shows the fault and waits for a
/// fix: [`kernel_fault_notice_test`].)
fn window_fault_test() -> Outcome {
    let x = Xvfb::start()?;
    let child = x.viewer(&[
        "--producer",
        "cuda",
        "--producer-process",
        "same",
        "--kernel",
        "tests/kernels/trap.cu",
        "--validate",
        "--size",
        "96x64",
    ])?;
    let o = wait_bounded(child, 60)?;
    let (stdout, stderr) = text(&o);
    let errors: Vec<&str> = stderr.lines().filter(|l| l.starts_with("vkcuda: error")).collect();
    if o.status.code() != Some(1)
        || errors.len() != 1
        || !errors[0].contains("CUDA_ERROR_")
        || stderr.contains("panicked")
        || stderr.contains("validation error")
        || stderr.contains("validation warning")
    {
        return Err(format!(
            "exit {:?}, expected 1 and one error naming CUDA's\n{stdout}{stderr}",
            o.status.code()
        ));
    }
    Ok(())
}

/// A Vulkan device the driver loses while the viewer runs (injected at frame
/// 60), its producer in a child: the device, the window's swapchain (or the
/// CPU path's buffers) and the child are made again on the same window, which
/// goes on showing the frames, exact; validated, exit 0 after Esc.
pub fn window_lost_device_test(mode: &[&str]) -> Outcome {
    let x = Xvfb::start()?;
    let lost = ["--producer-process", "child", "--inject", "device-lost@60", "--validate"];
    let scene = ["--size", "317x179", "--scene", "gradient", "--cost", "48"];
    let mut child = x.viewer(&[mode, &lost[..], &scene[..]].concat())?;
    let said = collected(child.stderr.take().ok_or("no stderr")?);
    let stderr = || said.lock().unwrap_or_else(|p| p.into_inner()).clone();
    let dir = tmp(&format!("lost-device{}", mode.join("")));
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let result = (|| -> Outcome {
        let id = x.window_id()?;
        wait_for(60, "the device made again", || Ok(stderr().contains("making the Vulkan device again")))?;
        // A size of its own (the screen may clip the window's first): the new swapchain follows.
        x.cmd("xdotool", &["windowsize", &id, "561", "401"])?;
        x.press_until(&id, "F1", |t| t.contains(" tick "))?;
        let title = x.press_until(&id, "space", |t| t.contains("(paused)"))?;
        let (scene, tick) = (title_spec(&title)?, title_tick(&title)?);
        let file = dir.join("after.xwd");
        let seen = std::cell::Cell::new((0.0, 0.0));
        wait_for(15, "the paused frame in the window", || {
            x.cmd("xwd", &["-id", &id, "-silent", "-out", file.to_str().ok_or("path")?])?;
            let cap = parse_xwd(&std::fs::read(&file).map_err(|e| e.to_string())?)?;
            seen.set(compare_window(&cap, &scene, tick));
            Ok((cap.width, cap.height) == (561, 401) && seen.get().0 >= 0.99)
        })
        .map_err(|e| {
            let (fraction, max) = seen.get();
            format!("{e}: {:.2}% of pixels within 4 levels (max diff {max:.0})", 100.0 * fraction)
        })?;
        let fraction = seen.get().0;
        println!(
            "  after the device was made again: {:.3}% of pixels within 4 levels of tick {tick}",
            100.0 * fraction
        );
        x.quit(&id);
        Ok(())
    })();
    let o = wait_bounded(child, 20)?;
    let (stdout, stderr) = (text(&o).0, stderr());
    let _ = std::fs::remove_dir_all(&dir);
    result.map_err(|e| format!("{e}\n{stdout}{stderr}"))?;
    let remade = stderr.matches("making the Vulkan device again").count();
    if o.status.code() != Some(0) || !stdout.contains("validation: 0 errors, 0 warnings") || remade != 1 {
        return Err(format!("exit {:?}, made again {remade} times\n{stdout}{stderr}", o.status.code()));
    }
    Ok(())
}

pub fn register(tests: &mut Tests) {
    tests.push(gated("window_lost_device_is_made_again", no_x_tools, || {
        window_lost_device_test(&["--producer", "cpu", "--layout", "buffer"])
    }));
    tests.push(gated("cpu_present_window_lost_device_is_made_again", no_x_tools, || {
        window_lost_device_test(&["--producer", "cpu", "--layout", "buffer", "--present", "cpu"])
    }));
    tests.push(gated(
        "cuda_window_lost_device_is_made_again",
        || no_nvidia().or_else(no_x_tools),
        || window_lost_device_test(&["--producer", "cuda"]),
    ));
    tests.push(gated(
        "cuda_window_kernel_hot_reload",
        || no_nvidia().or_else(no_x_tools),
        move || kernel_hot_reload_test(&["--producer", "cuda"]),
    ));
    // With --kernel the producer runs in a child process; the same in the viewer's own.
    tests.push(gated(
        "cuda_window_kernel_hot_reload_in_process",
        || no_nvidia().or_else(no_x_tools),
        move || kernel_hot_reload_test(&["--producer", "cuda", "--producer-process", "same"]),
    ));
    register_stalls(tests);
    tests.push(gated(
        "cuda_window_fault_is_written_over_the_last_frame",
        || no_nvidia().or_else(no_x_tools),
        kernel_fault_notice_test,
    ));
    tests.push(gated(
        "cuda_window_kernel_sees_the_pointer",
        || no_nvidia().or_else(no_x_tools),
        kernel_pointer_test,
    ));
    type Test = fn(&[&str]) -> Outcome;
    let kinds: [(&str, Test); 4] = [
        ("window_resize_pause_switch_matches_reference", window_test),
        ("window_1000_frames_with_resizes_validated", window_1000_frames),
        ("window_size_follows_the_window", window_follow_test),
        ("window_sigint_stops_cleanly", window_sigint_test),
    ];
    for (name, test) in kinds {
        tests.push(gated(name, no_x_tools, move || test(&["--producer", "cpu"])));
        tests.push(gated(&format!("cpu_present_{name}"), no_x_tools, move || {
            test(&["--producer", "cpu", "--present", "cpu"])
        }));
        tests.push(gated(
            &format!("cuda_{name}"),
            || no_nvidia().or_else(no_x_tools),
            move || test(&["--producer", "cuda"]),
        ));
        // Paced to the screen: the producer waits for the consumer's frames to go on screen.
        let low = ["--latency", "low"];
        tests.push(gated(&format!("low_latency_{name}"), no_x_tools, move || {
            test(&[&["--producer", "cpu"][..], &low].concat())
        }));
        tests.push(gated(&format!("cpu_present_low_latency_{name}"), no_x_tools, move || {
            test(&[&["--producer", "cpu", "--present", "cpu"][..], &low].concat())
        }));
        tests.push(gated(
            &format!("cuda_low_latency_{name}"),
            || no_nvidia().or_else(no_x_tools),
            move || test(&[&["--producer", "cuda"][..], &low].concat()),
        ));
    }
    // Float frames in linear memory: shown clamped, brighter with E, saved as OpenEXR.
    let float = ["--format", "rgba16f", "--layout", "buffer"];
    tests.push(gated("window_float_buffer_matches_reference", no_x_tools, move || {
        window_test(&[&["--producer", "cpu"][..], &float].concat())
    }));
    tests.push(gated("cpu_present_window_float_buffer_matches_reference", no_x_tools, move || {
        window_test(&[&["--producer", "cpu", "--present", "cpu"][..], &float].concat())
    }));
    tests.push(gated(
        "cuda_window_float_buffer_matches_reference",
        || no_nvidia().or_else(no_x_tools),
        move || window_test(&[&["--producer", "cuda"][..], &float].concat()),
    ));
    tests.push((
        "no_display_is_a_clear_error".into(),
        Box::new(|| {
            pass(no_window(
                &[],
                &["DISPLAY", "WAYLAND_DISPLAY"],
                "neither WAYLAND_DISPLAY nor DISPLAY is set",
            ))
        }),
    ));
    tests.push((
        "dead_display_names_its_socket".into(),
        Box::new(|| {
            pass(no_window(
                &[("DISPLAY", ":219")],
                &["WAYLAND_DISPLAY"],
                "no server socket at /tmp/.X11-unix/X219",
            ))
        }),
    ));
    tests.push((
        "dead_wayland_display_names_its_socket".into(),
        Box::new(|| {
            let env = [("WAYLAND_DISPLAY", "vkcuda-none"), ("XDG_RUNTIME_DIR", "/tmp")];
            pass(no_window(&env, &["DISPLAY"], "no server socket at /tmp/vkcuda-none"))
        }),
    ));
    for (lib, package) in [
        ("libxkbcommon-x11.so.0", "libxkbcommon-x11-0"),
        ("libX11-xcb.so.1", "libx11-xcb1"),
        ("libXcursor.so.1", "libxcursor1"),
    ] {
        tests.push(gated(&format!("missing_{lib}_is_named"), no_x_tools, move || {
            missing_library(lib, package)
        }));
    }
}
