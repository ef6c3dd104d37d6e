//! A real browser for the tests: Debian's Chromium, headless, driven over
//! the DevTools protocol (one WebSocket, the page attached in flat mode),
//! and a plain WebSocket client of the view's stream.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tungstenite::stream::MaybeTlsStream;
use tungstenite::{Message, WebSocket};
use vkcuda_serve::protocol::{Header, HEADER};

type Socket = WebSocket<MaybeTlsStream<TcpStream>>;

/// Why the browser tests cannot run here, if they cannot.
pub fn no_chromium() -> Option<String> {
    (!std::path::Path::new(CHROMIUM).exists()).then(|| format!("no {CHROMIUM} (Debian's chromium package)"))
}

const CHROMIUM: &str = "/usr/bin/chromium";

/// A canvas's pixels, its size and the frame it shows.
pub type Shown = (Vec<u8>, (u32, u32), u64);

/// A headless Chromium with one page, closed when dropped.
pub struct Browser {
    child: Child,
    socket: Socket,
    session: String,
    next_id: u64,
    profile: std::path::PathBuf,
}

impl Browser {
    /// Starts Chromium with a `width`×`height` window (CSS pixels, scale 1) and opens `url`.
    pub fn open(url: &str, (width, height): (u32, u32)) -> Result<Self, String> {
        static OPENED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let profile =
            super::tmp(&format!("chromium-{}", OPENED.fetch_add(1, std::sync::atomic::Ordering::Relaxed)));
        let mut child = Command::new(CHROMIUM)
            .args(["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run"])
            .args(["--disable-background-networking", "--disable-component-update", "--disable-sync"])
            .args(["--remote-debugging-port=0", "--force-device-scale-factor=1", "--hide-scrollbars"])
            .arg(format!("--window-size={width},{height}"))
            .arg(format!("--user-data-dir={}", profile.display()))
            .arg("about:blank")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("starting {CHROMIUM}: {e}"))?;
        let endpoint = devtools_endpoint(&mut child)?;
        let (socket, _) = tungstenite::connect(&endpoint).map_err(|e| format!("DevTools {endpoint}: {e}"))?;
        let mut b = Self { child, socket, session: String::new(), next_id: 0, profile };
        let target = b.call("Target.createTarget", json!({ "url": "about:blank" }))?;
        let target = target["targetId"].as_str().ok_or("no targetId")?.to_string();
        let attached = b.call("Target.attachToTarget", json!({ "targetId": target, "flatten": true }))?;
        b.session = attached["sessionId"].as_str().ok_or("no sessionId")?.to_string();
        b.resize(width, height)?;
        b.call("Page.navigate", json!({ "url": url }))?;
        Ok(b)
    }

    /// A DevTools command on the page (or, before it is attached, the browser); its result.
    pub fn call(&mut self, method: &str, params: Value) -> Result<Value, String> {
        self.next_id += 1;
        let id = self.next_id;
        let mut m = json!({ "id": id, "method": method, "params": params });
        if !self.session.is_empty() {
            m["sessionId"] = json!(self.session);
        }
        self.socket.send(Message::text(m.to_string())).map_err(|e| format!("{method}: {e}"))?;
        loop {
            let reply = self.socket.read().map_err(|e| format!("{method}: {e}"))?;
            let Ok(reply) = serde_json::from_str::<Value>(reply.to_text().unwrap_or("{}")) else { continue };
            if reply["id"].as_u64() == Some(id) {
                if let Some(e) = reply.get("error") {
                    return Err(format!("{method}: {e}"));
                }
                return Ok(reply["result"].clone());
            }
        }
    }

    /// The value of a JavaScript expression in the page (promises awaited).
    pub fn eval(&mut self, expression: &str) -> Result<Value, String> {
        let r = self.call(
            "Runtime.evaluate",
            json!({ "expression": expression, "returnByValue": true, "awaitPromise": true }),
        )?;
        if let Some(e) = r.get("exceptionDetails") {
            return Err(format!("{expression}: {e}"));
        }
        Ok(r["result"]["value"].clone())
    }

    /// Waits until `expression` is truthy (at most `secs` seconds); its value then.
    pub fn wait_for(&mut self, expression: &str, secs: u64) -> Result<Value, String> {
        let deadline = Instant::now() + Duration::from_secs(secs);
        loop {
            let v = self.eval(expression)?;
            if !(v.is_null() || v == json!(false) || v == json!(0) || v == json!("")) {
                return Ok(v);
            }
            if Instant::now() > deadline {
                let state = self.eval("JSON.stringify(window.vkcuda || null)").unwrap_or_default();
                return Err(format!("not true after {secs} s: {expression}\npage state: {state}"));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Makes the page `width`×`height` CSS pixels at scale 1.
    pub fn resize(&mut self, width: u32, height: u32) -> Result<(), String> {
        let metrics = json!({ "width": width, "height": height, "deviceScaleFactor": 1, "mobile": false });
        self.call("Emulation.setDeviceMetricsOverride", metrics).map(|_| ())
    }

    /// Presses and releases a key, as `KeyboardEvent.key` names it.
    pub fn press(&mut self, key: &str) -> Result<(), String> {
        let (code, vk) = match key {
            " " => ("Space", 32),
            "ArrowRight" => ("ArrowRight", 39),
            "ArrowLeft" => ("ArrowLeft", 37),
            k => (k, k.chars().next().map_or(0, |c| c.to_ascii_uppercase() as u32)),
        };
        let text = if key.chars().count() == 1 { key } else { "" };
        for kind in ["keyDown", "keyUp"] {
            let e =
                json!({ "type": kind, "key": key, "code": code, "windowsVirtualKeyCode": vk, "text": text });
            self.call("Input.dispatchKeyEvent", e)?;
        }
        Ok(())
    }

    /// Moves the mouse to (`x`, `y`) CSS pixels with `buttons` held (bit 0 left).
    pub fn mouse(&mut self, (x, y): (f64, f64), buttons: u32) -> Result<(), String> {
        let e = json!({ "type": "mouseMoved", "x": x, "y": y, "buttons": buttons,
            "button": if buttons & 1 == 1 { "left" } else { "none" } });
        self.call("Input.dispatchMouseEvent", e).map(|_| ())
    }

    /// The canvas's pixels (RGBA rows), its size, and the frame shown, read at one moment.
    pub fn canvas(&mut self) -> Result<Shown, String> {
        let v = self.eval(
            "(() => { const c = document.getElementById('view');
              const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
              let s = ''; for (let i = 0; i < d.length; i += 32768) s += String.fromCharCode.apply(null, d.subarray(i, i + 32768));
              return { w: c.width, h: c.height, frame: window.vkcuda.last ? window.vkcuda.last.frame : -1, data: btoa(s) }; })()",
        )?;
        let data = base64(v["data"].as_str().ok_or("no canvas data")?)?;
        let size = (v["w"].as_u64().unwrap_or(0) as u32, v["h"].as_u64().unwrap_or(0) as u32);
        Ok((data, size, v["frame"].as_u64().ok_or("no frame shown")?))
    }

    /// A PNG screenshot of the page.
    pub fn screenshot(&mut self) -> Result<Vec<u8>, String> {
        let r = self.call("Page.captureScreenshot", json!({ "format": "png" }))?;
        base64(r["data"].as_str().ok_or("no screenshot")?)
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.profile);
    }
}

/// The browser's DevTools WebSocket, from the line Chromium prints.
fn devtools_endpoint(child: &mut Child) -> Result<String, String> {
    let mut stderr = child.stderr.take().ok_or("no stderr")?;
    let mut seen = String::new();
    let mut byte = [0u8; 1];
    let deadline = Instant::now() + Duration::from_secs(30);
    while Instant::now() < deadline && stderr.read(&mut byte).map_err(|e| e.to_string())? == 1 {
        seen.push(byte[0] as char);
        if let Some(at) = seen.find("DevTools listening on ") {
            if let Some(line) = seen[at..].lines().next().filter(|_| seen.ends_with('\n')) {
                let url = line.trim_start_matches("DevTools listening on ").trim().to_string();
                // The rest of its output is not read: it goes nowhere.
                std::thread::spawn(move || std::io::copy(&mut stderr, &mut std::io::sink()));
                return Ok(url);
            }
        }
    }
    Err(format!("Chromium printed no DevTools address:\n{seen}"))
}

fn base64(s: &str) -> Result<Vec<u8>, String> {
    let value = |c: u8| match c {
        b'A'..=b'Z' => Some(c - b'A'),
        b'a'..=b'z' => Some(c - b'a' + 26),
        b'0'..=b'9' => Some(c - b'0' + 52),
        b'+' => Some(62),
        b'/' => Some(63),
        _ => None,
    };
    let mut out = Vec::with_capacity(s.len() * 3 / 4);
    for chunk in s.trim_end_matches('=').as_bytes().chunks(4) {
        let v: Vec<u8> = chunk.iter().map(|&c| value(c).ok_or("not base64")).collect::<Result<_, _>>()?;
        let n = v.iter().enumerate().fold(0u32, |n, (i, &b)| n | u32::from(b) << (18 - 6 * i));
        out.extend_from_slice(&n.to_be_bytes()[1..v.len()]);
    }
    Ok(out)
}

/// A client of the view's stream: says its canvas, reads frames, acknowledges each.
pub struct Viewer {
    pub socket: Socket,
}

/// A frame the stream sent: its header and its payload.
pub struct Frame {
    pub header: Header,
    pub payload: Vec<u8>,
}

impl Frame {
    /// The run's frame.
    pub fn frame(&self) -> u64 {
        self.header.frame
    }

    /// The size it was sent at.
    pub fn size(&self) -> (u32, u32) {
        (self.header.width, self.header.height)
    }
}

impl Viewer {
    /// Connects to the view at `port` (with `token`) and asks for `canvas`-sized frames in `mode`.
    pub fn connect(port: u16, token: Option<&str>, canvas: (u32, u32), mode: &str) -> Result<Self, String> {
        let url = match token {
            Some(t) => format!("ws://127.0.0.1:{port}/ws?token={t}"),
            None => format!("ws://127.0.0.1:{port}/ws"),
        };
        let (mut socket, _) = tungstenite::connect(&url).map_err(|e| format!("{url}: {e}"))?;
        if let MaybeTlsStream::Plain(s) = socket.get_mut() {
            let _ = s.set_read_timeout(Some(Duration::from_secs(30)));
        }
        let hello =
            [json!({ "t": "mode", "mode": mode }), json!({ "t": "canvas", "w": canvas.0, "h": canvas.1 })];
        for m in hello {
            socket.send(Message::text(m.to_string())).map_err(|e| e.to_string())?;
        }
        Ok(Self { socket })
    }

    /// The next frame (status messages skipped), acknowledged.
    pub fn frame(&mut self) -> Result<Frame, String> {
        loop {
            match self.socket.read().map_err(|e| format!("reading a frame: {e}"))? {
                Message::Binary(b) => {
                    let header = Header::parse(&b).map_err(|e| e.to_string())?;
                    let ack = json!({ "t": "ack", "frame": header.frame }).to_string();
                    self.socket.send(Message::text(ack)).map_err(|e| e.to_string())?;
                    return Ok(Frame { header, payload: b[HEADER..].to_vec() });
                }
                Message::Close(c) => return Err(format!("closed: {c:?}")),
                _ => {}
            }
        }
    }
}

/// A raw HTTP/1.1 exchange with the view: the status code of the answer to `request`.
pub fn http_status(port: u16, request: &str) -> Result<u16, String> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).map_err(|e| e.to_string())?;
    s.set_read_timeout(Some(Duration::from_secs(10))).map_err(|e| e.to_string())?;
    s.write_all(request.as_bytes()).map_err(|e| e.to_string())?;
    let mut head = [0u8; 12];
    s.read_exact(&mut head).map_err(|e| format!("no answer to {request:?}: {e}"))?;
    let text = String::from_utf8_lossy(&head);
    text.get(9..12).and_then(|c| c.parse().ok()).ok_or_else(|| format!("not HTTP: {text}"))
}

/// A raw HTTP/1.1 exchange with the view: the answer's head (status line and headers).
pub fn response_head(port: u16, request: &str) -> Result<String, String> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).map_err(|e| e.to_string())?;
    s.set_read_timeout(Some(Duration::from_secs(10))).map_err(|e| e.to_string())?;
    s.write_all(request.as_bytes()).map_err(|e| e.to_string())?;
    let mut answer = Vec::new();
    let mut byte = [0u8; 1];
    while !answer.ends_with(b"\r\n\r\n") && answer.len() < 16384 {
        s.read_exact(&mut byte).map_err(|e| format!("no whole head in answer to {request:?}: {e}"))?;
        answer.push(byte[0]);
    }
    Ok(String::from_utf8_lossy(&answer).into_owned())
}
