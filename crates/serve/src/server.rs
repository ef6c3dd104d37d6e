//! The HTTP and WebSocket server (axum on a tokio runtime of its own
//! thread): the embedded page at `/`, the stream at `/ws`, nothing else.
//!
//! The door: every request is `GET`; on loopback its `Host` must name
//! loopback (no DNS rebinding); anywhere else it must carry the token; the
//! WebSocket upgrade checks `Origin` (no cross-site page may open the stream);
//! a message is at most [`MAX_MESSAGE`] bytes, and a malformed or unexpected one
//! closes that client with one log line.

use std::net::SocketAddr;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use anyhow::Result;
use axum::extract::ws::{CloseFrame, Message, WebSocket, WebSocketUpgrade};
use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, Method, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use futures_util::stream::SplitSink;
use futures_util::{SinkExt, StreamExt};
use tokio::sync::{mpsc, watch, Notify};

use crate::address::{Bound, Token};
use crate::hub::Hub;
use crate::protocol::{self, Controls, Then};

/// The longest message a page may send.
pub const MAX_MESSAGE: usize = 4096;
/// How often a page is told the run's state.
const STATUS_EVERY: Duration = Duration::from_millis(500);
/// A client whose socket takes a frame no faster than this is closed.
const SEND_TIMEOUT: Duration = Duration::from_secs(20);
/// How long a stop waits for the clients to be told.
const STOP_GRACE: Duration = Duration::from_secs(3);

static PAGE: &str = include_str!("page.html");

#[derive(Clone)]
struct App {
    hub: Arc<Hub>,
    controls: Arc<dyn Controls>,
    token: Option<Token>,
    closing: watch::Receiver<bool>,
    /// Held by every copy (each client's task has one): the stop waits until all are gone.
    _alive: mpsc::Sender<()>,
}

/// A running server; stopping it (or dropping it) closes every client and frees the port.
pub struct Server {
    url: String,
    at: SocketAddr,
    stop: Option<watch::Sender<bool>>,
    thread: Option<JoinHandle<()>>,
}

impl Server {
    /// Serves the page and `hub`'s frames on `bound`, keys and pointer to `controls`.
    pub fn start(bound: Bound, hub: Arc<Hub>, controls: Arc<dyn Controls>) -> Result<Server> {
        let (url, at) = (bound.url(), bound.at);
        let (stop, closing) = watch::channel(false);
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("vkcuda server")
            .enable_all()
            .build()?;
        let (alive, gone) = mpsc::channel(1);
        let app = App { hub, controls, token: bound.token, closing, _alive: alive };
        let listener = bound.listener;
        let thread = std::thread::Builder::new().name("vkcuda server".into()).spawn(move || {
            runtime.block_on(serve(listener, app, gone));
            runtime.shutdown_timeout(STOP_GRACE);
        })?;
        Ok(Server { url, at, stop: Some(stop), thread: Some(thread) })
    }

    /// The page's URL (with the token, when one is needed).
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The address it listens on.
    pub fn address(&self) -> SocketAddr {
        self.at
    }

    /// Closes every client and stops listening; the port is free when this returns.
    pub fn stop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(true);
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Serves until told to stop, then gives the clients [`STOP_GRACE`] to be told and
/// go (`gone` ends when the last copy of the app, a client's, is dropped).
async fn serve(listener: std::net::TcpListener, app: App, mut gone: mpsc::Receiver<()>) {
    let listener = match tokio::net::TcpListener::from_std(listener) {
        Ok(l) => l,
        Err(e) => return log::error!("vkcuda: the view cannot listen: {e}"),
    };
    let (mut closing, mut after) = (app.closing.clone(), app.closing.clone());
    let router = Router::new()
        .route("/", get(page))
        .route("/ws", get(stream))
        .fallback(|| async { (StatusCode::NOT_FOUND, "not found") })
        .layer(middleware::from_fn_with_state(app.clone(), guard))
        .with_state(app);
    let serving = axum::serve(listener, router).with_graceful_shutdown(async move {
        let _ = closing.wait_for(|c| *c).await;
    });
    let grace = async move {
        let _ = after.wait_for(|c| *c).await;
        tokio::time::sleep(STOP_GRACE).await;
    };
    tokio::select! {
        served = serving => if let Err(e) = served { log::warn!("vkcuda: the view stopped: {e}") },
        () = grace => {}
    }
    // Upgraded connections are not the HTTP server's to wait for: a client still sending
    // its close frame would be cut (a reset) when the runtime shuts down.
    let _ = tokio::time::timeout(STOP_GRACE, gone.recv()).await;
}

/// Every request: `GET` (or `HEAD`), a loopback `Host` on loopback, the token where one is needed.
async fn guard(State(app): State<App>, request: Request, next: Next) -> Response {
    if request.method() != Method::GET && request.method() != Method::HEAD {
        return (StatusCode::METHOD_NOT_ALLOWED, "only GET").into_response();
    }
    let allowed = match &app.token {
        Some(token) => query_token(request.uri().query()).is_some_and(|t| token.matches(t)),
        None => host_is_loopback(request.headers()),
    };
    match allowed {
        true => next.run(request).await,
        false => (StatusCode::FORBIDDEN, "forbidden").into_response(),
    }
}

/// The `token` parameter of a query string.
fn query_token(query: Option<&str>) -> Option<&str> {
    query?.split('&').find_map(|kv| kv.strip_prefix("token="))
}

/// Whether the `Host` header names loopback (`localhost`, `127.0.0.1`, `[::1]`; any port:
/// an `ssh -L` tunnel may use another).
fn host_is_loopback(headers: &HeaderMap) -> bool {
    let Some(host) = headers.get(header::HOST).and_then(|h| h.to_str().ok()) else { return false };
    let name = match host.rsplit_once(':') {
        Some((name, port)) if port.bytes().all(|b| b.is_ascii_digit()) => name,
        _ => host,
    };
    matches!(name, "localhost" | "127.0.0.1" | "[::1]")
}

/// Whether a WebSocket upgrade comes from the page itself: no `Origin`
/// (not a browser) or `http://` + its own `Host`.
fn same_origin(headers: &HeaderMap) -> bool {
    let Some(origin) = headers.get(header::ORIGIN) else { return true };
    let host = headers.get(header::HOST).and_then(|h| h.to_str().ok());
    match (origin.to_str().ok(), host) {
        (Some(origin), Some(host)) => origin.strip_prefix("http://") == Some(host),
        _ => false,
    }
}

async fn page() -> Response {
    let headers = [
        (header::CONTENT_TYPE, "text/html; charset=utf-8"),
        (header::CACHE_CONTROL, "no-store"),
        (header::REFERRER_POLICY, "no-referrer"),
        (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
    ];
    (headers, Html(PAGE)).into_response()
}

async fn stream(State(app): State<App>, headers: HeaderMap, upgrade: WebSocketUpgrade) -> Response {
    if !same_origin(&headers) {
        return (StatusCode::FORBIDDEN, "forbidden: another site's page").into_response();
    }
    let Some((id, wake)) = app.hub.join() else {
        return (StatusCode::SERVICE_UNAVAILABLE, "too many viewers").into_response();
    };
    let hub = app.hub.clone();
    upgrade
        .max_message_size(MAX_MESSAGE)
        .max_frame_size(MAX_MESSAGE)
        .on_failed_upgrade(move |_| hub.leave(id))
        .on_upgrade(move |socket| async move {
            let hub = app.hub.clone();
            if let Err(why) = client(socket, app, id, wake).await {
                log::warn!("vkcuda: browser client {id} closed: {why}");
            }
            hub.leave(id);
        })
}

type Sink = SplitSink<WebSocket, Message>;

/// One client's socket until it closes or the server stops: its messages
/// in, its frames and the run's state out. `Err`: why it was closed.
async fn client(socket: WebSocket, app: App, id: u64, wake: Arc<Notify>) -> Result<(), String> {
    let (mut tx, mut rx) = socket.split();
    let mut status = tokio::time::interval(STATUS_EVERY);
    let mut closing = app.closing.clone();
    let result = loop {
        tokio::select! {
            m = rx.next() => match m {
                Some(Ok(Message::Text(text))) => {
                    if let Err(why) = handle(&app, id, &text, &mut tx).await {
                        break Err(why);
                    }
                }
                Some(Ok(Message::Binary(_))) => break Err("a binary message (the page sends none)".into()),
                Some(Ok(Message::Ping(_) | Message::Pong(_))) => {}
                Some(Ok(Message::Close(_))) | None => return Ok(()),
                Some(Err(e)) => break Err(format!("{e}")),
            },
            _ = wake.notified() => send_frames(&app.hub, id, &mut tx).await?,
            _ = status.tick() => {
                let status = protocol::status(&app.hub, &*app.controls, id);
                send(&mut tx, Message::Text(status.into())).await?;
            }
            _ = closing.changed() => break Ok(()),
        }
    };
    let (code, reason) = match &result {
        Ok(()) => (1001, "the run ended".to_string()),
        Err(why) => (1008, why.chars().take(100).collect()),
    };
    let _ = send(&mut tx, Message::Close(Some(CloseFrame { code, reason: reason.into() }))).await;
    result
}

/// Sends the client's waiting frames, as many as it may have unacknowledged.
async fn send_frames(hub: &Hub, id: u64, tx: &mut Sink) -> Result<(), String> {
    while let Some(frame) = hub.next_for(id) {
        send(tx, Message::Binary(frame.bytes)).await?;
    }
    Ok(())
}

async fn send(tx: &mut Sink, m: Message) -> Result<(), String> {
    match tokio::time::timeout(SEND_TIMEOUT, tx.send(m)).await {
        Ok(sent) => sent.map_err(|e| format!("{e}")),
        Err(_) => Err(format!("took no data for {} s", SEND_TIMEOUT.as_secs())),
    }
}

/// One message from the page; `Err`: it was malformed or unexpected.
async fn handle(app: &App, id: u64, text: &str, tx: &mut Sink) -> Result<(), String> {
    match protocol::apply(&app.hub, &*app.controls, id, text)? {
        Then::Nothing => Ok(()),
        Then::SendFrames => send_frames(&app.hub, id, tx).await,
        Then::Reply(text) => send(tx, Message::Text(text.into())).await,
    }
}
