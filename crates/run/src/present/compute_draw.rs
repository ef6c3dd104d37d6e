//! The draw pass as a compute shader (shaders/draw.wgsl): the ready shared
//! frame letterboxed into a target of another size, filtered as the
//! fragment shaders of [`super::draw`] filter it, written into a storage
//! buffer as packed RGBA8 rows or as I420 planes ([`Pixels`]) that a JPEG or
//! video encoder takes as they are. No graphics pipeline, no raster unit:
//! it runs on any queue with compute, also on a GPU whose graphics pipelines
//! stopped finishing after a CUDA fault (../shared/interop-notes.md).

use std::sync::Arc;

use anyhow::{anyhow, bail, Context, Result};
use ash::vk;
use gpu_allocator::MemoryLocation;

use super::readback::{Pixels, Readable, I420};
use crate::base::scene::letterbox;
use crate::frames::consumer::{Frames, Source};
use vkcuda::vk::device::Device;
use vkcuda::vk::frame::{buffer_barrier, COLOR};
use vkcuda::vk::memory::Buffer;
use vkcuda::Format;

const SPIRV: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/draw.spv"));

/// The shader's workgroup size (`@workgroup_size` in shaders/draw.wgsl), both ways.
const GROUP: u32 = 8;

/// At most this many shared frames (`--buffers` is 1..=3).
const MAX_SHARED: usize = 3;

/// The stage and access of the pass's writes to a target.
const WRITE: (vk::PipelineStageFlags2, vk::AccessFlags2) =
    (vk::PipelineStageFlags2::COMPUTE_SHADER, vk::AccessFlags2::SHADER_STORAGE_WRITE);
/// The stage and access of a copy out of a target (the readback).
pub const COPY_R: (vk::PipelineStageFlags2, vk::AccessFlags2) =
    (vk::PipelineStageFlags2::COPY, vk::AccessFlags2::TRANSFER_READ);

/// The shader's push constants (`Draw` in shaders/draw.wgsl), in order.
#[derive(Clone, Copy, Default)]
struct Draw {
    exposure: f32,
    mono: u32,
    encode_srgb: u32,
    width: u32,
    height: u32,
    exact: u32,
    left: u32,
    top: u32,
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
}

impl Draw {
    const WORDS: usize = 18;

    fn bytes(&self) -> [u8; 4 * Self::WORDS] {
        let words = [
            self.exposure.to_bits(),
            self.mono,
            self.encode_srgb,
            self.width,
            self.height,
            self.exact,
            self.left,
            self.top,
            self.box_w,
            self.box_h,
            self.target_w,
            self.target_h,
            self.output,
            self.source,
            self.y_stride,
            self.u_offset,
            self.v_offset,
            self.c_stride,
        ];
        let mut b = [0u8; 4 * Self::WORDS];
        for (i, w) in words.iter().enumerate() {
            b[4 * i..4 * i + 4].copy_from_slice(&w.to_ne_bytes());
        }
        b
    }
}

/// One pipeline: its frame set's layout (set 0), its layout and the sets of the frames it is bound to.
#[derive(Default)]
struct Pipe {
    set_layout: vk::DescriptorSetLayout,
    layout: vk::PipelineLayout,
    pipeline: vk::Pipeline,
    sets: Vec<vk::DescriptorSet>,
}

/// A shared frame the pass is bound to: its image or buffer, the image's view
/// (null for a buffer), and the set that reads it.
struct Bound {
    handle: u64,
    view: vk::ImageView,
    set: vk::DescriptorSet,
}

/// The image bindings of set 0: the frame and the sampler.
const IMAGE_BINDINGS: [(u32, vk::DescriptorType); 2] =
    [(0, vk::DescriptorType::SAMPLED_IMAGE), (1, vk::DescriptorType::SAMPLER)];
/// The buffer bindings of set 0: the frame as 32-, 64- and 128-bit elements.
const BUFFER_BINDINGS: [(u32, vk::DescriptorType); 3] = [
    (2, vk::DescriptorType::STORAGE_BUFFER),
    (3, vk::DescriptorType::STORAGE_BUFFER),
    (4, vk::DescriptorType::STORAGE_BUFFER),
];
/// Set 1: the target.
const TARGET_BINDINGS: [(u32, vk::DescriptorType); 1] = [(0, vk::DescriptorType::STORAGE_BUFFER)];

/// The pipelines (images, buffers), the sampler, and the frames bound to them.
pub struct ComputeDraw {
    device: Arc<Device>,
    images: Pipe,
    buffers: Pipe,
    target_layout: vk::DescriptorSetLayout,
    sampler: vk::Sampler,
    pool: vk::DescriptorPool,
    shared: Vec<Bound>,
    bound_to_buffers: bool,
    shared_extent: vk::Extent2D,
    shared_format: Format,
    /// What the shown colours are multiplied by before they are clamped (float frames' exposure).
    pub exposure: f32,
}

impl ComputeDraw {
    /// The pass (pipelines for images and for buffers, and the sampler).
    pub fn new(device: Arc<Device>) -> Result<Self> {
        let mut this = Self {
            device,
            images: Pipe::default(),
            buffers: Pipe::default(),
            target_layout: vk::DescriptorSetLayout::null(),
            sampler: vk::Sampler::null(),
            pool: vk::DescriptorPool::null(),
            shared: Vec::new(),
            bound_to_buffers: false,
            shared_extent: vk::Extent2D::default(),
            shared_format: Format::Rgba8,
            exposure: 1.0,
        };
        // On an error, Drop destroys what was made.
        let sampler = vk::SamplerCreateInfo::default()
            .mag_filter(vk::Filter::LINEAR)
            .min_filter(vk::Filter::LINEAR)
            .address_mode_u(vk::SamplerAddressMode::CLAMP_TO_EDGE)
            .address_mode_v(vk::SamplerAddressMode::CLAMP_TO_EDGE)
            .address_mode_w(vk::SamplerAddressMode::CLAMP_TO_EDGE);
        // SAFETY: valid create info; destroyed in Drop.
        this.sampler = unsafe { this.device.raw().create_sampler(&sampler, None) }?;
        this.target_layout = set_layout(&this.device, &TARGET_BINDINGS)?;
        this.images = this.create_pipe(&IMAGE_BINDINGS, c"from_image")?;
        this.buffers = this.create_pipe(&BUFFER_BINDINGS, c"from_buffer")?;
        this.allocate_sets()?;
        Ok(this)
    }

    /// Whether the pass reads shared buffers themselves (bound with [`Frames::Buffers`]).
    pub fn reads_buffers(&self) -> bool {
        self.bound_to_buffers
    }

    /// The stage and access of the pass's read of a shared frame.
    pub fn frame_use(&self) -> (vk::PipelineStageFlags2, vk::AccessFlags2) {
        let access = match self.bound_to_buffers {
            true => vk::AccessFlags2::SHADER_STORAGE_READ,
            false => vk::AccessFlags2::SHADER_SAMPLED_READ,
        };
        (vk::PipelineStageFlags2::COMPUTE_SHADER, access)
    }

    /// A pipeline reading frames through `bindings` (set 0) into a target (set 1), from `entry`.
    fn create_pipe(&self, bindings: &[(u32, vk::DescriptorType)], entry: &std::ffi::CStr) -> Result<Pipe> {
        let dev = self.device.raw();
        let mut pipe = Pipe { set_layout: set_layout(&self.device, bindings)?, ..Pipe::default() };
        let set_layouts = [pipe.set_layout, self.target_layout];
        let push = [vk::PushConstantRange::default()
            .stage_flags(vk::ShaderStageFlags::COMPUTE)
            .size(4 * Draw::WORDS as u32)];
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

    /// One pool with [`MAX_SHARED`] frame sets of each pipeline's layout.
    fn allocate_sets(&mut self) -> Result<()> {
        let dev = self.device.raw();
        let n = MAX_SHARED as u32;
        let sizes = [
            vk::DescriptorPoolSize { ty: vk::DescriptorType::SAMPLED_IMAGE, descriptor_count: n },
            vk::DescriptorPoolSize { ty: vk::DescriptorType::SAMPLER, descriptor_count: n },
            vk::DescriptorPoolSize { ty: vk::DescriptorType::STORAGE_BUFFER, descriptor_count: 3 * n },
        ];
        let info = vk::DescriptorPoolCreateInfo::default().max_sets(2 * n).pool_sizes(&sizes);
        // SAFETY: valid create info; destroyed in Drop.
        self.pool = unsafe { dev.create_descriptor_pool(&info, None) }?;
        for pipe in [&mut self.images, &mut self.buffers] {
            let layouts = [pipe.set_layout; MAX_SHARED];
            let alloc =
                vk::DescriptorSetAllocateInfo::default().descriptor_pool(self.pool).set_layouts(&layouts);
            // SAFETY: the pool has room for MAX_SHARED sets of each layout.
            pipe.sets = unsafe { dev.allocate_descriptor_sets(&alloc) }?;
        }
        Ok(())
    }

    /// Points the frame sets at a new session's shared frames (the queue is
    /// idle: interop rebuilds drain first).
    pub fn bind_shared(&mut self, frames: Frames<'_>) -> Result<()> {
        self.release_views();
        let (count, desc) = match frames {
            Frames::Images(images) => (images.len(), images.first().map(|i| (i.extent(), i.format()))),
            Frames::Buffers(buffers) => {
                (buffers.len(), buffers.first().map(|b| (b.desc().extent, b.desc().format)))
            }
        };
        if count > MAX_SHARED {
            bail!("{count} shared frames, the compute draw has sets for {MAX_SHARED}");
        }
        match frames {
            Frames::Images(images) => {
                for (image, &set) in images.iter().zip(&self.images.sets) {
                    let view = self.bind_image(image.image(), image.format(), set)?;
                    self.shared.push(Bound { handle: vk::Handle::as_raw(image.image()), view, set });
                }
            }
            Frames::Buffers(buffers) => {
                for (buffer, &set) in buffers.iter().zip(&self.buffers.sets) {
                    write_buffer_set(&self.device, set, &BUFFER_BINDINGS, buffer.buffer());
                    let handle = vk::Handle::as_raw(buffer.buffer());
                    self.shared.push(Bound { handle, view: vk::ImageView::null(), set });
                }
            }
        }
        self.bound_to_buffers = matches!(frames, Frames::Buffers(_));
        (self.shared_extent, self.shared_format) = desc.unwrap_or((vk::Extent2D::default(), Format::Rgba8));
        Ok(())
    }

    /// A view of `image` for `set` to sample (kept in `shared`, destroyed in `release_views`).
    fn bind_image(&self, image: vk::Image, format: Format, set: vk::DescriptorSet) -> Result<vk::ImageView> {
        let dev = self.device.raw();
        let view_info = vk::ImageViewCreateInfo::default()
            .image(image)
            .view_type(vk::ImageViewType::TYPE_2D)
            .format(format.vk())
            .subresource_range(COLOR);
        // SAFETY: a live image; destroyed in release_views.
        let view = unsafe { dev.create_image_view(&view_info, None) }?;
        let image_info =
            [vk::DescriptorImageInfo::default().image_view(view).image_layout(vk::ImageLayout::GENERAL)];
        let sampler_info = [vk::DescriptorImageInfo::default().sampler(self.sampler)];
        let writes = [
            vk::WriteDescriptorSet::default()
                .dst_set(set)
                .dst_binding(0)
                .descriptor_type(vk::DescriptorType::SAMPLED_IMAGE)
                .image_info(&image_info),
            vk::WriteDescriptorSet::default()
                .dst_set(set)
                .dst_binding(1)
                .descriptor_type(vk::DescriptorType::SAMPLER)
                .image_info(&sampler_info),
        ];
        // SAFETY: the queue is idle (interop rebuilds drain first): no pending command buffer uses the set.
        unsafe { dev.update_descriptor_sets(&writes, &[]) };
        Ok(view)
    }

    fn release_views(&mut self) {
        for bound in self.shared.drain(..).filter(|b| b.view != vk::ImageView::null()) {
            // SAFETY: called with the queue idle (interop rebuilds drain first); the view is ours.
            unsafe { self.device.raw().destroy_image_view(bound.view, None) };
        }
    }

    /// What the shader is told for `frame` into `target`.
    fn constants(&self, frame: Source<'_>, target: &ComputeTarget) -> Draw {
        let extent = target.extent;
        let bx = letterbox(extent, self.shared_extent);
        let mut d = Draw {
            exposure: self.exposure,
            mono: u32::from(self.shared_format == Format::R32f),
            encode_srgb: u32::from(self.shared_format == Format::Rgba8Srgb),
            width: self.shared_extent.width,
            height: self.shared_extent.height,
            exact: u32::from(bx.extent == self.shared_extent),
            left: bx.offset.x.max(0) as u32,
            top: bx.offset.y.max(0) as u32,
            box_w: bx.extent.width,
            box_h: bx.extent.height,
            target_w: extent.width,
            target_h: extent.height,
            source: source_kind(frame, self.shared_format),
            y_stride: extent.width,
            ..Draw::default()
        };
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
        let (handle, pipe) = match frame {
            Source::Image(image) => (vk::Handle::as_raw(image.image()), &self.images),
            Source::Buffer(buffer) => (vk::Handle::as_raw(buffer.buffer()), &self.buffers),
        };
        let set = self
            .shared
            .iter()
            .find(|b| b.handle == handle && pipe.sets.contains(&b.set))
            .map(|b| b.set)
            .ok_or_else(|| anyhow!("shared frame not bound to the compute draw"))?;
        let draw = self.constants(frame, target);
        let groups = match target.pixels {
            Pixels::I420 { .. } => (target.extent.width.div_ceil(8), target.extent.height.div_ceil(2)),
            _ => (target.extent.width, target.extent.height),
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
        unsafe { dev.cmd_push_constants(cmd, pipe.layout, vk::ShaderStageFlags::COMPUTE, 0, &draw.bytes()) };
        // SAFETY: as above.
        unsafe { dev.cmd_dispatch(cmd, groups.0.div_ceil(GROUP), groups.1.div_ceil(GROUP), 1) };
        // SAFETY: as above: the writes come before the copy out.
        unsafe {
            dev.cmd_pipeline_barrier2(cmd, &vk::DependencyInfo::default().buffer_memory_barriers(&after))
        };
        Ok(())
    }
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

/// A set layout of `bindings`, each one descriptor, for the compute stage.
fn set_layout(device: &Device, bindings: &[(u32, vk::DescriptorType)]) -> Result<vk::DescriptorSetLayout> {
    let bindings: Vec<_> = bindings
        .iter()
        .map(|&(binding, ty)| {
            vk::DescriptorSetLayoutBinding::default()
                .binding(binding)
                .descriptor_type(ty)
                .descriptor_count(1)
                .stage_flags(vk::ShaderStageFlags::COMPUTE)
        })
        .collect();
    let info = vk::DescriptorSetLayoutCreateInfo::default().bindings(&bindings);
    // SAFETY: valid create info; the caller destroys it.
    Ok(unsafe { device.raw().create_descriptor_set_layout(&info, None) }?)
}

/// Points `set`'s storage-buffer `bindings` at the whole of `buffer`.
fn write_buffer_set(
    device: &Device,
    set: vk::DescriptorSet,
    bindings: &[(u32, vk::DescriptorType)],
    buffer: vk::Buffer,
) {
    let info = [vk::DescriptorBufferInfo::default().buffer(buffer).range(vk::WHOLE_SIZE)];
    let writes: Vec<_> = bindings
        .iter()
        .map(|&(binding, ty)| {
            vk::WriteDescriptorSet::default()
                .dst_set(set)
                .dst_binding(binding)
                .descriptor_type(ty)
                .buffer_info(&info)
        })
        .collect();
    // SAFETY: no pending command buffer uses the set (a new target's, or the queue is idle).
    unsafe { device.raw().update_descriptor_sets(&writes, &[]) };
}

impl Pipe {
    fn destroy(&mut self, dev: &ash::Device) {
        // The owner waited for the queue; the objects are ours (null ones are ignored).
        // SAFETY: as above.
        unsafe { dev.destroy_pipeline(self.pipeline, None) };
        // SAFETY: as above; the pipeline made with it is gone.
        unsafe { dev.destroy_pipeline_layout(self.layout, None) };
        // SAFETY: as above.
        unsafe { dev.destroy_descriptor_set_layout(self.set_layout, None) };
    }
}

impl Drop for ComputeDraw {
    fn drop(&mut self) {
        self.release_views();
        let dev = self.device.raw();
        self.images.destroy(dev);
        self.buffers.destroy(dev);
        // The owner waited for the queue before dropping; the objects are ours.
        // SAFETY: as above.
        unsafe { dev.destroy_descriptor_set_layout(self.target_layout, None) };
        // SAFETY: as above.
        unsafe { dev.destroy_sampler(self.sampler, None) };
        // SAFETY: as above; its sets go with it.
        unsafe { dev.destroy_descriptor_pool(self.pool, None) };
    }
}

/// A target of the compute draw: a device-local buffer of `extent` pixels in
/// [`Pixels`] (RGBA8 rows or I420 planes), and the set that writes it.
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
            bail!("a compute draw target is RGBA8 or I420 of at least 1x1, not {pixels:?} of {extent:?}");
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
        write_buffer_set(&this.device, this.set, &TARGET_BINDINGS, this.buffer.raw());
        Ok(this)
    }

    /// The buffer, and the bytes of one drawing in it.
    pub fn raw(&self) -> (vk::Buffer, u64) {
        (self.buffer.raw(), self.buffer.size())
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
