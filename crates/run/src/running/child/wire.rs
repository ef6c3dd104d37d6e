//! The child protocol's wire: typed messages as length-prefixed JSON over a
//! Unix stream socket, and the exported handles as `SCM_RIGHTS` on one byte
//! sent after the [`Offer`] that counts them.

use std::io::{IoSlice, IoSliceMut, Read, Write};
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, ensure, Context, Result};
use rustix::net::{RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, SendAncillaryBuffer};
use rustix::net::{SendAncillaryMessage, SendFlags};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::base::director::FrameSpec;
use crate::base::nvrtc::Program;
use crate::base::userkernel::KernelSpec;
use vkcuda::sync::{FramePlan, SyncScheme};
use vkcuda::types::CudaSched;
use vkcuda::{Format, FrameDesc, Layout};

/// The protocol's version: a child of another build refuses the offer.
pub const VERSION: u32 = 1;

/// The most handles one offer carries (frames and timelines).
pub const MAX_HANDLES: usize = 16;

/// The largest message either side accepts (a kernel's PTX and CUBIN fit).
const MAX_MESSAGE: u32 = 64 << 20;

/// What the session offers a new child, once: the frames, the device, what to render.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Offer {
    /// [`VERSION`].
    pub version: u32,
    /// The Vulkan device's `deviceUUID`: the child renders on the device that has it.
    pub uuid: [u8; 16],
    /// The frames and their plan.
    pub frames: PlanWire,
    /// Each frame's allocation size, in the plan's order: one handle each follows.
    pub memory: Vec<u64>,
    /// Timeline handles after the frames' (0: the session signals "rendered" for the child).
    pub timelines: usize,
    /// Timeline handles after those, for the child's host waits (0: the session waits for it).
    pub wait_timelines: usize,
    /// The images have `COLOR_ATTACHMENT` usage.
    pub color: bool,
    /// What the child renders.
    pub render: Render,
    /// Test only: faults to inject (`FAULT@FRAME`).
    pub inject: Vec<String>,
    /// The child's Vulkan instance loads the validation layer.
    pub validate: bool,
}

impl Offer {
    /// Handles that follow the offer.
    pub fn handles(&self) -> usize {
        self.memory.len() + self.timelines + self.wait_timelines
    }
}

/// A frame plan and its frames, as plain data.
#[derive(Clone, Copy, Debug, Serialize, Deserialize)]
pub struct PlanWire {
    /// The synchronization scheme.
    pub sync: SyncScheme,
    /// Frames in rotation.
    pub images: usize,
    /// The timelines' base value.
    pub base: u64,
    /// Frames the plan is made for.
    pub total: u64,
    /// The pixel format.
    pub format: Format,
    /// Array or buffer.
    pub layout: Layout,
    /// Width and height.
    pub size: (u32, u32),
}

impl PlanWire {
    /// The plan and frames as the core has them.
    pub fn new(plan: &FramePlan, desc: &FrameDesc, total: u64) -> Self {
        let (w, h) = (desc.extent.width, desc.extent.height);
        let (sync, images, base) = (plan.scheme(), plan.images(), plan.initial_value());
        Self { sync, images, base, total, format: desc.format, layout: desc.layout, size: (w, h) }
    }

    /// Back to the core's types.
    pub fn parts(&self) -> Result<(FramePlan, FrameDesc)> {
        let plan = FramePlan::new(self.sync, self.images, self.base, self.total)?;
        let extent = ash::vk::Extent2D { width: self.size.0, height: self.size.1 };
        Ok((plan, FrameDesc::new(extent).format(self.format).layout(self.layout)))
    }
}

/// How a CUDA child runs.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct CudaWire {
    /// Where compiled PTX is cached.
    pub ptx_cache: PathBuf,
    /// How CUDA's host thread waits.
    pub sched: CudaSched,
    /// The stream with the highest priority.
    pub high_priority: bool,
    /// The child waits on the host until a frame is released before it
    /// enqueues the frame (a stream's wait on a value not yet reached keeps
    /// the thread's next CUDA call spinning); the session sends each frame a
    /// frame early then.
    pub host_waits: bool,
}

/// What a child renders.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum Render {
    /// The built-in scenes, with CUDA.
    Scene(CudaWire),
    /// The user's kernel, with CUDA: the program the session last compiled, if any.
    Kernel {
        /// The kernel.
        kernel: KernelSpec,
        /// Its newest compiled program (else the child compiles the file).
        program: Option<Program>,
        /// How CUDA runs it.
        cuda: CudaWire,
    },
    /// The CPU reference, written through the child's own Vulkan device
    /// (buffer frames; runs wherever Vulkan exports memory: lavapipe, CI).
    Reference,
}

/// What the session tells its child after the offer.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum ToChild {
    /// Render frame `g` showing `spec`: its frame is free (the session waited for
    /// "released"), or, when the child waits on the host, the frame before it is.
    Frame {
        /// The frame.
        g: u64,
        /// What it shows.
        spec: FrameSpec,
    },
    /// A newly compiled version of the user's kernel, from the next frame on.
    Kernel(Program),
    /// No more frames: finish what was enqueued, say [`FromChild::Done`], exit.
    Stop,
}

/// What a child tells its session.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum FromChild {
    /// The frames are imported and the kernels loaded (`arch`: what a new
    /// version of the user's kernel is compiled for).
    Ready {
        /// `sm_XY`, when the child runs a user kernel.
        arch: Option<String>,
    },
    /// Frame `g` is submitted: its "rendered" signal is enqueued (or, with
    /// no timeline handles, the frame is written: the session signals).
    Produced {
        /// The frame.
        g: u64,
    },
    /// A frame's timing, resolved late.
    Timing {
        /// The frame.
        g: u64,
        /// Its render time.
        render_ns: u64,
        /// When it was rendered, on the host's monotonic clock (shared by both processes).
        rendered_ns: u64,
    },
    /// The newest [`ToChild::Kernel`] renders from frame `g` on.
    Swapped {
        /// Its first frame.
        g: u64,
    },
    /// The child failed; it exits next.
    Failed {
        /// What happened, for people.
        error: String,
    },
    /// Every frame is finished; the child exits next.
    Done,
}

/// One end of the child's socket.
pub struct Wire {
    stream: UnixStream,
}

impl Wire {
    /// A connected pair: the session's end, and the child's (to be inherited).
    pub fn pair() -> Result<(Wire, OwnedFd)> {
        let (ours, theirs) = UnixStream::pair().context("making the child's socket")?;
        Ok((Wire { stream: ours }, theirs.into()))
    }

    /// The child's end, from the descriptor it inherited.
    pub fn from_fd(fd: OwnedFd) -> Self {
        Wire { stream: UnixStream::from(fd) }
    }

    /// A second handle to the same socket (one thread reads while another writes).
    pub fn try_clone(&self) -> Result<Wire> {
        Ok(Wire { stream: self.stream.try_clone().context("cloning the child's socket")? })
    }

    /// Reads give up after `after` (`None`: never), with [`Received::Quiet`].
    pub fn read_timeout(&self, after: Option<Duration>) -> Result<()> {
        Ok(self.stream.set_read_timeout(after)?)
    }

    /// Sends one message.
    pub fn send<T: Serialize>(&self, message: &T) -> Result<()> {
        let text = serde_json::to_vec(message)?;
        let len =
            u32::try_from(text.len()).ok().filter(|&n| n <= MAX_MESSAGE).context("a message too large")?;
        let mut s = &self.stream;
        s.write_all(&len.to_le_bytes())?;
        s.write_all(&text)?;
        Ok(())
    }

    /// Receives one message.
    pub fn recv<T: DeserializeOwned>(&self) -> Result<Received<T>> {
        let mut len = [0u8; 4];
        let mut s = &self.stream;
        loop {
            match s.read(&mut len[..1]) {
                Ok(0) => return Ok(Received::Closed),
                Ok(_) => break,
                Err(e)
                    if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) =>
                {
                    return Ok(Received::Quiet)
                }
                // A signal (Ctrl+C) came: the caller's loop looks at it after its next message.
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return Ok(Received::Closed),
                Err(e) => return Err(e.into()),
            }
        }
        // A message once begun is read whole, whatever the timeout.
        let timeout = self.stream.read_timeout()?;
        self.read_timeout(None)?;
        let mut rest = || -> Result<Vec<u8>> {
            s.read_exact(&mut len[1..])?;
            let len = u32::from_le_bytes(len);
            ensure!(len <= MAX_MESSAGE, "a message of {len} bytes (at most {MAX_MESSAGE})");
            let mut text = vec![0u8; len as usize];
            s.read_exact(&mut text)?;
            Ok(text)
        };
        let text = rest();
        self.read_timeout(timeout)?;
        Ok(Received::Message(serde_json::from_slice(&text?).context("a malformed message")?))
    }

    /// Sends `fds` on one byte.
    pub fn send_fds(&self, fds: &[BorrowedFd<'_>]) -> Result<()> {
        ensure!(fds.len() <= MAX_HANDLES, "{} handles (at most {MAX_HANDLES})", fds.len());
        let mut space = vec![MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(MAX_HANDLES))];
        let mut control = SendAncillaryBuffer::new(&mut space);
        ensure!(control.push(SendAncillaryMessage::ScmRights(fds)), "no room for the handles");
        let sent = loop {
            let byte = [IoSlice::new(b"H")];
            match rustix::net::sendmsg(self.stream.as_fd(), &byte, &mut control, SendFlags::empty()) {
                Err(rustix::io::Errno::INTR) => continue,
                other => break other?,
            }
        };
        ensure!(sent == 1, "the handles' byte was not sent");
        Ok(())
    }

    /// Receives the `n` descriptors of [`Wire::send_fds`].
    pub fn recv_fds(&self, n: usize) -> Result<Vec<OwnedFd>> {
        ensure!(n <= MAX_HANDLES, "{n} handles (at most {MAX_HANDLES})");
        let mut space = vec![MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(MAX_HANDLES))];
        let mut control = RecvAncillaryBuffer::new(&mut space);
        let mut byte = [0u8; 1];
        let got = loop {
            let flags = RecvFlags::CMSG_CLOEXEC;
            match rustix::net::recvmsg(
                self.stream.as_fd(),
                &mut [IoSliceMut::new(&mut byte)],
                &mut control,
                flags,
            ) {
                Err(rustix::io::Errno::INTR) => continue,
                other => break other?,
            }
        };
        ensure!(got.bytes == 1 && byte == *b"H", "the handles did not come");
        let mut fds = Vec::new();
        for message in control.drain() {
            if let RecvAncillaryMessage::ScmRights(rights) = message {
                fds.extend(rights);
            }
        }
        if fds.len() != n {
            bail!("{} handles came, {n} were announced", fds.len());
        }
        Ok(fds)
    }
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
