//! The door of a job sharing its frames: its socket in the [`ShareDir`],
//! and each process that knocks checked before it is let in (its uid by
//! `SO_PEERCRED`, then the greeting's version, then the GPU handshake). A
//! peer refused, silent or malformed is closed alone; the door goes on
//! taking the next. Every wait has a bound.

use std::fmt;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use rustix::net::RecvFlags;

use super::dir::{probe, Holder, ShareDir};
use super::handshake::{exchange, GpuIdentity, Met, Mismatch, Role};
use super::name::ShareName;
use crate::drive::child::channel::Channel;

/// How long a process that connected has for each step of the handshake
/// (its greeting, its GPU) before it is closed. Each is one small message a
/// live peer sends at once (the tests' peers answer in well under a
/// millisecond); 2 s leaves room for a loaded machine, not measured beyond
/// that. A silent peer holds the door this long: the door takes one knock at a time.
pub const HANDSHAKE_WITHIN: Duration = Duration::from_secs(2);

/// A job's door: its socket, removed when the door is dropped.
pub struct Door {
    listener: UnixListener,
    path: PathBuf,
    /// The socket file's device and inode: the drop removes this file only.
    file: (u64, u64),
    gpu: GpuIdentity,
    handshake_within: Duration,
}

/// A process let in.
pub struct Visitor {
    /// Greeted and matched: the protocol above goes on it.
    pub channel: Channel,
    /// Its pid, as the kernel tells it.
    pub pid: u32,
}

/// What a knock came to.
pub enum Knock {
    /// A process let in.
    Admitted(Visitor),
    /// A process refused and closed (already logged).
    Refused(Refusal),
    /// Nobody knocked within the wait.
    Nobody,
}

/// A process refused, and why.
#[derive(Debug)]
pub struct Refusal {
    /// Its pid, as the kernel tells it.
    pub pid: u32,
    /// Why.
    pub why: Why,
}

/// Why a process was refused.
#[derive(Debug)]
pub enum Why {
    /// It runs as another user.
    OtherUser {
        /// Its uid.
        uid: u32,
    },
    /// It said nothing within [`HANDSHAKE_WITHIN`].
    Silent(Duration),
    /// It closed before the handshake ended (a [`super::list`] probe does).
    Left,
    /// Its greeting was another protocol or version.
    Greeting(String),
    /// A message that is not the handshake's.
    Malformed(String),
    /// Its GPU or driver is not the job's.
    Gpu(Mismatch),
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let pid = self.pid;
        match &self.why {
            Why::OtherUser { uid } => write!(f, "pid {pid} runs as uid {uid}, not this job's: refused"),
            Why::Silent(within) => write!(f, "pid {pid} said nothing within {within:?}: closed"),
            Why::Left => write!(f, "pid {pid} closed before the handshake"),
            Why::Greeting(why) => write!(f, "pid {pid}: {why}"),
            Why::Malformed(why) => write!(f, "pid {pid} sent a malformed handshake ({why}): closed"),
            Why::Gpu(mismatch) => write!(f, "pid {pid} refused: {mismatch}"),
        }
    }
}

impl Door {
    /// Opens `name`'s door in `dir` for frames on `gpu`. A name a live job
    /// holds is refused (with its pid); a dead job's socket is replaced.
    pub fn open(dir: &ShareDir, name: &ShareName, gpu: GpuIdentity) -> Result<Door> {
        let path = dir.socket(name);
        let listener = match UnixListener::bind(&path) {
            Ok(listener) => listener,
            Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => {
                Self::clear(&path, name)?;
                UnixListener::bind(&path).with_context(|| format!("listening at {}", path.display()))?
            }
            Err(e) => return Err(e).with_context(|| format!("listening at {}", path.display())),
        };
        // The folder keeps others out already; the socket is closed to them too.
        std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o600))?;
        listener.set_nonblocking(true)?;
        let meta = std::fs::symlink_metadata(&path)?;
        let file = (meta.dev(), meta.ino());
        Ok(Door { listener, path, file, gpu, handshake_within: HANDSHAKE_WITHIN })
    }

    /// Removes `path` if it is a dead job's; refuses it if a live one holds it.
    fn clear(path: &Path, name: &ShareName) -> Result<()> {
        match probe(path)? {
            Holder::Live { pid: Some(pid), .. } => {
                bail!("the name `{name}` is in use by pid {pid} ({}): pick another name", path.display())
            }
            Holder::Live { pid: None, .. } | Holder::Busy => {
                bail!("the name `{name}` is in use by a live job ({}): pick another name", path.display())
            }
            Holder::Stale => {
                if !std::fs::symlink_metadata(path)?.file_type().is_socket() {
                    bail!("{} is not a socket: remove it, or pick another name", path.display());
                }
                log::info!("replacing {}, a job's that is gone", path.display());
                std::fs::remove_file(path).with_context(|| format!("removing {}", path.display()))
            }
            Holder::Missing => Ok(()),
        }
    }

    /// The same door, closing silent peers after `within` (not [`HANDSHAKE_WITHIN`]).
    pub fn handshake_within(mut self, within: Duration) -> Door {
        self.handshake_within = within;
        self
    }

    /// Where the socket is.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Takes the next process that knocks within `within` and checks it:
    /// another uid is refused, then the greeting and the GPU handshake (each
    /// within the door's handshake bound). A refused peer is closed and
    /// logged; an error is the door's own (its socket failed).
    pub fn accept(&self, within: Duration) -> Result<Knock> {
        if !readable(self.listener.as_fd(), within)? {
            return Ok(Knock::Nobody);
        }
        let stream = match self.listener.accept() {
            Ok((stream, _)) => stream,
            // Another thread took it first, or it gave up.
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return Ok(Knock::Nobody),
            Err(e) => return Err(e).context("accepting a connection"),
        };
        stream.set_nonblocking(false)?;
        Ok(match self.check(stream)? {
            Ok(visitor) => Knock::Admitted(visitor),
            Err(refusal) => {
                match refusal.why {
                    Why::OtherUser { .. } => log::warn!("{}: {refusal}", self.path.display()),
                    Why::Left => log::debug!("{}: {refusal}", self.path.display()),
                    _ => log::info!("{}: {refusal}", self.path.display()),
                }
                Knock::Refused(refusal)
            }
        })
    }

    /// A connected process let in, or why not (the stream is closed with the refusal).
    fn check(&self, stream: UnixStream) -> Result<std::result::Result<Visitor, Refusal>> {
        let cred = rustix::net::sockopt::socket_peercred(&stream).context("the peer's credentials")?;
        let pid = cred.pid.as_raw_nonzero().get() as u32;
        let refused =
            |why: Why| -> Result<std::result::Result<Visitor, Refusal>> { Ok(Err(Refusal { pid, why })) };
        let uid = cred.uid.as_raw();
        if uid != rustix::process::geteuid().as_raw() {
            return refused(Why::OtherUser { uid });
        }
        // Its greeting comes first: a silent peer is told apart from a bad greeting.
        if !readable(stream.as_fd(), self.handshake_within)? {
            return refused(Why::Silent(self.handshake_within));
        }
        let mut byte = [0u8; 1];
        if rustix::net::recv(&stream, &mut byte, RecvFlags::PEEK | RecvFlags::DONTWAIT)?.0 == 0 {
            return refused(Why::Left);
        }
        let channel = Channel::inherited(OwnedFd::from(stream));
        if let Err(e) = channel.hello(self.handshake_within) {
            return refused(Why::Greeting(format!("{e:#}")));
        }
        match exchange(&channel, &self.gpu, Role::Job, self.handshake_within) {
            Ok(Met::Matched(_)) => Ok(Ok(Visitor { channel, pid })),
            Ok(Met::Mismatched(mismatch)) => refused(Why::Gpu(mismatch)),
            Ok(Met::Silent) => refused(Why::Silent(self.handshake_within)),
            Ok(Met::Left) => refused(Why::Left),
            Err(e) => refused(Why::Malformed(format!("{e:#}"))),
        }
    }
}

impl Drop for Door {
    fn drop(&mut self) {
        // Only this door's file: a job that replaced it (this one hung) keeps its own.
        let ours = std::fs::symlink_metadata(&self.path).is_ok_and(|m| (m.dev(), m.ino()) == self.file);
        if ours {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// Whether `fd` has something to read (a connection, a message, its end) within `within`.
fn readable(fd: BorrowedFd<'_>, within: Duration) -> Result<bool> {
    let until = Instant::now() + within;
    loop {
        let left = until.saturating_duration_since(Instant::now());
        let mut poll = libc::pollfd { fd: fd.as_raw_fd(), events: libc::POLLIN, revents: 0 };
        let ms = libc::c_int::try_from(left.as_nanos().div_ceil(1_000_000)).unwrap_or(libc::c_int::MAX);
        // SAFETY: one pollfd, valid for the call; `fd` is borrowed, so open throughout.
        let n = unsafe { libc::poll(&mut poll, 1, ms) };
        if n >= 0 {
            return Ok(n > 0);
        }
        let e = std::io::Error::last_os_error();
        if e.kind() != std::io::ErrorKind::Interrupted {
            return Err(e).context("waiting on a socket");
        }
    }
}

/// The live names in `dir`, in words (for a name that is not there).
fn live_names(dir: &ShareDir) -> String {
    match super::dir::list(dir) {
        Ok(live) if live.is_empty() => "no job shares there now".into(),
        Ok(live) => {
            let names: Vec<String> = live.iter().map(|l| format!("`{}`", l.name)).collect();
            format!("the jobs sharing there are {}", names.join(", "))
        }
        Err(e) => format!("its names could not be listed ({e:#})"),
    }
}

/// Enters `name`'s door in `dir` for frames on `gpu`: connects, greets and
/// makes the handshake (each within `within`). The errors say why a job
/// would not let this process in.
pub fn enter(dir: &ShareDir, name: &ShareName, gpu: &GpuIdentity, within: Duration) -> Result<Channel> {
    let path = dir.socket(name);
    let shown = path.display();
    let connection = match probe(&path)? {
        Holder::Live { connection, .. } => connection,
        Holder::Busy => bail!("`{name}`'s job is busy (its queue of connections is full): try again"),
        Holder::Stale => bail!("`{name}`'s job is gone ({shown} is a dead job's socket)"),
        Holder::Missing => {
            bail!("no job shares `{name}` in {}: {}", dir.path().display(), live_names(dir))
        }
    };
    rustix::io::ioctl_fionbio(&connection, false)?;
    let channel = Channel::inherited(connection);
    if let Err(e) = channel.hello(within) {
        let owner = std::fs::metadata(&path).map(|m| m.uid()).ok();
        let me = rustix::process::geteuid().as_raw();
        return Err(match owner.filter(|&owner| owner != me) {
            Some(owner) => e.context(format!(
                "`{name}`'s job runs as uid {owner} and this process as uid {me}: a job lets in its own user only"
            )),
            None => e.context(format!("`{name}`'s job at {shown} did not greet")),
        });
    }
    match exchange(&channel, gpu, Role::Viewer, within).with_context(|| format!("`{name}`'s handshake"))? {
        Met::Matched(_) => Ok(channel),
        Met::Mismatched(mismatch) => bail!("`{name}` cannot be attached here: {mismatch}"),
        Met::Silent => bail!("`{name}`'s job did not say its GPU within {within:?}"),
        Met::Left => bail!("`{name}`'s job closed the connection in the handshake"),
    }
}
