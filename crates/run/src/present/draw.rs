//! The viewer's draw pass: a fullscreen triangle that shows the ready
//! shared frame, letterboxed to keep its aspect ratio, into a colour target
//! (a swapchain image, in [`super::window`]: the one graphics pipeline left;
//! every other draw is [`super::compute_draw`]). It samples a shared image, or
//! reads a shared buffer as a storage buffer and filters it in the shader:
//! the buffer layout is drawn without a per-frame copy into an image.

use std::sync::Arc;

use anyhow::{Context, Result};
use ash::vk;

use super::frame_sets::{constant_bytes, FrameSets, Pipe, Show};
use crate::frames::consumer::{Frames, Source};
use vkcuda::vk::device::Device;
use vkcuda::Format;

const SPIRV: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/present.spv"));

/// The two pipelines (images, buffers) and the bound frames.
pub struct DrawPass {
    device: Arc<Device>,
    format: vk::Format,
    frames: FrameSets,
    /// Samples a shared image (`fs_main`).
    images: Pipe,
    /// Loads and filters an sRGB shared image itself (`fs_image_loaded`), with `images`' layout.
    srgb_images: vk::Pipeline,
    /// Reads a shared buffer (`fs_buffer_*`); its pipeline is made for the
    /// format of the buffers bound last.
    buffers: Pipe,
    buffer_format: Option<Format>,
    /// What the shown colours are multiplied by before they are clamped (float frames' exposure).
    pub exposure: f32,
}

impl DrawPass {
    /// The pipelines for colour targets of `format`.
    pub fn new(device: Arc<Device>, format: vk::Format) -> Result<Self> {
        let frames = FrameSets::new(device.clone(), vk::ShaderStageFlags::FRAGMENT)?;
        let mut this = Self {
            device,
            format,
            frames,
            images: Pipe::default(),
            srgb_images: vk::Pipeline::null(),
            buffers: Pipe::default(),
            buffer_format: None,
            exposure: 1.0,
        };
        // On an error, Drop destroys what was made.
        this.images = this.create_pipe(this.frames.image_layout, Some(c"fs_main"))?;
        this.srgb_images = this.create_pipeline(this.images.layout, c"fs_image_loaded")?;
        this.buffers = this.create_pipe(this.frames.buffer_layout, None)?;
        Ok(this)
    }

    /// Whether the pass reads shared buffers themselves (bound with
    /// [`Frames::Buffers`]), rather than images.
    pub fn reads_buffers(&self) -> bool {
        self.frames.reads_buffers()
    }

    /// The stage and access of the pass's read of a shared frame.
    pub fn frame_use(&self) -> (vk::PipelineStageFlags2, vk::AccessFlags2) {
        self.frames.frame_use()
    }

    /// The layout for frame sets of `frame_layout` (set 0), and the pipeline whose
    /// fragment shader is `entry` (`None`: made later, [`DrawPass::bind_shared`]).
    fn create_pipe(
        &self,
        frame_layout: vk::DescriptorSetLayout,
        entry: Option<&std::ffi::CStr>,
    ) -> Result<Pipe> {
        let dev = &self.device.raw();
        let mut pipe = Pipe::default();
        let set_layouts = [frame_layout];
        let push = [vk::PushConstantRange::default()
            .stage_flags(vk::ShaderStageFlags::FRAGMENT)
            .size(4 * Show::default().words().len() as u32)];
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
    /// the interop is (re)built), and makes the buffer pipeline for their format.
    pub fn bind_shared(&mut self, frames: Frames<'_>) -> Result<()> {
        self.frames.bind(frames)?;
        if let Frames::Buffers([first, ..]) = frames {
            self.buffer_pipeline(first.desc().format)?;
        }
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
        let format = self.frames.format;
        let pipe = match frame {
            Source::Image(_) => &self.images,
            Source::Buffer(_) => &self.buffers,
        };
        let pipeline = match (frame, format) {
            (Source::Image(_), Format::Rgba8Srgb) => self.srgb_images,
            _ => pipe.pipeline,
        };
        let set = self.frames.set_of(frame)?;
        let attachments = [vk::RenderingAttachmentInfo::default()
            .image_view(target)
            .image_layout(vk::ImageLayout::COLOR_ATTACHMENT_OPTIMAL)
            .load_op(vk::AttachmentLoadOp::CLEAR)
            .store_op(vk::AttachmentStoreOp::STORE)
            .clear_value(vk::ClearValue { color: vk::ClearColorValue { float32: [0.0, 0.0, 0.0, 1.0] } })];
        let whole = vk::Rect2D { offset: vk::Offset2D::default(), extent };
        let rendering =
            vk::RenderingInfo::default().render_area(whole).layer_count(1).color_attachments(&attachments);
        let (show, bx) = Show::new(&self.frames, extent, self.exposure);
        let viewport = vk::Viewport {
            x: bx.offset.x as f32,
            y: bx.offset.y as f32,
            width: bx.extent.width as f32,
            height: bx.extent.height as f32,
            min_depth: 0.0,
            max_depth: 1.0,
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
        unsafe {
            dev.cmd_push_constants(
                cmd,
                pipe.layout,
                vk::ShaderStageFlags::FRAGMENT,
                0,
                &constant_bytes(&show.words()),
            )
        };
        // SAFETY: as above.
        unsafe { dev.cmd_draw(cmd, 3, 1, 0, 0) };
        // SAFETY: as above: ends the rendering begun above.
        unsafe { dev.cmd_end_rendering(cmd) };
        Ok(())
    }
}

impl Drop for DrawPass {
    fn drop(&mut self) {
        self.images.destroy(self.device.raw());
        self.buffers.destroy(self.device.raw());
        // The owner waited for the queue before dropping; the pipeline is ours (the frame sets go after).
        // SAFETY: as above.
        unsafe { self.device.raw().destroy_pipeline(self.srgb_images, None) };
    }
}
