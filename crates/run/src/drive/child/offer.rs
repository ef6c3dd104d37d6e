//! A protocol-neutral offer of shared frames, from the process that made
//! them to another: the frame plan and frames, one memory handle per frame,
//! and (when exportable) one handle per timeline with its value when offered.
//! It says nothing of what the other process does with them: a producer's
//! child renders into them ([`super::wire`]); a viewer attached to a running
//! producer would show them. Sent over a [`Channel`] once both ends greeted.

use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

use anyhow::{ensure, Result};
use serde::{Deserialize, Serialize};

use super::channel::{Channel, Received, MAX_HANDLES};
use vkcuda::interop::{ExportedFrames, SharedFrames};
use vkcuda::platform::ExportedMemory;
use vkcuda::sync::{FramePlan, SyncScheme};
use vkcuda::{Format, FrameDesc, Layout};

/// What an offer says; its handles follow it (memory, then timelines).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Offer {
    /// The Vulkan device's `deviceUUID`: the other end opens the device that has it.
    pub uuid: [u8; 16],
    /// The frames and their plan.
    pub frames: PlanWire,
    /// Each frame's allocation size, in the plan's order: one handle each.
    pub memory: Vec<u64>,
    /// Each timeline's value when offered, in the plan's order: one handle
    /// each (none: the timelines are not exportable, and the offering
    /// process signals for the other).
    pub timelines: Vec<u64>,
    /// The images have `COLOR_ATTACHMENT` usage.
    pub color: bool,
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
    pub fn parts(&self) -> Result<PlannedFrames> {
        let plan = FramePlan::new(self.sync, self.images, self.base, self.total)?;
        let extent = ash::vk::Extent2D { width: self.size.0, height: self.size.1 };
        Ok(PlannedFrames { plan, desc: FrameDesc::new(extent).format(self.format).layout(self.layout) })
    }
}

/// The plan and the frames of an offer, as the core has them ([`PlanWire::parts`]).
#[derive(Clone, Copy, Debug)]
pub struct PlannedFrames {
    /// Who waits for and signals which value, frame by frame.
    pub plan: FramePlan,
    /// The frames' size, format and layout.
    pub desc: FrameDesc,
}

/// An offer and its handles, as made or as received.
pub struct Offered {
    /// What it says.
    pub offer: Offer,
    /// One memory handle per frame, in the plan's order.
    pub memory: Vec<OwnedFd>,
    /// One handle per timeline, in the plan's order (or none).
    pub timelines: Vec<OwnedFd>,
}

impl Offered {
    /// `shared`'s frames exported (on the device with `uuid`, planned for
    /// `total` frames), with their timelines' values now.
    pub fn export(shared: &SharedFrames, uuid: [u8; 16], total: u64) -> Result<Self> {
        let exported = shared.export()?;
        let values = match exported.timelines.is_empty() {
            true => Vec::new(),
            false => shared.timelines().iter().map(|t| t.value()).collect::<vkcuda::Result<Vec<_>>>()?,
        };
        let (sizes, memory) =
            exported.memory.into_iter().map(|m| m.into_parts()).map(|(fd, s)| (s, fd)).unzip();
        let frames = PlanWire::new(&exported.plan, &exported.desc, total);
        let offer = Offer { uuid, frames, memory: sizes, timelines: values, color: exported.color };
        Ok(Self { offer, memory, timelines: exported.timelines })
    }

    /// Its handles, in the order they travel (memory, then timelines).
    pub fn handles(&self) -> Vec<BorrowedFd<'_>> {
        self.memory.iter().chain(&self.timelines).map(AsFd::as_fd).collect()
    }

    /// Sends the offer, then its handles.
    pub fn send(&self, channel: &Channel) -> Result<()> {
        channel.send(&self.offer)?;
        channel.send_handles(&self.handles())
    }

    /// Receives an offer and its handles (within the channel's read timeout).
    pub fn receive(channel: &Channel) -> Result<Self> {
        let offer = match channel.recv::<Offer>()? {
            Received::Message(offer) => offer,
            Received::Quiet => anyhow::bail!("no offer came in time"),
            Received::Closed => anyhow::bail!("the other end closed before it offered frames"),
        };
        let n = offer.memory.len() + offer.timelines.len();
        ensure!(n <= MAX_HANDLES, "an offer of {n} handles (at most {MAX_HANDLES})");
        let mut memory = channel.recv_handles(n)?;
        let timelines = memory.split_off(offer.memory.len());
        Ok(Self { offer, memory, timelines })
    }

    /// The frames as the core imports them (`CudaFrames::import_exported`).
    ///
    /// # Safety
    /// The handles are what they say: the offering process's export of its
    /// shared frames of this offer's plan and frames (`SharedFrames::export`),
    /// on the device with this offer's UUID (a peer you trust to say so).
    pub unsafe fn into_exported(self) -> Result<ExportedFrames> {
        let PlannedFrames { plan, desc } = self.offer.frames.parts()?;
        let memory = self
            .memory
            .into_iter()
            .zip(&self.offer.memory)
            // SAFETY: exported from frames of `desc` (the caller's promise).
            .map(|(fd, &size)| unsafe { ExportedMemory::from_raw(fd, size) })
            .collect();
        Ok(ExportedFrames { plan, desc, memory, timelines: self.timelines, color: self.offer.color })
    }
}
