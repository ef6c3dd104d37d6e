//! The viewer's draw pass: a fullscreen triangle that shows the ready
//! shared frame, letterboxed to keep its aspect ratio, into a colour target
//! (a swapchain image, in [`super::window`]: the one graphics pipeline left;
//! every other draw is [`super::compute_draw`]). It samples a shared image, or
//! reads a shared buffer as a storage buffer and filters it in the shader:
//! the buffer layout is drawn without a per-frame copy into an image.

use std::sync::Arc;

use anyhow::{anyhow, bail, Context, Result};
use ash::vk;

use crate::base::scene::letterbox;
use crate::frames::consumer::{Frames, Source};
use vkcuda::vk::device::Device;
use vkcuda::vk::frame::COLOR;
use vkcuda::Format;

/// The fragment shader's push constants (`Show` in shaders/present.wgsl).
#[repr(C)]
#[derive(Clone, Copy)]
struct Show {
    exposure: f32,
    mono: u32,
    encode_srgb: u32,
    width: u32,
    height: u32,
    /// 1: drawn at the frame's own size (one texel per pixel, no filtering).
    exact: u32,
    /// The letterbox's top left corner in the target.
    left: u32,
    top: u32,
}

/// At most this many shared images (`--buffers` is 1..=3 in a window).
const MAX_SHARED: usize = 3;

const SPIRV: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/present.spv"));

/// One pipeline of the pass: what it binds, and how.
#[derive(Default)]
struct Pipe {
    set_layout: vk::DescriptorSetLayout,
    layout: vk::PipelineLayout,
    pipeline: vk::Pipeline,
    /// Its descriptor sets, one per shared frame it can be bound to.
    sets: Vec<vk::DescriptorSet>,
}

/// A shared frame the pass is bound to: its image or buffer, the image's view
/// (null for a buffer), and the descriptor set that reads it.
struct Bound {
    handle: u64,
    view: vk::ImageView,
    set: vk::DescriptorSet,
}

/// The two pipelines (images, buffers), the sampler, and the bound frames.
pub struct DrawPass {
    device: Arc<Device>,
    format: vk::Format,
    /// Samples a shared image (`fs_main`).
    images: Pipe,
    /// Loads and filters an sRGB shared image itself (`fs_image_loaded`), with `images`' layouts.
    srgb_images: vk::Pipeline,
    /// Reads a shared buffer (`fs_buffer_*`); its pipeline is made for the
    /// format of the buffers bound last.
    buffers: Pipe,
    buffer_format: Option<Format>,
    sampler: vk::Sampler,
    pool: vk::DescriptorPool,
    shared: Vec<Bound>,
    /// Whether `shared` holds buffers.
    bound_to_buffers: bool,
    shared_extent: vk::Extent2D,
    shared_format: Format,
    /// What the shown colours are multiplied by before they are clamped (float frames' exposure).
    pub exposure: f32,
}

/// The image pipeline's bindings: the image and the sampler.
const IMAGE_BINDINGS: [(u32, vk::DescriptorType); 2] =
    [(0, vk::DescriptorType::SAMPLED_IMAGE), (1, vk::DescriptorType::SAMPLER)];
/// The buffer pipeline's bindings: the buffer as 32-, 64- and 128-bit elements.
const BUFFER_BINDINGS: [(u32, vk::DescriptorType); 3] = [
    (2, vk::DescriptorType::STORAGE_BUFFER),
    (3, vk::DescriptorType::STORAGE_BUFFER),
    (4, vk::DescriptorType::STORAGE_BUFFER),
];

impl DrawPass {
    /// The pipelines for colour targets of `format`.
    pub fn new(device: Arc<Device>, format: vk::Format) -> Result<Self> {
        let mut this = Self {
            device,
            format,
            images: Pipe::default(),
            srgb_images: vk::Pipeline::null(),
            buffers: Pipe::default(),
            buffer_format: None,
            sampler: vk::Sampler::null(),
            pool: vk::DescriptorPool::null(),
            shared: Vec::new(),
            bound_to_buffers: false,
            shared_extent: vk::Extent2D::default(),
            shared_format: Format::Rgba8,
            exposure: 1.0,
        };
        let sampler = vk::SamplerCreateInfo::default()
            .mag_filter(vk::Filter::LINEAR)
            .min_filter(vk::Filter::LINEAR)
            .address_mode_u(vk::SamplerAddressMode::CLAMP_TO_EDGE)
            .address_mode_v(vk::SamplerAddressMode::CLAMP_TO_EDGE)
            .address_mode_w(vk::SamplerAddressMode::CLAMP_TO_EDGE);
        // SAFETY: valid create info; destroyed in Drop.
        this.sampler = unsafe { this.device.raw().create_sampler(&sampler, None) }?;
        this.images = this.create_pipe(&IMAGE_BINDINGS, Some(c"fs_main"))?;
        this.srgb_images = this.create_pipeline(this.images.layout, c"fs_image_loaded")?;
        this.buffers = this.create_pipe(&BUFFER_BINDINGS, None)?;
        this.allocate_sets()?;
        Ok(this)
    }

    /// Whether the pass reads shared buffers themselves (bound with
    /// [`Frames::Buffers`]), rather than images.
    pub fn reads_buffers(&self) -> bool {
        self.bound_to_buffers
    }

    /// The stage and access of the pass's read of a shared frame.
    pub fn frame_use(&self) -> (vk::PipelineStageFlags2, vk::AccessFlags2) {
        let access = match self.bound_to_buffers {
            true => vk::AccessFlags2::SHADER_STORAGE_READ,
            false => vk::AccessFlags2::SHADER_SAMPLED_READ,
        };
        (vk::PipelineStageFlags2::FRAGMENT_SHADER, access)
    }

    /// One descriptor pool with [`MAX_SHARED`] sets of each pipeline's layout.
    fn allocate_sets(&mut self) -> Result<()> {
        let dev = &self.device.raw();
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

    /// The layouts for `bindings` (set 0), and the pipeline whose fragment
    /// shader is `entry` (`None`: made later, [`DrawPass::bind_shared`]).
    fn create_pipe(
        &self,
        bindings: &[(u32, vk::DescriptorType)],
        entry: Option<&std::ffi::CStr>,
    ) -> Result<Pipe> {
        let dev = &self.device.raw();
        let bindings: Vec<_> = bindings
            .iter()
            .map(|&(binding, ty)| {
                vk::DescriptorSetLayoutBinding::default()
                    .binding(binding)
                    .descriptor_type(ty)
                    .descriptor_count(1)
                    .stage_flags(vk::ShaderStageFlags::FRAGMENT)
            })
            .collect();
        let info = vk::DescriptorSetLayoutCreateInfo::default().bindings(&bindings);
        // SAFETY: valid create info; destroyed in Drop (through `Pipe::destroy`).
        let set_layout = unsafe { dev.create_descriptor_set_layout(&info, None) }?;
        let mut pipe = Pipe { set_layout, ..Pipe::default() };
        let set_layouts = [pipe.set_layout];
        let push = [vk::PushConstantRange::default()
            .stage_flags(vk::ShaderStageFlags::FRAGMENT)
            .size(std::mem::size_of::<Show>() as u32)];
        let info =
            vk::PipelineLayoutCreateInfo::default().set_layouts(&set_layouts).push_constant_ranges(&push);
        // SAFETY: valid create info; destroyed in Drop (through `Pipe::destroy`).
        pipe.layout = match unsafe { dev.create_pipeline_layout(&info, None) } {
            Ok(layout) => layout,
            Err(e) => {
                pipe.destroy(dev);
                return Err(e.into());
            }
        };
        match entry.map(|entry| self.create_pipeline(pipe.layout, entry)).transpose() {
            Ok(pipeline) => pipe.pipeline = pipeline.unwrap_or_default(),
            Err(e) => {
                pipe.destroy(dev);
                return Err(e);
            }
        }
        Ok(pipe)
    }

    fn create_pipeline(&self, layout: vk::PipelineLayout, entry: &std::ffi::CStr) -> Result<vk::Pipeline> {
        let dev = &self.device.raw();
        let code = ash::util::read_spv(&mut std::io::Cursor::new(SPIRV)).context("reading present.spv")?;
        // SAFETY: SPIR-V produced and validated by naga at build time.
        let module =
            unsafe { dev.create_shader_module(&vk::ShaderModuleCreateInfo::default().code(&code), None) }?;
        let stages = [
            vk::PipelineShaderStageCreateInfo::default()
                .stage(vk::ShaderStageFlags::VERTEX)
                .module(module)
                .name(c"vs_main"),
            vk::PipelineShaderStageCreateInfo::default()
                .stage(vk::ShaderStageFlags::FRAGMENT)
                .module(module)
                .name(entry),
        ];
        let vertex_input = vk::PipelineVertexInputStateCreateInfo::default();
        let assembly = vk::PipelineInputAssemblyStateCreateInfo::default()
            .topology(vk::PrimitiveTopology::TRIANGLE_LIST);
        let viewport = vk::PipelineViewportStateCreateInfo::default().viewport_count(1).scissor_count(1);
        let raster = vk::PipelineRasterizationStateCreateInfo::default()
            .polygon_mode(vk::PolygonMode::FILL)
            .cull_mode(vk::CullModeFlags::NONE)
            .line_width(1.0);
        let multisample = vk::PipelineMultisampleStateCreateInfo::default()
            .rasterization_samples(vk::SampleCountFlags::TYPE_1);
        let attachments =
            [vk::PipelineColorBlendAttachmentState::default()
                .color_write_mask(vk::ColorComponentFlags::RGBA)];
        let blend = vk::PipelineColorBlendStateCreateInfo::default().attachments(&attachments);
        let dynamic_states = [vk::DynamicState::VIEWPORT, vk::DynamicState::SCISSOR];
        let dynamic = vk::PipelineDynamicStateCreateInfo::default().dynamic_states(&dynamic_states);
        let formats = [self.format];
        let mut rendering = vk::PipelineRenderingCreateInfo::default().color_attachment_formats(&formats);
        let info = vk::GraphicsPipelineCreateInfo::default()
            .stages(&stages)
            .vertex_input_state(&vertex_input)
            .input_assembly_state(&assembly)
            .viewport_state(&viewport)
            .rasterization_state(&raster)
            .multisample_state(&multisample)
            .color_blend_state(&blend)
            .dynamic_state(&dynamic)
            .layout(layout)
            .push_next(&mut rendering);
        // SAFETY: every pointer in `info` points into locals that outlive the call.
        let pipelines = unsafe { dev.create_graphics_pipelines(vk::PipelineCache::null(), &[info], None) };
        // SAFETY: the module is only needed while the pipeline is created.
        unsafe { dev.destroy_shader_module(module, None) };
        Ok(pipelines.map_err(|(_, e)| e).context("creating the present pipeline")?[0])
    }

    /// Points the descriptor sets at a new session's shared frames (after
    /// the interop is (re)built). The pool and sets live as long as the pass.
    pub fn bind_shared(&mut self, frames: Frames<'_>) -> Result<()> {
        self.release_views();
        let count = match frames {
            Frames::Images(images) => images.len(),
            Frames::Buffers(buffers) => buffers.len(),
        };
        if count > MAX_SHARED {
            bail!("{count} shared frames, the presenter has sets for {MAX_SHARED}");
        }
        match frames {
            Frames::Images(images) => {
                for (image, &set) in images.iter().zip(&self.images.sets) {
                    let view = self.bind_image(image.image(), image.format(), set)?;
                    self.shared.push(Bound { handle: vk::Handle::as_raw(image.image()), view, set });
                }
            }
            Frames::Buffers(buffers) => {
                if let Some(first) = buffers.first() {
                    self.buffer_pipeline(first.desc().format)?;
                }
                for (buffer, &set) in buffers.iter().zip(&self.buffers.sets) {
                    let info =
                        [vk::DescriptorBufferInfo::default().buffer(buffer.buffer()).range(buffer.size())];
                    let writes = BUFFER_BINDINGS.map(|(binding, ty)| {
                        vk::WriteDescriptorSet::default()
                            .dst_set(set)
                            .dst_binding(binding)
                            .descriptor_type(ty)
                            .buffer_info(&info)
                    });
                    // SAFETY: the queue is idle (interop rebuilds drain first), so no pending
                    // command buffer uses the set.
                    unsafe { self.device.raw().update_descriptor_sets(&writes, &[]) };
                    let handle = vk::Handle::as_raw(buffer.buffer());
                    self.shared.push(Bound { handle, view: vk::ImageView::null(), set });
                }
            }
        }
        self.bound_to_buffers = matches!(frames, Frames::Buffers(_));
        let desc = match frames {
            Frames::Images(images) => images.first().map(|i| (i.extent(), i.format())),
            Frames::Buffers(buffers) => buffers.first().map(|b| (b.desc().extent, b.desc().format)),
        };
        (self.shared_extent, self.shared_format) = desc.unwrap_or((vk::Extent2D::default(), Format::Rgba8));
        Ok(())
    }

    /// Makes the buffer pipeline for `format`, unless it is made (queue idle).
    fn buffer_pipeline(&mut self, format: Format) -> Result<()> {
        if self.buffer_format == Some(format) {
            return Ok(());
        }
        let entry = match format {
            Format::Rgba8 => c"fs_buffer_rgba8",
            Format::Rgba8Srgb => c"fs_buffer_rgba8_srgb",
            Format::Bgra8 => c"fs_buffer_bgra8",
            Format::Rgba16f => c"fs_buffer_rgba16f",
            Format::Rgba32f => c"fs_buffer_rgba32f",
            Format::R32f => c"fs_buffer_r32f",
        };
        let pipeline = self.create_pipeline(self.buffers.layout, entry)?;
        let old = std::mem::replace(&mut self.buffers.pipeline, pipeline);
        // SAFETY: the queue is idle (interop rebuilds drain first): no command buffer uses it.
        unsafe { self.device.raw().destroy_pipeline(old, None) };
        self.buffer_format = Some(format);
        Ok(())
    }

    /// A view of `image` for `set` to sample (the caller keeps it in `shared`).
    fn bind_image(&self, image: vk::Image, format: Format, set: vk::DescriptorSet) -> Result<vk::ImageView> {
        let dev = &self.device.raw();
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
        // SAFETY: the queue is idle (interop rebuilds drain first), so no pending command
        // buffer uses the set.
        unsafe { dev.update_descriptor_sets(&writes, &[]) };
        Ok(view)
    }

    fn release_views(&mut self) {
        // SAFETY: called with the queue idle (interop rebuilds drain first); the views are ours.
        unsafe {
            for bound in self.shared.drain(..).filter(|b| b.view != vk::ImageView::null()) {
                self.device.raw().destroy_image_view(bound.view, None);
            }
        }
    }

    /// Records the pass: clears `target` (a `COLOR_ATTACHMENT_OPTIMAL` view of
    /// `extent` pixels) and draws `frame` (bound with [`DrawPass::bind_shared`]) letterboxed.
    pub fn record(
        &self,
        cmd: vk::CommandBuffer,
        frame: Source<'_>,
        target: vk::ImageView,
        extent: vk::Extent2D,
    ) -> Result<()> {
        let dev = &self.device.raw();
        let (handle, pipe) = match frame {
            Source::Image(image) => (vk::Handle::as_raw(image.image()), &self.images),
            Source::Buffer(buffer) => (vk::Handle::as_raw(buffer.buffer()), &self.buffers),
        };
        let pipeline = match (frame, self.shared_format) {
            (Source::Image(_), Format::Rgba8Srgb) => self.srgb_images,
            _ => pipe.pipeline,
        };
        let set = self
            .shared
            .iter()
            .find(|b| b.handle == handle && (pipe.sets.contains(&b.set)))
            .map(|b| b.set)
            .ok_or_else(|| anyhow!("shared frame not bound to the draw pass"))?;
        let attachments = [vk::RenderingAttachmentInfo::default()
            .image_view(target)
            .image_layout(vk::ImageLayout::COLOR_ATTACHMENT_OPTIMAL)
            .load_op(vk::AttachmentLoadOp::CLEAR)
            .store_op(vk::AttachmentStoreOp::STORE)
            .clear_value(vk::ClearValue { color: vk::ClearColorValue { float32: [0.0, 0.0, 0.0, 1.0] } })];
        let whole = vk::Rect2D { offset: vk::Offset2D::default(), extent };
        let rendering =
            vk::RenderingInfo::default().render_area(whole).layer_count(1).color_attachments(&attachments);
        let bx = letterbox(extent, self.shared_extent);
        let viewport = vk::Viewport {
            x: bx.offset.x as f32,
            y: bx.offset.y as f32,
            width: bx.extent.width as f32,
            height: bx.extent.height as f32,
            min_depth: 0.0,
            max_depth: 1.0,
        };
        let show = Show {
            exposure: self.exposure,
            mono: u32::from(self.shared_format == Format::R32f),
            encode_srgb: u32::from(self.shared_format == Format::Rgba8Srgb),
            width: self.shared_extent.width,
            height: self.shared_extent.height,
            exact: u32::from(bx.extent == self.shared_extent),
            left: bx.offset.x.max(0) as u32,
            top: bx.offset.y.max(0) as u32,
        };
        let graphics = vk::PipelineBindPoint::GRAPHICS;
        // Recording into `cmd`; every handle below is live, the target in COLOR_ATTACHMENT_OPTIMAL.
        // SAFETY: as above.
        unsafe { dev.cmd_begin_rendering(cmd, &rendering) };
        // SAFETY: as above.
        unsafe { dev.cmd_bind_pipeline(cmd, graphics, pipeline) };
        // SAFETY: as above; the set matches the pipeline's layout.
        unsafe { dev.cmd_bind_descriptor_sets(cmd, graphics, pipe.layout, 0, &[set], &[]) };
        // SAFETY: as above.
        unsafe { dev.cmd_set_viewport(cmd, 0, &[viewport]) };
        // SAFETY: as above.
        unsafe { dev.cmd_set_scissor(cmd, 0, &[whole]) };
        // SAFETY: as above; the constants are the layout's fragment range.
        unsafe { dev.cmd_push_constants(cmd, pipe.layout, vk::ShaderStageFlags::FRAGMENT, 0, &show.bytes()) };
        // SAFETY: as above.
        unsafe { dev.cmd_draw(cmd, 3, 1, 0, 0) };
        // SAFETY: as above: ends the rendering begun above.
        unsafe { dev.cmd_end_rendering(cmd) };
        Ok(())
    }
}

impl Show {
    fn bytes(&self) -> [u8; std::mem::size_of::<Show>()] {
        let words = [self.mono, self.encode_srgb, self.width, self.height, self.exact, self.left, self.top];
        let mut b = [0u8; std::mem::size_of::<Show>()];
        b[0..4].copy_from_slice(&self.exposure.to_ne_bytes());
        for (i, w) in words.iter().enumerate() {
            b[4 + 4 * i..8 + 4 * i].copy_from_slice(&w.to_ne_bytes());
        }
        b
    }
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

impl Drop for DrawPass {
    fn drop(&mut self) {
        self.release_views();
        self.images.destroy(self.device.raw());
        self.buffers.destroy(self.device.raw());
        // The owner waited for the queue before dropping; the objects are ours.
        // SAFETY: as above.
        unsafe { self.device.raw().destroy_pipeline(self.srgb_images, None) };
        // SAFETY: as above.
        unsafe { self.device.raw().destroy_sampler(self.sampler, None) };
        // SAFETY: as above; its sets go with it.
        unsafe { self.device.raw().destroy_descriptor_pool(self.pool, None) };
    }
}
