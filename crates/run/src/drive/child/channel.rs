//! The transport under the child protocol, and under any process that
//! offers or takes shared frames: one Unix stream socket, made as a pair (a
//! child inherits one end) or named (a listener in one process, a connector
//! in another). Both ends greet with [`PROTOCOL`] and [`VERSION`] and each
//! refuses another. On it go three kinds of frame, each a kind byte first:
//! a message (`M`, a length and JSON), bulk bytes (`B`, a length and the
//! bytes as they are: a CUBIN), and handles (`H`, one byte carrying
//! descriptors as `SCM_RIGHTS`). What is sent when is the protocol's above:
//! [`super::offer`] for frames, [`super::wire`] for a producer's messages.

use std::io::{IoSlice, IoSliceMut, Read, Write};
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, ensure, Context, Result};
use rustix::net::{RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, SendAncillaryBuffer};
use rustix::net::{SendAncillaryMessage, SendFlags};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

/// The protocol both ends name in their greeting.
pub const PROTOCOL: &str = "vkcuda-frames";

/// The protocol's version: an end of another build refuses the other.
pub const VERSION: u32 = 2;

/// The most handles one frame of handles carries.
pub const MAX_HANDLES: usize = 16;

/// The largest message or bulk bytes either end accepts (a kernel's CUBIN fits).
const MAX_FRAME: u32 = 64 << 20;

/// A message's kind byte.
const MESSAGE: u8 = b'M';
/// Bulk bytes' kind byte.
const BYTES: u8 = b'B';
/// The handles' byte.
const HANDLES: u8 = b'H';

/// What each end says first.
#[derive(Debug, Serialize, Deserialize)]
struct Hello {
    protocol: String,
    version: u32,
}

/// One end of a connection.
pub struct Channel {
    stream: UnixStream,
}

/// What a receive found.
pub enum Received<T> {
    /// A message.
    Message(T),
    /// Nothing within the read timeout.
    Quiet,
    /// The other end closed (it exited, or was killed).
    Closed,
}

impl Channel {
    /// A connected pair: this end, and the other's descriptor (for a child
    /// to inherit). Neither has greeted: each calls [`Channel::hello`].
    pub fn pair() -> Result<(Channel, OwnedFd)> {
        let (ours, theirs) = UnixStream::pair().context("making a socket pair")?;
        Ok((Channel { stream: ours }, theirs.into()))
    }

    /// The end a process inherited (see `child::inherited_socket`); not greeted yet.
    pub fn inherited(fd: OwnedFd) -> Self {
        Channel { stream: UnixStream::from(fd) }
    }

    /// Connects to the [`Listener`] at `path` and greets it (within `within`).
    pub fn connect(path: &Path, within: Duration) -> Result<Channel> {
        let stream =
            UnixStream::connect(path).with_context(|| format!("connecting to {}", path.display()))?;
        let channel = Channel { stream };
        channel.hello(within)?;
        Ok(channel)
    }

    /// Says this end's protocol and version, then reads the other's (for at
    /// most `within`): an error unless both are the same. Both ends call it
    /// before anything else, so each knows the other speaks its version.
    pub fn hello(&self, within: Duration) -> Result<()> {
        self.send(&Hello { protocol: PROTOCOL.into(), version: VERSION })?;
        let timeout = self.stream.read_timeout()?;
        self.read_timeout(Some(within))?;
        let theirs = self.recv::<Hello>();
        self.read_timeout(timeout)?;
        let theirs = match theirs.context("the other end's greeting")? {
            Received::Message(hello) => hello,
            Received::Quiet => bail!("the other end did not greet within {within:?}"),
            Received::Closed => bail!("the other end closed before it greeted"),
        };
        ensure!(
            theirs.protocol == PROTOCOL && theirs.version == VERSION,
            "the other end speaks {} version {} (this end {PROTOCOL} version {VERSION})",
            theirs.protocol,
            theirs.version
        );
        Ok(())
    }

    /// A second handle to the same socket (one thread reads while another writes).
    pub fn try_clone(&self) -> Result<Channel> {
        Ok(Channel { stream: self.stream.try_clone().context("cloning a channel's socket")? })
    }

    /// Reads give up after `after` (`None`: never), with [`Received::Quiet`].
    pub fn read_timeout(&self, after: Option<Duration>) -> Result<()> {
        Ok(self.stream.set_read_timeout(after)?)
    }

    /// Sends one message.
    pub fn send<T: Serialize>(&self, message: &T) -> Result<()> {
        self.send_frame(MESSAGE, &serde_json::to_vec(message)?)
    }

    /// Sends `bytes` as they are (the protocol above says what they are).
    pub fn send_bytes(&self, bytes: &[u8]) -> Result<()> {
        self.send_frame(BYTES, bytes)
    }

    /// A kind byte, a length, and `payload`.
    fn send_frame(&self, kind: u8, payload: &[u8]) -> Result<()> {
        let len =
            u32::try_from(payload.len()).ok().filter(|&n| n <= MAX_FRAME).context("a frame too large")?;
        let mut header = [kind, 0, 0, 0, 0];
        header[1..].copy_from_slice(&len.to_le_bytes());
        let mut s = &self.stream;
        s.write_all(&header)?;
        s.write_all(payload)?;
        Ok(())
    }

    /// Receives one message (`Quiet` once the read timeout passed with nothing).
    pub fn recv<T: DeserializeOwned>(&self) -> Result<Received<T>> {
        let kind = match self.kind()? {
            Received::Message(kind) => kind,
            Received::Quiet => return Ok(Received::Quiet),
            Received::Closed => return Ok(Received::Closed),
        };
        ensure!(kind == MESSAGE, "{} came where a message was expected", what(kind));
        let text = self.payload()?;
        Ok(Received::Message(serde_json::from_slice(&text).context("a malformed message")?))
    }

    /// Receives the bulk bytes the protocol said come next (waits for them).
    pub fn recv_bytes(&self) -> Result<Vec<u8>> {
        let timeout = self.stream.read_timeout()?;
        self.read_timeout(None)?;
        let kind = self.kind();
        self.read_timeout(timeout)?;
        match kind? {
            Received::Message(BYTES) => self.payload(),
            Received::Message(kind) => bail!("{} came where bytes were expected", what(kind)),
            Received::Quiet | Received::Closed => bail!("the other end closed before the bytes came"),
        }
    }

    /// The next frame's kind byte.
    fn kind(&self) -> Result<Received<u8>> {
        let mut kind = [0u8; 1];
        let mut s = &self.stream;
        loop {
            return match s.read(&mut kind) {
                Ok(0) => Ok(Received::Closed),
                Ok(_) => Ok(Received::Message(kind[0])),
                Err(e)
                    if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) =>
                {
                    Ok(Received::Quiet)
                }
                // A signal (Ctrl+C) came: the caller's loop looks at it after its next message.
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => Ok(Received::Closed),
                Err(e) => Err(e.into()),
            };
        }
    }

    /// A frame's length and payload, after its kind: read whole, whatever the timeout.
    fn payload(&self) -> Result<Vec<u8>> {
        let timeout = self.stream.read_timeout()?;
        self.read_timeout(None)?;
        let mut s = &self.stream;
        let mut read = || -> Result<Vec<u8>> {
            let mut len = [0u8; 4];
            s.read_exact(&mut len)?;
            let len = u32::from_le_bytes(len);
            ensure!(len <= MAX_FRAME, "a frame of {len} bytes (at most {MAX_FRAME})");
            let mut payload = vec![0u8; len as usize];
            s.read_exact(&mut payload)?;
            Ok(payload)
        };
        let payload = read();
        self.read_timeout(timeout)?;
        payload
    }

    /// Sends `fds` on the handles' byte (none: nothing is sent).
    pub fn send_handles(&self, fds: &[BorrowedFd<'_>]) -> Result<()> {
        if fds.is_empty() {
            return Ok(());
        }
        ensure!(fds.len() <= MAX_HANDLES, "{} handles (at most {MAX_HANDLES})", fds.len());
        let mut space = vec![MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(MAX_HANDLES))];
        let mut control = SendAncillaryBuffer::new(&mut space);
        ensure!(control.push(SendAncillaryMessage::ScmRights(fds)), "no room for the handles");
        let sent = loop {
            let byte = [IoSlice::new(&[HANDLES])];
            match rustix::net::sendmsg(self.stream.as_fd(), &byte, &mut control, SendFlags::empty()) {
                Err(rustix::io::Errno::INTR) => continue,
                other => break other?,
            }
        };
        ensure!(sent == 1, "the handles' byte was not sent");
        Ok(())
    }

    /// Receives the `n` descriptors of [`Channel::send_handles`] the protocol said come next.
    pub fn recv_handles(&self, n: usize) -> Result<Vec<OwnedFd>> {
        if n == 0 {
            return Ok(Vec::new());
        }
        ensure!(n <= MAX_HANDLES, "{n} handles (at most {MAX_HANDLES})");
        let mut space = vec![MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(MAX_HANDLES))];
        let mut control = RecvAncillaryBuffer::new(&mut space);
        let mut byte = [0u8; 1];
        let got = loop {
            let mut data = [IoSliceMut::new(&mut byte)];
            match rustix::net::recvmsg(self.stream.as_fd(), &mut data, &mut control, RecvFlags::CMSG_CLOEXEC)
            {
                Err(rustix::io::Errno::INTR) => continue,
                other => break other?,
            }
        };
        let mut fds = Vec::new();
        for message in control.drain() {
            if let RecvAncillaryMessage::ScmRights(rights) = message {
                fds.extend(rights);
            }
        }
        ensure!(got.bytes == 1 && byte[0] == HANDLES, "the handles did not come");
        ensure!(fds.len() == n, "{} handles came, {n} were announced", fds.len());
        Ok(fds)
    }
}

/// A frame's kind, in words.
fn what(kind: u8) -> &'static str {
    match kind {
        MESSAGE => "a message",
        BYTES => "bulk bytes",
        HANDLES => "handles",
        _ => "a byte of no frame",
    }
}

/// A named socket that [`Channel::connect`] reaches: another process (a
/// viewer attaching to a producer) connects to its path. The socket's file
/// is removed when it is dropped.
pub struct Listener {
    listener: UnixListener,
    path: PathBuf,
}

impl Listener {
    /// Listens at `path` (a file that must not exist yet).
    pub fn bind(path: &Path) -> Result<Listener> {
        let listener =
            UnixListener::bind(path).with_context(|| format!("listening at {}", path.display()))?;
        Ok(Listener { listener, path: path.to_path_buf() })
    }

    /// Where it listens.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The next connection, greeted (its hello within `within`).
    pub fn accept(&self, within: Duration) -> Result<Channel> {
        let (stream, _) = self.listener.accept().context("accepting a connection")?;
        let channel = Channel { stream };
        channel.hello(within)?;
        Ok(channel)
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        // Only this listener's file: a later bind at the same path must not find it.
        let _ = std::fs::remove_file(&self.path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_ends_refuse_another_version() {
        let (ours, theirs) = Channel::pair().expect("a pair");
        let theirs = Channel::inherited(theirs);
        // The other end speaks version 1: it greets, then reads ours.
        theirs.send(&Hello { protocol: PROTOCOL.into(), version: 1 }).expect("an old greeting");
        let refused = ours.hello(Duration::from_secs(10)).expect_err("another version");
        assert!(format!("{refused}").contains("version 1"), "{refused}");
        // And the other end, reading ours, sees a version that is not its own.
        match theirs.recv::<Hello>().expect("our greeting") {
            Received::Message(hello) => assert_eq!(hello.version, VERSION),
            _ => panic!("no greeting came"),
        }
    }

    #[test]
    fn messages_bytes_and_handles_keep_their_order() {
        let (ours, theirs) = Channel::pair().expect("a pair");
        let theirs = Channel::inherited(theirs);
        let greeted = std::thread::spawn(move || theirs.hello(Duration::from_secs(10)).map(|()| theirs));
        ours.hello(Duration::from_secs(10)).expect("our greeting");
        let theirs = greeted.join().expect("the other end").expect("its greeting");
        let cubin: Vec<u8> = (0..=255).collect();
        let file = std::fs::File::open("/proc/self/stat").expect("a file");
        ours.send(&"a kernel").expect("a message");
        ours.send_bytes(&cubin).expect("bytes");
        ours.send_handles(&[file.as_fd()]).expect("a handle");
        assert!(matches!(theirs.recv::<String>(), Ok(Received::Message(m)) if m == "a kernel"));
        assert_eq!(theirs.recv_bytes().expect("the bytes"), cubin);
        assert_eq!(theirs.recv_handles(1).expect("the handle").len(), 1);
        // Bytes where a message is expected: an error (the connection's end), not a misread message.
        ours.send_bytes(b"{}").expect("bytes");
        let misread = theirs.recv::<serde_json::Value>().err().expect("bytes are no message");
        assert!(format!("{misread}").contains("bulk bytes came"), "{misread}");
    }

    #[test]
    fn a_named_socket_connects_and_greets() {
        let path = std::env::temp_dir().join(format!("vkcuda-channel-{}.sock", std::process::id()));
        let listener = Listener::bind(&path).expect("a listener");
        let connector = std::thread::spawn({
            let path = path.clone();
            move || Channel::connect(&path, Duration::from_secs(10)).and_then(|c| c.send(&7u32))
        });
        let accepted = listener.accept(Duration::from_secs(10)).expect("a greeted connection");
        connector.join().expect("the connector").expect("its message");
        assert!(matches!(accepted.recv::<u32>(), Ok(Received::Message(7))));
        // The connector's end is gone with its thread.
        assert!(matches!(accepted.recv::<u32>(), Ok(Received::Closed)));
        drop(listener);
        assert!(!path.exists(), "the socket's file stays");
    }
}
