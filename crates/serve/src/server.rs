//! The HTTP and WebSocket server (axum's router on hyper, a tokio runtime
//! of its own thread): the embedded page at `/` (the client module inside
//! it), the stream at `ws` beside it, nothing else. Every URL the page uses
//! is relative, so it works behind a proxy that serves it under a prefix
//! (JupyterHub's `/user/NAME/proxy/PORT/`).
//!
//! The door:
//! - every request is `GET` (or `HEAD`), with one `Host` header;
//! - it carries the token (`?token=`), or the server listens on loopback and
//!   the `Host` names loopback (no DNS rebinding). Only someone who was given
//!   the page's URL knows the token (128 random bits, compared in constant
//!   time); a page that another server forwards (JupyterHub's proxy, whose
//!   `Host` is the hub's) comes in with it;
//! - a WebSocket's `Origin` is the page's own: `http://` or `https://` and
//!   the request's `Host` (a proxy that terminates TLS forwards the browser's
//!   `Host` and `https` `Origin`, as jupyter-server-proxy does). No other
//!   site's page may open the stream, token or not;
//! - a connection not yet upgraded must send a whole request head within
//!   [`HEAD_TIMEOUT`] and finish within [`REQUEST_DEADLINE`], and at most
//!   [`MAX_PENDING`] are held at once: a client that cannot get in cannot
//!   exhaust the process's file descriptors;
//! - a message is at most [`MAX_MESSAGE`] bytes, and a malformed or
//!   unexpected one closes that client with one log line;
//! - the page may be framed only by pages of its own origin.

use std::net::SocketAddr;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use anyhow::Result;
use axum::extract::ws::{CloseFrame, Message, WebSocket, WebSocketUpgrade};
use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use futures_util::stream::{SplitSink, SplitStream};
use futures_util::{SinkExt, StreamExt};
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::sync::{mpsc, watch, Notify, Semaphore};

use crate::address::{Bound, Token};
use crate::hub::Hub;
use crate::protocol::{self, Controls, Then, ToPage};

/// The longest message a page may send.
pub const MAX_MESSAGE: usize = 4096;
/// Connections not yet upgraded to a WebSocket, at most.
pub const MAX_PENDING: usize = 64;
/// The time a request head may take to arrive.
pub const HEAD_TIMEOUT: Duration = Duration::from_secs(5);
/// The time a connection may stay before it is upgraded (its requests answered meanwhile).
pub const REQUEST_DEADLINE: Duration = Duration::from_secs(15);
/// How often a page is told the run's state.
const STATUS_EVERY: Duration = Duration::from_millis(500);
/// A client whose socket takes a frame no faster than this is closed.
const SEND_TIMEOUT: Duration = Duration::from_secs(20);
/// Replies (pongs) read and not yet written, at most (past it, reading waits).
const REPLIES: usize = 8;
/// How long a stop waits for the clients to be told.
const STOP_GRACE: Duration = Duration::from_secs(3);

/// The page: page.html with the client module (client.js) in it.
pub fn page_html() -> String {
    include_str!("page.html").replace("/*CLIENT*/", CLIENT_JS)
}

/// The one client of the protocol: the page's and the notebook widget's.
pub const CLIENT_JS: &str = include_str!("client.js");

#[derive(Clone)]
struct App {
    hub: Arc<Hub>,
    controls: Arc<dyn Controls>,
    token: Token,
    loopback: bool,
    page: Arc<str>,
    closing: watch::Receiver<bool>,
    /// Held by every copy (each client's task has one): the stop waits until all are gone.
    _alive: mpsc::Sender<()>,
}

/// A running server; stopping it (or dropping it) closes every client and frees the port.
pub struct Server {
    url: String,
    token: String,
    stop: Option<watch::Sender<bool>>,
    thread: Option<JoinHandle<()>>,
}

impl Server {
    /// Serves the page and `hub`'s frames on `bound`, keys and pointer to `controls`.
    pub fn start(bound: Bound, hub: Arc<Hub>, controls: Arc<dyn Controls>) -> Result<Server> {
        let (url, token) = (bound.url(), bound.token().to_string());
        let (stop, closing) = watch::channel(false);
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("vkcuda server")
            .enable_all()
            .build()?;
        let (alive, gone) = mpsc::channel(1);
        let page = Arc::from(page_html());
        let app =
            App { hub, controls, token: bound.token, loopback: bound.loopback, page, closing, _alive: alive };
        let listener = bound.listener;
        let thread = std::thread::Builder::new().name("vkcuda server".into()).spawn(move || {
            runtime.block_on(serve(listener, app, gone));
            runtime.shutdown_timeout(STOP_GRACE);
        })?;
        Ok(Server { url, token, stop: Some(stop), thread: Some(thread) })
    }

    /// The page's URL (with the token, when one is needed).
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The token, for a URL another server forwards (`?token=`).
    pub fn token(&self) -> &str {
        &self.token
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

/// Accepts connections until told to stop, then gives the clients
/// [`STOP_GRACE`] to be told and go (`gone` ends when the last copy of the
/// app, a client's, is dropped).
async fn serve(listener: std::net::TcpListener, app: App, mut gone: mpsc::Receiver<()>) {
    let listener = match tokio::net::TcpListener::from_std(listener) {
        Ok(l) => l,
        Err(e) => return log::error!("vkcuda: the view cannot listen: {e}"),
    };
    let mut closing = app.closing.clone();
    let router = Router::new()
        .route("/", get(page))
        .route("/ws", get(stream))
        .fallback(|| async { (StatusCode::NOT_FOUND, "not found") })
        .layer(middleware::from_fn_with_state(app.clone(), guard))
        .with_state(app.clone());
    let pending = Arc::new(Semaphore::new(MAX_PENDING));
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            () = stopped(&mut closing) => break,
        };
        let Ok((socket, from)) = accepted else { continue };
        // A frame's last segment would otherwise wait for the previous frame's to be
        // acknowledged (Nagle), a round trip on a slow link.
        if let Err(e) = socket.set_nodelay(true) {
            log::debug!("vkcuda: {from}: TCP_NODELAY: {e}");
        }
        // Past the bound, a new connection is closed at once (the socket drops).
        let Ok(permit) = pending.clone().try_acquire_owned() else {
            log::debug!("vkcuda: {from} refused: {MAX_PENDING} connections are not yet upgraded");
            continue;
        };
        let (router, closing) = (router.clone(), app.closing.clone());
        tokio::spawn(async move {
            connection(socket, from, router, closing).await;
            drop(permit);
        });
    }
    drop(app);
    // Upgraded connections are not the HTTP server's to wait for: a client still sending
    // its close frame would be cut (a reset) when the runtime shuts down.
    let _ = tokio::time::timeout(STOP_GRACE, gone.recv()).await;
}

/// One connection until it is upgraded (its WebSocket then lives in a task
/// of its own), answered, timed out, or the server stops.
async fn connection(
    socket: tokio::net::TcpStream,
    from: SocketAddr,
    router: Router,
    mut closing: watch::Receiver<bool>,
) {
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new()).header_read_timeout(HEAD_TIMEOUT).max_buf_size(16 * 1024);
    let conn = http.serve_connection(TokioIo::new(socket), TowerToHyperService::new(router)).with_upgrades();
    tokio::pin!(conn);
    let deadline = tokio::time::sleep(REQUEST_DEADLINE);
    tokio::pin!(deadline);
    tokio::select! {
        served = conn.as_mut() => if let Err(e) = served { log::debug!("vkcuda: {from}: {e}") },
        () = &mut deadline => log::debug!("vkcuda: {from} closed: no request within {REQUEST_DEADLINE:?}"),
        _ = stopped(&mut closing) => {
            conn.as_mut().graceful_shutdown();
            let _ = tokio::time::timeout(STOP_GRACE, conn).await;
        }
    }
}

/// Resolves once the server is told to stop.
async fn stopped(closing: &mut watch::Receiver<bool>) {
    let _ = closing.wait_for(|c| *c).await;
}

/// Every request: `GET` (or `HEAD`), one `Host`; the token, or loopback with a loopback `Host`.
async fn guard(State(app): State<App>, request: Request, next: Next) -> Response {
    if request.method() != Method::GET && request.method() != Method::HEAD {
        return (StatusCode::METHOD_NOT_ALLOWED, "only GET").into_response();
    }
    if request.headers().get_all(header::HOST).iter().count() != 1 {
        return (StatusCode::BAD_REQUEST, "one Host header").into_response();
    }
    let token = query_token(request.uri().query()).is_some_and(|t| app.token.matches(t));
    match token || (app.loopback && host_is_loopback(request.headers())) {
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
/// (not a browser) or `http://` or `https://` and its own `Host`.
fn same_origin(headers: &HeaderMap) -> bool {
    let Some(origin) = headers.get(header::ORIGIN) else { return true };
    let host = headers.get(header::HOST).and_then(|h| h.to_str().ok());
    match (origin.to_str().ok(), host) {
        (Some(origin), Some(host)) => {
            let site = origin.strip_prefix("http://").or_else(|| origin.strip_prefix("https://"));
            site == Some(host)
        }
        _ => false,
    }
}

async fn page(State(app): State<App>) -> Response {
    let headers = [
        (header::CONTENT_TYPE, HeaderValue::from_static("text/html; charset=utf-8")),
        (header::CACHE_CONTROL, HeaderValue::from_static("no-store")),
        (header::REFERRER_POLICY, HeaderValue::from_static("no-referrer")),
        (header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff")),
        (header::X_FRAME_OPTIONS, HeaderValue::from_static("SAMEORIGIN")),
        (header::CONTENT_SECURITY_POLICY, HeaderValue::from_static("frame-ancestors 'self'")),
    ];
    (headers, app.page.to_string()).into_response()
}

/// The stream: only the page's own origin may open it (the guard checked the token or the host).
async fn stream(State(app): State<App>, headers: HeaderMap, upgrade: WebSocketUpgrade) -> Response {
    if !same_origin(&headers) {
        return (StatusCode::FORBIDDEN, "forbidden: another site's page").into_response();
    }
    let Some(crate::hub::Joined { id, wake }) = app.hub.join() else {
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
type Source = SplitStream<WebSocket>;

/// How a client's socket ended.
enum Ended {
    /// The page closed it (no close frame is owed).
    ByPage,
    /// The page said goodbye, or the server stops.
    Leave,
    /// Why it was closed.
    Failed(String),
    /// Why writing to it failed (no close frame is sent: it would wait as long again).
    Broken(String),
}

/// One client's socket until it closes or the server stops: its messages
/// in, its frames and the run's state out. `Err`: why it was closed.
///
/// The page's messages are read while a frame is being written: an
/// acknowledgement is the link's only clock, and one read only after a write
/// that waited for the link would be timed late (and bunched with the next).
async fn client(socket: WebSocket, app: App, id: u64, wake: Arc<Notify>) -> Result<(), String> {
    let (mut tx, rx) = socket.split();
    let (replies, replied) = mpsc::channel(REPLIES);
    let mut closing = app.closing.clone();
    let ended = tokio::select! {
        ended = read_page(rx, &app, id, &wake, replies) => ended,
        ended = write_page(&mut tx, &app, id, &wake, replied) => ended,
        _ = closing.changed() => Ended::Leave,
    };
    let (code, reason, result) = match ended {
        Ended::ByPage => return Ok(()),
        Ended::Broken(why) => return Err(why),
        Ended::Leave => (1001, "the run ended".to_string(), Ok(())),
        Ended::Failed(why) => (1008, why.chars().take(100).collect(), Err(why)),
    };
    let _ = send(&mut tx, Message::Close(Some(CloseFrame { code, reason: reason.into() }))).await;
    result
}

/// The page's messages, each applied as it arrives; replies go to the writer.
async fn read_page(
    mut rx: Source,
    app: &App,
    id: u64,
    wake: &Notify,
    replies: mpsc::Sender<ToPage>,
) -> Ended {
    loop {
        let text = match rx.next().await {
            Some(Ok(Message::Text(text))) => text,
            Some(Ok(Message::Binary(_))) => {
                return Ended::Failed("a binary message (the page sends none)".into())
            }
            Some(Ok(Message::Ping(_) | Message::Pong(_))) => continue,
            Some(Ok(Message::Close(_))) | None => return Ended::ByPage,
            Some(Err(e)) => return Ended::Failed(format!("{e}")),
        };
        match protocol::apply(&app.hub, &*app.controls, id, &text) {
            Ok(Then::Nothing) => {}
            Ok(Then::SendFrames) => wake.notify_one(),
            // The writer keeps the receiver while this runs (the select drops both).
            Ok(Then::Reply(reply)) => drop(replies.send(reply).await),
            Ok(Then::Leave) => return Ended::Leave,
            Err(why) => return Ended::Failed(why),
        }
    }
}

/// Frames as the client's link has room, the reader's replies, and the run's state.
async fn write_page(
    tx: &mut Sink,
    app: &App,
    id: u64,
    wake: &Notify,
    mut replied: mpsc::Receiver<ToPage>,
) -> Ended {
    let mut status = tokio::time::interval(STATUS_EVERY);
    loop {
        let sent = tokio::select! {
            _ = wake.notified() => send_frames(&app.hub, id, tx).await,
            Some(reply) = replied.recv() => send(tx, Message::Text(reply.text().into())).await,
            _ = status.tick() => {
                let status = protocol::status(&app.hub, &*app.controls, id).text();
                send(tx, Message::Text(status.into())).await
            }
        };
        if let Err(why) = sent {
            return Ended::Broken(why);
        }
    }
}

/// Sends the client's waiting frames, as many as its link has room for.
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

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(axum::http::HeaderName::from_bytes(k.as_bytes()).unwrap(), v.parse().unwrap());
        }
        h
    }

    #[test]
    fn origins_of_the_page_itself_only() {
        assert!(same_origin(&headers(&[("host", "localhost:8080")])), "not a browser");
        assert!(same_origin(&headers(&[("host", "localhost:8080"), ("origin", "http://localhost:8080")])));
        assert!(same_origin(&headers(&[("host", "hub.example"), ("origin", "https://hub.example")])));
        assert!(!same_origin(&headers(&[("host", "localhost:8080"), ("origin", "https://evil.example")])));
        assert!(!same_origin(&headers(&[("host", "localhost:8080"), ("origin", "null")])));
        assert!(host_is_loopback(&headers(&[("host", "[::1]:9")])));
        assert!(!host_is_loopback(&headers(&[("host", "localhost.evil.example")])));
        assert_eq!(query_token(Some("a=1&token=xyz")), Some("xyz"));
        assert!(page_html().contains("function connect") && !page_html().contains("/*CLIENT*/"));
    }
}
