//! The shared frames as the draw reads them: descriptor set 0 of the compute
//! draw ([`super::compute_draw`]), one set per shared frame. An image is sampled (binding 0, the sampler at
//! 1); a buffer is read as it is, as 32-, 64- and 128-bit elements (bindings
//! 2–4: one load per pixel for every format), so the buffer layout is drawn
//! without a per-frame copy into an image.

use std::sync::Arc;

use anyhow::{anyhow, bail, Result};
use ash::vk;

use crate::frames::consumer::{Frames, Source};
use vkcuda::interop::Use;
use vkcuda::vk::device::Device;
use vkcuda::vk::frame::COLOR;
use vkcuda::Format;

/// At most this many shared frames (`--buffers` is 1..=3).
const MAX_SHARED: usize = 3;

/// The image sets' bindings: the frame and the sampler.
const IMAGE_BINDINGS: [(u32, vk::DescriptorType); 2] =
    [(0, vk::DescriptorType::SAMPLED_IMAGE), (1, vk::DescriptorType::SAMPLER)];
/// The buffer sets' bindings: the frame as 32-, 64- and 128-bit elements.
const BUFFER_BINDINGS: [(u32, vk::DescriptorType); 3] = [
    (2, vk::DescriptorType::STORAGE_BUFFER),
    (3, vk::DescriptorType::STORAGE_BUFFER),
    (4, vk::DescriptorType::STORAGE_BUFFER),
];

/// How a draw shows the frame: both draws' first push constants (`Show` in
/// shaders/frame.wgsl.inc), in its order.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Show {
    exposure: f32,
    /// R32F: shown grey.
    mono: u32,
    /// sRGB frames: decoded before filtering, encoded again after.
    encode_srgb: u32,
    /// The frame's size.
    width: u32,
    height: u32,
    /// 1: drawn at the frame's own size (one texel per pixel, no filtering).
    exact: u32,
    /// The letterbox's top left corner in the target.
    left: u32,
    top: u32,
}

impl Show {
    /// The frames bound to `frames` at `exposure`, letterboxed into `bx`
    /// (their [`crate::scene::letterbox`] in the target).
    pub fn new(frames: &FrameSets, bx: vk::Rect2D, exposure: f32) -> Self {
        let (shared, format) = (frames.extent, frames.format);
        Show {
            exposure,
            mono: u32::from(format == Format::R32f),
            encode_srgb: u32::from(format == Format::Rgba8Srgb),
            width: shared.width,
            height: shared.height,
            exact: u32::from(bx.extent == shared),
            left: bx.offset.x.max(0) as u32,
            top: bx.offset.y.max(0) as u32,
        }
    }

    /// Its words, in the shader's order.
    pub fn words(&self) -> [u32; 8] {
        let s = self;
        [s.exposure.to_bits(), s.mono, s.encode_srgb, s.width, s.height, s.exact, s.left, s.top]
    }
}

/// Push constants of `words` as the GPU reads them (native byte order).
pub fn constant_bytes(words: &[u32]) -> Vec<u8> {
    words.iter().flat_map(|w| w.to_ne_bytes()).collect()
}

/// One pipeline of a draw: its layout and the pipeline.
#[derive(Default)]
pub struct Pipe {
    pub layout: vk::PipelineLayout,
    pub pipeline: vk::Pipeline,
}

impl Pipe {
    /// Destroys both (the owner waited for the queue; null ones are ignored).
    pub fn destroy(&mut self, dev: &ash::Device) {
        // SAFETY: as above: no pending command buffer uses them; they are the owner's.
        unsafe { dev.destroy_pipeline(self.pipeline, None) };
        // SAFETY: as above; the pipeline made with it is gone.
        unsafe { dev.destroy_pipeline_layout(self.layout, None) };
    }
}

/// A shared frame bound to a set: its image or buffer, the image's view
/// (null for a buffer), and the set that reads it.
struct Bound {
    handle: u64,
    view: vk::ImageView,
    set: vk::DescriptorSet,
}

/// Set 0 of a draw: its two layouts (images, buffers), [`MAX_SHARED`] sets of
/// each, the sampler, and the frames bound to them.
pub struct FrameSets {
    device: Arc<Device>,
    stage: vk::ShaderStageFlags,
    /// The layout of the sets that read images.
    pub image_layout: vk::DescriptorSetLayout,
    /// The layout of the sets that read buffers.
    pub buffer_layout: vk::DescriptorSetLayout,
    image_sets: Vec<vk::DescriptorSet>,
    buffer_sets: Vec<vk::DescriptorSet>,
    sampler: vk::Sampler,
    pool: vk::DescriptorPool,
    shared: Vec<Bound>,
    /// The size and format of the frames bound last.
    pub extent: vk::Extent2D,
    /// See `extent`.
    pub format: Format,
}

impl FrameSets {
    /// The layouts, sets and sampler for shaders of `stage`.
    pub fn new(device: Arc<Device>, stage: vk::ShaderStageFlags) -> Result<Self> {
        let mut this = Self {
            device,
            stage,
            image_layout: vk::DescriptorSetLayout::null(),
            buffer_layout: vk::DescriptorSetLayout::null(),
            image_sets: Vec::new(),
            buffer_sets: Vec::new(),
            sampler: vk::Sampler::null(),
            pool: vk::DescriptorPool::null(),
            shared: Vec::new(),
            extent: vk::Extent2D::default(),
            format: Format::Rgba8,
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
        this.image_layout = set_layout(&this.device, &IMAGE_BINDINGS, stage)?;
        this.buffer_layout = set_layout(&this.device, &BUFFER_BINDINGS, stage)?;
        this.allocate_sets()?;
        Ok(this)
    }

    /// One pool with [`MAX_SHARED`] sets of each layout.
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
        for (layout, sets) in
            [(self.image_layout, &mut self.image_sets), (self.buffer_layout, &mut self.buffer_sets)]
        {
            let layouts = [layout; MAX_SHARED];
            let alloc =
                vk::DescriptorSetAllocateInfo::default().descriptor_pool(self.pool).set_layouts(&layouts);
            // SAFETY: the pool has room for MAX_SHARED sets of each layout.
            *sets = unsafe { dev.allocate_descriptor_sets(&alloc) }?;
        }
        Ok(())
    }

    /// Whether buffers are bound (else images, or nothing yet).
    pub fn reads_buffers(&self) -> bool {
        self.shared.first().is_some_and(|b| b.view == vk::ImageView::null())
    }

    /// The stage and access of a draw's read of a shared frame.
    pub fn frame_use(&self) -> Use {
        let access = match self.reads_buffers() {
            true => vk::AccessFlags2::SHADER_STORAGE_READ,
            false => vk::AccessFlags2::SHADER_SAMPLED_READ,
        };
        let stage = match self.stage {
            vk::ShaderStageFlags::COMPUTE => vk::PipelineStageFlags2::COMPUTE_SHADER,
            _ => vk::PipelineStageFlags2::FRAGMENT_SHADER,
        };
        (stage, access)
    }

    /// Points the sets at a new session's shared frames (the queue is idle:
    /// interop rebuilds drain first).
    pub fn bind(&mut self, frames: Frames<'_>) -> Result<()> {
        self.release_views();
        let (count, desc) = match frames {
            Frames::Images(images) => (images.len(), images.first().map(|i| (i.extent(), i.format()))),
            Frames::Buffers(buffers) => {
                (buffers.len(), buffers.first().map(|b| (b.desc().extent, b.desc().format)))
            }
        };
        if count > MAX_SHARED {
            bail!("{count} shared frames, a draw has sets for {MAX_SHARED}");
        }
        match frames {
            Frames::Images(images) => {
                for (image, &set) in images.iter().zip(&self.image_sets) {
                    let view = self.bind_image(image.image(), image.format(), set)?;
                    self.shared.push(Bound { handle: vk::Handle::as_raw(image.image()), view, set });
                }
            }
            Frames::Buffers(buffers) => {
                for (buffer, &set) in buffers.iter().zip(&self.buffer_sets) {
                    let span = BufferSpan { buffer: buffer.buffer(), bytes: buffer.size() };
                    write_buffer_set(&self.device, set, &BUFFER_BINDINGS, span);
                    let handle = vk::Handle::as_raw(buffer.buffer());
                    self.shared.push(Bound { handle, view: vk::ImageView::null(), set });
                }
            }
        }
        (self.extent, self.format) = desc.unwrap_or((vk::Extent2D::default(), Format::Rgba8));
        Ok(())
    }

    /// The set that reads `frame` (bound with [`FrameSets::bind`]).
    pub fn set_of(&self, frame: Source<'_>) -> Result<vk::DescriptorSet> {
        let (handle, sets) = match frame {
            Source::Image(image) => (vk::Handle::as_raw(image.image()), &self.image_sets),
            Source::Buffer(buffer) => (vk::Handle::as_raw(buffer.buffer()), &self.buffer_sets),
        };
        self.shared
            .iter()
            .find(|b| b.handle == handle && sets.contains(&b.set))
            .map(|b| b.set)
            .ok_or_else(|| anyhow!("shared frame not bound to the draw"))
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
}

impl Drop for FrameSets {
    fn drop(&mut self) {
        self.release_views();
        let dev = self.device.raw();
        // The owner waited for the queue before dropping; the objects are ours (null ones are ignored).
        // SAFETY: as above; its sets go with it.
        unsafe { dev.destroy_descriptor_pool(self.pool, None) };
        // SAFETY: as above.
        unsafe { dev.destroy_descriptor_set_layout(self.image_layout, None) };
        // SAFETY: as above.
        unsafe { dev.destroy_descriptor_set_layout(self.buffer_layout, None) };
        // SAFETY: as above.
        unsafe { dev.destroy_sampler(self.sampler, None) };
    }
}

/// A set layout of `bindings`, each one descriptor, for shaders of `stage`.
pub fn set_layout(
    device: &Device,
    bindings: &[(u32, vk::DescriptorType)],
    stage: vk::ShaderStageFlags,
) -> Result<vk::DescriptorSetLayout> {
    let bindings: Vec<_> = bindings
        .iter()
        .map(|&(binding, ty)| {
            vk::DescriptorSetLayoutBinding::default()
                .binding(binding)
                .descriptor_type(ty)
                .descriptor_count(1)
                .stage_flags(stage)
        })
        .collect();
    let info = vk::DescriptorSetLayoutCreateInfo::default().bindings(&bindings);
    // SAFETY: valid create info; the caller destroys it.
    Ok(unsafe { device.raw().create_descriptor_set_layout(&info, None) }?)
}

/// The first `bytes` of a buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BufferSpan {
    /// The buffer.
    pub buffer: vk::Buffer,
    /// How many bytes from its start (or `vk::WHOLE_SIZE`).
    pub bytes: u64,
}

/// Points `set`'s storage-buffer `bindings` at `span`.
pub fn write_buffer_set(
    device: &Device,
    set: vk::DescriptorSet,
    bindings: &[(u32, vk::DescriptorType)],
    span: BufferSpan,
) {
    let info = [vk::DescriptorBufferInfo::default().buffer(span.buffer).range(span.bytes)];
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn show_words_are_in_the_shaders_order() {
        let s =
            Show { exposure: 2.0, mono: 1, encode_srgb: 0, width: 7, height: 5, exact: 1, left: 3, top: 4 };
        assert_eq!(s.words(), [2.0f32.to_bits(), 1, 0, 7, 5, 1, 3, 4]);
        let bytes = constant_bytes(&s.words());
        assert_eq!(bytes.len(), 32);
        assert_eq!(&bytes[..4], &2.0f32.to_ne_bytes());
        assert_eq!(&bytes[28..], &4u32.to_ne_bytes());
    }
}
