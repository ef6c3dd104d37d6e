//! The browser view measured over a link (a bench, not a test): starts a
//! server (vkcuda's `--serve`, an older vkcuda, or viser's path), behind a
//! link made on this machine when one is asked for (tests/common/link.rs: a
//! network namespace, `tc` shaping both ways, a relay adding the round
//! trip), and watches it with `CLIENTS` clients that decode every frame
//! (JPEG, VP8 with libvpx, PNG, raw) and acknowledge it as the page does.
//! Prints one JSON line: frames a second delivered per client, latency p50
//! and p95 (the frame taken on the server to decoded here; one machine,
//! one clock), bytes a frame, PSNR of what is shown (scaled up to the
//! canvas as the page scales it) against the CPU reference of the frame
//! drawn at the canvas, beside the PSNR JPEG q80 of the same frames gets
//! (the view before this change), the server's CPU per frame, the codecs
//! seen, and the producer's frames a second (vkcuda's own summary).
//!
//!   link_bench SERVER LINK CANVAS CLIENTS SECS [--size WxH] [--rate FPS] [--still]
//!              [--ahead] [--scene julia|gradient] [--cost N] [--trace FILE] [--server-log FILE]
//!
//! SERVER: `new:PATH` (this vkcuda), `old:PATH` (a vkcuda before the link
//! work: JPEG q80, its old protocol), `viser:PATH` (viser_path.py: a JPEG
//! loop without acknowledgements). LINK: `loopback`, `MBIT/RTT_MS`, or
//! `drop:MBIT/MBIT/RTT_MS` (the rate falls half-way; the line says how long
//! p95 took to come back under 200 ms, and the latest it could see: a row of
//! 5 s sees 1.5 s after the drop, too short for the issue's 2 s; use SECS=10).
//! `--ahead`: each acknowledgement says how many frames had arrived and were
//! not yet acknowledged when its frame arrived, as the page does (a server
//! before that rejects the field). `--still`: then pauses the run and
//! times the exact frame. The scene is julia (`--cost 64`) unless `--scene`
//! says gradient (vkcuda's servers only: viser's path draws julia). `--cost N`:
//! julia's iterations a pixel (vkcuda's servers only), which sets how fast the
//! producer runs and so how far apart in the animation the frames sent are
//! (a tick a frame: 64 on the H200 runs ~3,400 a second).

#[path = "../../../tests/common/link.rs"]
mod link;

use std::collections::VecDeque;
use std::io::{Read, Write};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{channel, Sender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use ash::vk::Extent2D;
use tungstenite::Message;
use vkcuda::Format;
use vkcuda_run::scene::{drawn_reference, render_cpu_as, FrameArgs, Scene, SceneKind, MAX_COST};
use vkcuda_serve::protocol::{Header, Kind, HEADER, MAGIC};

/// Seconds of warm-up before anything is counted.
const WARM: f64 = 3.0;

fn main() {
    if let Err(e) = run() {
        eprintln!("link_bench: {e}");
        std::process::exit(1);
    }
}

/// What the command line asks.
struct Ask {
    server: (String, String),
    link: LinkAsk,
    canvas: (u32, u32),
    clients: usize,
    secs: f64,
    size: (u32, u32),
    rate: f64,
    still: bool,
    /// Whether each acknowledgement says the frames ahead of its frame (as the page does; earlier servers reject it).
    ahead: bool,
    /// The scene the server draws, and the PSNR's reference.
    scene: SceneKind,
    /// Julia's iterations a pixel (the server's `--cost`, and the reference's).
    cost: u32,
    /// Where to write each frame's arrival and each status line (JSON lines), if asked.
    trace: Option<String>,
    /// Where to write the server's standard error, if asked.
    server_log: Option<String>,
}

#[derive(Clone, Copy)]
enum LinkAsk {
    Loopback,
    Shaped { mbit: f64, rtt: f64 },
    Drop { from: f64, to: f64, rtt: f64 },
}

fn pair(s: &str, sep: char) -> Option<(u32, u32)> {
    let (a, b) = s.split_once(sep)?;
    Some((a.parse().ok()?, b.parse().ok()?))
}

fn ask() -> Result<Ask, String> {
    let usage = "link_bench SERVER LINK CANVAS CLIENTS SECS [--size WxH] [--rate FPS] [--still] [--ahead] [--scene julia|gradient] [--cost N] [--trace FILE] [--server-log FILE]";
    let a: Vec<String> = std::env::args().collect();
    let arg = |i: usize| a.get(i).cloned().ok_or(usage);
    let server = arg(1)?.split_once(':').map(|(k, p)| (k.to_string(), p.to_string())).ok_or(usage)?;
    let link = match arg(2)?.as_str() {
        "loopback" => LinkAsk::Loopback,
        l if l.starts_with("drop:") => {
            let v: Vec<f64> = l[5..].split('/').filter_map(|x| x.parse().ok()).collect();
            let [from, to, rtt] = v[..] else { return Err(usage.into()) };
            LinkAsk::Drop { from, to, rtt }
        }
        l => {
            let (mbit, rtt) = l.split_once('/').ok_or(usage)?;
            LinkAsk::Shaped { mbit: mbit.parse().map_err(|_| usage)?, rtt: rtt.parse().map_err(|_| usage)? }
        }
    };
    let flag = |name: &str| a.iter().position(|x| x == name).and_then(|i| a.get(i + 1)).cloned();
    let scene = match flag("--scene") {
        None => SceneKind::Julia,
        Some(name) => SceneKind::ALL
            .into_iter()
            .find(|k| k.to_string() == name)
            .ok_or(format!("--scene {name}: julia or gradient"))?,
    };
    if scene != SceneKind::Julia && server.0 == "viser" {
        return Err("viser's path draws julia only".into());
    }
    let cost = match flag("--cost") {
        None => 64,
        Some(n) => n
            .parse()
            .ok()
            .filter(|n| (1..=MAX_COST).contains(n))
            .ok_or(format!("--cost {n}: 1 to {MAX_COST}"))?,
    };
    if cost != 64 && server.0 == "viser" {
        return Err("viser's path draws julia at cost 64 only".into());
    }
    Ok(Ask {
        server,
        link,
        canvas: pair(&arg(3)?, 'x').ok_or(usage)?,
        clients: arg(4)?.parse().map_err(|_| usage)?,
        secs: arg(5)?.parse().map_err(|_| usage)?,
        size: flag("--size").and_then(|s| pair(&s, 'x')).unwrap_or((1920, 1080)),
        rate: flag("--rate").and_then(|r| r.parse().ok()).unwrap_or(60.0),
        still: a.iter().any(|x| x == "--still"),
        ahead: a.iter().any(|x| x == "--ahead"),
        scene,
        cost,
        trace: flag("--trace"),
        server_log: flag("--server-log"),
    })
}

/// The server, its address, the token its URL has, and where vkcuda writes its summary.
struct Server {
    child: Child,
    at: SocketAddr,
    token: Option<String>,
    summary: Option<std::path::PathBuf>,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts the server (in `link`'s namespace when there is one) and waits for its address.
fn start(ask: &Ask, link: Option<&link::Link>) -> Result<Server, String> {
    let (kind, path) = (&ask.server.0, std::path::PathBuf::from(&ask.server.1));
    let bind = if link.is_some() { "0.0.0.0:0" } else { "127.0.0.1:0" };
    let mut c = match link {
        Some(l) if kind == "viser" => l.command(std::path::Path::new("python3")),
        Some(l) => l.command(&path),
        None if kind == "viser" => Command::new("python3"),
        None => Command::new(&path),
    };
    let summary = std::env::temp_dir().join(format!("link-bench-{}.json", std::process::id()));
    let (size, scene) = (format!("{}x{}", ask.size.0, ask.size.1), ask.scene.to_string());
    match kind.as_str() {
        "viser" => c.arg(&path).args([&size, &format!("{}x{}", ask.canvas.0, ask.canvas.1), bind]),
        _ => c
            .args(["--headless", "--serve", bind, "--scene", &scene, "--cost", &ask.cost.to_string()])
            .args(["--size", &size, "--json"])
            .arg(&summary),
    };
    let mut child = c
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| e.to_string())?;
    let mut err = child.stderr.take().ok_or("no stderr")?;
    let mut log = match &ask.server_log {
        Some(path) => Some(std::fs::File::create(path).map_err(|e| format!("{path}: {e}"))?),
        None => None,
    };
    let (tx, rx) = channel();
    std::thread::spawn(move || {
        let (mut seen, mut told) = (String::new(), false);
        let mut buf = [0u8; 4096];
        while let Ok(n @ 1..) = err.read(&mut buf) {
            if let Some(log) = &mut log {
                let _ = log.write_all(&buf[..n]);
            }
            if told {
                continue;
            }
            seen.push_str(&String::from_utf8_lossy(&buf[..n]));
            if let Some(url) = seen.split("watch it at ").nth(1).filter(|r| r.contains('\n')) {
                told = tx.send(url.lines().next().unwrap_or("").trim().to_string()).is_ok();
            }
        }
    });
    let url = rx.recv_timeout(Duration::from_secs(60)).map_err(|_| "the server printed no URL in 60 s")?;
    let port: u16 = url
        .rsplit(':')
        .next()
        .and_then(|p| p.split('/').next())
        .and_then(|p| p.parse().ok())
        .ok_or("no port")?;
    let host = if link.is_some() { link::SERVER_IP } else { "127.0.0.1" };
    let at = format!("{host}:{port}").parse().map_err(|e| format!("{e}"))?;
    let token = url.split("token=").nth(1).map(str::to_string);
    Ok(Server { child, at, token, summary: (kind != "viser").then_some(summary) })
}

fn now_us() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default().as_micros() as u64
}

/// What one client saw: per frame (arrival, latency ms, bytes, kind), PSNRs, the exact frame's delay.
#[derive(Default)]
struct Seen {
    frames: Vec<(Instant, f64, usize, Kind)>,
    /// PSNR of what was shown, and of JPEG q80 of the same frames.
    psnr: Vec<Psnr>,
    exact_after: Option<f64>,
    status: String,
    /// `--trace`: a JSON line per frame (ms since the start: arrival, decoded; its header) and per status.
    trace: Vec<String>,
}

/// The server's header of a frame, either version, read by the view's own parser: an
/// old server's `VKF1` header is this one with bytes 5 to 7 zero (no key flag, no
/// quality), so it reads as one once its magic is this one's.
fn header(b: &[u8]) -> Result<Header, String> {
    let parse = |b: &[u8]| Header::parse(b).map_err(|e| e.to_string());
    match b.get(..HEADER) {
        Some(head) if head.starts_with(b"VKF1") => {
            let mut now = [0u8; HEADER];
            now.copy_from_slice(head);
            now[..4].copy_from_slice(MAGIC);
            parse(&now)
        }
        _ => parse(b),
    }
}

/// A VP8 decoder (libvpx) giving RGB.
struct Vp8Decoder(Box<vpx_sys::vpx_codec_ctx_t>);

impl Vp8Decoder {
    fn new() -> Result<Self, String> {
        let mut ctx = Box::new(std::mem::MaybeUninit::<vpx_sys::vpx_codec_ctx_t>::zeroed());
        // SAFETY: libvpx's static description of its VP8 decoder.
        let vp8 = unsafe { vpx_sys::vpx_codec_vp8_dx() };
        let abi = vpx_sys::VPX_DECODER_ABI_VERSION as i32;
        // SAFETY: zeroed memory for the context, a static interface, no configuration.
        let err = unsafe { vpx_sys::vpx_codec_dec_init_ver(ctx.as_mut_ptr(), vp8, std::ptr::null(), 0, abi) };
        if err != vpx_sys::vpx_codec_err_t::VPX_CODEC_OK {
            return Err(format!("VP8 decoder: {err:?}"));
        }
        // SAFETY: initialised above.
        Ok(Self(unsafe { Box::from_raw(Box::into_raw(ctx).cast()) }))
    }

    /// Decodes one frame; a copy of its planes when `keep` (the PSNR is
    /// worked out on another thread: converting and scaling is not the page's work).
    fn decode(&mut self, data: &[u8], keep: bool) -> Result<Option<I420>, String> {
        let (ptr, len) = (data.as_ptr(), data.len() as u32);
        // SAFETY: an initialised decoder and the frame's bytes.
        let err = unsafe { vpx_sys::vpx_codec_decode(&mut *self.0, ptr, len, std::ptr::null_mut(), 0) };
        if err != vpx_sys::vpx_codec_err_t::VPX_CODEC_OK {
            return Err(format!("VP8: {err:?}"));
        }
        let mut iter = std::ptr::null();
        // SAFETY: an initialised decoder; the image is libvpx's until the next call on it.
        let img = unsafe { vpx_sys::vpx_codec_get_frame(&mut *self.0, &mut iter) };
        // SAFETY: null or libvpx's image, read before the next call.
        let img = unsafe { img.as_ref() }.ok_or("VP8: no picture")?;
        if !keep {
            return Ok(None);
        }
        let (w, h) = (img.d_w as usize, img.d_h as usize);
        let (ys, cs) = (img.stride[0] as usize, img.stride[1] as usize);
        // SAFETY: the planes of a decoded w×h I420 image, of these strides.
        let plane = |i: usize, len: usize| unsafe { std::slice::from_raw_parts(img.planes[i], len) }.to_vec();
        let (y, u, v) = (plane(0, ys * h), plane(1, cs * h.div_ceil(2)), plane(2, cs * h.div_ceil(2)));
        Ok(Some(I420 { w, h, ys, cs, y, u, v }))
    }
}

/// A decoded VP8 picture's planes.
struct I420 {
    w: usize,
    h: usize,
    ys: usize,
    cs: usize,
    y: Vec<u8>,
    u: Vec<u8>,
    v: Vec<u8>,
}

impl I420 {
    /// Its RGB (BT.601, limited range, as the page's decoder shows it).
    fn rgb(&self) -> Vec<u8> {
        let (w, h, ys, cs) = (self.w, self.h, self.ys, self.cs);
        let mut rgb = Vec::with_capacity(w * h * 3);
        for row in 0..h {
            for x in 0..w {
                let l = f64::from(self.y[row * ys + x]) - 16.0;
                let (cu, cv) = (
                    f64::from(self.u[(row / 2) * cs + x / 2]) - 128.0,
                    f64::from(self.v[(row / 2) * cs + x / 2]) - 128.0,
                );
                for c in [1.164 * l + 1.596 * cv, 1.164 * l - 0.392 * cu - 0.813 * cv, 1.164 * l + 2.017 * cu]
                {
                    rgb.push(c.round().clamp(0.0, 255.0) as u8);
                }
            }
        }
        rgb
    }
}

/// What was shown of a frame, for its PSNR.
enum Shown {
    Rgb(Vec<u8>),
    I420(I420),
}

impl Shown {
    fn rgb(self) -> Vec<u8> {
        match self {
            Shown::Rgb(rgb) => rgb,
            Shown::I420(p) => p.rgb(),
        }
    }
}

impl Drop for Vp8Decoder {
    fn drop(&mut self) {
        // SAFETY: an initialised decoder, destroyed once.
        unsafe { vpx_sys::vpx_codec_destroy(&mut *self.0) };
    }
}

/// A frame's image decoded: JPEG (turbojpeg), PNG, raw RGBA, or VP8 (`vp8`;
/// its planes only when `keep`).
fn decode(kind: Kind, image: &[u8], vp8: &mut Vp8Decoder, keep: bool) -> Result<Option<Shown>, String> {
    let rgba_to_rgb = |p: &[u8]| p.chunks_exact(4).flat_map(|c| [c[0], c[1], c[2]]).collect::<Vec<u8>>();
    let rgb = match kind {
        Kind::Raw => Ok(rgba_to_rgb(image)),
        Kind::Jpeg => turbojpeg::decompress(image, turbojpeg::PixelFormat::RGB)
            .map(|i| i.pixels)
            .map_err(|e| e.to_string()),
        Kind::Vp8 => return Ok(vp8.decode(image, keep)?.map(Shown::I420)),
        Kind::Png => {
            let mut r =
                png::Decoder::new(std::io::Cursor::new(image)).read_info().map_err(|e| e.to_string())?;
            let mut buf = vec![0u8; r.output_buffer_size().unwrap_or(0)];
            let info = r.next_frame(&mut buf).map_err(|e| e.to_string())?;
            Ok(rgba_to_rgb(&buf[..info.buffer_size()]))
        }
    };
    Ok(Some(Shown::Rgb(rgb?)))
}

/// `rgb` of `size` scaled to `canvas` bilinearly, as the page's canvas scales a smaller image.
fn scaled(rgb: &[u8], size: Extent2D, canvas: Extent2D) -> Vec<u8> {
    if size == canvas {
        return rgb.to_vec();
    }
    let (w, h) = (size.width as usize, size.height as usize);
    let (cw, ch) = (canvas.width as usize, canvas.height as usize);
    let mut out = vec![0u8; cw * ch * 3];
    for y in 0..ch {
        let fy = ((y as f64 + 0.5) * h as f64 / ch as f64 - 0.5).clamp(0.0, (h - 1) as f64);
        let (y0, ay) = (fy.floor() as usize, fy.fract());
        let y1 = (y0 + 1).min(h - 1);
        for x in 0..cw {
            let fx = ((x as f64 + 0.5) * w as f64 / cw as f64 - 0.5).clamp(0.0, (w - 1) as f64);
            let (x0, ax) = (fx.floor() as usize, fx.fract());
            let x1 = (x0 + 1).min(w - 1);
            for c in 0..3 {
                let p = |x: usize, y: usize| f64::from(rgb[(y * w + x) * 3 + c]);
                let v = (p(x0, y0) * (1.0 - ax) + p(x1, y0) * ax) * (1.0 - ay)
                    + (p(x0, y1) * (1.0 - ax) + p(x1, y1) * ax) * ay;
                out[(y * cw + x) * 3 + c] = v.round() as u8;
            }
        }
    }
    out
}

/// A frame's PSNR against the CPU reference drawn at the canvas, in dB.
#[derive(Clone, Copy, Debug)]
struct Psnr {
    /// Of the frame the page showed.
    shown: f64,
    /// Of the reference itself sent as JPEG q80 at the canvas (the view
    /// before this change, on the same frame).
    jpeg_q80: f64,
}

/// PSNR of `rgb` at the canvas against the scene's frame `frame` drawn
/// there, and of that reference sent as JPEG q80 at the canvas.
fn psnr(rgb: &[u8], scene: &Scene, frame: u64, canvas: Extent2D) -> Psnr {
    let size = Extent2D { width: scene.width, height: scene.height };
    let mut rendered = vec![0u8; (size.width * size.height * 4) as usize];
    render_cpu_as(scene, &FrameArgs::new(scene, frame as u32), Format::Rgba8, &mut rendered, 8);
    let want = drawn_reference(&rendered, Format::Rgba8, size, canvas);
    let exact: Vec<u8> = want
        .iter()
        .flat_map(|w| {
            w.map_or([0, 0, 0, 255], |c| [c[0].round() as u8, c[1].round() as u8, c[2].round() as u8, 255])
        })
        .collect();
    let (width, height) = (canvas.width as usize, canvas.height as usize);
    let image = turbojpeg::Image {
        pixels: &exact[..],
        width,
        pitch: width * 4,
        height,
        format: turbojpeg::PixelFormat::RGBA,
    };
    let q80 = turbojpeg::compress(image, 80, turbojpeg::Subsamp::Sub2x2)
        .ok()
        .and_then(|j| turbojpeg::decompress(&j, turbojpeg::PixelFormat::RGB).ok())
        .map(|i| i.pixels)
        .unwrap_or_default();
    let score = |got: &[u8]| {
        let (mut se, mut n) = (0.0, 0usize);
        for (g, w) in got.chunks_exact(3).zip(&want) {
            if let Some(w) = w {
                for c in 0..3 {
                    let d = f64::from(g[c]) - w[c].round();
                    se += d * d;
                }
                n += 3;
            }
        }
        if se == 0.0 {
            99.0
        } else {
            10.0 * (255.0f64 * 255.0 / (se / n.max(1) as f64)).log10()
        }
    };
    Psnr { shown: score(rgb), jpeg_q80: score(&q80) }
}

/// A frame to score: what was shown, the size it was sent at, its number, and whose.
type PsnrJob = (Shown, (u32, u32), u64, Arc<Mutex<Seen>>);

/// A message as it arrived: when (and ms after the server took it, for a
/// frame), the frames arrived and not yet acknowledged then, and it.
type Arrival = (Instant, f64, usize, Message);

/// Reads `ws` as a browser's socket does, beside the decode: each message
/// timestamped as it arrives, each frame with the frames ahead of it
/// (`at_page`: arrived and not yet acknowledged, oldest first).
fn read_all(mut ws: Socket, at_page: AtPage, arrivals: Sender<Arrival>) {
    while let Ok(m) = ws.read() {
        let (at, mut since, mut ahead) = (Instant::now(), 0.0, 0);
        if let Message::Binary(b) = &m {
            let Ok(Header { frame, stamp, .. }) = header(b) else { return };
            since = now_us().saturating_sub(stamp) as f64 / 1e3;
            let mut q = lock(&at_page);
            (ahead, _) = (q.len(), q.push_back(frame));
        }
        if arrivals.send((at, since, ahead, m)).is_err() {
            return;
        }
    }
}

type Socket = tungstenite::WebSocket<tungstenite::stream::MaybeTlsStream<std::net::TcpStream>>;
/// The second handle on a client's socket, that acknowledgements go out on.
type Writer = tungstenite::WebSocket<std::net::TcpStream>;

/// The frames arrived and not yet acknowledged, oldest first.
type AtPage = Arc<Mutex<VecDeque<u64>>>;

/// Connects as a page does (its hello, mode, rate and canvas): the socket
/// acknowledgements go out on, and what arrives, read by a thread of its own.
fn open(url: &str, ask: &Ask) -> Result<(Writer, std::sync::mpsc::Receiver<Arrival>, AtPage), String> {
    let (mut ws, _) = tungstenite::connect(url).map_err(|e| format!("{url}: {e}"))?;
    let mut hello: Vec<String> = match ask.server.0.as_str() {
        "new" => vec![r#"{"t":"hello","video":["vp8"]}"#.into(), r#"{"t":"mode","mode":"auto"}"#.into()],
        _ => vec![r#"{"t":"mode","mode":"jpeg","quality":80}"#.into()],
    };
    hello.push(format!(r#"{{"t":"rate","fps":{}}}"#, ask.rate));
    hello.push(format!(r#"{{"t":"canvas","w":{},"h":{}}}"#, ask.canvas.0, ask.canvas.1));
    for m in hello {
        ws.send(Message::text(m)).map_err(|e| e.to_string())?;
    }
    let tungstenite::stream::MaybeTlsStream::Plain(s) = ws.get_mut() else {
        return Err("not plain TCP".into());
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(10)));
    // As a browser's socket: an acknowledgement goes at once.
    let _ = s.set_nodelay(true);
    // Acknowledgements go out through a second handle on the socket while a thread reads.
    let ws_out = tungstenite::WebSocket::from_raw_socket(
        s.try_clone().map_err(|e| e.to_string())?,
        tungstenite::protocol::Role::Client,
        None,
    );
    let (at_page, (arrivals, arrived)) = (AtPage::default(), channel());
    let reading = at_page.clone();
    std::thread::spawn(move || read_all(ws, reading, arrivals));
    Ok((ws_out, arrived, at_page))
}

/// Acknowledges `frame` as the page does (the frames `ahead` of it, where asked; none to viser).
fn acknowledge(ws: &mut Writer, ask: &Ask, at_page: &AtPage, frame: u64, ahead: usize) -> Result<(), String> {
    let mut q = lock(at_page);
    let acked = q.iter().position(|f| *f == frame).map_or(0, |at| at + 1);
    q.drain(..acked);
    drop(q);
    let ack = match (ask.server.0.as_str(), ask.ahead) {
        ("new", true) => format!(r#"{{"t":"ack","frame":{frame},"ahead":{ahead}}}"#),
        ("new", false) => format!(r#"{{"t":"ack","frame":{frame}}}"#),
        ("old", _) => r#"{"t":"ack"}"#.to_string(),
        _ => return Ok(()),
    };
    ws.send(Message::text(ack)).map_err(|e| e.to_string())
}

/// One client, for `secs` after the warm-up; `key` pauses the run (a page's space key) once asked.
fn watch(url: &str, ask: &Ask, psnr_jobs: Sender<PsnrJob>, seen: Arc<Mutex<Seen>>) -> Result<(), String> {
    let (mut ws_out, arrived, at_page) = open(url, ask)?;
    let (start, mut vp8) = (Instant::now(), Vp8Decoder::new()?);
    let (mut last_psnr, mut paused_at) = (Instant::now(), None::<Instant>);
    loop {
        let age = start.elapsed().as_secs_f64();
        if age > WARM + ask.secs + if ask.still { 5.0 } else { 0.0 } {
            return Ok(());
        }
        if ask.still && paused_at.is_none() && age > WARM + ask.secs {
            ws_out.send(Message::text(r#"{"t":"key","key":" "}"#)).map_err(|e| e.to_string())?;
            paused_at = Some(Instant::now());
        }
        let (arrived_at, since, ahead, m) =
            arrived.recv().map_err(|_| "reading: the connection ended".to_string())?;
        let b = match m {
            Message::Binary(b) => b,
            Message::Text(t) => {
                let mut s = lock(&seen);
                if ask.trace.is_some() {
                    let at = start.elapsed().as_secs_f64() * 1e3;
                    s.trace.push(format!(r#"{{"at":{at:.1},"status":{t}}}"#));
                }
                s.status = t.to_string();
                continue;
            }
            _ => continue,
        };
        let Header { kind, key, frame, width: w, height: h, stamp, quality } = header(&b)?;
        let arrived = (arrived_at.duration_since(start).as_secs_f64() * 1e3, since);
        let sample = age > WARM && paused_at.is_none() && last_psnr.elapsed() > Duration::from_millis(700);
        let shown = decode(kind, &b[HEADER..], &mut vp8, sample)?;
        let latency = now_us().saturating_sub(stamp) as f64 / 1000.0;
        acknowledge(&mut ws_out, ask, &at_page, frame, ahead)?;
        let mut s = lock(&seen);
        if ask.trace.is_some() {
            let at = start.elapsed().as_secs_f64() * 1e3;
            s.trace.push(format!(
                r#"{{"at":{:.1},"decoded":{at:.1},"frame":{frame},"kind":{},"key":{key},"size":[{w},{h}],"q":{quality},"bytes":{},"latency_arrived":{:.1},"latency":{latency:.1}}}"#,
                arrived.0,
                kind as u8,
                b.len(),
                arrived.1
            ));
        }
        if let Some(p) = paused_at.filter(|_| kind == Kind::Png && s.exact_after.is_none()) {
            s.exact_after = Some(p.elapsed().as_secs_f64());
        }
        if age > WARM && paused_at.is_none() {
            s.frames.push((Instant::now(), latency, b.len(), kind));
        }
        if let Some(shown) = shown.filter(|_| sample) {
            last_psnr = Instant::now();
            let _ = psnr_jobs.send((shown, (w, h), frame, seen.clone()));
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// CPU seconds (user + system) of `pid`.
fn cpu(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let fields: Vec<&str> = stat.rsplit(')').next().unwrap_or("").split_whitespace().collect();
    let ticks = |i: usize| fields.get(i).and_then(|f| f.parse::<f64>().ok()).unwrap_or(0.0);
    (ticks(11) + ticks(12)) / 100.0
}

fn percentile(v: &mut [f64], p: f64) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v.get(((v.len() as f64 - 1.0) * p).round() as usize).copied().unwrap_or(f64::NAN)
}

/// The drop's recovery: seconds from the drop until a second of frames whose p95 latency is under 200 ms.
fn recovery(frames: &[(Instant, f64, usize, Kind)], dropped: Instant) -> Option<f64> {
    let after: Vec<&(Instant, f64, usize, Kind)> = frames.iter().filter(|f| f.0 >= dropped).collect();
    for (i, f) in after.iter().enumerate() {
        let mut window: Vec<f64> =
            after[i..].iter().take_while(|g| g.0 < f.0 + Duration::from_secs(1)).map(|g| g.1).collect();
        if window.len() >= 5
            && after.last().is_some_and(|l| l.0 >= f.0 + Duration::from_secs(1))
            && percentile(&mut window, 0.95) < 200.0
        {
            return Some(f.0.duration_since(dropped).as_secs_f64());
        }
    }
    None
}

fn run() -> Result<(), String> {
    let ask = ask()?;
    let shaped = match ask.link {
        LinkAsk::Loopback => None,
        LinkAsk::Shaped { mbit, rtt } => Some((mbit, rtt)),
        LinkAsk::Drop { from, rtt, .. } => Some((from, rtt)),
    };
    if let Some(why) = shaped.and_then(|_| link::no_link()) {
        return Err(format!("a shaped link cannot be made here: {why}"));
    }
    let link = shaped.map(|(mbit, _)| link::Link::new(mbit)).transpose()?;
    let server = start(&ask, link.as_ref())?;
    let relay = match shaped {
        Some((mbit, rtt)) => {
            let bdp = (mbit * 1e6 / 8.0 * rtt / 1000.0) as usize;
            Some(link::Relay::start(
                "127.0.0.1:0",
                server.at,
                Duration::from_secs_f64(rtt / 2000.0),
                (2 * bdp).max(64 * 1024),
            )?)
        }
        None => None,
    };
    let at = relay.as_ref().map_or(server.at, |r| r.addr);
    let url =
        format!("ws://{at}/ws{}", server.token.as_ref().map(|t| format!("?token={t}")).unwrap_or_default());
    let (psnr_jobs, jobs) = channel::<PsnrJob>();
    let (canvas, scene) =
        (ask.canvas, Scene { kind: ask.scene, width: ask.size.0, height: ask.size.1, cost: ask.cost });
    // Scored once the clients are done (a frame every 0.7 s a client is kept till
    // then): julia drawn on the CPU on 8 threads beside them took cores from their
    // decode, the limit of a row as fast as it decodes (from bench-31 on).
    let scorer = std::thread::spawn(move || {
        let kept: Vec<PsnrJob> = jobs.iter().collect();
        for (shown, sent, frame, seen) in kept {
            let canvas = Extent2D { width: canvas.0, height: canvas.1 };
            let sent = Extent2D { width: sent.0, height: sent.1 };
            let p = psnr(&scaled(&shown.rgb(), sent, canvas), &scene, frame, canvas);
            lock(&seen).psnr.push(p);
        }
    });
    let cpu0 = (Instant::now(), cpu(server.child.id()));
    let seen: Vec<Arc<Mutex<Seen>>> = (0..ask.clients).map(|_| Arc::default()).collect();
    let ask = Arc::new(ask);
    let clients: Vec<_> = seen
        .iter()
        .map(|s| {
            let (url, ask, jobs, s) = (url.clone(), ask.clone(), psnr_jobs.clone(), s.clone());
            std::thread::spawn(move || watch(&url, &ask, jobs, s))
        })
        .collect();
    if ask.clients == 0 {
        // The producer alone: what the clients cost it is measured against this.
        std::thread::sleep(Duration::from_secs_f64(WARM + ask.secs));
    }
    let dropped = match (ask.link, &link) {
        (LinkAsk::Drop { to, .. }, Some(l)) => {
            std::thread::sleep(Duration::from_secs_f64(WARM + ask.secs / 2.0));
            l.set_rate(to)?;
            Some(Instant::now())
        }
        _ => None,
    };
    for c in clients {
        c.join().map_err(|_| "a client panicked")??;
    }
    let server_cpu = cpu(server.child.id()) - cpu0.1;
    drop(psnr_jobs);
    let _ = scorer.join();
    report(&ask, &seen, server_cpu, dropped, server)
}

/// Stops the server (SIGINT: vkcuda writes its summary) and prints the line.
fn report(
    ask: &Ask,
    seen: &[Arc<Mutex<Seen>>],
    server_cpu: f64,
    dropped: Option<Instant>,
    server: Server,
) -> Result<(), String> {
    let _ = Command::new("kill").args(["-INT", &server.child.id().to_string()]).status();
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut server = server;
    while server.child.try_wait().ok().flatten().is_none() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    let producer_fps = server
        .summary
        .as_ref()
        .and_then(|p| std::fs::read_to_string(p).ok())
        .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
        .and_then(|v| v["fps"].as_f64());
    let all: Vec<std::sync::MutexGuard<'_, Seen>> = seen.iter().map(|s| lock(s)).collect();
    if let (Some(path), Some(first)) = (&ask.trace, all.first()) {
        std::fs::write(path, first.trace.join("\n") + "\n").map_err(|e| format!("{path}: {e}"))?;
    }
    let frames: Vec<&(Instant, f64, usize, Kind)> = all.iter().flat_map(|s| s.frames.iter()).collect();
    let n = frames.len().max(1) as f64;
    let mut lat: Vec<f64> = frames.iter().map(|f| f.1).collect();
    let psnrs: Vec<f64> = all.iter().flat_map(|s| s.psnr.iter().map(|p| p.shown)).collect();
    let q80s: Vec<f64> = all.iter().flat_map(|s| s.psnr.iter().map(|p| p.jpeg_q80)).collect();
    let kinds: Vec<String> =
        Kind::ALL.iter().map(|k| format!("{}", frames.iter().filter(|f| f.3 == *k).count())).collect();
    let first = all.first();
    let recovered = dropped.zip(first).and_then(|(d, s)| recovery(&s.frames, d));
    // A recovery is a second of frames, so one later than this cannot be seen (null then).
    let seen_up_to = dropped
        .zip(first.and_then(|s| s.frames.last()))
        .map(|(d, l)| l.0.duration_since(d).as_secs_f64() - 1.0);
    let line = serde_json::json!({
        "server": ask.server.0, "link": format!("{}", describe(ask.link)), "canvas": format!("{}x{}", ask.canvas.0, ask.canvas.1),
        "size": format!("{}x{}", ask.size.0, ask.size.1), "scene": ask.scene.to_string(), "cost": ask.cost,
        "clients": ask.clients, "rate": ask.rate,
        "fps_per_client": n / ask.secs / ask.clients.max(1) as f64,
        "latency_p50_ms": percentile(&mut lat, 0.5), "latency_p95_ms": percentile(&mut lat, 0.95),
        "kb_per_frame": frames.iter().map(|f| f.2).sum::<usize>() as f64 / n / 1000.0,
        "mbit_per_client": frames.iter().map(|f| f.2).sum::<usize>() as f64 * 8.0 / 1e6 / ask.secs / ask.clients.max(1) as f64,
        "psnr_mean_db": psnrs.iter().sum::<f64>() / psnrs.len().max(1) as f64,
        "psnr_min_db": psnrs.iter().copied().fold(f64::INFINITY, f64::min),
        "psnr_q80_same_frames_db": q80s.iter().sum::<f64>() / q80s.len().max(1) as f64,
        "server_cpu_ms_per_frame": server_cpu * 1000.0 / n,
        "frames_raw_jpeg_vp8_png": kinds.join("/"),
        "exact_after_pause_s": first.and_then(|s| s.exact_after), "p95_under_200ms_after_drop_s": recovered,
        "recovery_seen_up_to_s": seen_up_to,
        "producer_fps": producer_fps,
        "last_status": first.map(|s| s.status.chars().take(400).collect::<String>()),
    });
    println!("{line}");
    Ok(())
}

fn describe(l: LinkAsk) -> String {
    match l {
        LinkAsk::Loopback => "loopback".into(),
        LinkAsk::Shaped { mbit, rtt } => format!("{mbit} Mbit/s, {rtt} ms"),
        LinkAsk::Drop { from, to, rtt } => format!("{from} -> {to} Mbit/s, {rtt} ms"),
    }
}
