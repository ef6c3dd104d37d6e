//! The browser view (`--headless --serve`) in a real browser (Debian's
//! Chromium, headless, over the DevTools protocol) and with hand-made
//! clients: pixels against the CPU reference, keys and pointer, the token,
//! `Origin` and `Host` checks, a client that never reads, 8 clients, and
//! bounded fuzzing of malformed requests and messages.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Output, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::common::browser::{http_status, no_chromium, response_head, Browser, Viewer};
use crate::common::scene::{drawn_reference, frame_pixel, render_cpu_as, Diff, FrameArgs, Scene, SceneKind};
use crate::common::{bin, collected, ended_by_signal, gated, send_signal, Outcome, Tests};
use vkcuda::Format;
use vkcuda_serve::protocol::Kind;

/// A served run, its address and what it printed so far.
pub struct Served {
    pub child: Child,
    pub port: u16,
    pub url: String,
    stderr: Arc<Mutex<String>>,
    stdout: Arc<Mutex<Vec<u8>>>,
}

impl Served {
    /// `vkcuda --headless --serve ADDRESS ARGS...`, once it printed its URL.
    pub fn start(address: &str, args: &[&str]) -> Result<Self, String> {
        Self::start_with(Command::new(bin()), address, args)
    }

    /// [`Served::start`] through `command` (the binary, or `ip netns exec NS` and the binary).
    pub fn start_with(mut command: Command, address: &str, args: &[&str]) -> Result<Self, String> {
        let mut child = command
            .args(["--headless", "--serve", address])
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| e.to_string())?;
        let stderr = collected(child.stderr.take().ok_or("no stderr")?);
        let stdout = Arc::new(Mutex::new(Vec::new()));
        let mut out = child.stdout.take().ok_or("no stdout")?;
        let o = stdout.clone();
        std::thread::spawn(move || {
            let mut all = Vec::new();
            let _ = out.read_to_end(&mut all);
            *o.lock().unwrap_or_else(|p| p.into_inner()) = all;
        });
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let printed = stderr.lock().unwrap_or_else(|p| p.into_inner()).clone();
            if let Some(url) = printed.split("watch it at ").nth(1).and_then(|r| r.lines().next()) {
                let port =
                    url.rsplit(':').next().and_then(|p| p.split('/').next()).and_then(|p| p.parse().ok());
                let port = port.ok_or_else(|| format!("no port in {url}"))?;
                return Ok(Self { child, port, url: url.trim().to_string(), stderr, stdout });
            }
            if Instant::now() > deadline || child.try_wait().map_err(|e| e.to_string())?.is_some() {
                let _ = child.kill();
                return Err(format!("the run printed no URL:\n{printed}"));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The page's URL with `query` added.
    fn page(&self, query: &str) -> String {
        let join = if self.url.contains('?') { '&' } else { '?' };
        format!("{}{join}{query}", self.url)
    }

    pub fn token(&self) -> Option<String> {
        self.url.split("token=").nth(1).map(str::to_string)
    }

    pub fn printed(&self) -> String {
        self.stderr.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Waits (at most `secs`) for the run to end on its own.
    fn wait(mut self, secs: u64) -> Result<Output, String> {
        let deadline = Instant::now() + Duration::from_secs(secs);
        let status = loop {
            if let Some(s) = self.child.try_wait().map_err(|e| e.to_string())? {
                break s;
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                return Err(format!("the run did not end in {secs} s\n{}", self.printed()));
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        // The readers end with the pipes.
        std::thread::sleep(Duration::from_millis(100));
        let stdout = self.stdout.lock().unwrap_or_else(|p| p.into_inner()).clone();
        Ok(Output { status, stdout, stderr: self.printed().into_bytes() })
    }

    /// SIGINT, then the run must stop cleanly (exit 130, no validation message), the port free.
    pub fn stop(self, result: Outcome) -> Outcome {
        let port = self.port;
        send_signal(self.child.id(), "INT")?;
        let o = self.wait(60)?;
        ended_by_signal(&o, result, 2)?;
        std::net::TcpListener::bind(("127.0.0.1", port))
            .map_err(|e| format!("port {port} still taken: {e}"))?;
        Ok(())
    }
}

/// The gradient at `size` that the CPU producer renders, shown at frame `tick`.
pub fn gradient(size: (u32, u32)) -> Scene {
    Scene { kind: SceneKind::Gradient, width: size.0, height: size.1, cost: 64 }
}

/// The CPU reference of `scene` at `tick` drawn at `canvas`'s size (RGB; `None`: not compared).
fn reference(scene: Scene, tick: u64, canvas: (u32, u32)) -> Vec<Option<[f64; 3]>> {
    let mut frame = vec![0u8; (scene.width * scene.height * 4) as usize];
    render_cpu_as(&scene, &FrameArgs::new(&scene, tick as u32), Format::Rgba8, &mut frame, 2);
    drawn_reference(&frame, Format::Rgba8, extent(scene.width, scene.height), extent(canvas.0, canvas.1))
}

/// Compares canvas pixels with the CPU reference of `scene` at `tick` drawn at the canvas's size.
pub fn compare(scene: Scene, tick: u64, got: &[u8], canvas: (u32, u32)) -> Result<Diff, String> {
    Ok(Diff::drawn(got, &reference(scene, tick, canvas)))
}

/// The mean difference of a channel (RGB), in levels, from the reference (lossy frames).
fn mean_difference(scene: Scene, tick: u64, got: &[u8], canvas: (u32, u32)) -> f64 {
    let want = reference(scene, tick, canvas);
    let (mut sum, mut n) = (0.0, 0usize);
    for (px, w) in got.chunks_exact(4).zip(&want) {
        if let Some(w) = w {
            sum += (0..3).map(|c| (f64::from(px[c]) - w[c]).abs()).sum::<f64>();
            n += 3;
        }
    }
    sum / n.max(1) as f64
}

pub const SHOWN: &str = "window.vkcuda && window.vkcuda.last";

/// Lossless frames in the page equal the CPU reference drawn at the canvas
/// size, at two sizes (the second after a resize); then JPEG frames arrive.
fn pixels_match_the_reference() -> Outcome {
    let size = (320, 180);
    let s = Served::start("0", &["--producer", "cpu", "--size", "320x180", "--validate"])?;
    let result = (|| {
        let mut b = Browser::open(&s.page("mode=raw"), (400, 324))?;
        for (w, h) in [(400u32, 324u32), (517, 311)] {
            b.resize(w, h)?;
            let canvas = (w, h - 24);
            let shown = format!(
                "{SHOWN} && vkcuda.last.w === {} && vkcuda.last.h === {} && vkcuda.last.kind === 'raw'",
                canvas.0, canvas.1
            );
            b.wait_for(&shown, 60)?;
            let (pixels, at, frame) = b.canvas()?;
            if at != canvas {
                return Err(format!("canvas {at:?}, expected {canvas:?}"));
            }
            let diff = compare(gradient(size), frame, &pixels, canvas)?;
            println!("  browser: canvas {}x{} frame {frame}: {diff:?}", canvas.0, canvas.1);
            if !diff.within_tolerance() {
                return Err(format!("canvas {canvas:?}, frame {frame}: {diff:?}"));
            }
        }
        b.eval("(() => { const m = document.getElementById('mode'); m.value = 'jpeg'; m.onchange(); return 1; })()")?;
        b.wait_for(&format!("{SHOWN} && vkcuda.last.kind === 'jpeg'"), 60)?;
        let (pixels, canvas, frame) = b.canvas()?;
        let mean = mean_difference(gradient(size), frame, &pixels, canvas);
        println!("  browser: JPEG frame {frame} at {canvas:?}: mean difference {mean:.2} levels");
        if mean > 3.0 {
            return Err(format!("the JPEG frame is far from the reference: {mean:.2} levels on average"));
        }
        Ok(())
    })();
    s.stop(result)
}

/// Space pauses, the right arrow switches the scene, the pointer reaches the run.
fn keys_and_pointer_reach_the_run() -> Outcome {
    let s = Served::start("0", &["--producer", "cpu", "--size", "320x180", "--validate"])?;
    let result = (|| {
        let mut b = Browser::open(&s.url, (400, 324))?;
        b.wait_for(&format!("{SHOWN} && vkcuda.status"), 60)?;
        b.eval("document.getElementById('view').focus()")?;
        b.press(" ")?;
        b.wait_for("vkcuda.status.run.paused === true", 30)?;
        // Paused, the picture stands: it comes once more, exact, and the tick stays.
        b.wait_for("vkcuda.last.kind === 'png'", 30)?;
        let tick = b.eval("vkcuda.status.run.tick")?.as_u64().unwrap_or(0);
        let seen = b.eval("vkcuda.statuses")?.as_u64().unwrap_or(0);
        b.wait_for(&format!("vkcuda.statuses > {seen} + 3 && vkcuda.status.run.tick"), 60)?;
        let later = b.eval("vkcuda.status.run.tick")?.as_u64().unwrap_or(0);
        if later != tick {
            return Err(format!("paused, yet the tick went from {tick} to {later}"));
        }
        b.press("ArrowRight")?;
        b.wait_for("vkcuda.status.run.scene === 'julia'", 30)?;
        b.press("e")?;
        b.wait_for("vkcuda.status.exposure === 2", 30)?;
        b.press("d")?;
        b.wait_for("vkcuda.status.exposure === 1", 30)?;
        b.mouse((250.0, 100.0), 1)?;
        let at = b.wait_for(
            "vkcuda.status.run.pointer && vkcuda.status.run.buttons === 1 && vkcuda.status.run.pointer",
            30,
        )?;
        let want = frame_pixel(extent(400, 300), extent(320, 180), (250.0, 100.0));
        let got = (at[0].as_u64().unwrap_or(0) as u32, at[1].as_u64().unwrap_or(0) as u32);
        if want != Some(got) {
            return Err(format!("the run's pointer is {got:?}, expected {want:?}"));
        }
        println!(
            "  browser: paused at tick {tick}, julia, exposure 2 then 1 (E, D), pointer at frame pixel {got:?} with the left button"
        );
        b.press(" ")?;
        b.wait_for("vkcuda.status.run.paused === false", 30).map(|_| ())
    })();
    s.stop(result)
}

fn extent(width: u32, height: u32) -> ash::vk::Extent2D {
    ash::vk::Extent2D { width, height }
}

/// A WebSocket upgrade request for `path` with these extra headers.
fn upgrade(path: &str, host: &str, extra: &str) -> String {
    format!(
        "GET {path} HTTP/1.1\r\nHost: {host}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
         Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n{extra}\r\n"
    )
}

fn get(path: &str, host: &str) -> String {
    format!("GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n")
}

/// Any address but loopback needs the token (403 and nothing else without
/// it), the upgrade checks `Origin`, loopback checks `Host`, only the page
/// and the stream are served.
fn the_door_checks_token_origin_and_host() -> Outcome {
    let s = Served::start("0.0.0.0:0", &["--producer", "cpu", "--size", "160x90", "--validate"])?;
    let result = (|| {
        let (port, token) = (s.port, s.token().ok_or("no token in the URL of a 0.0.0.0 run")?);
        let host = format!("127.0.0.1:{port}");
        let cases = [
            ("the page without the token", get("/", &host), 403),
            ("the page with a wrong token", get("/?token=00000000000000000000000000000000", &host), 403),
            (
                "the page with a token one character short",
                get(&format!("/?token={}", &token[1..]), &host),
                403,
            ),
            ("the page with the token", get(&format!("/?token={token}"), &host), 200),
            ("the stream without the token", upgrade("/ws", &host, ""), 403),
            (
                "the stream, another site's page",
                upgrade(&format!("/ws?token={token}"), &host, "Origin: http://evil.example\r\n"),
                403,
            ),
            (
                "the stream, the page's origin",
                upgrade(&format!("/ws?token={token}"), &host, &format!("Origin: http://{host}\r\n")),
                101,
            ),
            ("a path outside the page", get(&format!("/etc/passwd?token={token}"), &host), 404),
            ("a path up and out", get(&format!("/../../etc/passwd?token={token}"), &host), 404),
            (
                "a POST",
                format!("POST /?token={token} HTTP/1.1\r\nHost: {host}\r\nContent-Length: 0\r\n\r\n"),
                405,
            ),
            (
                "two Host headers",
                format!("GET /?token={token} HTTP/1.1\r\nHost: {host}\r\nHost: evil.example\r\n\r\n"),
                400,
            ),
        ];
        for (what, request, want) in cases {
            let got = http_status(port, &request)?;
            println!("  door: {what}: {got}");
            if got != want {
                return Err(format!("{what}: {got}, expected {want}"));
            }
        }
        let head = response_head(port, &get(&format!("/?token={token}"), &host))?;
        for needed in ["x-frame-options: sameorigin", "content-security-policy: frame-ancestors 'self'"] {
            if !head.to_ascii_lowercase().contains(needed) {
                return Err(format!("the page's answer lacks {needed}:\n{head}"));
            }
        }
        println!("  door: the page may be framed by its own origin only (X-Frame-Options, frame-ancestors)");
        let mut b = Browser::open(&s.url, (320, 204))?;
        b.wait_for(SHOWN, 60).map(|_| println!("  door: the browser with the token's URL shows frames"))
    })();
    s.stop(result)?;
    let s = Served::start("0", &["--producer", "cpu", "--size", "160x90", "--validate"])?;
    let port = s.port;
    let result = (|| {
        for (host, want) in [
            ("evil.example", 403),
            (&*format!("evil.example:{port}"), 403),
            ("localhost:1234", 200),
            ("[::1]", 200),
        ] {
            let got = http_status(port, &get("/", host))?;
            println!("  door: loopback, Host {host}: {got}");
            if got != want {
                return Err(format!("Host {host}: {got}, expected {want}"));
            }
        }
        Ok(())
    })();
    s.stop(result)
}

/// A port in use is the first error, before any GPU work; nothing is written.
fn a_port_in_use_fails_before_the_gpu() -> Outcome {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
    let port = taken.local_addr().map_err(|e| e.to_string())?.port();
    let o = Command::new(bin())
        .args(["--headless", "--serve", &port.to_string(), "--producer", "cpu"])
        .output()
        .map_err(|e| e.to_string())?;
    let stderr = String::from_utf8_lossy(&o.stderr);
    if o.status.code() != Some(1)
        || !stderr.contains("the port is in use")
        || stderr.contains("Vulkan device")
    {
        return Err(format!("exit {:?}: {stderr}", o.status.code()));
    }
    println!("  port: {}", stderr.trim());
    Ok(())
}

/// The peak resident memory of `pid` while `running` says it runs, sampled.
fn peak_rss(pid: u32, until: &dyn Fn() -> bool) -> u64 {
    let mut peak = 0;
    while !until() {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
        let kb = status
            .lines()
            .find(|l| l.starts_with("VmRSS:"))
            .and_then(|l| l.split_whitespace().nth(1)?.parse().ok());
        peak = peak.max(kb.unwrap_or(0));
        std::thread::sleep(Duration::from_millis(50));
    }
    peak
}

/// One run of `frames` frames, with a client that asks for frames and never
/// reads (or none): its fps (from --json) and peak memory (kB).
fn run_with_stalled(stalled: bool, frames: &str) -> Result<(serde_json::Value, u64), String> {
    let json = crate::common::tmp(&format!("stall-{stalled}.json"));
    let args = ["--producer", "cpu", "--size", "640x360", "--frames", frames, "--json"];
    let s = Served::start("0", &[&args[..], &[json.to_str().unwrap_or("")]].concat())?;
    let _client = match stalled {
        true => {
            let mut c = TcpStream::connect(("127.0.0.1", s.port)).map_err(|e| e.to_string())?;
            let _ = c.set_nodelay(true);
            let hello = upgrade("/ws", &format!("127.0.0.1:{}", s.port), "");
            c.write_all(hello.as_bytes()).map_err(|e| e.to_string())?;
            c.write_all(&masked_text(r#"{"t":"canvas","w":640,"h":360}"#)).map_err(|e| e.to_string())?;
            Some(c)
        }
        false => None,
    };
    let pid = s.child.id();
    let done = || {
        std::fs::metadata(format!("/proc/{pid}/status")).is_err()
            || std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|st| st.contains(") Z "))
    };
    let peak = peak_rss(pid, &done);
    let o = s.wait(300)?;
    if !o.status.success() {
        return Err(format!("exit {:?}: {}", o.status.code(), String::from_utf8_lossy(&o.stderr)));
    }
    let j: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).map_err(|e| e.to_string())?)
        .map_err(|e| e.to_string())?;
    let _ = std::fs::remove_file(&json);
    Ok((j, peak))
}

/// A client frame: a masked text frame (a client must mask).
fn masked_text(text: &str) -> Vec<u8> {
    masked(0x81, text.as_bytes())
}

fn masked(first: u8, payload: &[u8]) -> Vec<u8> {
    let mask = [0x12u8, 0x34, 0x56, 0x78];
    let mut f = vec![first];
    match payload.len() {
        n @ 0..=125 => f.push(0x80 | n as u8),
        n @ 126..=65535 => {
            f.push(0x80 | 126);
            f.extend_from_slice(&(n as u16).to_be_bytes());
        }
        n => {
            f.push(0x80 | 127);
            f.extend_from_slice(&(n as u64).to_be_bytes());
        }
    }
    f.extend_from_slice(&mask);
    f.extend(payload.iter().enumerate().map(|(i, b)| b ^ mask[i % 4]));
    f
}

/// A client that connects and never reads: the run never waits for it. Its
/// frames are skipped (the view sends it a few, until its socket is full,
/// and none after), every frame is still consumed, the consumer's time in the
/// view's calls stays near zero (a wait on the client would last as long as
/// the run: it never reads), and the memory stays within the view's fixed
/// cost. What the design promises, not a frame rate, which the machine's
/// other work moves.
fn a_stalled_client_does_not_slow_the_run() -> Outcome {
    const FRAMES: u64 = 24000;
    let (without, peak_without) = run_with_stalled(false, &FRAMES.to_string())?;
    let (with, peak_with) = run_with_stalled(true, &FRAMES.to_string())?;
    let view = &with["view"];
    let (asked, sent) = (view["frames"].as_u64().unwrap_or(0), view["sent"].as_u64().unwrap_or(u64::MAX));
    let (total_us, longest_us) = (
        view["handoff_us"]["total"].as_f64().unwrap_or(f64::MAX),
        view["handoff_us"]["longest"].as_f64().unwrap_or(f64::MAX),
    );
    println!(
        "  stalled client: {} frames consumed, the view asked for {asked}, sent {sent}; hand-off {:.1} us a frame, \
         longest {longest_us:.0} us; peak memory {} MB with, {} MB without",
        with["frames"],
        total_us / asked.max(1) as f64,
        peak_with / 1024,
        peak_without / 1024
    );
    if with["frames"].as_u64() != Some(FRAMES) || asked < FRAMES {
        return Err(format!("not every frame was consumed and offered to the view: {with}"));
    }
    // The socket holds a few frames of 640x360 before it is full; the rest are skipped.
    if sent > FRAMES / 100 {
        return Err(format!("a client that never reads was sent {sent} of {FRAMES} frames"));
    }
    // Each call takes a lock and copies a want list: microseconds. 100 us a frame and
    // 200 ms at most are far above that, however loaded the machine (a thread preempted
    // while it holds the hub's lock), and far below a wait on a client that never reads.
    if total_us / asked as f64 > 100.0 || longest_us > 200_000.0 {
        return Err(format!(
            "the run waited on the view: {total_us:.0} us over {asked} frames, {longest_us:.0} us at most"
        ));
    }
    // The view's fixed cost: a draw target, its readback buffers and, on NVIDIA, the
    // allocator's first 64 MB block of host-visible memory; a client that grew it would show
    // as more than that.
    if peak_with > peak_without + 96 * 1024 {
        return Err(format!("a stalled client grew the memory: {peak_with} kB vs {peak_without} kB"));
    }
    if without["view"]["frames"].as_u64() != Some(FRAMES) {
        return Err(format!("the run without a client did not offer each frame to the view: {without}"));
    }
    Ok(())
}

/// 8 clients at once, each its own size and encoding, while a ninth leaves
/// in the middle of a frame: all 8 go on getting frames of their size.
fn eight_clients_and_one_leaving_mid_frame() -> Outcome {
    let s = Served::start("0", &["--producer", "cpu", "--size", "320x180", "--validate"])?;
    let result = (|| {
        let sizes: Vec<(u32, u32)> = (0..8).map(|i| (97 + 41 * i, 61 + 29 * i)).collect();
        let mut clients = Vec::new();
        for (i, &size) in sizes.iter().enumerate() {
            clients.push(Viewer::connect(s.port, None, size, if i % 2 == 0 { "raw" } else { "jpeg" })?);
        }
        let mut leaving = TcpStream::connect(("127.0.0.1", s.port)).map_err(|e| e.to_string())?;
        leaving
            .write_all(upgrade("/ws", &format!("127.0.0.1:{}", s.port), "").as_bytes())
            .map_err(|e| e.to_string())?;
        leaving.write_all(&masked_text(r#"{"t":"mode","mode":"raw"}"#)).map_err(|e| e.to_string())?;
        leaving.write_all(&masked_text(r#"{"t":"canvas","w":800,"h":600}"#)).map_err(|e| e.to_string())?;
        let mut part = [0u8; 4096];
        leaving.read_exact(&mut part).map_err(|e| format!("the leaving client got nothing: {e}"))?;
        drop(leaving);
        for round in 0..6 {
            for (c, &size) in clients.iter_mut().zip(&sizes) {
                let f = c.frame()?;
                let want =
                    if f.header.kind == Kind::Raw { (size.0 * size.1 * 4) as usize } else { f.payload.len() };
                if f.size() != size
                    || f.payload.len() != want
                    || f.payload.is_empty()
                    || f.frame() < 1 + round as u64 && round > 3
                {
                    return Err(format!(
                        "round {round}: a {:?} client got {:?} with {} bytes",
                        size,
                        f.size(),
                        f.payload.len()
                    ));
                }
            }
        }
        println!("  clients: 8 clients, 6 frames each at their own size, after a ninth left mid-frame");
        Ok(())
    })();
    s.stop(result)
}

/// A small deterministic generator (xorshift) for the fuzzing.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next() as u8).collect()
    }

    /// 1 to `most` random bytes.
    fn some(&mut self, most: u64) -> Vec<u8> {
        let n = 1 + self.next() % most;
        self.bytes(n as usize)
    }
}

/// Writes `bytes` and reads until the server closes (or 5 s pass): whether it closed.
fn closed_after(port: u16, bytes: &[u8]) -> Result<bool, String> {
    let mut c = TcpStream::connect(("127.0.0.1", port)).map_err(|e| e.to_string())?;
    c.set_read_timeout(Some(Duration::from_secs(5))).map_err(|e| e.to_string())?;
    let _ = c.write_all(bytes);
    let _ = c.shutdown(std::net::Shutdown::Write);
    let mut sink = [0u8; 65536];
    let deadline = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline {
        match c.read(&mut sink) {
            Ok(0) | Err(_) => return Ok(true),
            Ok(_) => {}
        }
    }
    Ok(false)
}

/// Malformed HTTP requests and WebSocket messages, seeded: each closes its
/// own connection, and a well-behaved client goes on getting frames.
fn fuzzing_closes_only_the_fuzzing_clients() -> Outcome {
    let s = Served::start("0", &["--producer", "cpu", "--size", "160x90", "--validate"])?;
    let result = (|| {
        let port = s.port;
        let mut good = Viewer::connect(port, None, (160, 90), "raw")?;
        good.frame()?;
        let mut rng = Rng(0x5eed_1234_abcd_ef01);
        let host = format!("127.0.0.1:{port}");
        let mut http = 0;
        for i in 0..60 {
            let request = match i % 6 {
                0 => rng.some(2000),
                1 => format!("GET / HTTP/1.1\r\nHost: {host}\r\nX: {}\r\n\r\n", "a".repeat(200_000))
                    .into_bytes(),
                2 => [b"GET /".as_slice(), &rng.bytes(300), b" HTTP/1.1\r\n\r\n"].concat(),
                3 => {
                    format!("GET / HTTP/1.1\r\n{}\r\n", format!("Host: {host}\r\n").repeat(500)).into_bytes()
                }
                4 => b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03".to_vec(),
                _ => format!("BREW /ws HTTP/9.9\r\nHost: {host}\r\n\r\n").into_bytes(),
            };
            http += usize::from(closed_after(port, &request)?);
        }
        let messages: Vec<Vec<u8>> = vec![
            masked_text("{not json"),
            masked_text(r#"{"t":"launch"}"#),
            masked_text(r#"{"t":"canvas","w":0,"h":10}"#),
            masked_text(r#"{"t":"canvas","w":99999,"h":10}"#),
            masked_text(&format!(r#"{{"t":"key","key":"{}"}}"#, "k".repeat(5000))),
            masked(0x82, b"binary"),
            masked_text(r#"{"t":"mode","mode":"gif"}"#),
            masked_text(&format!(r#"{{"t":"key","key":"{}"}}"#, "k".repeat(100))),
            masked_text(r#"{"t":"pointer","x":1,"buttons":0}"#),
            masked(0x81, &[0xff, 0xfe, 0xfd]),
            masked_text(r#"{"t":"rate","fps":-5}"#),
        ];
        let mut ws = 0;
        for i in 0..100 {
            let m = match i % 12 {
                11 => masked(0x81, &rng.some(300)),
                k => messages[k].clone(),
            };
            let bytes = [upgrade("/ws", &host, "").into_bytes(), m].concat();
            ws += usize::from(closed_after(port, &bytes)?);
        }
        for _ in 0..5 {
            good.frame()?;
        }
        let logged = s.printed().matches("closed: ").count();
        println!("  fuzz: {http}/60 malformed HTTP requests closed, {ws}/100 malformed WebSocket sessions closed, {logged} log lines; the good client still gets frames");
        if http != 60 || ws != 100 {
            return Err(format!("{http}/60 and {ws}/100 closed"));
        }
        Ok(())
    })();
    s.stop(result)
}

/// Connections that never send a whole request head (half a head, or
/// nothing) are closed within the server's bound on the time to a head, and
/// while they last the server holds at most [`MAX_PENDING`] of them: a
/// client that cannot get in cannot exhaust the process's descriptors. A
/// good client gets in once they are gone.
fn half_sent_requests_are_bounded() -> Outcome {
    use vkcuda_serve::server::{HEAD_TIMEOUT, MAX_PENDING, REQUEST_DEADLINE};
    let s = Served::start("0", &["--producer", "cpu", "--size", "160x90", "--validate"])?;
    let result = (|| {
        let fds = |pid: u32| std::fs::read_dir(format!("/proc/{pid}/fd")).map(|d| d.count()).unwrap_or(0);
        let before = fds(s.child.id());
        let mut held = Vec::new();
        for i in 0..300 {
            let mut c = TcpStream::connect(("127.0.0.1", s.port)).map_err(|e| e.to_string())?;
            if i % 6 != 0 {
                // Half a head; every sixth sends nothing at all.
                c.write_all(format!("GET / HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nX-Slow: ", s.port).as_bytes())
                    .map_err(|e| e.to_string())?;
            }
            c.set_read_timeout(Some(Duration::from_millis(50))).map_err(|e| e.to_string())?;
            held.push(c);
        }
        let during = fds(s.child.id());
        if during > before + MAX_PENDING + 8 {
            return Err(format!(
                "the server held {during} descriptors with 300 half-sent requests ({before} before)"
            ));
        }
        let started = Instant::now();
        let bound = HEAD_TIMEOUT.max(REQUEST_DEADLINE) + Duration::from_secs(10);
        let mut open: Vec<TcpStream> = held;
        while !open.is_empty() {
            if started.elapsed() > bound {
                return Err(format!("{} of 300 half-sent requests still open after {bound:?}", open.len()));
            }
            let mut buf = [0u8; 256];
            open.retain_mut(|c| match c.read(&mut buf) {
                Ok(0) => false,
                Ok(_) => true,
                Err(e) => matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut),
            });
        }
        println!(
            "  door: 300 half-sent or silent requests: at most {} descriptors held ({before} before), all closed within {:.1} s",
            during,
            started.elapsed().as_secs_f64()
        );
        let mut good = Viewer::connect(s.port, None, (160, 90), "raw")?;
        good.frame().map(|_| ())
    })();
    s.stop(result)
}

/// Frames are decoded in the order they came: a large PNG that takes long to
/// decode, then a small JPEG that is quick, handed to the page's client one
/// after the other; the JPEG (the newer) is what the canvas shows. Their
/// acknowledgements say how many frames were ahead of each (the server holds
/// the frames in flight to what a page that makes frames wait decodes): the
/// JPEG arrived behind the PNG, one more than the PNG found.
fn an_older_frame_is_never_drawn_over_a_newer() -> Outcome {
    let s = Served::start("0", &["--producer", "cpu", "--size", "160x90", "--validate"])?;
    let result = (|| {
        let mut b = Browser::open(&s.url, (400, 324))?;
        b.wait_for(SHOWN, 60)?;
        let order = b.eval(
            "(async () => {
              const frame = async (n, w, h, colour, type, noise) => {
                const c = new OffscreenCanvas(w, h), x = c.getContext('2d');
                x.fillStyle = colour; x.fillRect(0, 0, w, h);
                if (noise) { const d = x.getImageData(0, 0, w, h);
                  for (let i = 0; i < d.data.length; i += 4) { d.data[i] = Math.random() * 64; d.data[i + 3] = 255; }
                  x.putImageData(d, 0, 0); }
                const image = new Uint8Array(await (await c.convertToBlob({ type })).arrayBuffer());
                const out = new Uint8Array(32 + image.length), v = new DataView(out.buffer);
                out.set([86, 75, 70, 50], 0); out[4] = type === 'image/png' ? 3 : 1; out[5] = 1;
                v.setBigUint64(8, BigInt(n), true); v.setUint32(16, w, true); v.setUint32(20, h, true);
                v.setBigUint64(24, BigInt(Date.now() * 1000), true); out.set(image, 32); return out;
              };
              const big = await frame(1e12, 2400, 2400, '#0000ff', 'image/png', true);
              const small = await frame(1e12 + 1, 16, 16, '#ff0000', 'image/jpeg', false);
              const ahead = {}, send = WebSocket.prototype.send;
              WebSocket.prototype.send = function (d) {
                const m = JSON.parse(d);
                if (m.t === 'ack' && m.frame >= 1e12) ahead[m.frame - 1e12] = m.ahead;
                return send.call(this, d);
              };
              const t = performance.now();
              vkcudaView.frame(big); vkcudaView.frame(small);
              while (vkcuda.drawn < 1e12 + 1 && performance.now() - t < 20000) await new Promise(r => setTimeout(r, 10));
              await new Promise(r => setTimeout(r, 200));
              const p = document.getElementById('view').getContext('2d').getImageData(200, 150, 1, 1).data;
              WebSocket.prototype.send = send;
              return { drawn: vkcuda.drawn, ms: performance.now() - t, pixel: [p[0], p[1], p[2]], ahead: [ahead[0], ahead[1]] };
            })()",
        )?;
        let pixel: Vec<u64> =
            order["pixel"].as_array().map_or(Vec::new(), |a| a.iter().filter_map(|v| v.as_u64()).collect());
        println!(
            "  order: a slow PNG then a quick JPEG: the canvas shows {pixel:?} after {:.0} ms; frames ahead of each {}",
            order["ms"].as_f64().unwrap_or(0.0),
            order["ahead"]
        );
        let ahead: Vec<Option<u64>> =
            order["ahead"].as_array().map_or(Vec::new(), |a| a.iter().map(|v| v.as_u64()).collect());
        if !matches!(ahead[..], [Some(png), Some(jpeg)] if jpeg == png + 1) {
            return Err(format!("the acknowledgements do not count the frames ahead: {}", order["ahead"]));
        }
        if order["drawn"].as_f64() != Some(1e12 + 1.0) || pixel.len() != 3 || pixel[0] < 200 || pixel[2] > 60
        {
            return Err(format!("the newer (red) frame is not the one shown: {order}"));
        }
        Ok(())
    })();
    s.stop(result)
}

/// A screenshot of the page for the README (under target/, copied to assets/ by hand).
fn screenshot() -> Outcome {
    let s =
        Served::start("0", &["--producer", "cpu", "--size", "640x360", "--scene", "julia", "--validate"])?;
    let result = (|| {
        let mut b = Browser::open(&s.url, (800, 474))?;
        b.wait_for(&format!("{SHOWN} && vkcuda.status && vkcuda.frames > 30"), 60)?;
        std::thread::sleep(Duration::from_millis(1200)); // the status line's next refresh
        let png = b.screenshot()?;
        let path = crate::common::crate_root().join("target/browser-view.png");
        std::fs::write(&path, png).map_err(|e| e.to_string())?;
        println!("  screenshot: {}", path.display());
        Ok(())
    })();
    s.stop(result)
}

/// Full-range I420 planes (BT.601, rows to an even count, luma rows to 8
/// bytes: the readback's layout) of the julia scene's CPU reference.
fn julia_i420((w, h): (u32, u32)) -> (Vec<u8>, usize) {
    let scene = Scene { kind: SceneKind::Julia, width: w, height: h, cost: 64 };
    let mut rgba = vec![0u8; (w * h * 4) as usize];
    render_cpu_as(&scene, &FrameArgs::new(&scene, 40), Format::Rgba8, &mut rgba, 2);
    let (w, h) = (w as usize, h as usize);
    let (stride, rows) = (w.div_ceil(8) * 8, h.div_ceil(2) * 2);
    let mut planes = vec![128u8; stride * rows * 3 / 2];
    let px = |x: usize, y: usize| {
        let p = &rgba[(y.min(h - 1) * w + x.min(w - 1)) * 4..];
        [f64::from(p[0]), f64::from(p[1]), f64::from(p[2])]
    };
    for y in 0..rows {
        for x in 0..w {
            let [r, g, b] = px(x, y);
            planes[y * stride + x] = (0.299 * r + 0.587 * g + 0.114 * b).round() as u8;
            if x % 2 == 0 && y % 2 == 0 {
                let c = stride * rows + (y / 2) * (stride / 2) + x / 2;
                planes[c] = (128.0 - 0.168_736 * r - 0.331_264 * g + 0.5 * b).round().clamp(0.0, 255.0) as u8;
                planes[c + stride * rows / 4] =
                    (128.0 + 0.5 * r - 0.418_688 * g - 0.081_312 * b).round().clamp(0.0, 255.0) as u8;
            }
        }
    }
    (planes, stride)
}

/// A JPEG the server encodes in strips at once (restart markers between
/// them) decodes in Chromium to the very pixels of one encode of the whole
/// picture, at 1080p and at an odd size.
fn jpeg_strips_decode_as_one_encode() -> Outcome {
    let mut b = Browser::open("about:blank", (200, 200))?;
    for (size, threads) in [((1920, 1080), 4), ((1277, 719), 3)] {
        let (planes, stride) = julia_i420(size);
        let rows = size.1.div_ceil(2) as usize * 2;
        let (u, v) = (stride * rows, stride * rows + stride * rows / 4);
        let p = vkcuda_serve::strips::Planes {
            y: &planes[..u],
            u: &planes[u..v],
            v: &planes[v..],
            y_stride: stride,
            c_stride: stride / 2,
            width: size.0 as usize,
            height: size.1 as usize,
        };
        let mut compressors = Vec::new();
        let mut jpeg = |threads| {
            vkcuda_serve::strips::jpeg(&mut compressors, &p, 80, threads).map_err(|e| e.to_string())
        };
        let (whole, strips) = (jpeg(1)?, jpeg(threads)?);
        let array = |bytes: &[u8]| bytes.iter().map(u8::to_string).collect::<Vec<_>>().join(",");
        let compared = b.eval(&format!(
            "(async () => {{
              const pixels = async (bytes) => {{
                const bitmap = await createImageBitmap(new Blob([new Uint8Array(bytes)], {{ type: 'image/jpeg' }}));
                const c = new OffscreenCanvas(bitmap.width, bitmap.height), g = c.getContext('2d');
                g.drawImage(bitmap, 0, 0);
                return [bitmap.width, bitmap.height, g.getImageData(0, 0, bitmap.width, bitmap.height).data];
              }};
              const [w, h, a] = await pixels([{}]), [sw, sh, s] = await pixels([{}]);
              let differ = 0;
              for (let i = 0; i < a.length; i++) differ += a[i] !== s[i];
              return {{ w, h, sw, sh, differ }};
            }})()",
            array(&whole),
            array(&strips)
        ))?;
        let (w, h) = (compared["sw"].as_u64(), compared["sh"].as_u64());
        let differ = compared["differ"].as_u64().ok_or_else(|| format!("no comparison: {compared}"))?;
        println!(
            "  JPEG in {} strips at {}x{}: {} bytes (one encode {}), decoded {:?}x{:?}, {differ} bytes differ",
            vkcuda_serve::strips::cut(size.0 as usize, size.1 as usize, threads).strips,
            size.0,
            size.1,
            strips.len(),
            whole.len(),
            w.unwrap_or(0),
            h.unwrap_or(0)
        );
        if (w, h) != (Some(u64::from(size.0)), Some(u64::from(size.1))) || differ != 0 {
            return Err(format!("the strips' JPEG does not decode as one encode does: {compared}"));
        }
    }
    Ok(())
}

/// Raw frames at an odd canvas size equal the CPU reference drawn at that
/// size, from `producer`'s frames (the CUDA producer: on an NVIDIA GPU);
/// `extra`: more arguments (the producer in a child process).
fn raw_frames_match_the_reference(producer: &str, extra: &[&str]) -> Outcome {
    let mut args = vec!["--producer", producer, "--size", "320x180", "--validate"];
    args.extend(extra);
    let s = Served::start("0", &args)?;
    let result = (|| {
        for canvas in [(333u32, 187u32), (160, 161), (641, 359)] {
            let mut c = Viewer::connect(s.port, None, canvas, "raw")?;
            for _ in 0..3 {
                let f = c.frame()?;
                let diff = compare(gradient((320, 180)), f.frame(), &f.payload, canvas)?;
                if f.size() != canvas || !diff.within_tolerance() {
                    return Err(format!("{canvas:?}: a {:?} frame {}: {diff:?}", f.size(), f.frame()));
                }
            }
            println!("  raw: {producer} frames drawn at {}x{} equal the reference", canvas.0, canvas.1);
        }
        Ok(())
    })();
    s.stop(result)
}

/// The Vulkan device lost mid-run (injected at frame `lost`, as a driver may
/// report after a GPU fault) is made again, under `producer` in a child
/// process (its frames the CPU reference's): a client connected before it
/// keeps its connection and gets frames after it, numbered after those
/// before, each equal to the reference. (The new session's frames show the
/// animation where it was: a few ticks past their numbers, the frames the
/// lost session had begun; the same few for every frame.)
fn a_lost_device_is_made_again_and_the_view_goes_on(producer: &str, at: u64) -> Outcome {
    let lost = format!("device-lost@{at}");
    // The CPU reference child writes buffers (it has no image import).
    let layout: &[&str] = if producer == "cpu" { &["--layout", "buffer"] } else { &[] };
    let args =
        [&["--producer", producer, "--producer-process", "child", "--size", "320x180"], layout].concat();
    let s = Served::start("0", &[&args[..], &["--validate", "--inject", &lost]].concat())?;
    let remade = "making the Vulkan device again; the run goes on";
    let canvas = (333u32, 187u32);
    let result = (|| {
        let mut c = Viewer::connect(s.port, None, canvas, "raw")?;
        let first = c.frame()?;
        if first.frame() >= at || s.printed().contains(remade) {
            return Err(format!("the client's first frame ({}) came after the loss at {at}", first.frame()));
        }
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
        let (mut last, mut ahead, mut after) = (first.frame(), None, 0);
        while after < 3 {
            if std::time::Instant::now() > deadline {
                return Err(format!("no 3 frames past {at} in 120 s (the last: {last}):\n{}", s.printed()));
            }
            let f = c.frame()?;
            if f.frame() <= last {
                return Err(format!("frame {} came after frame {last}", f.frame()));
            }
            last = f.frame();
            if !s.printed().contains(remade) {
                continue;
            }
            let matches =
                |t: u64| compare(gradient((320, 180)), t, &f.payload, canvas).map(|d| d.within_tolerance());
            let found = match ahead {
                Some(a) => matches(f.frame() + a)?.then_some(a),
                None => (0..16).find(|&a| matches(f.frame() + a).unwrap_or(false)),
            };
            if f.size() != canvas || found.is_none() {
                return Err(format!(
                    "a {:?} frame {} after the loss equals no reference ({ahead:?} ticks ahead)",
                    f.size(),
                    f.frame()
                ));
            }
            (ahead, after) = (found, after + 1);
        }
        println!(
            "  lost device: made again at frame {at}; one connection, frames {} to {last}, those after it equal the reference {} ticks ahead",
            first.frame(),
            ahead.unwrap_or(0)
        );
        Ok(())
    })();
    s.stop(result)
}

/// The page's pointer reaches a `--kernel`'s `vk_frame`: a kernel that draws
/// a dot under the pointer shows it where the client points.
fn the_pointer_reaches_your_kernel() -> Outcome {
    let file = crate::common::tmp("dot.cu");
    let kernel = r#"#include "vkcuda.h"
extern "C" __global__ void render(vk_frame f) {
    VK_PIXEL(f, x, y);
    float dx = x + 0.5f - f.mouse_x, dy = y + 0.5f - f.mouse_y;
    bool on = f.mouse_x >= 0.0f && dx * dx + dy * dy < 9.0f && (f.buttons & 1);
    vk_put8(f.target, x, y, on ? make_uchar4(255, 255, 255, 255) : make_uchar4(0, 0, 40, 255));
}
"#;
    std::fs::write(&file, kernel).map_err(|e| e.to_string())?;
    let s =
        Served::start("0", &["--kernel", file.to_str().unwrap_or(""), "--size", "320x180", "--validate"])?;
    let result = (|| {
        let mut c = Viewer::connect(s.port, None, (320, 180), "raw")?;
        c.frame()?;
        let pointer = serde_json::json!({ "t": "pointer", "x": 100.5, "y": 50.5, "buttons": 1 }).to_string();
        c.socket.send(tungstenite::Message::text(pointer)).map_err(|e| e.to_string())?;
        let at = |f: &crate::common::browser::Frame, x: usize, y: usize| f.payload[(y * 320 + x) * 4];
        for _ in 0..600 {
            let f = c.frame()?;
            if at(&f, 100, 50) == 255 && at(&f, 10, 10) == 0 && at(&f, 110, 50) == 0 {
                println!(
                    "  pointer: the kernel drew the dot at frame pixel (100, 50) in frame {}",
                    f.frame()
                );
                return Ok(());
            }
        }
        Err("600 frames and no dot under the pointer".into())
    })();
    let _ = std::fs::remove_file(&file);
    s.stop(result)
}

/// A page connected before its `--kernel` faulted gets the fixed kernel's
/// frames as soon as the fix runs, numbered after every frame before (each
/// session of the run counts its frames from 0; a page draws only newer ones,
/// so frames numbered from 0 again were held back for as long as the session
/// before had run: here 15 s, where the fix's first frame must come in 6).
fn a_page_gets_the_fixed_kernel_at_once() -> Outcome {
    let file = crate::common::tmp("live.cu");
    let save = |rgb: (u8, u8, u8), fault: bool| {
        let store = if fault { "if (x == 1 && y == 1) *(volatile int *)16 = 1;" } else { "" };
        let kernel = format!(
            "#include \"vkcuda.h\"\nextern \"C\" __global__ void render(vk_frame f) {{\n    VK_PIXEL(f, x, y);\n    \
             {store}\n    vk_put8(f.target, x, y, make_uchar4({}, {}, {}, 255));\n}}\n",
            rgb.0, rgb.1, rgb.2
        );
        let new = file.with_extension("cu.new");
        std::fs::write(&new, kernel).and_then(|()| std::fs::rename(&new, &file)).map_err(|e| e.to_string())
    };
    save((200, 10, 10), false)?;
    let s =
        Served::start("0", &["--kernel", file.to_str().unwrap_or(""), "--size", "320x180", "--validate"])?;
    let printed = |what: &str| {
        crate::common::wait_for(60, what, || Ok(s.printed().contains(what)))
            .map_err(|e| format!("{e}:\n{}", s.printed()))
    };
    let result = (|| {
        let mut c = Viewer::connect(s.port, None, (320, 180), "raw")?;
        let until = |c: &mut Viewer, rgb: [u8; 3]| -> Result<u64, String> {
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
            loop {
                let f = c.frame()?;
                if f.payload[..3] == rgb && f.payload[f.payload.len() - 4..][..3] == rgb {
                    return Ok(f.frame());
                }
                if std::time::Instant::now() > deadline {
                    return Err(format!(
                        "no {rgb:?} frame in 20 s (frame {}: {:?})",
                        f.frame(),
                        &f.payload[..3]
                    ));
                }
            }
        };
        until(&mut c, [200, 10, 10])?;
        // The first session runs 15 s, its frames taken as they come (a served
        // run makes frames while a page wants them).
        let started = std::time::Instant::now();
        let mut before = 0;
        while started.elapsed() < std::time::Duration::from_secs(15) {
            before = until(&mut c, [200, 10, 10])?;
        }
        save((10, 200, 10), true)?;
        printed("the page shows the last frame")?;
        save((10, 10, 200), false)?;
        printed("the fix runs")?;
        let fixed = std::time::Instant::now();
        let after = until(&mut c, [10, 10, 200])?;
        let took = fixed.elapsed();
        if after <= before || took > std::time::Duration::from_secs(6) {
            return Err(format!(
                "the fix's frame {after} (after red frame {before}) came {took:?} after the fix ran"
            ));
        }
        println!("  fault and fix: red frames to {before} in 15 s, the fix's blue frame {after} {took:.2?} after the fix ran, one connection");
        Ok(())
    })();
    let _ = std::fs::remove_file(&file);
    s.stop(result)
}

/// Raw frames of other formats and the buffer layout, drawn at an odd canvas
/// size, equal the CPU reference drawn from frames of that format.
fn formats_are_drawn_as_the_window_draws_them() -> Outcome {
    let cases = [
        ("rgba8", Format::Rgba8, "buffer"),
        ("rgba16f", Format::Rgba16f, "array"),
        ("r32f", Format::R32f, "buffer"),
        ("rgba8-srgb", Format::Rgba8Srgb, "array"),
    ];
    for (format, fmt, layout) in cases {
        let args =
            ["--producer", "cpu", "--size", "200x120", "--format", format, "--layout", layout, "--validate"];
        let s = Served::start("0", &args)?;
        let result = (|| {
            let canvas = (251, 163);
            let mut c = Viewer::connect(s.port, None, canvas, "raw")?;
            for _ in 0..3 {
                let f = c.frame()?;
                let scene = gradient((200, 120));
                let mut frame = vec![0u8; (200 * 120) as usize * fmt.bytes_per_pixel() as usize];
                render_cpu_as(&scene, &FrameArgs::new(&scene, f.frame() as u32), fmt, &mut frame, 2);
                let diff = Diff::drawn(
                    &f.payload,
                    &drawn_reference(&frame, fmt, extent(200, 120), extent(canvas.0, canvas.1)),
                );
                if f.size() != canvas || !diff.within_tolerance() {
                    return Err(format!("{format} {layout}: frame {}: {diff:?}", f.frame()));
                }
            }
            println!("  formats: {format} {layout} drawn at 251x163 equals the reference");
            Ok(())
        })();
        s.stop(result)?;
    }
    Ok(())
}

/// The server stops with the run: at its last frame (clients told, the port
/// free, exit 0) and on SIGTERM (exit 143, clean).
fn the_view_stops_with_the_run() -> Outcome {
    let s = Served::start("0", &["--producer", "cpu", "--size", "160x90", "--frames", "400", "--validate"])?;
    let port = s.port;
    let mut c = Viewer::connect(port, None, (160, 90), "raw")?;
    let mut frames = 0;
    let why = loop {
        match c.frame() {
            Ok(_) => frames += 1,
            Err(e) => break e,
        }
    };
    let o = s.wait(60)?;
    let stdout = String::from_utf8_lossy(&o.stdout);
    if !o.status.success() || !stdout.contains("validation: 0 errors, 0 warnings") || !why.contains("closed")
    {
        return Err(format!("exit {:?}, the client: {why}\n{stdout}", o.status.code()));
    }
    std::net::TcpListener::bind(("127.0.0.1", port)).map_err(|e| format!("port {port} still taken: {e}"))?;
    println!("  stop: the last frame: {frames} frames, then {why}; exit 0, port free");
    let s = Served::start("0", &["--producer", "cpu", "--size", "160x90", "--validate"])?;
    let mut c = Viewer::connect(s.port, None, (160, 90), "raw")?;
    c.frame()?;
    send_signal(s.child.id(), "TERM")?;
    let o = s.wait(60)?;
    ended_by_signal(&o, Ok(()), 15)?;
    println!("  stop: SIGTERM with a client: exit 143, clean");
    Ok(())
}

/// A test that runs wherever the binary does (lavapipe in CI).
fn plain(
    name: &str,
    test: impl Fn() -> Outcome + 'static,
) -> (String, Box<dyn Fn() -> crate::common::Verdict>) {
    (name.to_string(), Box::new(move || crate::common::pass(test())))
}

/// Registers this area's tests.
pub fn register(tests: &mut Tests) {
    tests.push(gated(
        "browser_pixels_match_the_reference_at_two_sizes",
        no_chromium,
        pixels_match_the_reference,
    ));
    tests.push(gated("browser_keys_and_pointer_reach_the_run", no_chromium, keys_and_pointer_reach_the_run));
    tests.push(gated(
        "browser_door_checks_token_origin_and_host",
        no_chromium,
        the_door_checks_token_origin_and_host,
    ));
    tests.push(plain("serve_port_in_use_fails_before_the_gpu", a_port_in_use_fails_before_the_gpu));
    tests.push(plain("serve_stalled_client_does_not_slow_the_run", || {
        a_stalled_client_does_not_slow_the_run()
    }));
    tests.push(plain("serve_eight_clients_and_one_leaving_mid_frame", || {
        eight_clients_and_one_leaving_mid_frame()
    }));
    tests.push(plain("serve_fuzzing_closes_only_the_fuzzing_clients", || {
        fuzzing_closes_only_the_fuzzing_clients()
    }));
    tests.push(gated("browser_screenshot", no_chromium, screenshot));
    tests.push(gated(
        "browser_jpeg_strips_decode_as_one_encode",
        no_chromium,
        jpeg_strips_decode_as_one_encode,
    ));
    tests.push(plain("serve_half_sent_requests_are_bounded", half_sent_requests_are_bounded));
    tests.push(gated(
        "browser_an_older_frame_is_never_drawn_over_a_newer",
        no_chromium,
        an_older_frame_is_never_drawn_over_a_newer,
    ));
    tests.push(plain("serve_raw_frames_match_the_reference_cpu", || {
        raw_frames_match_the_reference("cpu", &[])
    }));
    tests.push(plain("serve_a_lost_device_is_made_again_and_the_view_goes_on", || {
        a_lost_device_is_made_again_and_the_view_goes_on("cpu", 5000)
    }));
    tests.push(gated(
        "cuda_serve_a_page_gets_the_fixed_kernel_at_once",
        crate::common::no_nvidia,
        a_page_gets_the_fixed_kernel_at_once,
    ));
    tests.push(gated(
        "cuda_serve_a_lost_device_is_made_again_and_the_view_goes_on",
        crate::common::no_nvidia,
        || a_lost_device_is_made_again_and_the_view_goes_on("cuda", 40000),
    ));
    // The CPU reference in a child process (its own Vulkan device writes the frames' memory).
    tests.push(plain("serve_raw_frames_match_the_reference_cpu_child", || {
        raw_frames_match_the_reference("cpu", &["--producer-process", "child", "--layout", "buffer"])
    }));
    tests.push(plain("serve_formats_are_drawn_as_the_window_draws_them", || {
        formats_are_drawn_as_the_window_draws_them()
    }));
    tests.push(plain("serve_the_view_stops_with_the_run", the_view_stops_with_the_run));
    tests.push(gated("cuda_serve_raw_frames_match_the_reference", crate::common::no_nvidia, || {
        raw_frames_match_the_reference("cuda", &[])
    }));
    tests.push(gated("cuda_serve_raw_frames_match_the_reference_child", crate::common::no_nvidia, || {
        raw_frames_match_the_reference("cuda", &["--producer-process", "child"])
    }));
    tests.push(gated(
        "cuda_serve_the_pointer_reaches_your_kernel",
        crate::common::no_nvidia,
        the_pointer_reaches_your_kernel,
    ));
}
