//! What a page sends and how the hub takes it: the browser page over its
//! WebSocket and the notebook widget over Jupyter's comm speak the same JSON
//! messages, so both are applied here. A message that is malformed, or asks
//! for what no page would (a canvas of 0 or 99999 pixels, a 100-character
//! key), is an error: the connection that sent it is closed.

use ash::vk;
use serde::Deserialize;

use crate::encode::Mode;
use crate::hub::Hub;
use vkcuda_run::present::watch::Watchers;

/// The largest canvas a page may ask for, per side.
pub const MAX_CANVAS: u32 = 8192;

/// What the page's keys and pointer act on, and what the page is told of the run.
pub trait Controls: Send + Sync {
    /// A key pressed in the page (`KeyboardEvent.key`: `" "`, `"ArrowRight"`, `"+"`, `"r"`…).
    fn key(&self, key: &str);
    /// The pointer over a `canvas`-sized canvas, in its pixels (`None`: it left), and the buttons held.
    fn pointer(&self, canvas: vk::Extent2D, at: Option<(f64, f64)>, buttons: u32);
    /// The run's state for the page's status line (a JSON object).
    fn status(&self) -> serde_json::Value;
}

/// What a page sends.
#[derive(Deserialize)]
#[serde(tag = "t", rename_all = "lowercase")]
enum FromPage {
    /// Its canvas, in device pixels.
    Canvas {
        w: u32,
        h: u32,
    },
    /// It decoded a frame.
    Ack {},
    /// JPEG at `quality`, or raw (`"raw"`).
    Mode {
        mode: String,
        quality: Option<u8>,
    },
    Key {
        key: String,
    },
    /// The pointer over the canvas (`x`, `y` absent: it left).
    Pointer {
        x: Option<f64>,
        y: Option<f64>,
        buttons: u32,
    },
    /// At most `fps` frames a second (the page's display rate); 0: no limit.
    Rate {
        fps: f64,
    },
    /// Echoed (the page's round-trip time).
    Ping {
        c: f64,
    },
}

/// What the connection does after a message.
pub enum Then {
    /// Nothing more.
    Nothing,
    /// Sends the client's waiting frames (it acknowledged one).
    SendFrames,
    /// Sends this text back.
    Reply(String),
}

/// Applies one message of client `id`; `Err`: it was malformed or unexpected.
pub fn apply(hub: &Hub, controls: &dyn Controls, id: u64, text: &str) -> Result<Then, String> {
    let message: FromPage = serde_json::from_str(text).map_err(|e| format!("a malformed message: {e}"))?;
    match message {
        FromPage::Canvas { w, h } => {
            if !(1..=MAX_CANVAS).contains(&w) || !(1..=MAX_CANVAS).contains(&h) {
                return Err(format!("a {w}x{h} canvas (1 to {MAX_CANVAS} a side)"));
            }
            hub.set_canvas(id, vk::Extent2D { width: w, height: h });
        }
        FromPage::Ack {} => {
            hub.ack(id);
            return Ok(Then::SendFrames);
        }
        FromPage::Mode { mode, quality } => {
            let mode = match (mode.as_str(), quality) {
                ("raw", _) => Mode::Raw,
                ("jpeg", Some(q @ 1..=100)) => Mode::Jpeg { quality: q },
                ("jpeg", None) => Mode::Jpeg { quality: 80 },
                _ => return Err(format!("mode '{}' (jpeg with quality 1-100, or raw)", clip(&mode))),
            };
            hub.set_mode(id, mode);
        }
        FromPage::Key { key } if key.chars().count() <= 16 => match key.as_str() {
            "e" | "E" => hub.change_exposure(2.0),
            "d" | "D" => hub.change_exposure(0.5),
            _ => controls.key(&key),
        },
        FromPage::Key { key } => return Err(format!("key '{}…'", clip(&key))),
        FromPage::Pointer { x, y, buttons } => pointer(hub, controls, id, (x, y), buttons)?,
        FromPage::Rate { fps } if (0.0..=1000.0).contains(&fps) => hub.set_rate(id, fps),
        FromPage::Rate { fps } => return Err(format!("a rate of {fps} frames a second (0 to 1000)")),
        FromPage::Ping { c } => {
            return Ok(Then::Reply(serde_json::json!({ "t": "pong", "c": c }).to_string()))
        }
    }
    Ok(Then::Nothing)
}

/// The status message for client `id`: the run's state, what it was sent, who watches.
pub fn status(hub: &Hub, controls: &dyn Controls, id: u64) -> String {
    let s = serde_json::json!({ "t": "status", "run": controls.status(), "client": hub.stats(id),
        "clients": hub.clients(), "exposure": hub.exposure() });
    s.to_string()
}

fn pointer(
    hub: &Hub,
    controls: &dyn Controls,
    id: u64,
    at: (Option<f64>, Option<f64>),
    buttons: u32,
) -> Result<(), String> {
    let Some(canvas) = hub.canvas(id) else { return Ok(()) };
    let at = match at {
        (Some(x), Some(y)) if x.is_finite() && y.is_finite() => Some((x, y)),
        (None, None) => None,
        _ => return Err("a pointer position that is not two numbers".into()),
    };
    controls.pointer(canvas, at, buttons & 7);
    Ok(())
}

fn clip(s: &str) -> String {
    s.chars().take(16).collect()
}
