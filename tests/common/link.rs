//! Links as people watch through them, made on this machine: a network
//! namespace for the server's side, a veth pair to it whose both ends the
//! kernel shapes to a rate (`tc` `tbf`; this kernel has no `netem`), and a
//! relay in this process that delays each direction by half the round trip
//! and holds at most a bandwidth-delay product, so TCP's back-pressure
//! reaches the server as a real path's would. Traffic stays on the pair and
//! the loopback; the namespace and the pair go when the [`Link`] drops.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// The server side's address on the pair, and this side's.
pub const SERVER_IP: &str = "10.77.0.1";
pub const CLIENT_IP: &str = "10.77.0.2";

/// Why a shaped link cannot be made here, if it cannot (root, `ip`, `tc`, network namespaces).
pub fn no_link() -> Option<String> {
    if effective_uid() != 0 {
        return Some("shaping a link needs root (network namespaces, tc)".into());
    }
    for tool in ["ip", "tc"] {
        let found = Command::new(tool).arg("-V").stdout(Stdio::null()).stderr(Stdio::null()).status();
        if !found.is_ok_and(|s| s.success()) {
            return Some(format!("no `{tool}` (iproute2)"));
        }
    }
    None
}

fn effective_uid() -> u32 {
    // The effective user, from /proc (no libc dependency in the tests).
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let uid = status.lines().find(|l| l.starts_with("Uid:")).and_then(|l| l.split_whitespace().nth(2));
    uid.and_then(|u| u.parse().ok()).unwrap_or(u32::MAX)
}

fn ip(args: &[&str]) -> Result<(), String> {
    let out = Command::new("ip").args(args).output().map_err(|e| format!("ip {args:?}: {e}"))?;
    match out.status.success() {
        true => Ok(()),
        false => Err(format!("ip {}: {}", args.join(" "), String::from_utf8_lossy(&out.stderr).trim())),
    }
}

fn tc(netns: Option<&str>, args: &[&str]) -> Result<(), String> {
    let mut c = match netns {
        Some(ns) => {
            let mut c = Command::new("ip");
            c.args(["netns", "exec", ns, "tc"]);
            c
        }
        None => Command::new("tc"),
    };
    let out = c.args(args).output().map_err(|e| format!("tc {args:?}: {e}"))?;
    match out.status.success() {
        true => Ok(()),
        false => Err(format!("tc {}: {}", args.join(" "), String::from_utf8_lossy(&out.stderr).trim())),
    }
}

/// A namespace for the server's side and a shaped veth pair to it.
pub struct Link {
    /// The namespace's name (`ip netns exec NAME ...` runs in it).
    pub netns: String,
    here: String,
    there: String,
}

impl Link {
    /// The namespace and the pair, both ends at `mbit` Mbit/s.
    pub fn new(mbit: f64) -> Result<Self, String> {
        let id = std::process::id() % 100_000;
        let link =
            Link { netns: format!("vkcuda{id}"), here: format!("vkc{id}a"), there: format!("vkc{id}b") };
        let _ = ip(&["netns", "del", &link.netns]);
        ip(&["netns", "add", &link.netns])?;
        ip(&["link", "add", &link.here, "type", "veth", "peer", "name", &link.there])?;
        ip(&["link", "set", &link.there, "netns", &link.netns])?;
        ip(&["addr", "add", &format!("{CLIENT_IP}/30"), "dev", &link.here])?;
        ip(&["-n", &link.netns, "addr", "add", &format!("{SERVER_IP}/30"), "dev", &link.there])?;
        ip(&["link", "set", &link.here, "up"])?;
        ip(&["-n", &link.netns, "link", "set", &link.there, "up"])?;
        ip(&["-n", &link.netns, "link", "set", "lo", "up"])?;
        link.shape(mbit, "add")?;
        Ok(link)
    }

    /// Both ends at `mbit` Mbit/s from now on (a link that gets slower or faster).
    pub fn set_rate(&self, mbit: f64) -> Result<(), String> {
        self.shape(mbit, "change")
    }

    fn shape(&self, mbit: f64, verb: &str) -> Result<(), String> {
        let rate = format!("{}kbit", (mbit * 1000.0) as u64);
        // A burst of a few packets and a queue of 50 ms at the rate: the link's own buffer.
        let shape =
            ["qdisc", verb, "dev", "", "root", "tbf", "rate", &rate, "burst", "16kb", "latency", "50ms"];
        let mut there = shape;
        there[3] = &self.there;
        tc(Some(&self.netns), &there)?;
        let mut here = shape;
        here[3] = &self.here;
        tc(None, &here)
    }

    /// A command run in the server's namespace.
    pub fn command(&self, program: &std::path::Path) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.netns]).arg(program);
        c
    }
}

impl Drop for Link {
    fn drop(&mut self) {
        // The pair goes with the namespace.
        let _ = ip(&["netns", "del", &self.netns]);
        let _ = ip(&["link", "del", &self.here]);
    }
}

/// A relay that delays each direction by `one_way` and holds at most `cap`
/// bytes per direction: listens on `at`, forwards each connection to `to`.
pub struct Relay {
    /// Where it listens.
    pub addr: SocketAddr,
    stop: Arc<AtomicBool>,
}

impl Relay {
    pub fn start(at: &str, to: SocketAddr, one_way: Duration, cap: usize) -> Result<Self, String> {
        let listener = TcpListener::bind(at).map_err(|e| format!("relay on {at}: {e}"))?;
        let addr = listener.local_addr().map_err(|e| e.to_string())?;
        listener.set_nonblocking(true).map_err(|e| e.to_string())?;
        let stop = Arc::new(AtomicBool::new(false));
        let s = stop.clone();
        std::thread::spawn(move || {
            while !s.load(Ordering::Relaxed) {
                match listener.accept() {
                    Ok((client, _)) => {
                        let Ok(server) = TcpStream::connect_timeout(&to, Duration::from_secs(5)) else {
                            continue;
                        };
                        // A link forwards what comes when it comes: Nagle here would hold a
                        // small message (an acknowledgement) until the last one was acknowledged.
                        let _ = (client.set_nodelay(true), server.set_nodelay(true));
                        for (from, into) in [
                            (client.try_clone(), server.try_clone()),
                            (server.try_clone(), client.try_clone()),
                        ] {
                            if let (Ok(from), Ok(into)) = (from, into) {
                                pipe(from, into, one_way, cap, s.clone());
                            }
                        }
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(5)),
                }
            }
        });
        Ok(Relay { addr, stop })
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// What one direction holds: pieces read (and when each may go), their bytes, whether the reading ended.
#[derive(Default)]
struct Queue {
    pieces: std::collections::VecDeque<(Instant, Vec<u8>)>,
    bytes: usize,
    closed: bool,
}

/// A direction's queue and the signal of its changes.
struct Delayed {
    queue: Mutex<Queue>,
    changed: Condvar,
}

/// One direction: a reader that queues what it reads (waiting while `cap`
/// bytes are queued) and a writer that sends each piece `one_way` after it came.
fn pipe(mut from: TcpStream, mut into: TcpStream, one_way: Duration, cap: usize, stop: Arc<AtomicBool>) {
    let d = Arc::new(Delayed { queue: Mutex::new(Queue::default()), changed: Condvar::new() });
    let reader = d.clone();
    let _ = from.set_read_timeout(Some(Duration::from_millis(200)));
    std::thread::spawn(move || {
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            let n = match from.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e)
                    if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) =>
                {
                    if stop.load(Ordering::Relaxed) {
                        break;
                    }
                    continue;
                }
                Err(_) => break,
            };
            let mut q = reader.queue.lock().unwrap_or_else(|p| p.into_inner());
            while q.bytes >= cap && !q.closed {
                q = reader.changed.wait(q).unwrap_or_else(|p| p.into_inner());
            }
            q.pieces.push_back((Instant::now() + one_way, buf[..n].to_vec()));
            q.bytes += n;
            reader.changed.notify_all();
        }
        let mut q = reader.queue.lock().unwrap_or_else(|p| p.into_inner());
        q.closed = true;
        reader.changed.notify_all();
    });
    std::thread::spawn(move || loop {
        let mut q = d.queue.lock().unwrap_or_else(|p| p.into_inner());
        let Some((due, _)) = q.pieces.front() else {
            if q.closed {
                let _ = into.shutdown(std::net::Shutdown::Write);
                return;
            }
            let _ = d.changed.wait_timeout(q, Duration::from_millis(100));
            continue;
        };
        let wait = due.saturating_duration_since(Instant::now());
        if !wait.is_zero() {
            drop(q);
            std::thread::sleep(wait);
            continue;
        }
        let Some((_, piece)) = q.pieces.pop_front() else { continue };
        q.bytes -= piece.len();
        d.changed.notify_all();
        drop(q);
        if into.write_all(&piece).is_err() {
            let mut q = d.queue.lock().unwrap_or_else(|p| p.into_inner());
            q.closed = true;
            d.changed.notify_all();
            return;
        }
    });
}
