//! The producer's messages, on top of the frames' offer
//! ([`super::offer`]) over a [`Channel`]: after the offer, a [`Produce`]
//! says what the child renders; then frames, kernel versions and the stop
//! go to the child ([`ToChild`]), and readiness, frames made, timings and
//! failures come back ([`FromChild`]). A kernel's CUBIN travels as bulk
//! bytes after the message that announces it, not inside it.

use std::path::PathBuf;

use anyhow::{bail, Result};
use serde::{Deserialize, Serialize};

use super::channel::{Channel, Received};
use crate::kernel::nvrtc::Program;
use crate::kernel::user::KernelSpec;
use crate::scene::director::FrameSpec;
use vkcuda::types::CudaSched;

/// Where a session passes a child the faults to inject (`FAULT@FRAME`,
/// comma-separated), for tests only: in the environment, not the protocol.
pub const INJECT_ENV: &str = "VKCUDA_CHILD_INJECT";

/// What the child does with the frames offered: sent after the offer.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Produce {
    /// What it renders (a kernel's CUBIN follows as bulk bytes, when `cubin`).
    pub render: Render,
    /// Bulk bytes follow: the CUBIN of `render`'s program.
    pub cubin: bool,
    /// Timeline handles after that, for the child's host waits (0: the session waits for it).
    pub wait_timelines: usize,
    /// The child's Vulkan instance loads the validation layer.
    pub validate: bool,
}

impl Produce {
    /// Sends it; a program's CUBIN as bulk bytes after it.
    pub fn send(channel: &Channel, render: &Render, wait_timelines: usize, validate: bool) -> Result<()> {
        let mut render = render.clone();
        let cubin = match &mut render {
            Render::Kernel { program: Some(program), .. } => program.cubin.take(),
            _ => None,
        };
        channel.send(&Produce { render, cubin: cubin.is_some(), wait_timelines, validate })?;
        cubin.map_or(Ok(()), |bytes| channel.send_bytes(&bytes))
    }

    /// Receives it, and the CUBIN after it.
    pub fn receive(channel: &Channel) -> Result<Produce> {
        let mut produce = match channel.recv::<Produce>()? {
            Received::Message(produce) => produce,
            _ => bail!("the session said not what to produce"),
        };
        if let (true, Render::Kernel { program: Some(program), .. }) = (produce.cubin, &mut produce.render) {
            program.cubin = Some(channel.recv_bytes()?);
        }
        Ok(produce)
    }
}

/// Sends a new kernel version: [`ToChild::Kernel`], then its CUBIN.
pub fn send_kernel(channel: &Channel, program: &Program) -> Result<()> {
    let ptx = program.ptx.clone();
    channel.send(&ToChild::Kernel { ptx, cubin: program.cubin.is_some() })?;
    program.cubin.as_ref().map_or(Ok(()), |bytes| channel.send_bytes(bytes))
}

/// The program of a [`ToChild::Kernel`], its CUBIN read after it.
pub fn received_kernel(channel: &Channel, ptx: String, cubin: bool) -> Result<Program> {
    let cubin = if cubin { Some(channel.recv_bytes()?) } else { None };
    Ok(Program { ptx, cubin })
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
    /// A newly compiled version of the user's kernel, from the next frame
    /// on: its PTX; its CUBIN, if any, follows as bulk bytes.
    Kernel {
        /// The PTX.
        ptx: String,
        /// Bulk bytes follow: the CUBIN.
        cubin: bool,
    },
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::user::PARAMS;
    use std::os::fd::OwnedFd;

    /// Both ends of a pair, as a session and its child hold them (greeting aside).
    fn pair() -> (Channel, Channel) {
        let (ours, theirs): (Channel, OwnedFd) = Channel::pair().expect("a pair");
        (ours, Channel::inherited(theirs))
    }

    #[test]
    fn a_cubin_travels_as_bytes_after_its_message() {
        let (session, child) = pair();
        let cubin: Vec<u8> = (0..=255).cycle().take(20_000).collect();
        let program = Program { ptx: ".version 8.0".into(), cubin: Some(cubin.clone()) };
        let kernel = KernelSpec {
            file: "k.cu".into(),
            entry: "k".into(),
            params: [0.0; PARAMS],
            block: (16, 16),
            live: false,
        };
        let cuda = CudaWire {
            ptx_cache: "cache".into(),
            sched: CudaSched::Auto,
            high_priority: false,
            host_waits: true,
        };
        let render = Render::Kernel { kernel, program: Some(program.clone()), cuda };
        Produce::send(&session, &render, 2, false).expect("the produce message");
        send_kernel(&session, &program).expect("a kernel version");
        let produce = Produce::receive(&child).expect("what to produce");
        assert!(produce.cubin && produce.wait_timelines == 2);
        let Render::Kernel { program: Some(got), .. } = &produce.render else { panic!("not the kernel") };
        assert_eq!((got.ptx.as_str(), got.cubin.as_ref()), (program.ptx.as_str(), Some(&cubin)));
        let Ok(Received::Message(ToChild::Kernel { ptx, cubin: true })) = child.recv::<ToChild>() else {
            panic!("no kernel version with its CUBIN announced")
        };
        let version = received_kernel(&child, ptx, true).expect("its CUBIN");
        assert_eq!(version.cubin, Some(cubin));
    }
}
