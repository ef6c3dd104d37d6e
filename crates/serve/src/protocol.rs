//! One protocol for every page, typed both ways, to its leaves: the browser
//! page over its WebSocket and the notebook widget over Jupyter's comm send
//! the same JSON messages ([`FromPage`]) and get the same replies
//! ([`ToPage`]); frames come as binary messages, a [`Header`] and the image.
//! The page's one JavaScript client (client.js, embedded in the page and in
//! the widget) speaks it; the tests below hold it to these types (every
//! message it sends parses, every field it reads is sent). A message that
//! is malformed, or asks for what no page would (a canvas of 0 or 99999
//! pixels, a 100-character key), is an error: the connection that sent it
//! is closed.

use ash::vk;
use serde::{Deserialize, Serialize};

use crate::hub::Hub;
use crate::ladder::{Mode, DEFAULT_QUALITY};
use vkcuda_run::present::watch::Watchers;
use vkcuda_run::scene::SceneKind;

pub use crate::header::{Header, Kind, Size, HEADER, MAGIC};
pub use crate::hub::ClientStats;

/// The largest canvas a page may ask for, per side.
pub const MAX_CANVAS: u32 = 8192;

/// What the page's keys and pointer act on, and what the page is told of the run.
pub trait Controls: Send + Sync {
    /// A key pressed in the page (`KeyboardEvent.key`: `" "`, `"ArrowRight"`, `"+"`, `"r"`…).
    fn key(&self, key: &str);
    /// The pointer over a `canvas`-sized canvas (`None`: it left), and the buttons held.
    fn pointer(&self, canvas: vk::Extent2D, at: Option<CanvasPoint>, buttons: u32);
    /// The run's state for the page's status line.
    fn status(&self) -> RunStatus;
}

/// A point over the page's canvas, in its device pixels.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CanvasPoint {
    /// From the left.
    pub x: f64,
    /// From the top.
    pub y: f64,
}

impl CanvasPoint {
    /// The point a pointer message gives: both coordinates (finite), or neither (it left).
    fn of(x: Option<f64>, y: Option<f64>) -> Result<Option<Self>, String> {
        match (x, y) {
            (Some(x), Some(y)) if x.is_finite() && y.is_finite() => Ok(Some(Self { x, y })),
            (None, None) => Ok(None),
            _ => Err("a pointer position that is not two numbers".into()),
        }
    }
}

/// A frame pixel, `[x, y]` on the wire.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "[u32; 2]", into = "[u32; 2]")]
pub struct Pixel {
    /// Its column.
    pub x: u32,
    /// Its row.
    pub y: u32,
}

impl From<[u32; 2]> for Pixel {
    fn from([x, y]: [u32; 2]) -> Self {
        Self { x, y }
    }
}

impl From<Pixel> for [u32; 2] {
    fn from(p: Pixel) -> Self {
        [p.x, p.y]
    }
}

/// The run's state, for the page's status line (`run` in [`ToPage::Status`]):
/// what renders and why its frames stopped, if they did; a run a director
/// drives (the CLI's scenes and kernels) says its state too, a caller's
/// frames (Python's viewer) say no more.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunStatus {
    /// What renders: a scene's name, a kernel's file, `vkcuda.Viewer`.
    pub what: String,
    /// Why the producer's frames stopped (a kernel's fault, the caller's CUDA
    /// error), while it stands: the page says it over the last frame.
    pub error: Option<String>,
    /// The director's state, when one drives the run.
    #[serde(flatten, default, skip_serializing_if = "Option::is_none")]
    pub director: Option<DirectorStatus>,
}

/// What a director says of its run, beside [`RunStatus`]'s fields.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DirectorStatus {
    /// The scene (by its kernel's name: `julia`, `gradient`).
    #[serde(with = "scene_name")]
    pub scene: SceneKind,
    /// Whether the animation stands still.
    pub paused: bool,
    /// The animation's tick.
    pub tick: u32,
    /// The scene's iterations a pixel.
    pub cost: u32,
    /// The frames' size.
    pub size: Size,
    /// The frame pixel under a page's pointer (`None`: none is over the frame).
    pub pointer: Option<Pixel>,
    /// The buttons held (bit 0 left, 1 right, 2 middle).
    pub buttons: u32,
}

/// A scene by its kernel's name, as the status line says it.
mod scene_name {
    use serde::{de::Error, Deserialize, Deserializer, Serializer};
    use vkcuda_run::scene::SceneKind;

    pub fn serialize<S: Serializer>(kind: &SceneKind, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(kind.kernel_name())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<SceneKind, D::Error> {
        let name = String::deserialize(d)?;
        SceneKind::ALL
            .into_iter()
            .find(|k| k.kernel_name() == name)
            .ok_or_else(|| D::Error::custom(format!("an unknown scene '{name}'")))
    }
}

/// The mode a page names (`mode` in [`FromPage::Mode`]); JPEG's quality comes beside it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "&'static str")]
pub enum ModeName {
    /// Chosen for the link (VP8 or JPEG; exact pixels once the picture stops).
    Auto,
    /// JPEG, at the quality given.
    Jpeg,
    /// VP8.
    Video,
    /// PNG: lossless.
    Png,
    /// RGBA rows: lossless.
    Raw,
}

impl ModeName {
    /// Every mode.
    pub const ALL: [ModeName; 5] =
        [ModeName::Auto, ModeName::Jpeg, ModeName::Video, ModeName::Png, ModeName::Raw];

    /// Its name on the wire.
    pub fn name(self) -> &'static str {
        match self {
            ModeName::Auto => "auto",
            ModeName::Jpeg => "jpeg",
            ModeName::Video => "video",
            ModeName::Png => "png",
            ModeName::Raw => "raw",
        }
    }
}

/// What a page that names no mode, or a mode with a quality it does not take, is told.
fn no_such_mode(mode: &str) -> String {
    format!("mode '{}' (auto, jpeg with quality 1-100, video, png or raw)", clip(mode))
}

impl TryFrom<String> for ModeName {
    type Error = String;

    fn try_from(name: String) -> Result<Self, String> {
        Self::ALL.into_iter().find(|m| m.name() == name).ok_or_else(|| no_such_mode(&name))
    }
}

impl From<ModeName> for &'static str {
    fn from(m: ModeName) -> Self {
        m.name()
    }
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
        /// The mode.
        mode: ModeName,
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
        /// The run's own words (what renders, its error; a director's scene, whether it is paused…).
        run: RunStatus,
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
        FromPage::Mode { mode, quality } => hub.set_mode(id, mode_of(mode, quality)?),
        FromPage::Keyframe {} => hub.key_frame(id),
        FromPage::Key { key } if key.chars().count() <= 16 => match key.as_str() {
            "e" | "E" => hub.change_exposure(2.0),
            "d" | "D" => hub.change_exposure(0.5),
            _ => controls.key(&key),
        },
        FromPage::Key { key } => return Err(format!("key '{}…'", clip(&key))),
        FromPage::Pointer { x, y, buttons } => {
            // Before the page said its canvas, its pointer means nothing (and is not read).
            if let Some(canvas) = hub.canvas(id) {
                controls.pointer(canvas, CanvasPoint::of(x, y)?, buttons & 7);
            }
        }
        FromPage::Rate { fps } if (0.0..=1000.0).contains(&fps) => hub.set_rate(id, fps),
        FromPage::Rate { fps } => return Err(format!("a rate of {fps} frames a second (0 to 1000)")),
        FromPage::Ping { c } if c.is_finite() => return Ok(Then::Reply(ToPage::Pong { c })),
        FromPage::Ping { .. } => return Err("a ping that is not a number".into()),
        FromPage::Bye {} => return Ok(Then::Leave),
    }
    Ok(Then::Nothing)
}

/// The mode a page named, with the quality it gave.
fn mode_of(mode: ModeName, quality: Option<u8>) -> Result<Mode, String> {
    Ok(match (mode, quality) {
        (ModeName::Auto, None) => Mode::Auto,
        (ModeName::Jpeg, Some(q @ 1..=100)) => Mode::Jpeg { quality: q },
        (ModeName::Jpeg, None) => Mode::Jpeg { quality: DEFAULT_QUALITY },
        (ModeName::Video, None) => Mode::Video,
        (ModeName::Png, None) => Mode::Png,
        (ModeName::Raw, None) => Mode::Raw,
        _ => return Err(no_such_mode(mode.name())),
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

fn clip(s: &str) -> String {
    s.chars().take(16).collect()
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;
    use std::sync::Mutex;

    use serde_json::json;

    use super::*;

    /// The page's client, its page, the widget's view, and the Python module's
    /// widget and docs: what speaks this protocol.
    const CLIENT_JS: &str = include_str!("client.js");
    const PAGE_HTML: &str = include_str!("page.html");
    const WIDGET_JS: &str = include_str!("../../../python/vkcuda/widget.js");
    const WIDGET_PY: &str = include_str!("../../../python/vkcuda/_widget.py");
    const INIT_PY: &str = include_str!("../../../python/vkcuda/__init__.py");

    /// A message of every shape the page's client and the widget send: each
    /// shape client.js and widget.js send must be here (the test below), and
    /// each of these must parse and apply.
    const PAGE_SENDS: &[&str] = &[
        r#"{"t":"hello","video":["vp8"]}"#,
        r#"{"t":"hello","video":[]}"#,
        r#"{"t":"mode","mode":"auto"}"#,
        r#"{"t":"mode","mode":"jpeg","quality":80}"#,
        r#"{"t":"canvas","w":1280,"h":720}"#,
        r#"{"t":"rate","fps":60}"#,
        r#"{"t":"ack","frame":7,"ahead":0}"#,
        r#"{"t":"keyframe"}"#,
        r#"{"t":"key","key":"ArrowRight"}"#,
        r#"{"t":"pointer","x":10.5,"y":20.25,"buttons":1}"#,
        r#"{"t":"pointer","buttons":0}"#,
        r#"{"t":"ping","c":1234.5}"#,
        r#"{"t":"bye"}"#,
    ];

    /// The identifier characters of JavaScript and Python names.
    fn ident(c: char) -> bool {
        c.is_ascii_alphanumeric() || c == '_' || c == '$'
    }

    /// The `t` name and the field names of every object literal `{ t: "…", … }` in `js`.
    fn js_messages(js: &str) -> Vec<(String, BTreeSet<String>)> {
        let mut found = Vec::new();
        for (at, _) in js.match_indices("{ t: \"") {
            let body = &js[at + 1..];
            let (mut depth, mut end) = (0i32, None);
            for (i, c) in body.char_indices() {
                match c {
                    '(' | '[' | '{' => depth += 1,
                    ')' | ']' => depth -= 1,
                    '}' if depth == 0 => {
                        end = Some(i);
                        break;
                    }
                    '}' => depth -= 1,
                    _ => {}
                }
            }
            let body = &body[..end.expect("an object literal closes")];
            let (mut parts, mut depth, mut from) = (Vec::new(), 0i32, 0);
            for (i, c) in body.char_indices() {
                match c {
                    '(' | '[' | '{' => depth += 1,
                    ')' | ']' | '}' => depth -= 1,
                    ',' if depth == 0 => {
                        parts.push(&body[from..i]);
                        from = i + 1;
                    }
                    _ => {}
                }
            }
            parts.push(&body[from..]);
            let key = |p: &str| p.split(':').next().unwrap_or("").trim().to_string();
            let t = parts[0].split('"').nth(1).expect("t is a string").to_string();
            found.push((t, parts[1..].iter().map(|p| key(p)).collect()));
        }
        found
    }

    /// A JSON message's `t` and its other fields' names.
    fn shape(text: &str) -> (String, BTreeSet<String>) {
        let v: serde_json::Value = serde_json::from_str(text).unwrap();
        let m = v.as_object().unwrap();
        (m["t"].as_str().unwrap().to_string(), m.keys().filter(|k| *k != "t").cloned().collect())
    }

    /// The names after `prefix` in `src` (`run.` gives `what` of `run.what`), where
    /// `prefix` starts a name.
    fn names_after(src: &str, prefix: &str) -> BTreeSet<String> {
        src.match_indices(prefix)
            .filter(|(at, _)| !src[..*at].ends_with(ident))
            .map(|(at, _)| src[at + prefix.len()..].chars().take_while(|c| ident(*c)).collect::<String>())
            .filter(|n| !n.is_empty())
            .collect()
    }

    /// What a page's keys and pointer did.
    #[derive(Default)]
    struct Seen(Mutex<Vec<String>>);

    impl Controls for Seen {
        fn key(&self, key: &str) {
            self.0.lock().unwrap().push(format!("key {key}"));
        }
        fn pointer(&self, _: vk::Extent2D, at: Option<CanvasPoint>, buttons: u32) {
            self.0.lock().unwrap().push(format!("pointer {at:?} {buttons}"));
        }
        fn status(&self) -> RunStatus {
            RunStatus { what: "a test".into(), error: None, director: None }
        }
    }

    #[test]
    fn every_message_the_page_and_the_widget_send_is_a_from_page() {
        let examples: Vec<_> = PAGE_SENDS.iter().map(|m| shape(m)).collect();
        let sent: Vec<_> = [CLIENT_JS, WIDGET_JS].iter().flat_map(|js| js_messages(js)).collect();
        assert!(sent.len() >= 12, "client.js's and widget.js's messages are found: {sent:?}");
        for (t, fields) in &sent {
            assert!(
                examples.iter().any(|(et, ef)| et == t && ef == fields),
                "the page sends {t} with {fields:?}: PAGE_SENDS needs an example of it"
            );
        }
        for (t, fields) in &examples {
            assert!(sent.iter().any(|(st, sf)| st == t && sf == fields), "no page sends {t} with {fields:?}");
        }
        let hub = Hub::new(1);
        let id = hub.join().unwrap().id;
        let controls = Seen::default();
        for m in PAGE_SENDS {
            let parsed: FromPage = serde_json::from_str(m).unwrap_or_else(|e| panic!("{m}: {e}"));
            assert_eq!(
                serde_json::from_value::<FromPage>(serde_json::to_value(&parsed).unwrap()).unwrap(),
                parsed
            );
            match apply(&hub, &controls, id, m) {
                Ok(Then::Reply(ToPage::Pong { c })) => assert_eq!(c, 1234.5),
                Ok(Then::Leave) => assert_eq!(parsed, FromPage::Bye {}),
                Ok(_) => {}
                Err(e) => panic!("{m}: {e}"),
            }
        }
        let seen = controls.0.lock().unwrap();
        assert_eq!(
            *seen,
            ["key ArrowRight", "pointer Some(CanvasPoint { x: 10.5, y: 20.25 }) 1", "pointer None 0"],
            "the keys and the pointer reach the controls (after the canvas)"
        );
    }

    #[test]
    fn the_page_sends_only_keys_and_modes_the_protocol_takes() {
        let keys =
            CLIENT_JS.split("const VKCUDA_KEYS = new Set([").nth(1).unwrap().split("])").next().unwrap();
        for key in keys.split("\", \"").map(|k| k.trim_matches('"')) {
            let m = serde_json::to_string(&FromPage::Key { key: key.into() }).unwrap();
            assert_eq!(serde_json::from_str::<FromPage>(&m).unwrap(), FromPage::Key { key: key.into() });
            assert!(key.chars().count() <= 16, "{key}");
        }
        let modes: Vec<&str> =
            PAGE_HTML.split("<option value=\"").skip(1).map(|o| o.split('"').next().unwrap()).collect();
        assert_eq!(modes.len(), ModeName::ALL.len(), "the page offers every mode: {modes:?}");
        for mode in modes {
            let m = format!(r#"{{"t":"mode","mode":"{mode}"}}"#);
            assert!(matches!(serde_json::from_str::<FromPage>(&m), Ok(FromPage::Mode { .. })), "{m}");
        }
    }

    #[test]
    fn the_python_module_shows_and_reads_from_page_messages() {
        // The docs' examples: Python dict literals of strings and numbers, which are JSON.
        let literals: Vec<&str> = INIT_PY
            .match_indices("{\"t\": ")
            .map(|(at, _)| &INIT_PY[at..at + INIT_PY[at..].find('}').unwrap() + 1])
            .collect();
        assert!(literals.len() >= 3, "{literals:?}");
        for m in literals {
            serde_json::from_str::<FromPage>(m).unwrap_or_else(|e| panic!("__init__.py shows {m}: {e}"));
        }
        // The widget reads the `t` of what its views send, and writes none itself.
        let read = names_after(WIDGET_PY, "kind == \"");
        assert_eq!(read, ["bye", "hello"].map(String::from).into(), "_widget.py reads these");
        for t in read {
            assert!(
                PAGE_SENDS.iter().any(|m| shape(m).0 == t),
                "_widget.py reads '{t}', which no page sends"
            );
        }
        assert!(!WIDGET_PY.contains("{\"t\""), "_widget.py sends ToPage through the module");
    }

    /// A status of each kind of run: a director's (the CLI) and a caller's (Python).
    fn statuses() -> [RunStatus; 2] {
        let director = DirectorStatus {
            scene: SceneKind::Julia,
            paused: true,
            tick: 41,
            cost: 64,
            size: Size { width: 640, height: 360 },
            pointer: Some(Pixel { x: 3, y: 5 }),
            buttons: 1,
        };
        [
            RunStatus { what: "julia".into(), error: Some("a fault".into()), director: Some(director) },
            RunStatus { what: "vkcuda.Viewer".into(), error: None, director: None },
        ]
    }

    #[test]
    fn the_run_status_reads_back_and_says_what_it_said_before() {
        let [directed, fed] = statuses();
        // What controls.rs and python/src/serve.rs built with json! before the status was typed.
        let before = [
            json!({ "what": "julia", "scene": "julia", "paused": true, "tick": 41, "cost": 64,
                    "size": [640, 360], "pointer": [3, 5], "buttons": 1, "error": "a fault" }),
            json!({ "what": "vkcuda.Viewer", "error": null }),
        ];
        for (status, before) in [directed, fed].into_iter().zip(before) {
            assert_eq!(serde_json::to_value(&status).unwrap(), before);
            assert_eq!(serde_json::from_value::<RunStatus>(before).unwrap(), status);
        }
        let mut left = statuses()[0].clone();
        left.director.as_mut().unwrap().pointer = None;
        assert_eq!(serde_json::to_value(&left).unwrap()["pointer"], serde_json::Value::Null);
        assert_eq!(serde_json::from_value::<RunStatus>(serde_json::to_value(&left).unwrap()).unwrap(), left);
    }

    #[test]
    fn the_page_reads_only_what_the_status_sends() {
        let [directed, _] = statuses();
        let client = ClientStats { codec: Some(Kind::Vp8), capacity: Some(1e6), ..ClientStats::default() };
        let status = ToPage::Status { run: directed, client, clients: 2, exposure: 1.0 };
        let text = status.text();
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(serde_json::from_str::<ToPage>(&text).unwrap(), status);
        assert_eq!(
            (v["client"]["codec"].as_str(), v["client"]["size"].as_array().map(Vec::len)),
            (Some("vp8"), Some(2))
        );
        // client.js's and page.html's names for the status's parts (page.html's `s`, client.js's `me`).
        let (page, both) = (PAGE_HTML.to_string(), [CLIENT_JS, PAGE_HTML].concat());
        let client = CLIENT_JS.to_string();
        for (source, prefix, part) in
            [(&both, "run.", &v["run"]), (&client, "me.", &v["client"]), (&page, "s.", &v)]
        {
            let read = names_after(source, prefix);
            assert!(!read.is_empty(), "the page reads {prefix}…");
            for name in read {
                assert!(
                    part.get(&name).is_some(),
                    "the page reads {prefix}{name}, which the status does not send"
                );
            }
        }
        let replies = [
            status,
            ToPage::Pong { c: 1.0 },
            ToPage::Closed { reason: "the viewer closed".into() },
            ToPage::Frame {},
        ];
        let tags: BTreeSet<String> = replies.iter().map(|r| shape(&r.text()).0).collect();
        let read: BTreeSet<String> =
            [names_after(CLIENT_JS, "m.t === \""), names_after(WIDGET_JS, "msg.t === \"")]
                .into_iter()
                .flatten()
                .collect();
        assert_eq!(read, tags, "the page reads every ToPage, and only those");
    }

    #[test]
    fn a_mode_goes_by_its_name_and_a_malformed_one_is_refused_as_before() {
        for mode in ModeName::ALL {
            let text = serde_json::to_string(&mode).unwrap();
            assert_eq!(text, format!("\"{}\"", mode.name()));
            assert_eq!(serde_json::from_str::<ModeName>(&text).unwrap(), mode);
        }
        let words = "(auto, jpeg with quality 1-100, video, png or raw)";
        let e = serde_json::from_str::<FromPage>(r#"{"t":"mode","mode":"gif"}"#).unwrap_err().to_string();
        assert!(e.starts_with(&format!("mode 'gif' {words}")), "{e}");
        let long = format!(r#"{{"t":"mode","mode":"{}"}}"#, "x".repeat(40));
        let e = serde_json::from_str::<FromPage>(&long).unwrap_err().to_string();
        assert!(e.starts_with(&format!("mode '{}' {words}", "x".repeat(16))), "{e}");
        assert_eq!(mode_of(ModeName::Png, Some(3)), Err(format!("mode 'png' {words}")));
        assert_eq!(mode_of(ModeName::Jpeg, Some(0)), Err(format!("mode 'jpeg' {words}")));
        assert_eq!(mode_of(ModeName::Jpeg, None), Ok(Mode::Jpeg { quality: DEFAULT_QUALITY }));
        assert_eq!(mode_of(ModeName::Jpeg, Some(35)), Ok(Mode::Jpeg { quality: 35 }));
    }

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
        assert_eq!(
            CanvasPoint::of(Some(1.0), None),
            Err("a pointer position that is not two numbers".into())
        );
        assert!(CanvasPoint::of(Some(f64::NAN), Some(1.0)).is_err());
    }
}
