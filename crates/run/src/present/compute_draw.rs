//! The draw pass as a compute shader (shaders/draw.wgsl), every draw of
//! vkcuda (the window's, `--consume draw`, the watchers'): the ready shared
//! frame letterboxed into a target of another size, filtered as a sampler
//! filters it, written into a storage buffer as packed RGBA8 or BGRA8 rows
//! (a swapchain's bytes) or as I420 planes ([`Pixels`]) that a JPEG or video
//! encoder takes as they are. No graphics pipeline, no raster unit:
//! it runs on any queue with compute, also on a GPU whose graphics pipelines
//! stopped finishing after a CUDA fault (../shared/interop-notes.md).

use std::sync::Arc;

use anyhow::{bail, Context, Result};
use ash::vk;
use gpu_allocator::MemoryLocation;

use super::frame_sets::{constant_bytes, set_layout, write_buffer_set, BufferSpan, FrameSets, Pipe, Show};
use super::readback::{Pixels, Readable, I420};
use crate::frames::consumer::{Frames, Source};
use crate::scene::letterbox;
use vkcuda::interop::Use;
use vkcuda::vk::device::Device;
use vkcuda::vk::frame::buffer_barrier;
use vkcuda::vk::memory::Buffer;
use vkcuda::Format;

const SPIRV: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/draw.spv"));

/// The shader's workgroup size (`@workgroup_size` in shaders/draw.wgsl), both ways.
const GROUP: u32 = 8;

/// The stage and access of the pass's writes to a target.
const WRITE: Use = (vk::PipelineStageFlags2::COMPUTE_SHADER, vk::AccessFlags2::SHADER_STORAGE_WRITE);
/// The stage and access of a copy out of a target (the readback).
pub const COPY_R: Use = (vk::PipelineStageFlags2::COPY, vk::AccessFlags2::TRANSFER_READ);

/// The shader's push constants (`Draw` in shaders/draw.wgsl), in order: how
/// the frame is shown, then where and into what.
#[derive(Clone, Copy, Default)]
struct Draw {
    show: Show,
    box_w: u32,
    box_h: u32,
    target_w: u32,
    target_h: u32,
    output: u32,
    source: u32,
    y_stride: u32,
    u_offset: u32,
    v_offset: u32,
    c_stride: u32,
    rows_each: u32,
    row_stride: u32,
}

impl Draw {
    fn words(&self) -> Vec<u32> {
        let d = self;
        let rest = [d.box_w, d.box_h, d.target_w, d.target_h, d.output, d.source];
        let planes = [d.y_stride, d.u_offset, d.v_offset, d.c_stride, d.rows_each, d.row_stride];
        [&d.show.words()[..], &rest, &planes].concat()
    }
}

/// Rows each invocation draws on a CPU device (lavapipe): there an invocation
/// costs about 30 ns whatever it does, a step of the shader's loop little.
const CPU_ROWS_EACH: u32 = 32;

/// Set 1: the target.
const TARGET_BINDINGS: [(u32, vk::DescriptorType); 1] = [(0, vk::DescriptorType::STORAGE_BUFFER)];

/// The pipelines (images, buffers) and the frames bound to them.
pub struct ComputeDraw {
    device: Arc<Device>,
    frames: FrameSets,
    images: Pipe,
    buffers: Pipe,
    target_layout: vk::DescriptorSetLayout,
    /// Rows each invocation draws (packed rows): 1 on a GPU, [`CPU_ROWS_EACH`] on a CPU device.
    rows_each: u32,
    /// What the shown colours are multiplied by before they are clamped (float frames' exposure).
    pub exposure: f32,
}

impl ComputeDraw {
    /// The pass (pipelines for images and for buffers).
    pub fn new(device: Arc<Device>) -> Result<Self> {
        let frames = FrameSets::new(device.clone(), vk::ShaderStageFlags::COMPUTE)?;
        // SAFETY: a plain query of the device's own GPU.
        let kind =
            unsafe { device.instance().get_physical_device_properties(device.info().physical) }.device_type;
        let rows_each = if kind == vk::PhysicalDeviceType::CPU { CPU_ROWS_EACH } else { 1 };
        let mut this = Self {
            device,
            rows_each,
            frames,
            images: Pipe::default(),
            buffers: Pipe::default(),
            target_layout: vk::DescriptorSetLayout::null(),
            exposure: 1.0,
        };
        // On an error, Drop destroys what was made.
        this.target_layout = set_layout(&this.device, &TARGET_BINDINGS, vk::ShaderStageFlags::COMPUTE)?;
        this.images = this.create_pipe(this.frames.image_layout, c"from_image")?;
        this.buffers = this.create_pipe(this.frames.buffer_layout, c"from_buffer")?;
        Ok(this)
    }

    /// Whether the pass reads shared buffers themselves (bound with [`Frames::Buffers`]).
    pub fn reads_buffers(&self) -> bool {
        self.frames.reads_buffers()
    }

    /// The stage and access of the pass's read of a shared frame.
    pub fn frame_use(&self) -> Use {
        self.frames.frame_use()
    }

    /// A pipeline reading frames through sets of `frame_layout` (set 0) into a target (set 1), from `entry`.
    fn create_pipe(&self, frame_layout: vk::DescriptorSetLayout, entry: &std::ffi::CStr) -> Result<Pipe> {
        let dev = self.device.raw();
        let mut pipe = Pipe::default();
        let set_layouts = [frame_layout, self.target_layout];
        let push = [vk::PushConstantRange::default()
            .stage_flags(vk::ShaderStageFlags::COMPUTE)
            .size(4 * Draw::default().words().len() as u32)];
        let info =
            vk::PipelineLayoutCreateInfo::default().set_layouts(&set_layouts).push_constant_ranges(&push);
        // SAFETY: valid create info; destroyed in Drop (through `Pipe::destroy`).
        match unsafe { dev.create_pipeline_layout(&info, None) } {
            Ok(layout) => pipe.layout = layout,
            Err(e) => {
                pipe.destroy(dev);
                return Err(e.into());
            }
        }
        match self.create_pipeline(pipe.layout, entry) {
            Ok(pipeline) => pipe.pipeline = pipeline,
            Err(e) => {
                pipe.destroy(dev);
                return Err(e);
            }
        }
        Ok(pipe)
    }

    fn create_pipeline(&self, layout: vk::PipelineLayout, entry: &std::ffi::CStr) -> Result<vk::Pipeline> {
        let dev = self.device.raw();
        let code = ash::util::read_spv(&mut std::io::Cursor::new(SPIRV)).context("reading draw.spv")?;
        // SAFETY: SPIR-V produced and validated by naga at build time.
        let module =
            unsafe { dev.create_shader_module(&vk::ShaderModuleCreateInfo::default().code(&code), None) }?;
        let stage = vk::PipelineShaderStageCreateInfo::default()
            .stage(vk::ShaderStageFlags::COMPUTE)
            .module(module)
            .name(entry);
        let info = vk::ComputePipelineCreateInfo::default().stage(stage).layout(layout);
        // SAFETY: every pointer in `info` points into locals that outlive the call.
        let pipelines = unsafe { dev.create_compute_pipelines(vk::PipelineCache::null(), &[info], None) };
        // SAFETY: the module is only needed while the pipeline is created.
        unsafe { dev.destroy_shader_module(module, None) };
        Ok(pipelines.map_err(|(_, e)| e).context("creating the compute draw pipeline")?[0])
    }

    /// Points the frame sets at a new session's shared frames (the queue is
    /// idle: interop rebuilds drain first).
    pub fn bind_shared(&mut self, frames: Frames<'_>) -> Result<()> {
        self.frames.bind(frames)
    }

    /// What the shader is told for `frame` into `target`.
    fn constants(&self, frame: Source<'_>, target: &ComputeTarget) -> Draw {
        let extent = target.extent;
        let bx = letterbox(extent, self.frames.extent);
        let show = Show::new(&self.frames, bx, self.exposure);
        let mut d = Draw {
            show,
            box_w: bx.extent.width,
            box_h: bx.extent.height,
            target_w: extent.width,
            target_h: extent.height,
            source: source_kind(frame, self.frames.format),
            y_stride: extent.width,
            rows_each: self.rows_each,
            row_stride: row_groups(extent.height, self.rows_each) * GROUP,
            ..Draw::default()
        };
        if target.pixels == Pixels::Bgra8 {
            d.output = 3;
        }
        if let Pixels::I420 { full_range } = target.pixels {
            let planes = I420::of(extent);
            d.output = if full_range { 2 } else { 1 };
            d.y_stride = (planes.y_stride / 4) as u32;
            d.c_stride = (planes.c_stride / 4) as u32;
            (d.u_offset, d.v_offset) = ((planes.u / 4) as u32, (planes.v / 4) as u32);
        }
        d
    }

    /// Records the pass drawing `frame` (bound with [`ComputeDraw::bind_shared`])
    /// into `target`, after the target's last copy out, and makes it ready to be
    /// copied out ([`COPY_R`]).
    pub fn record(&self, cmd: vk::CommandBuffer, frame: Source<'_>, target: &ComputeTarget) -> Result<()> {
        let dev = self.device.raw();
        let pipe = match frame {
            Source::Image(_) => &self.images,
            Source::Buffer(_) => &self.buffers,
        };
        let set = self.frames.set_of(frame)?;
        let draw = self.constants(frame, target);
        let (width, height) = (target.extent.width, target.extent.height);
        let groups = match target.pixels {
            Pixels::I420 { .. } => (width.div_ceil(8).div_ceil(GROUP), height.div_ceil(2).div_ceil(GROUP)),
            _ => (width.div_ceil(GROUP), row_groups(height, self.rows_each)),
        };
        let compute = vk::PipelineBindPoint::COMPUTE;
        let before = [buffer_barrier(target.buffer.raw(), COPY_R, WRITE)];
        let after = [buffer_barrier(target.buffer.raw(), WRITE, COPY_R)];
        // Recording into `cmd`; every handle below is live, the set matches the pipeline's layout.
        // SAFETY: as above: the last copy out of the target comes first.
        unsafe {
            dev.cmd_pipeline_barrier2(cmd, &vk::DependencyInfo::default().buffer_memory_barriers(&before))
        };
        // SAFETY: as above.
        unsafe { dev.cmd_bind_pipeline(cmd, compute, pipe.pipeline) };
        // SAFETY: as above.
        unsafe { dev.cmd_bind_descriptor_sets(cmd, compute, pipe.layout, 0, &[set, target.set], &[]) };
        // SAFETY: as above; the constants are the layout's range.
        unsafe {
            dev.cmd_push_constants(
                cmd,
                pipe.layout,
                vk::ShaderStageFlags::COMPUTE,
                0,
                &constant_bytes(&draw.words()),
            )
        };
        // SAFETY: as above.
        unsafe { dev.cmd_dispatch(cmd, groups.0, groups.1, 1) };
        // SAFETY: as above: the writes come before the copy out.
        unsafe {
            dev.cmd_pipeline_barrier2(cmd, &vk::DependencyInfo::default().buffer_memory_barriers(&after))
        };
        Ok(())
    }
}

/// Workgroups down a target of `height` rows, each invocation drawing `rows_each` of them.
fn row_groups(height: u32, rows_each: u32) -> u32 {
    height.div_ceil(rows_each).div_ceil(GROUP)
}

/// The shader's `source` for a frame of `format` read from `frame`.
fn source_kind(frame: Source<'_>, format: Format) -> u32 {
    match (frame, format) {
        (Source::Image(_), Format::Rgba8Srgb) => 1,
        (Source::Image(_), _) => 0,
        (Source::Buffer(_), f) => match f {
            Format::Rgba8 => 0,
            Format::Rgba8Srgb => 1,
            Format::Bgra8 => 2,
            Format::Rgba16f => 3,
            Format::Rgba32f => 4,
            Format::R32f => 5,
        },
    }
}

impl Drop for ComputeDraw {
    fn drop(&mut self) {
        let dev = self.device.raw();
        self.images.destroy(dev);
        self.buffers.destroy(dev);
        // The owner waited for the queue before dropping; the layout is ours (the frame sets go after).
        // SAFETY: as above.
        unsafe { dev.destroy_descriptor_set_layout(self.target_layout, None) };
    }
}

/// A target of the compute draw: a device-local buffer of `extent` pixels in
/// [`Pixels`] (RGBA8 or BGRA8 rows, or I420 planes), and the set that writes it.
pub struct ComputeTarget {
    device: Arc<Device>,
    buffer: Buffer,
    pool: vk::DescriptorPool,
    set: vk::DescriptorSet,
    /// Its size in pixels.
    pub extent: vk::Extent2D,
    /// How its pixels are laid out.
    pub pixels: Pixels,
}

impl ComputeTarget {
    /// A target of `extent` pixels laid out as `pixels` (RGBA8 or I420), for `pass`.
    pub fn new(pass: &ComputeDraw, name: &str, extent: vk::Extent2D, pixels: Pixels) -> Result<Self> {
        let bytes = pixels.bytes(extent, Format::Rgba8) as u64;
        if matches!(pixels, Pixels::Rendered) || bytes == 0 {
            bail!(
                "a compute draw target is RGBA8, BGRA8 or I420 of at least 1x1, not {pixels:?} of {extent:?}"
            );
        }
        let device = pass.device.clone();
        let usage = vk::BufferUsageFlags::STORAGE_BUFFER | vk::BufferUsageFlags::TRANSFER_SRC;
        let buffer = Buffer::new(device.clone(), name, bytes, usage, MemoryLocation::GpuOnly)?;
        let sizes = [vk::DescriptorPoolSize { ty: vk::DescriptorType::STORAGE_BUFFER, descriptor_count: 1 }];
        let info = vk::DescriptorPoolCreateInfo::default().max_sets(1).pool_sizes(&sizes);
        // SAFETY: valid create info; destroyed in Drop.
        let pool = unsafe { device.raw().create_descriptor_pool(&info, None) }?;
        let mut this = Self { device, buffer, pool, set: vk::DescriptorSet::null(), extent, pixels };
        let layouts = [pass.target_layout];
        let alloc = vk::DescriptorSetAllocateInfo::default().descriptor_pool(pool).set_layouts(&layouts);
        // SAFETY: the pool has room for one set of the target layout.
        this.set = unsafe { this.device.raw().allocate_descriptor_sets(&alloc) }?[0];
        let whole = BufferSpan { buffer: this.buffer.raw(), bytes: vk::WHOLE_SIZE };
        write_buffer_set(&this.device, this.set, &TARGET_BINDINGS, whole);
        Ok(this)
    }

    /// The buffer, and the bytes of one drawing in it.
    pub fn raw(&self) -> BufferSpan {
        BufferSpan { buffer: self.buffer.raw(), bytes: self.buffer.size() }
    }

    /// One drawing, as a readback copies it out.
    pub fn readable(&self) -> Readable {
        Readable::Buffer(self.buffer.raw(), self.pixels.bytes(self.extent, Format::Rgba8) as u64)
    }
}

impl Drop for ComputeTarget {
    fn drop(&mut self) {
        // SAFETY: the owner waited for the GPU's last use of the target; its set goes with the pool.
        unsafe { self.device.raw().destroy_descriptor_pool(self.pool, None) };
    }
}
