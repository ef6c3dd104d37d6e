//! The host feed: frames in host memory, copied into staging buffers.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Result;

use super::{check_size, Mailbox};
use crate::drive::producer::cpu::host_loop;
use crate::drive::producer::{Job, Report};
use vkcuda::interop::SharedFrames;
use vkcuda::vk::memory::Buffer;

/// The fed producer: copies each frame taken from its [`Mailbox`] into
/// the staging buffer of its slot, for the consumer to upload.
pub struct FedProducer {
    shared: Arc<SharedFrames>,
    staging: Arc<Vec<Buffer>>,
    mailbox: Arc<Mailbox>,
}

impl FedProducer {
    /// Fills `staging[plan.image(g)]` from `mailbox` and signals `shared`'s timelines from the host.
    pub fn new(shared: Arc<SharedFrames>, staging: Arc<Vec<Buffer>>, mailbox: Arc<Mailbox>) -> Self {
        Self { shared, staging, mailbox }
    }

    /// The producer thread's loop: until the mailbox is closed and empty, or the run stops.
    pub fn run(self, job: &Job) -> Result<Report> {
        let control = &job.control;
        let result = host_loop(job, &self.shared, &self.staging, |_, pixels| {
            let stop = || control.failed();
            let Some(frame) = self.mailbox.take(&stop) else { return Ok(None) };
            check_size(frame.len(), pixels.len())?;
            pixels.copy_from_slice(&frame);
            Ok(Some(Duration::ZERO))
        });
        self.mailbox.end();
        result
    }
}
