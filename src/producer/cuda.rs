//! The CUDA producer: one stream, one thread. For frame `g` it enqueues
//! wait("released") → kernel (surf2Dwrite into the shared image) →
//! signal("rendered"), and never synchronises with the host in steady state.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use cudarc::driver::{sys, CudaContext, CudaEvent, CudaStream};

use super::{Job, Report};
use crate::cuda::external::{ExternalImage, ExternalSemaphore};
use crate::cuda::kernels::SceneKernels;
use crate::scene::FrameArgs;
use crate::vk::shared_image::SharedImage;
use crate::vk::timeline::Timeline;

/// Kernel timings are resolved this many frames late, so reading an event never stalls.
const EVENT_RING: usize = 16;

/// The CUDA producer's state: imports of the Vulkan objects, the stream, the kernels.
pub struct CudaProducer {
    // Field order is drop order: CUDA objects before the context they live in.
    images: Vec<ExternalImage>,
    timelines: Vec<ExternalSemaphore>,
    kernels: SceneKernels,
    stream: Arc<CudaStream>,
    ctx: Arc<CudaContext>,
}

impl CudaProducer {
    /// Imports the shared images and timelines into `ctx` and loads the kernels.
    pub fn new(
        ctx: Arc<CudaContext>,
        images: &[SharedImage],
        timelines: &[Timeline],
        ptx_cache: &Path,
    ) -> Result<Self> {
        let kernels = SceneKernels::load(&ctx, ptx_cache)?;
        let mut imported = Vec::new();
        for (i, img) in images.iter().enumerate() {
            let fd = img.export_fd()?;
            let ext = ExternalImage::import(
                ctx.clone(),
                fd,
                img.allocation_size,
                img.extent.width,
                img.extent.height,
            )
            .with_context(|| format!("importing shared image {i} into CUDA"))?;
            imported.push(ext);
        }
        let mut sems = Vec::new();
        for t in timelines {
            let sem = ExternalSemaphore::import(ctx.clone(), t.export_fd()?, t.name)
                .with_context(|| format!("importing timeline '{}' into CUDA", t.name))?;
            sems.push(sem);
        }
        let stream = ctx.new_stream().context("cuStreamCreate")?;
        Ok(Self { images: imported, timelines: sems, kernels, stream, ctx })
    }

    /// The producer thread's loop.
    pub fn run(self, job: &Job) -> Result<Report> {
        self.ctx.bind_to_thread()?;
        let timing = Some(sys::CUevent_flags::CU_EVENT_DEFAULT);
        let mut events: Vec<(CudaEvent, CudaEvent)> = Vec::new();
        for _ in 0..EVENT_RING {
            events.push((self.ctx.new_event(timing)?, self.ctx.new_event(timing)?));
        }
        let mut report = Report::default();
        let started = Instant::now();
        let result = (|| -> Result<()> {
            let mut g = 0;
            while g < job.control.limit() {
                let step = job.plan.producer(g);
                if let Some(w) = step.wait {
                    // GPU-side wait: the consumer released this image (frame g - N).
                    self.timelines[w.timeline].wait(&self.stream, w.value)?;
                }
                let (start, end) = &events[g as usize % EVENT_RING];
                if g as usize >= EVENT_RING {
                    // The pair's previous frame finished long ago; read its time before reuse.
                    let t = elapsed(start, end)?;
                    report.render_times.push(t);
                    job.control.set_render_time(t);
                }
                start.record(&self.stream)?;
                let spec = job.director.begin(g);
                let args = FrameArgs::new(&spec.scene, spec.tick);
                self.kernels.launch(&self.stream, &spec.scene, &args, self.images[step.image].surface())?;
                end.record(&self.stream)?;
                self.timelines[step.signal.timeline].signal(&self.stream, step.signal.value)?;
                report.frames += 1;
                g += 1;
                job.control.set_produced(g);
            }
            self.stream.synchronize().context("cuStreamSynchronize (a kernel fault shows here)")?;
            Ok(())
        })();
        report.thread_time = started.elapsed() / report.frames.max(1) as u32;
        result?;
        let first = report.frames.saturating_sub(EVENT_RING as u64);
        for g in first..report.frames {
            let (start, end) = &events[g as usize % EVENT_RING];
            report.render_times.push(elapsed(start, end)?);
        }
        Ok(report)
    }
}

fn elapsed(start: &CudaEvent, end: &CudaEvent) -> Result<Duration> {
    end.synchronize()?;
    Ok(Duration::from_secs_f64(f64::from(start.elapsed_ms(end)?) * 1e-3))
}
