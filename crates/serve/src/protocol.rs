//! One protocol for every page, typed both ways: the browser page over its
//! WebSocket and the notebook widget over Jupyter's comm send the same JSON
//! messages ([`FromPage`]) and get the same replies ([`ToPage`]); frames
//! come as binary messages, a [`Header`] and the image. The page's one
//! JavaScript client (client.js, embedded in the page and in the widget)
//! speaks it. A message that is malformed, or asks for what no page would
//! (a canvas of 0 or 99999 pixels, a 100-character key), is an error: the
//! connection that sent it is closed.

use ash::vk;
use serde::{Deserialize, Serialize};

use crate::hub::{ClientStats, Hub};
use crate::ladder::{Mode, DEFAULT_QUALITY};
use vkcuda_run::present::watch::Watchers;

pub use crate::header::{Header, Kind, HEADER, MAGIC};

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
#[derive(Debug, Deserialize, Serialize, PartialEq)]
#[serde(tag = "t", rename_all = "lowercase", deny_unknown_fields)]
pub enum FromPage {
    /// What it can decode besides JPEG and PNG (WebCodecs: `["vp8"]`; none on plain HTTP
    /// to another machine, which is not a secure context).
    Hello {
        /// Video codecs.
        video: Vec<String>,
    },
    /// Its canvas, in device pixels.
    Canvas {
        /// Width.
        w: u32,
        /// Height.
        h: u32,
    },
    /// It drew frame `frame`.
    Ack {
        /// The frame's number (the header's).
        frame: u64,
        /// The frames it had received and not yet acknowledged when this one
        /// arrived (0: its decoder was idle); absent from a page that does not count.
        #[serde(default)]
        ahead: Option<u32>,
    },
    /// What it wants: `auto`, `jpeg` (at `quality`), `video`, `png` (lossless) or `raw`.
    Mode {
        /// The mode's name.
        mode: String,
        /// JPEG's quality, 1–100.
        #[serde(default)]
        quality: Option<u8>,
    },
    /// Its video decoder needs a key frame (it was reset, or failed).
    Keyframe {},
    /// A key, as `KeyboardEvent.key` names it.
    Key {
        /// The key.
        key: String,
    },
    /// The pointer over the canvas (`x`, `y` absent: it left).
    Pointer {
        /// Canvas pixels.
        #[serde(default)]
        x: Option<f64>,
        /// Canvas pixels.
        #[serde(default)]
        y: Option<f64>,
        /// Buttons held (bit 0 left, 1 right, 2 middle).
        buttons: u32,
    },
    /// At most `fps` frames a second (the page's display rate); 0: no limit.
    Rate {
        /// Frames a second.
        fps: f64,
    },
    /// Echoed as [`ToPage::Pong`] (the page's round-trip time).
    Ping {
        /// The page's clock.
        c: f64,
    },
    /// The page's view went away (a widget's output was cleared or its cell run
    /// again): it wants no more frames.
    Bye {},
}

/// What a page is sent besides frames.
#[derive(Debug, Serialize, Deserialize, PartialEq)]
#[serde(tag = "t", rename_all = "lowercase")]
pub enum ToPage {
    /// The run's state, what this page is sent and how, and who watches.
    Status {
        /// The run's own words (its scene, whether it is paused…).
        run: serde_json::Value,
        /// What this page was sent, and the stream's current choice.
        client: ClientStats,
        /// Pages and widgets watching.
        clients: usize,
        /// The draw's exposure.
        exposure: f32,
    },
    /// The reply to a ping.
    Pong {
        /// The ping's clock.
        c: f64,
    },
    /// The viewer closed (the widget; a page's socket closes instead).
    Closed {
        /// Why.
        reason: String,
    },
    /// A frame follows as the message's buffer (the widget's comm has no binary messages of its own).
    Frame {},
}

impl ToPage {
    /// As JSON text.
    pub fn text(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }
}

/// What the connection does after a message.
pub enum Then {
    /// Nothing more.
    Nothing,
    /// Sends the client's waiting frames (it acknowledged one).
    SendFrames,
    /// Sends this back.
    Reply(ToPage),
    /// Closes the client: its view went away.
    Leave,
}

/// Applies one message of client `id`; `Err`: it was malformed or unexpected.
pub fn apply(hub: &Hub, controls: &dyn Controls, id: u64, text: &str) -> Result<Then, String> {
    let message: FromPage = serde_json::from_str(text).map_err(|e| format!("a malformed message: {e}"))?;
    match message {
        FromPage::Hello { video } if video.len() <= 8 => hub.set_video(id, video.iter().any(|c| c == "vp8")),
        FromPage::Hello { .. } => return Err("more than 8 codecs".into()),
        FromPage::Canvas { w, h } => {
            if !(1..=MAX_CANVAS).contains(&w) || !(1..=MAX_CANVAS).contains(&h) {
                return Err(format!("a {w}x{h} canvas (1 to {MAX_CANVAS} a side)"));
            }
            hub.set_canvas(id, vk::Extent2D { width: w, height: h });
        }
        FromPage::Ack { frame, ahead } => {
            hub.ack(id, frame, ahead);
            return Ok(Then::SendFrames);
        }
        FromPage::Mode { mode, quality } => hub.set_mode(id, mode_of(&mode, quality)?),
        FromPage::Keyframe {} => hub.key_frame(id),
        FromPage::Key { key } if key.chars().count() <= 16 => match key.as_str() {
            "e" | "E" => hub.change_exposure(2.0),
            "d" | "D" => hub.change_exposure(0.5),
            _ => controls.key(&key),
        },
        FromPage::Key { key } => return Err(format!("key '{}…'", clip(&key))),
        FromPage::Pointer { x, y, buttons } => pointer(hub, controls, id, (x, y), buttons)?,
        FromPage::Rate { fps } if (0.0..=1000.0).contains(&fps) => hub.set_rate(id, fps),
        FromPage::Rate { fps } => return Err(format!("a rate of {fps} frames a second (0 to 1000)")),
        FromPage::Ping { c } if c.is_finite() => return Ok(Then::Reply(ToPage::Pong { c })),
        FromPage::Ping { .. } => return Err("a ping that is not a number".into()),
        FromPage::Bye {} => return Ok(Then::Leave),
    }
    Ok(Then::Nothing)
}

/// The mode a page named.
fn mode_of(mode: &str, quality: Option<u8>) -> Result<Mode, String> {
    Ok(match (mode, quality) {
        ("auto", None) => Mode::Auto,
        ("jpeg", Some(q @ 1..=100)) => Mode::Jpeg { quality: q },
        ("jpeg", None) => Mode::Jpeg { quality: DEFAULT_QUALITY },
        ("video", None) => Mode::Video,
        ("png", None) => Mode::Png,
        ("raw", None) => Mode::Raw,
        _ => return Err(format!("mode '{}' (auto, jpeg with quality 1-100, video, png or raw)", clip(mode))),
    })
}

/// The status message for client `id`: the run's state, what it was sent, who watches.
pub fn status(hub: &Hub, controls: &dyn Controls, id: u64) -> ToPage {
    ToPage::Status {
        run: controls.status(),
        client: hub.stats(id),
        clients: hub.clients(),
        exposure: hub.exposure(),
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_are_typed_both_ways() {
        let m: FromPage = serde_json::from_str(r#"{"t":"pointer","buttons":1}"#).unwrap();
        assert_eq!(m, FromPage::Pointer { x: None, y: None, buttons: 1 });
        assert!(serde_json::from_str::<FromPage>(r#"{"t":"ack","frame":1,"extra":2}"#).is_err());
        let m: FromPage = serde_json::from_str(r#"{"t":"ack","frame":3,"ahead":1}"#).unwrap();
        assert_eq!(m, FromPage::Ack { frame: 3, ahead: Some(1) });
        let m: FromPage = serde_json::from_str(r#"{"t":"ack","frame":3}"#).unwrap();
        assert_eq!(m, FromPage::Ack { frame: 3, ahead: None });
        assert!(serde_json::from_str::<FromPage>(r#"{"t":"ack","frame":3,"ahead":-1}"#).is_err());
        assert_eq!(ToPage::Pong { c: 1.5 }.text(), r#"{"t":"pong","c":1.5}"#);
        assert_eq!(ToPage::Frame {}.text(), r#"{"t":"frame"}"#);
        assert_eq!(mode_of("jpeg", None), Ok(Mode::Jpeg { quality: DEFAULT_QUALITY }));
        assert!(mode_of("jpeg", Some(0)).is_err());
        assert!(mode_of("png", Some(3)).is_err());
    }
}
