//! The windowed consumer: draws the ready shared image into a swapchain image
//! (a fullscreen triangle sampling it, letterboxed to keep its aspect ratio)
//! and presents it.
//!
//! Semaphores, who signals and who waits:
//! - `acquired[slot]` (binary, one per frame slot): signalled by
//!   `vkAcquireNextImageKHR`, waited on by the frame's submission before it
//!   writes colour. A slot's semaphore is reused only after the slot's fence
//!   says its last submission finished.
//! - `rendered_to[image]` (binary, one per swapchain image): signalled by the
//!   frame's submission, waited on by `vkQueuePresentKHR`. One per image, not
//!   per slot, because only re-acquiring the image proves its last present
//!   no longer waits on it.
//! - the timelines, as in every mode (`vk::frame`).

use std::sync::Arc;

use anyhow::{anyhow, bail, Context, Result};
use ash::vk;

use super::readback::Readback;
use crate::vk::device::Device;
use crate::vk::frame::{Consume, COLOR};
use crate::vk::shared_image::SharedImage;
use crate::vk::SHARED_FORMAT;

/// At most this many shared images (`--buffers` is 1..=3).
const MAX_SHARED: usize = 3;

const SPIRV: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/present.spv"));

/// The swapchain, the present pipeline and the per-shared-image descriptor sets.
pub struct Presenter {
    device: Arc<Device>,
    surface_fn: ash::khr::surface::Instance,
    swapchain_fn: ash::khr::swapchain::Device,
    surface: vk::SurfaceKHR,
    swapchain: vk::SwapchainKHR,
    images: Vec<vk::Image>,
    views: Vec<vk::ImageView>,
    rendered_to: Vec<vk::Semaphore>,
    acquired: Vec<vk::Semaphore>,
    extent: vk::Extent2D,
    format: vk::Format,
    mode: vk::PresentModeKHR,
    modes: Vec<vk::PresentModeKHR>,
    set_layout: vk::DescriptorSetLayout,
    layout: vk::PipelineLayout,
    pipeline: vk::Pipeline,
    sampler: vk::Sampler,
    pool: vk::DescriptorPool,
    sets: Vec<vk::DescriptorSet>,
    /// Per shared image: the image, its view, and the descriptor set that samples it.
    shared: Vec<(vk::Image, vk::ImageView, vk::DescriptorSet)>,
    shared_extent: vk::Extent2D,
    /// The swapchain image acquired for the frame being recorded.
    current: Option<u32>,
    /// When set, the next frame is also read back and written as PNG.
    pub snapshot: Option<Readback>,
    snapshot_next: bool,
}

/// The outcome of acquiring or presenting.
#[derive(Debug, PartialEq, Eq)]
pub enum SwapchainState {
    /// Go on.
    Ok,
    /// The swapchain no longer fits the window: recreate it.
    Stale,
}

/// The present mode names vkcuda accepts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum PresentMode {
    /// Vsync; always supported.
    Fifo,
    /// Vsync without blocking: the newest frame replaces a queued one.
    Mailbox,
    /// No vsync; may tear.
    Immediate,
}

impl PresentMode {
    fn raw(self) -> vk::PresentModeKHR {
        match self {
            PresentMode::Fifo => vk::PresentModeKHR::FIFO,
            PresentMode::Mailbox => vk::PresentModeKHR::MAILBOX,
            PresentMode::Immediate => vk::PresentModeKHR::IMMEDIATE,
        }
    }
}

/// A readable name of a present mode.
pub fn mode_name(mode: vk::PresentModeKHR) -> &'static str {
    match mode {
        vk::PresentModeKHR::FIFO => "fifo",
        vk::PresentModeKHR::MAILBOX => "mailbox",
        vk::PresentModeKHR::IMMEDIATE => "immediate",
        _ => "other",
    }
}

impl Presenter {
    /// Creates the pipeline; the swapchain follows with [`Presenter::recreate`].
    pub fn new(
        device: Arc<Device>,
        surface_fn: ash::khr::surface::Instance,
        surface: vk::SurfaceKHR,
        slots: usize,
        mode: PresentMode,
    ) -> Result<Self> {
        let swapchain_fn = ash::khr::swapchain::Device::new(&device.instance.raw, &device.raw);
        let physical = device.info.physical;
        // SAFETY: plain queries with a live surface.
        let formats = unsafe { surface_fn.get_physical_device_surface_formats(physical, surface) }?;
        // SAFETY: as above.
        let modes = unsafe { surface_fn.get_physical_device_surface_present_modes(physical, surface) }?;
        // UNORM, so the shared image's bytes reach the screen unchanged (no sRGB encoding).
        let format = [vk::Format::B8G8R8A8_UNORM, vk::Format::R8G8B8A8_UNORM]
            .into_iter()
            .find(|f| formats.iter().any(|s| s.format == *f))
            .ok_or_else(|| anyhow!("the window offers no UNORM 8-bit colour format ({formats:?})"))?;
        let wanted = mode.raw();
        let mode = if modes.contains(&wanted) {
            wanted
        } else {
            eprintln!("vkcuda: warning: present mode {:?} is not supported here; using fifo", mode);
            vk::PresentModeKHR::FIFO
        };
        let mut this = Self {
            device,
            surface_fn,
            swapchain_fn,
            surface,
            swapchain: vk::SwapchainKHR::null(),
            images: Vec::new(),
            views: Vec::new(),
            rendered_to: Vec::new(),
            acquired: Vec::new(),
            extent: vk::Extent2D::default(),
            format,
            mode,
            modes,
            set_layout: vk::DescriptorSetLayout::null(),
            layout: vk::PipelineLayout::null(),
            pipeline: vk::Pipeline::null(),
            sampler: vk::Sampler::null(),
            pool: vk::DescriptorPool::null(),
            sets: Vec::new(),
            shared: Vec::new(),
            shared_extent: vk::Extent2D::default(),
            current: None,
            snapshot: None,
            snapshot_next: false,
        };
        for _ in 0..slots {
            // SAFETY: default create info; destroyed in Drop.
            let s = unsafe { this.device.raw.create_semaphore(&vk::SemaphoreCreateInfo::default(), None) }?;
            this.acquired.push(s);
        }
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
        // SAFETY: valid create info; destroyed in Drop.
        self.layout = unsafe {
            dev.create_pipeline_layout(
                &vk::PipelineLayoutCreateInfo::default().set_layouts(&set_layouts),
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
                .format(SHARED_FORMAT)
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

    /// The window's drawable size now; zero when minimized.
    pub fn surface_extent(&self, window: vk::Extent2D) -> Result<vk::Extent2D> {
        // SAFETY: plain query with a live surface.
        let caps = unsafe {
            self.surface_fn.get_physical_device_surface_capabilities(self.device.info.physical, self.surface)
        }?;
        Ok(if caps.current_extent.width != u32::MAX { caps.current_extent } else { window })
    }

    /// (Re)creates the swapchain for a window of `window` pixels. The caller
    /// made sure no submitted frame still uses the old one (queue idle).
    pub fn recreate(&mut self, window: vk::Extent2D) -> Result<()> {
        let physical = self.device.info.physical;
        // SAFETY: plain query with a live surface.
        let caps =
            unsafe { self.surface_fn.get_physical_device_surface_capabilities(physical, self.surface) }?;
        let extent = if caps.current_extent.width != u32::MAX {
            caps.current_extent
        } else {
            vk::Extent2D {
                width: window.width.clamp(caps.min_image_extent.width, caps.max_image_extent.width),
                height: window.height.clamp(caps.min_image_extent.height, caps.max_image_extent.height),
            }
        };
        if extent.width == 0 || extent.height == 0 {
            bail!("cannot create a swapchain for a minimized window");
        }
        let mut count = caps.min_image_count + 1;
        if caps.max_image_count > 0 {
            count = count.min(caps.max_image_count);
        }
        let alpha = [vk::CompositeAlphaFlagsKHR::OPAQUE, vk::CompositeAlphaFlagsKHR::INHERIT]
            .into_iter()
            .find(|a| caps.supported_composite_alpha.contains(*a))
            .unwrap_or(vk::CompositeAlphaFlagsKHR::OPAQUE);
        let old = self.swapchain;
        let info = vk::SwapchainCreateInfoKHR::default()
            .surface(self.surface)
            .min_image_count(count)
            .image_format(self.format)
            .image_color_space(vk::ColorSpaceKHR::SRGB_NONLINEAR)
            .image_extent(extent)
            .image_array_layers(1)
            .image_usage(vk::ImageUsageFlags::COLOR_ATTACHMENT)
            .image_sharing_mode(vk::SharingMode::EXCLUSIVE)
            .pre_transform(caps.current_transform)
            .composite_alpha(alpha)
            .present_mode(self.mode)
            .clipped(true)
            .old_swapchain(old);
        // SAFETY: valid create info; the old swapchain is retired by this call and destroyed below.
        self.swapchain =
            unsafe { self.swapchain_fn.create_swapchain(&info, None) }.context("vkCreateSwapchainKHR")?;
        self.destroy_swapchain_objects(old);
        // SAFETY: a live swapchain.
        self.images = unsafe { self.swapchain_fn.get_swapchain_images(self.swapchain) }?;
        for &image in &self.images {
            let view_info = vk::ImageViewCreateInfo::default()
                .image(image)
                .view_type(vk::ImageViewType::TYPE_2D)
                .format(self.format)
                .subresource_range(COLOR);
            // SAFETY: a live swapchain image; destroyed with the swapchain.
            self.views.push(unsafe { self.device.raw.create_image_view(&view_info, None) }?);
            // SAFETY: default create info; destroyed with the swapchain.
            self.rendered_to.push(unsafe {
                self.device.raw.create_semaphore(&vk::SemaphoreCreateInfo::default(), None)
            }?);
        }
        self.extent = extent;
        Ok(())
    }

    fn destroy_swapchain_objects(&mut self, swapchain: vk::SwapchainKHR) {
        // SAFETY: the queue is idle (the caller drained it), so nothing uses these any more.
        unsafe {
            for v in self.views.drain(..) {
                self.device.raw.destroy_image_view(v, None);
            }
            for s in self.rendered_to.drain(..) {
                self.device.raw.destroy_semaphore(s, None);
            }
            if swapchain != vk::SwapchainKHR::null() {
                self.swapchain_fn.destroy_swapchain(swapchain, None);
            }
        }
    }

    /// Acquires the next swapchain image with slot `slot`'s semaphore; the
    /// returned semaphore is what the frame's submission must wait on.
    pub fn acquire(&mut self, slot: usize) -> Result<(SwapchainState, vk::Semaphore)> {
        let sem = self.acquired[slot];
        // SAFETY: the slot's semaphore is unsignalled: its last waiter (the slot's previous
        // submission) has finished, which the frame loop checked before this call.
        let r = unsafe {
            self.swapchain_fn.acquire_next_image(
                self.swapchain,
                crate::vk::WAIT_TIMEOUT.as_nanos() as u64,
                sem,
                vk::Fence::null(),
            )
        };
        match r {
            Ok((index, suboptimal)) => {
                self.current = Some(index);
                // A suboptimal image is still presentable: use it, then recreate.
                Ok((if suboptimal { SwapchainState::Stale } else { SwapchainState::Ok }, sem))
            }
            Err(vk::Result::ERROR_OUT_OF_DATE_KHR) => Ok((SwapchainState::Stale, vk::Semaphore::null())),
            Err(vk::Result::TIMEOUT | vk::Result::NOT_READY) => {
                bail!("timed out after {:?} acquiring a swapchain image", crate::vk::WAIT_TIMEOUT)
            }
            Err(e) => Err(e).context("vkAcquireNextImageKHR"),
        }
    }

    /// The semaphore the current frame's submission signals for the present.
    pub fn present_semaphore(&self) -> Result<vk::Semaphore> {
        let index = self.current.ok_or_else(|| anyhow!("no swapchain image acquired"))?;
        Ok(self.rendered_to[index as usize])
    }

    /// Presents the current image once the frame's submission is done.
    pub fn present(&mut self) -> Result<SwapchainState> {
        let index = self.current.take().ok_or_else(|| anyhow!("no swapchain image acquired"))?;
        let waits = [self.rendered_to[index as usize]];
        let swapchains = [self.swapchain];
        let indices = [index];
        let info = vk::PresentInfoKHR::default()
            .wait_semaphores(&waits)
            .swapchains(&swapchains)
            .image_indices(&indices);
        let presented = self.device.queue_op(|| {
            // SAFETY: the image was acquired; its semaphore's signal was submitted just before.
            unsafe { self.swapchain_fn.queue_present(self.device.queue, &info) }
        });
        match presented {
            Ok(false) => Ok(SwapchainState::Ok),
            Ok(true) | Err(vk::Result::ERROR_OUT_OF_DATE_KHR) => Ok(SwapchainState::Stale),
            Err(e) => Err(e).context("vkQueuePresentKHR"),
        }
    }

    /// Asks for the next frame to be read back and written as PNG.
    pub fn request_snapshot(&mut self) {
        self.snapshot_next = self.snapshot.is_some();
    }

    /// Switches to the next supported present mode; returns its name. The
    /// swapchain must be recreated for it to apply.
    pub fn cycle_mode(&mut self) -> &'static str {
        let order = [vk::PresentModeKHR::FIFO, vk::PresentModeKHR::MAILBOX, vk::PresentModeKHR::IMMEDIATE];
        let supported: Vec<_> = order.into_iter().filter(|m| self.modes.contains(m)).collect();
        let i = supported.iter().position(|m| *m == self.mode).unwrap_or(0);
        self.mode = supported[(i + 1) % supported.len().max(1)];
        mode_name(self.mode)
    }

    /// The present mode in use.
    pub fn mode(&self) -> &'static str {
        mode_name(self.mode)
    }

    /// The swapchain's size.
    pub fn extent(&self) -> vk::Extent2D {
        self.extent
    }
}

/// The letterbox: the largest rectangle with the frame's aspect ratio,
/// centred in the window, in whole pixels.
pub fn letterbox(window: vk::Extent2D, frame: vk::Extent2D) -> vk::Rect2D {
    let (ww, wh) = (f64::from(window.width), f64::from(window.height));
    let (fw, fh) = (f64::from(frame.width.max(1)), f64::from(frame.height.max(1)));
    let scale = (ww / fw).min(wh / fh);
    let (w, h) = ((fw * scale).round().max(1.0) as u32, (fh * scale).round().max(1.0) as u32);
    vk::Rect2D {
        offset: vk::Offset2D {
            x: ((window.width - w.min(window.width)) / 2) as i32,
            y: ((window.height - h.min(window.height)) / 2) as i32,
        },
        extent: vk::Extent2D { width: w.min(window.width), height: h.min(window.height) },
    }
}

impl Consume for Presenter {
    fn image_use(&self) -> (vk::PipelineStageFlags2, vk::AccessFlags2) {
        // Sampled by the present pass; copied when a snapshot is taken.
        (
            vk::PipelineStageFlags2::FRAGMENT_SHADER | vk::PipelineStageFlags2::COPY,
            vk::AccessFlags2::SHADER_SAMPLED_READ | vk::AccessFlags2::TRANSFER_READ,
        )
    }

    fn record(&mut self, cmd: vk::CommandBuffer, slot: usize, frame: u64, image: &SharedImage) -> Result<()> {
        let dev = &self.device.raw;
        let index = self.current.ok_or_else(|| anyhow!("no swapchain image acquired"))? as usize;
        let set = self
            .shared
            .iter()
            .find(|(i, _, _)| *i == image.image)
            .map(|s| s.2)
            .ok_or_else(|| anyhow!("shared image not bound to the presenter"))?;
        let target = self.images[index];
        let color_out = vk::PipelineStageFlags2::COLOR_ATTACHMENT_OUTPUT;
        // The acquire semaphore is waited on at COLOR_ATTACHMENT_OUTPUT: chain the layout change to it.
        let to_color = [vk::ImageMemoryBarrier2::default()
            .src_stage_mask(color_out)
            .dst_stage_mask(color_out)
            .dst_access_mask(vk::AccessFlags2::COLOR_ATTACHMENT_WRITE)
            .old_layout(vk::ImageLayout::UNDEFINED)
            .new_layout(vk::ImageLayout::COLOR_ATTACHMENT_OPTIMAL)
            .image(target)
            .subresource_range(COLOR)];
        let to_present = [vk::ImageMemoryBarrier2::default()
            .src_stage_mask(color_out)
            .src_access_mask(vk::AccessFlags2::COLOR_ATTACHMENT_WRITE)
            .old_layout(vk::ImageLayout::COLOR_ATTACHMENT_OPTIMAL)
            .new_layout(vk::ImageLayout::PRESENT_SRC_KHR)
            .image(target)
            .subresource_range(COLOR)];
        let attachments = [vk::RenderingAttachmentInfo::default()
            .image_view(self.views[index])
            .image_layout(vk::ImageLayout::COLOR_ATTACHMENT_OPTIMAL)
            .load_op(vk::AttachmentLoadOp::CLEAR)
            .store_op(vk::AttachmentStoreOp::STORE)
            .clear_value(vk::ClearValue { color: vk::ClearColorValue { float32: [0.0, 0.0, 0.0, 1.0] } })];
        let whole = vk::Rect2D { offset: vk::Offset2D::default(), extent: self.extent };
        let rendering =
            vk::RenderingInfo::default().render_area(whole).layer_count(1).color_attachments(&attachments);
        let bx = letterbox(self.extent, self.shared_extent);
        let viewport = vk::Viewport {
            x: bx.offset.x as f32,
            y: bx.offset.y as f32,
            width: bx.extent.width as f32,
            height: bx.extent.height as f32,
            min_depth: 0.0,
            max_depth: 1.0,
        };
        // SAFETY: recording; every handle is live and the swapchain image was acquired.
        unsafe {
            dev.cmd_pipeline_barrier2(cmd, &vk::DependencyInfo::default().image_memory_barriers(&to_color));
            dev.cmd_begin_rendering(cmd, &rendering);
            dev.cmd_bind_pipeline(cmd, vk::PipelineBindPoint::GRAPHICS, self.pipeline);
            dev.cmd_bind_descriptor_sets(cmd, vk::PipelineBindPoint::GRAPHICS, self.layout, 0, &[set], &[]);
            dev.cmd_set_viewport(cmd, 0, &[viewport]);
            dev.cmd_set_scissor(cmd, 0, &[whole]);
            dev.cmd_draw(cmd, 3, 1, 0, 0);
            dev.cmd_end_rendering(cmd);
            dev.cmd_pipeline_barrier2(cmd, &vk::DependencyInfo::default().image_memory_barriers(&to_present));
        }
        if std::mem::take(&mut self.snapshot_next) {
            if let Some(r) = self.snapshot.as_mut() {
                r.record(cmd, slot, frame, image.image);
            }
        }
        Ok(())
    }

    fn completed(&mut self, slot: usize, frame: u64) -> Result<()> {
        self.snapshot.as_mut().map_or(Ok(()), |r| r.completed(slot, frame))
    }
}

impl Drop for Presenter {
    fn drop(&mut self) {
        // SAFETY: the viewer waited for the queue before dropping; all objects are ours.
        let _ = unsafe { self.device.raw.queue_wait_idle(self.device.queue) };
        self.release_views();
        self.destroy_swapchain_objects(self.swapchain);
        // SAFETY: as above.
        unsafe {
            for s in self.acquired.drain(..) {
                self.device.raw.destroy_semaphore(s, None);
            }
            self.device.raw.destroy_pipeline(self.pipeline, None);
            self.device.raw.destroy_pipeline_layout(self.layout, None);
            self.device.raw.destroy_descriptor_set_layout(self.set_layout, None);
            self.device.raw.destroy_sampler(self.sampler, None);
            self.device.raw.destroy_descriptor_pool(self.pool, None);
            self.surface_fn.destroy_surface(self.surface, None);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn e(width: u32, height: u32) -> vk::Extent2D {
        vk::Extent2D { width, height }
    }

    #[test]
    fn letterbox_keeps_the_aspect_ratio() {
        // Wider window: bars left and right.
        let r = letterbox(e(800, 300), e(320, 180));
        assert_eq!((r.offset.x, r.offset.y, r.extent.width, r.extent.height), (133, 0, 533, 300));
        // Taller window: bars above and below.
        let r = letterbox(e(400, 400), e(320, 180));
        assert_eq!((r.offset.x, r.offset.y, r.extent.width, r.extent.height), (0, 87, 400, 225)); // 175 px of bars: 87 above, 88 below
                                                                                                  // Same ratio: fills the window.
        let r = letterbox(e(1280, 720), e(1920, 1080));
        assert_eq!((r.offset.x, r.offset.y, r.extent.width, r.extent.height), (0, 0, 1280, 720));
    }
}
