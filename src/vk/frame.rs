//! Barriers on the shared images, and their preparation: the building
//! blocks of one frame (see [`crate::interop::SharedFrames::vulkan_frame`]).

use crate::error::Result;
use ash::vk;

use super::device::Device;
use super::shared_buffer::SharedBuffer;
use super::shared_image::SharedImage;

/// A stage and the access in it: one side of a barrier.
pub type Use = (vk::PipelineStageFlags2, vk::AccessFlags2);

/// A barrier on the whole colour image that keeps it in `GENERAL`, from the
/// `src` use to the `dst` one.
pub fn image_barrier(image: vk::Image, src: Use, dst: Use) -> vk::ImageMemoryBarrier2<'static> {
    vk::ImageMemoryBarrier2::default()
        .src_stage_mask(src.0)
        .src_access_mask(src.1)
        .dst_stage_mask(dst.0)
        .dst_access_mask(dst.1)
        .old_layout(vk::ImageLayout::GENERAL)
        .new_layout(vk::ImageLayout::GENERAL)
        .image(image)
        .subresource_range(COLOR)
}

/// Records one image barrier into `cmd`.
pub fn record_image_barrier(dev: &ash::Device, cmd: vk::CommandBuffer, barrier: vk::ImageMemoryBarrier2<'_>) {
    let b = [barrier];
    // SAFETY: `cmd` is recording; the barrier names a live image of `dev`.
    unsafe { dev.cmd_pipeline_barrier2(cmd, &vk::DependencyInfo::default().image_memory_barriers(&b)) };
}

/// A barrier on a whole buffer, from the `src` use to the `dst` one.
pub fn buffer_barrier(buffer: vk::Buffer, src: Use, dst: Use) -> vk::BufferMemoryBarrier2<'static> {
    vk::BufferMemoryBarrier2::default()
        .src_stage_mask(src.0)
        .src_access_mask(src.1)
        .dst_stage_mask(dst.0)
        .dst_access_mask(dst.1)
        .buffer(buffer)
        .size(vk::WHOLE_SIZE)
}

/// The one colour mip level and layer of every image here.
pub const COLOR: vk::ImageSubresourceRange = vk::ImageSubresourceRange {
    aspect_mask: vk::ImageAspectFlags::COLOR,
    base_mip_level: 0,
    level_count: 1,
    base_array_layer: 0,
    layer_count: 1,
};

/// The whole colour image as a copy region.
pub fn copy_layers() -> vk::ImageSubresourceLayers {
    vk::ImageSubresourceLayers {
        aspect_mask: vk::ImageAspectFlags::COLOR,
        mip_level: 0,
        base_array_layer: 0,
        layer_count: 1,
    }
}

/// Moves fresh shared images from `UNDEFINED` to `GENERAL`, then releases
/// them and the shared buffers to `VK_QUEUE_FAMILY_EXTERNAL`, so every frame
/// finds them the same way. (Two barriers: a layout change inside a release
/// is not tracked by the validation layer as the image's layout.)
pub fn prepare_shared(device: &Device, images: &[SharedImage], buffers: &[SharedBuffer]) -> Result<()> {
    let none = (vk::PipelineStageFlags2::NONE, vk::AccessFlags2::NONE);
    let all = (vk::PipelineStageFlags2::ALL_COMMANDS, vk::AccessFlags2::MEMORY_WRITE);
    device.run_once("preparing the shared images", |cmd| {
        let to_general: Vec<_> = images
            .iter()
            .map(|i| image_barrier(i.image(), none, all).old_layout(vk::ImageLayout::UNDEFINED))
            .collect();
        let release: Vec<_> = images
            .iter()
            .map(|i| {
                image_barrier(i.image(), all, none)
                    .src_queue_family_index(device.queue_family())
                    .dst_queue_family_index(vk::QUEUE_FAMILY_EXTERNAL)
            })
            .collect();
        let release_buffers: Vec<_> = buffers
            .iter()
            .map(|b| {
                buffer_barrier(b.buffer(), all, none)
                    .src_queue_family_index(device.queue_family())
                    .dst_queue_family_index(vk::QUEUE_FAMILY_EXTERNAL)
            })
            .collect();
        let to_general = vk::DependencyInfo::default().image_memory_barriers(&to_general);
        // SAFETY: recording; the images are live and unused.
        unsafe { device.raw().cmd_pipeline_barrier2(cmd, &to_general) };
        let release = vk::DependencyInfo::default()
            .image_memory_barriers(&release)
            .buffer_memory_barriers(&release_buffers);
        // SAFETY: recording; the images and buffers are live and unused.
        unsafe { device.raw().cmd_pipeline_barrier2(cmd, &release) };
    })
}
