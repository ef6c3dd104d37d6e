//! The window's swapchain: acquire, present, recreate on resize, present modes.
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

use std::sync::Arc;

use anyhow::{anyhow, bail, Context, Result};
use ash::vk;

use crate::base::kinds::PresentMode;
use vkcuda::vk::device::Device;

/// What [`Swapchain::acquire`] got.
pub enum Acquisition {
    /// An image, and the semaphore the frame's submission waits on;
    /// [`SwapchainState::Stale`] when it is suboptimal (usable, then recreate).
    Image {
        /// Whether the swapchain still fits.
        state: SwapchainState,
        /// Signalled once the image is the frame's to write.
        wait: vk::Semaphore,
    },
    /// The swapchain is out of date: no image; recreate it.
    OutOfDate,
}

/// The swapchain and what hangs off it.
pub struct Swapchain {
    device: Arc<Device>,
    surface_fn: ash::khr::surface::Instance,
    swapchain_fn: ash::khr::swapchain::Device,
    surface: vk::SurfaceKHR,
    swapchain: vk::SwapchainKHR,
    images: Vec<vk::Image>,
    rendered_to: Vec<vk::Semaphore>,
    acquired: Vec<vk::Semaphore>,
    extent: vk::Extent2D,
    /// The colour format of its images.
    pub format: vk::Format,
    mode: vk::PresentModeKHR,
    modes: Vec<vk::PresentModeKHR>,
    /// The image acquired for the frame being recorded.
    current: Option<u32>,
}

/// The outcome of acquiring or presenting.
#[derive(Debug, PartialEq, Eq)]
pub enum SwapchainState {
    /// Go on.
    Ok,
    /// The swapchain no longer fits the window: recreate it.
    Stale,
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

impl Swapchain {
    /// Picks the format and mode for `surface`, with `slots` acquire
    /// semaphores; the swapchain itself follows with [`Swapchain::recreate`].
    pub fn new(
        device: Arc<Device>,
        surface_fn: ash::khr::surface::Instance,
        surface: vk::SurfaceKHR,
        slots: usize,
        mode: PresentMode,
    ) -> Result<Self> {
        let swapchain_fn = ash::khr::swapchain::Device::new(device.instance(), device.raw());
        let physical = device.info().physical;
        // SAFETY: plain queries with a live surface.
        let formats = unsafe { surface_fn.get_physical_device_surface_formats(physical, surface) }?;
        // SAFETY: as above.
        let modes = unsafe { surface_fn.get_physical_device_surface_present_modes(physical, surface) }?;
        // SAFETY: as above.
        let caps = unsafe { surface_fn.get_physical_device_surface_capabilities(physical, surface) }?;
        // The frame is drawn by compute and copied in (no graphics pipeline: on NVIDIA
        // those stop finishing after a CUDA fault).
        if !caps.supported_usage_flags.contains(vk::ImageUsageFlags::TRANSFER_DST) {
            bail!(
                "this window's swapchain images cannot be copied into (usage {:?}): \
                 present through the CPU instead",
                caps.supported_usage_flags
            );
        }
        // UNORM, so the shared image's bytes reach the screen unchanged (no sRGB encoding).
        let format = [vk::Format::B8G8R8A8_UNORM, vk::Format::R8G8B8A8_UNORM]
            .into_iter()
            .find(|f| formats.iter().any(|s| s.format == *f))
            .ok_or_else(|| anyhow!("the window offers no UNORM 8-bit colour format ({formats:?})"))?;
        let wanted = mode.raw();
        let mode = if modes.contains(&wanted) {
            wanted
        } else {
            log::warn!("warning: present mode {:?} is not supported here; using fifo", mode);
            vk::PresentModeKHR::FIFO
        };
        let mut this = Self {
            device,
            surface_fn,
            swapchain_fn,
            surface,
            swapchain: vk::SwapchainKHR::null(),
            images: Vec::new(),
            rendered_to: Vec::new(),
            acquired: Vec::new(),
            extent: vk::Extent2D::default(),
            format,
            mode,
            modes,
            current: None,
        };
        for _ in 0..slots {
            // SAFETY: default create info; destroyed in Drop.
            let s = unsafe { this.device.raw().create_semaphore(&vk::SemaphoreCreateInfo::default(), None) }?;
            this.acquired.push(s);
        }
        Ok(this)
    }

    /// (Re)creates the swapchain for a window of `window` pixels. The caller
    /// made sure no submitted frame still uses the old one (queue idle).
    pub fn recreate(&mut self, window: vk::Extent2D) -> Result<()> {
        let physical = self.device.info().physical;
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
            .image_usage(vk::ImageUsageFlags::TRANSFER_DST)
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
        for _ in &self.images {
            // SAFETY: default create info; destroyed with the swapchain.
            self.rendered_to.push(unsafe {
                self.device.raw().create_semaphore(&vk::SemaphoreCreateInfo::default(), None)
            }?);
        }
        self.extent = extent;
        Ok(())
    }

    fn destroy_swapchain_objects(&mut self, swapchain: vk::SwapchainKHR) {
        // The queue is idle (the caller drained it), so nothing uses these any more.
        for s in self.rendered_to.drain(..) {
            // SAFETY: as above.
            unsafe { self.device.raw().destroy_semaphore(s, None) };
        }
        if swapchain != vk::SwapchainKHR::null() {
            // SAFETY: as above.
            unsafe { self.swapchain_fn.destroy_swapchain(swapchain, None) };
        }
    }

    /// Acquires the next swapchain image with slot `slot`'s semaphore, which
    /// the frame's submission must wait on.
    pub fn acquire(&mut self, slot: usize) -> Result<Acquisition> {
        let Some(&sem) = self.acquired.get(slot) else {
            bail!(
                "frame slot {slot}, and the swapchain was made for {} frames in flight",
                self.acquired.len()
            );
        };
        // SAFETY: the slot's semaphore is unsignalled: its last waiter (the slot's previous
        // submission) has finished, which the frame loop checked before this call.
        let r = unsafe {
            self.swapchain_fn.acquire_next_image(
                self.swapchain,
                vkcuda::vk::WAIT_TIMEOUT.as_nanos() as u64,
                sem,
                vk::Fence::null(),
            )
        };
        match r {
            Ok((index, suboptimal)) => {
                self.current = Some(index);
                // A suboptimal image is still presentable: use it, then recreate.
                let state = if suboptimal { SwapchainState::Stale } else { SwapchainState::Ok };
                Ok(Acquisition::Image { state, wait: sem })
            }
            Err(vk::Result::ERROR_OUT_OF_DATE_KHR) => Ok(Acquisition::OutOfDate),
            Err(vk::Result::TIMEOUT | vk::Result::NOT_READY) => {
                bail!("timed out after {:?} acquiring a swapchain image", vkcuda::vk::WAIT_TIMEOUT)
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
        let index = self.current.ok_or_else(|| anyhow!("no swapchain image acquired"))?;
        self.present_after(&[self.rendered_to[index as usize]])
    }

    /// Presents the current image once `waits` are signalled.
    fn present_after(&mut self, waits: &[vk::Semaphore]) -> Result<SwapchainState> {
        let index = self.current.take().ok_or_else(|| anyhow!("no swapchain image acquired"))?;
        let swapchains = [self.swapchain];
        let indices = [index];
        let info = vk::PresentInfoKHR::default()
            .wait_semaphores(waits)
            .swapchains(&swapchains)
            .image_indices(&indices);
        let presented = self.device.queue_op(|| {
            // SAFETY: the image was acquired; its writes are done or signal `waits`, submitted before.
            unsafe { self.swapchain_fn.queue_present(self.device.queue(), &info) }
        });
        match presented {
            Ok(false) => Ok(SwapchainState::Ok),
            Ok(true) | Err(vk::Result::ERROR_OUT_OF_DATE_KHR) => Ok(SwapchainState::Stale),
            Err(e) => Err(e).context("vkQueuePresentKHR"),
        }
    }

    /// The acquired image, for the frame being recorded.
    pub fn target(&self) -> Result<vk::Image> {
        let index = self.current.ok_or_else(|| anyhow!("no swapchain image acquired"))? as usize;
        Ok(self.images[index])
    }

    /// Acquires the next image outside the frame loop (a notice over the
    /// last frame), waiting on the host until it is ready, for at most
    /// [`vkcuda::vk::WAIT_TIMEOUT`]; `None` when the swapchain no longer fits
    /// the window. Present it with [`Swapchain::present_now`].
    pub fn acquire_now(&mut self) -> Result<Option<vk::Image>> {
        let dev = self.device.raw();
        // SAFETY: default create info; destroyed below.
        let fence = unsafe { dev.create_fence(&vk::FenceCreateInfo::default(), None) }?;
        let timeout = vkcuda::vk::WAIT_TIMEOUT.as_nanos() as u64;
        // SAFETY: a live swapchain; the fence is unsignalled and waited on below.
        let acquired = unsafe {
            self.swapchain_fn.acquire_next_image(self.swapchain, timeout, vk::Semaphore::null(), fence)
        };
        let ready = match acquired {
            // SAFETY: the acquire signals the fence.
            Ok(_) => unsafe { dev.wait_for_fences(&[fence], true, timeout) },
            Err(_) => Ok(()),
        };
        // SAFETY: the fence was signalled, or never submitted (the acquire failed), or the wait
        // failed and the device is lost.
        unsafe { dev.destroy_fence(fence, None) };
        ready.context("waiting for a swapchain image to be free")?;
        match acquired {
            Ok((index, _)) => {
                self.current = Some(index);
                Ok(Some(self.images[index as usize]))
            }
            Err(vk::Result::ERROR_OUT_OF_DATE_KHR) => Ok(None),
            Err(e) => Err(e).context("vkAcquireNextImageKHR"),
        }
    }

    /// Presents the image of [`Swapchain::acquire_now`], whose writes the
    /// host has waited for.
    pub fn present_now(&mut self) -> Result<SwapchainState> {
        self.present_after(&[])
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

    /// The surface it presents to.
    pub fn surface(&self) -> (ash::khr::surface::Instance, vk::SurfaceKHR) {
        (self.surface_fn.clone(), self.surface)
    }

    /// Moves to `device`, a device of the same GPU made again after this
    /// one's was lost: the swapchain and its semaphores go (this device's
    /// queue must be idle), the surface stays, and the acquire semaphores
    /// are made on `device`; [`Swapchain::recreate`] makes the swapchain.
    pub fn move_to(&mut self, device: Arc<Device>) -> Result<()> {
        if device.info().physical != self.device.info().physical {
            bail!("the device made again is not on the GPU the window's swapchain was made for");
        }
        let old = std::mem::take(&mut self.swapchain);
        self.destroy_swapchain_objects(old);
        (self.images, self.current) = (Vec::new(), None);
        let slots = self.acquired.len();
        for s in self.acquired.drain(..) {
            // SAFETY: the old device's queue is idle; nothing waits on it.
            unsafe { self.device.raw().destroy_semaphore(s, None) };
        }
        self.swapchain_fn = ash::khr::swapchain::Device::new(device.instance(), device.raw());
        self.device = device;
        for _ in 0..slots {
            // SAFETY: default create info; destroyed in Drop (on the new device).
            let s = unsafe { self.device.raw().create_semaphore(&vk::SemaphoreCreateInfo::default(), None) }?;
            self.acquired.push(s);
        }
        Ok(())
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

impl Drop for Swapchain {
    fn drop(&mut self) {
        self.destroy_swapchain_objects(self.swapchain);
        // The owner waited for the queue before dropping; all objects are ours.
        for s in self.acquired.drain(..) {
            // SAFETY: as above.
            unsafe { self.device.raw().destroy_semaphore(s, None) };
        }
        // SAFETY: as above; the swapchain made on it is gone.
        unsafe { self.surface_fn.destroy_surface(self.surface, None) };
    }
}
