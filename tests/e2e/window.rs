//! The viewer in a real X window (Xvfb): captures compared with the CPU
//! reference, keys, resizes, `--size window`, validation over 1,500 frames.

use std::path::Path;
use std::process::Command;

use vkcuda::app::scene::{render_cpu, Diff, FrameArgs, Scene, SceneKind};

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
    width: u32,
    height: u32,
    rgb: Vec<[u8; 3]>,
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

/// What the window should show: the frame letterboxed into the window and
/// sampled bilinearly (clamp to edge), as the present pass draws it.
pub fn expected_window(frame: &[u8], fw: u32, fh: u32, ww: u32, wh: u32) -> Vec<Option<[f64; 3]>> {
    use ash::vk::Extent2D;
    let r = vkcuda::app::present::draw::letterbox(
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
pub fn window_test() -> Outcome {
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
pub fn check_pngs_any(dir: &Path, scene: Scene, tick: u32) -> Outcome {
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
        .and_then(|n| n.strip_suffix(".png"))
        .and_then(|n| n.parse().ok())
        .ok_or(format!("unexpected file {name}"))?;
    // The file is named by frame number; its pixels must be the paused tick's.
    let file = std::fs::File::open(dir.join(name)).map_err(|e| e.to_string())?;
    let mut reader =
        png::Decoder::new(std::io::BufReader::new(file)).read_info().map_err(|e| format!("{name}: {e}"))?;
    let mut buf = vec![0; reader.output_buffer_size().ok_or("no size")?];
    reader.next_frame(&mut buf).map_err(|e| format!("{name}: {e}"))?;
    let mut want = vec![0u8; buf.len()];
    render_cpu(&scene, &FrameArgs::new(&scene, tick), &mut want, 2);
    let d = Diff::between(&buf, &want);
    match d.differing {
        0 => Ok(()),
        n => Err(format!("saved frame {frame}: {n} pixels differ")),
    }
}

/// `--size window`: the shared images follow the window through two resizes.
/// The viewer for 1500 frames under validation while the window is resized
/// (swapchain recreated each time, at least 3 times) and then ends by
/// itself: exit 0, 1500 frames, 0 validation messages including teardown.
pub fn window_1000_frames() -> Outcome {
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

pub fn window_follow_test() -> Outcome {
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

/// Registers this area's tests.
pub fn register(tests: &mut Tests) {
    tests.push(gated("window_resize_pause_switch_matches_reference", no_x_tools, window_test));

    tests.push(gated("window_1000_frames_with_resizes_validated", no_x_tools, window_1000_frames));
    tests.push(gated("window_size_follows_the_window", no_x_tools, window_follow_test));
}
