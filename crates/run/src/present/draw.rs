//! The viewer's draw pass: a fullscreen triangle that samples the ready
//! shared image, letterboxed to keep its aspect ratio, into a colour target
//! (a swapchain image, in [`super::window`]).

use std::sync::Arc;

use anyhow::{anyhow, bail, Context, Result};
use ash::vk;

use crate::scene::letterbox;
use vkcuda::vk::device::Device;
use vkcuda::vk::frame::{image_barrier, record_image_barrier, COLOR};
use vkcuda::vk::memory::Image;
use vkcuda::vk::shared_image::SharedImage;
use vkcuda::Format;

/// The format of every image the draw pass draws into offscreen (the
/// headless draw target, the CPU-present target): 8-bit, like a swapchain.
pub const DISPLAY_FORMAT: vk::Format = vk::Format::R8G8B8A8_UNORM;

/// The fragment shader's push constants (`Show` in shaders/present.wgsl).
#[repr(C)]
#[derive(Clone, Copy)]
struct Show {
    exposure: f32,
    mono: u32,
    encode_srgb: u32,
    pad: u32,
}

/// At most this many shared images (`--buffers` is 1..=3 in a window).
const MAX_SHARED: usize = 3;

const SPIRV: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/present.spv"));

/// The pipeline, its sampler, and one descriptor set per shared image.
pub struct DrawPass {
    device: Arc<Device>,
    format: vk::Format,
    set_layout: vk::DescriptorSetLayout,
    layout: vk::PipelineLayout,
    pipeline: vk::Pipeline,
    sampler: vk::Sampler,
    pool: vk::DescriptorPool,
    sets: Vec<vk::DescriptorSet>,
    /// Per shared image: the image, its view, and the descriptor set that samples it.
    shared: Vec<(vk::Image, vk::ImageView, vk::DescriptorSet)>,
    shared_extent: vk::Extent2D,
    shared_format: Format,
    /// What the shown colours are multiplied by before they are clamped (float frames' exposure).
    pub exposure: f32,
}

impl DrawPass {
    /// The pipeline for colour targets of `format`.
    pub fn new(device: Arc<Device>, format: vk::Format) -> Result<Self> {
        let mut this = Self {
            device,
            format,
            set_layout: vk::DescriptorSetLayout::null(),
            layout: vk::PipelineLayout::null(),
            pipeline: vk::Pipeline::null(),
            sampler: vk::Sampler::null(),
            pool: vk::DescriptorPool::null(),
            sets: Vec::new(),
            shared: Vec::new(),
            shared_extent: vk::Extent2D::default(),
            shared_format: Format::Rgba8,
            exposure: 1.0,
        };
        this.create_pipeline()?;
        Ok(this)
    }

    fn create_pipeline(&mut self) -> Result<()> {
        let dev = &self.device.raw;
        let bindings = [
            vk::DescriptorSetLayoutBinding::default()
                .binding(0)
                .descriptor_type(vk::DescriptorType::SAMPLED_IMAGE)
                .descriptor_count(1)
                .stage_flags(vk::ShaderStageFlags::FRAGMENT),
            vk::DescriptorSetLayoutBinding::default()
                .binding(1)
                .descriptor_type(vk::DescriptorType::SAMPLER)
                .descriptor_count(1)
                .stage_flags(vk::ShaderStageFlags::FRAGMENT),
        ];
        let info = vk::DescriptorSetLayoutCreateInfo::default().bindings(&bindings);
        // SAFETY: valid create info; destroyed in Drop.
        self.set_layout = unsafe { dev.create_descriptor_set_layout(&info, None) }?;
        let set_layouts = [self.set_layout];
        let push = [vk::PushConstantRange::default()
            .stage_flags(vk::ShaderStageFlags::FRAGMENT)
            .size(std::mem::size_of::<Show>() as u32)];
        // SAFETY: valid create info; destroyed in Drop.
        self.layout = unsafe {
            dev.create_pipeline_layout(
                &vk::PipelineLayoutCreateInfo::default()
                    .set_layouts(&set_layouts)
                    .push_constant_ranges(&push),
                None,
            )
        }?;
        let sampler = vk::SamplerCreateInfo::default()
            .mag_filter(vk::Filter::LINEAR)
            .min_filter(vk::Filter::LINEAR)
            .address_mode_u(vk::SamplerAddressMode::CLAMP_TO_EDGE)
            .address_mode_v(vk::SamplerAddressMode::CLAMP_TO_EDGE)
            .address_mode_w(vk::SamplerAddressMode::CLAMP_TO_EDGE);
        // SAFETY: valid create info; destroyed in Drop.
        self.sampler = unsafe { dev.create_sampler(&sampler, None) }?;

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
                .name(c"fs_main"),
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
            .layout(self.layout)
            .push_next(&mut rendering);
        // SAFETY: every pointer in `info` points into locals that outlive the call.
        let pipelines = unsafe { dev.create_graphics_pipelines(vk::PipelineCache::null(), &[info], None) };
        // SAFETY: the module is only needed while the pipeline is created.
        unsafe { dev.destroy_shader_module(module, None) };
        self.pipeline = pipelines.map_err(|(_, e)| e).context("creating the present pipeline")?[0];
        Ok(())
    }

    /// Points the descriptor sets at `images` (after the interop is (re)built).
    /// The pool and sets live as long as the presenter; only the views change.
    pub fn bind_shared(&mut self, images: &[SharedImage]) -> Result<()> {
        self.release_views();
        let dev = &self.device.raw;
        if self.pool == vk::DescriptorPool::null() {
            let n = MAX_SHARED as u32;
            let sizes = [
                vk::DescriptorPoolSize { ty: vk::DescriptorType::SAMPLED_IMAGE, descriptor_count: n },
                vk::DescriptorPoolSize { ty: vk::DescriptorType::SAMPLER, descriptor_count: n },
            ];
            let info = vk::DescriptorPoolCreateInfo::default().max_sets(n).pool_sizes(&sizes);
            // SAFETY: valid create info; destroyed in Drop.
            self.pool = unsafe { dev.create_descriptor_pool(&info, None) }?;
            let layouts = [self.set_layout; MAX_SHARED];
            let alloc =
                vk::DescriptorSetAllocateInfo::default().descriptor_pool(self.pool).set_layouts(&layouts);
            // SAFETY: the pool has room for MAX_SHARED sets.
            self.sets = unsafe { dev.allocate_descriptor_sets(&alloc) }?;
        }
        if images.len() > self.sets.len() {
            bail!("{} shared images, the presenter has sets for {}", images.len(), self.sets.len());
        }
        for (image, &set) in images.iter().zip(&self.sets) {
            let view_info = vk::ImageViewCreateInfo::default()
                .image(image.image)
                .view_type(vk::ImageViewType::TYPE_2D)
                .format(image.format.vk())
                .subresource_range(COLOR);
            // SAFETY: a live image; destroyed in release_views.
            let view = unsafe { dev.create_image_view(&view_info, None) }?;
            self.shared.push((image.image, view, set));
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
        }
        self.shared_extent = images.first().map(|i| i.extent).unwrap_or_default();
        self.shared_format = images.first().map_or(Format::Rgba8, |i| i.format);
        Ok(())
    }

    fn release_views(&mut self) {
        // SAFETY: called with the queue idle (interop rebuilds drain first); the views are ours.
        unsafe {
            for (_, view, _) in self.shared.drain(..) {
                self.device.raw.destroy_image_view(view, None);
            }
        }
    }

    /// Records the pass: clears `target` (a `COLOR_ATTACHMENT_OPTIMAL` view of
    /// `extent` pixels) and draws `image` (bound with [`DrawPass::bind_shared`]) letterboxed.
    pub fn record(
        &self,
        cmd: vk::CommandBuffer,
        image: &SharedImage,
        target: vk::ImageView,
        extent: vk::Extent2D,
    ) -> Result<()> {
        let dev = &self.device.raw;
        let set = self
            .shared
            .iter()
            .find(|(i, _, _)| *i == image.image)
            .map(|s| s.2)
            .ok_or_else(|| anyhow!("shared image not bound to the draw pass"))?;
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
            pad: 0,
        };
        // SAFETY: recording; every handle is live.
        unsafe {
            dev.cmd_begin_rendering(cmd, &rendering);
            dev.cmd_bind_pipeline(cmd, vk::PipelineBindPoint::GRAPHICS, self.pipeline);
            dev.cmd_bind_descriptor_sets(cmd, vk::PipelineBindPoint::GRAPHICS, self.layout, 0, &[set], &[]);
            dev.cmd_set_viewport(cmd, 0, &[viewport]);
            dev.cmd_set_scissor(cmd, 0, &[whole]);
            dev.cmd_push_constants(cmd, self.layout, vk::ShaderStageFlags::FRAGMENT, 0, &show.bytes());
            dev.cmd_draw(cmd, 3, 1, 0, 0);
            dev.cmd_end_rendering(cmd);
        }
        Ok(())
    }
}

impl Show {
    fn bytes(&self) -> [u8; 16] {
        let mut b = [0u8; 16];
        b[0..4].copy_from_slice(&self.exposure.to_ne_bytes());
        b[4..8].copy_from_slice(&self.mono.to_ne_bytes());
        b[8..12].copy_from_slice(&self.encode_srgb.to_ne_bytes());
        b
    }
}

const COLOR_W: (vk::PipelineStageFlags2, vk::AccessFlags2) =
    (vk::PipelineStageFlags2::COLOR_ATTACHMENT_OUTPUT, vk::AccessFlags2::COLOR_ATTACHMENT_WRITE);
const COPY_R: (vk::PipelineStageFlags2, vk::AccessFlags2) =
    (vk::PipelineStageFlags2::COPY, vk::AccessFlags2::TRANSFER_READ);

/// An offscreen image the draw pass renders into: the headless
/// `--consume draw` target and the CPU-present path's window-sized image.
pub struct DrawTarget {
    device: Arc<Device>,
    // Field order is drop order: the view (Drop) before the image.
    view: vk::ImageView,
    image: Image,
    /// Its size.
    pub extent: vk::Extent2D,
}

impl DrawTarget {
    /// An `extent`-sized [`DISPLAY_FORMAT`] image that can be drawn into and copied from.
    pub fn new(device: Arc<Device>, name: &str, extent: vk::Extent2D) -> Result<Self> {
        let usage = vk::ImageUsageFlags::COLOR_ATTACHMENT | vk::ImageUsageFlags::TRANSFER_SRC;
        let image = Image::new(device.clone(), name, DISPLAY_FORMAT, extent, usage)?;
        let info = vk::ImageViewCreateInfo::default()
            .image(image.raw)
            .view_type(vk::ImageViewType::TYPE_2D)
            .format(DISPLAY_FORMAT)
            .subresource_range(COLOR);
        // SAFETY: a live image; destroyed in Drop.
        let view = unsafe { device.raw.create_image_view(&info, None) }?;
        Ok(Self { device, view, image, extent })
    }

    /// The image.
    pub fn raw(&self) -> vk::Image {
        self.image.raw
    }

    /// Records `pass` drawing `image` into the target; with `then_copy`, leaves
    /// the target in `GENERAL`, ready to be copied from.
    pub fn record(
        &self,
        cmd: vk::CommandBuffer,
        pass: &DrawPass,
        image: &SharedImage,
        then_copy: bool,
    ) -> Result<()> {
        let dev = &self.device.raw;
        // The previous frame's draw and copy out of the target come first; its contents may go.
        let last = (COLOR_W.0 | COPY_R.0, COLOR_W.1 | COPY_R.1);
        let to_color = image_barrier(self.image.raw, last, COLOR_W)
            .old_layout(vk::ImageLayout::UNDEFINED)
            .new_layout(vk::ImageLayout::COLOR_ATTACHMENT_OPTIMAL);
        record_image_barrier(dev, cmd, to_color);
        pass.record(cmd, image, self.view, self.extent)?;
        if then_copy {
            let to_copy = image_barrier(self.image.raw, COLOR_W, COPY_R)
                .old_layout(vk::ImageLayout::COLOR_ATTACHMENT_OPTIMAL);
            record_image_barrier(dev, cmd, to_copy);
        }
        Ok(())
    }
}

impl Drop for DrawTarget {
    fn drop(&mut self) {
        // SAFETY: the owner waited for the queue; the view is ours.
        unsafe { self.device.raw.destroy_image_view(self.view, None) };
    }
}

impl Drop for DrawPass {
    fn drop(&mut self) {
        self.release_views();
        // SAFETY: the owner waited for the queue before dropping; all objects are ours.
        unsafe {
            self.device.raw.destroy_pipeline(self.pipeline, None);
            self.device.raw.destroy_pipeline_layout(self.layout, None);
            self.device.raw.destroy_descriptor_set_layout(self.set_layout, None);
            self.device.raw.destroy_sampler(self.sampler, None);
            self.device.raw.destroy_descriptor_pool(self.pool, None);
        }
    }
}
