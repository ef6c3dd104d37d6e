//! The viewer's draw pass: a fullscreen triangle that samples the ready
//! shared image, letterboxed to keep its aspect ratio, into a colour target
//! (a swapchain image, in [`super::window`]).

use std::sync::Arc;

use anyhow::{anyhow, bail, Context, Result};
use ash::vk;

use crate::vk::device::Device;
use crate::vk::frame::{image_barrier, record_image_barrier, COLOR};
use crate::vk::memory::Image;
use crate::vk::shared_image::SharedImage;
use crate::vk::SHARED_FORMAT;

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
        // SAFETY: recording; every handle is live.
        unsafe {
            dev.cmd_begin_rendering(cmd, &rendering);
            dev.cmd_bind_pipeline(cmd, vk::PipelineBindPoint::GRAPHICS, self.pipeline);
            dev.cmd_bind_descriptor_sets(cmd, vk::PipelineBindPoint::GRAPHICS, self.layout, 0, &[set], &[]);
            dev.cmd_set_viewport(cmd, 0, &[viewport]);
            dev.cmd_set_scissor(cmd, 0, &[whole]);
            dev.cmd_draw(cmd, 3, 1, 0, 0);
            dev.cmd_end_rendering(cmd);
        }
        Ok(())
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
    /// An `extent`-sized RGBA8 image that can be drawn into and copied from.
    pub fn new(device: Arc<Device>, name: &str, extent: vk::Extent2D) -> Result<Self> {
        let usage = vk::ImageUsageFlags::COLOR_ATTACHMENT | vk::ImageUsageFlags::TRANSFER_SRC;
        let image = Image::new(device.clone(), name, SHARED_FORMAT, extent, usage)?;
        let info = vk::ImageViewCreateInfo::default()
            .image(image.raw)
            .view_type(vk::ImageViewType::TYPE_2D)
            .format(SHARED_FORMAT)
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

/// What the draw pass should produce: the `fw`×`fh` RGBA8 frame letterboxed
/// into a `tw`×`th` target and sampled bilinearly (clamp to edge), in RGB.
/// `None` marks the letterbox rectangle's edge pixels, whose coverage is the
/// rasterizer's call; the bars are black.
pub fn drawn_reference(frame: &[u8], (fw, fh): (u32, u32), (tw, th): (u32, u32)) -> Vec<Option<[f64; 3]>> {
    let r = letterbox(vk::Extent2D { width: tw, height: th }, vk::Extent2D { width: fw, height: fh });
    let (x0, y0) = (f64::from(r.offset.x), f64::from(r.offset.y));
    let (rw, rh) = (f64::from(r.extent.width), f64::from(r.extent.height));
    let texel = |x: i64, y: i64, c: usize| {
        let (x, y) = (x.clamp(0, i64::from(fw) - 1) as usize, y.clamp(0, i64::from(fh) - 1) as usize);
        f64::from(frame[(y * fw as usize + x) * 4 + c])
    };
    let mut out = Vec::with_capacity((tw * th) as usize);
    for py in 0..th {
        for px in 0..tw {
            let (fx, fy) = (f64::from(px) + 0.5 - x0, f64::from(py) + 0.5 - y0);
            if fx < 0.0 || fy < 0.0 || fx > rw || fy > rh {
                out.push(Some([0.0; 3]));
                continue;
            }
            if fx < 1.0 || fy < 1.0 || fx > rw - 1.0 || fy > rh - 1.0 {
                out.push(None);
                continue;
            }
            let (u, v) = (fx / rw * f64::from(fw) - 0.5, fy / rh * f64::from(fh) - 0.5);
            let (ix, iy) = (u.floor() as i64, v.floor() as i64);
            let (ax, ay) = (u - u.floor(), v - v.floor());
            let mut p = [0.0; 3];
            for (c, v) in p.iter_mut().enumerate() {
                let top = texel(ix, iy, c) * (1.0 - ax) + texel(ix + 1, iy, c) * ax;
                let bottom = texel(ix, iy + 1, c) * (1.0 - ax) + texel(ix + 1, iy + 1, c) * ax;
                *v = top * (1.0 - ay) + bottom * ay;
            }
            out.push(Some(p));
        }
    }
    out
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
