//! Vulkan objects imported into CUDA: image memory as a mipmapped array with
//! a surface and a texture object, buffer memory as a device pointer, and
//! timeline semaphores. cudarc has raw bindings for
//! these but no safe types, so here they are, small.
//!
//! Ownership and order:
//! - The exported handle ([`crate::platform::Handle`]) is consumed by the
//!   import: on Linux CUDA owns the file descriptor after a successful import
//!   (never close it), and a failed import closes it.
//! - Each type keeps its context alive and destroys its CUDA objects in
//!   `Drop`, children first (texture, surface → mipmapped array, or the
//!   mapped pointer → external memory).
//! - Drop them before the Vulkan objects they came from, after the stream
//!   that used them is synchronised (the producer thread does both as it ends).
//! - A semaphore wait or signal is enqueued on a stream: CUDA waits on the
//!   GPU, never on the host.

use crate::error::Result;
use cudarc::driver::sys;

use super::{check, Context, Stream};
use crate::format::FrameDesc;
use crate::platform::{self, ExportedMemory, Handle};

/// A shared image as CUDA sees it: level 0 of a mipmapped array, written
/// through a surface object (`surf2Dwrite`) and readable through a texture
/// object (point sampling, clamped, unnormalized coordinates; 8-bit channels
/// read as floats in [0, 1]).
pub struct ExternalImage {
    ctx: Context,
    memory: sys::CUexternalMemory,
    mipmapped: sys::CUmipmappedArray,
    surface: sys::CUsurfObject,
    texture: sys::CUtexObject,
}

// SAFETY: CUDA driver handles may be used from any thread that makes their
// context current; ExternalImage binds it before every call.
unsafe impl Send for ExternalImage {}

impl ExternalImage {
    /// Imports `memory`, the dedicated allocation of an image of `desc`'s
    /// format and extent (from [`crate::vk::shared_image::SharedImage::export`],
    /// or a handle of your own through the `unsafe`
    /// [`ExportedMemory::from_raw`]); `color_attachment`: the Vulkan image
    /// has that usage (CUDA must be told, `CUDA_ARRAY3D_COLOR_ATTACHMENT`).
    ///
    /// Checked: the allocation holds at least `desc`'s bytes
    /// ([`crate::Error::Invalid`] if not; the handle is closed).
    pub fn import(
        ctx: Context,
        memory: ExportedMemory,
        desc: &FrameDesc,
        color_attachment: bool,
    ) -> Result<Self> {
        let memory = import_memory(&ctx, memory, desc)?;
        let mut this = Self { ctx, memory, mipmapped: std::ptr::null_mut(), surface: 0, texture: 0 };
        let mut flags = sys::CUDA_ARRAY3D_SURFACE_LDST;
        if color_attachment {
            flags |= sys::CUDA_ARRAY3D_COLOR_ATTACHMENT;
        }
        let array = sys::CUDA_EXTERNAL_MEMORY_MIPMAPPED_ARRAY_DESC {
            offset: 0,
            arrayDesc: sys::CUDA_ARRAY3D_DESCRIPTOR {
                Width: desc.extent.width as usize,
                Height: desc.extent.height as usize,
                Depth: 0,
                Format: desc.format.cuda_array_format(),
                NumChannels: desc.format.channels(),
                Flags: flags,
            },
            numLevels: 1,
            reserved: [0; 16],
        };
        // SAFETY: `memory` was just imported; `array` is fully initialised.
        let r = unsafe { sys::cuExternalMemoryGetMappedMipmappedArray(&mut this.mipmapped, memory, &array) };
        check(r, "cuExternalMemoryGetMappedMipmappedArray")?;
        let mut level0 = std::ptr::null_mut();
        // SAFETY: the mipmapped array has one level; the level is owned by it.
        let r = unsafe { sys::cuMipmappedArrayGetLevel(&mut level0, this.mipmapped, 0) };
        check(r, "cuMipmappedArrayGetLevel")?;
        let resource = sys::CUDA_RESOURCE_DESC {
            resType: sys::CUresourcetype::CU_RESOURCE_TYPE_ARRAY,
            res: sys::CUDA_RESOURCE_DESC_st__bindgen_ty_1 {
                array: sys::CUDA_RESOURCE_DESC_st__bindgen_ty_1__bindgen_ty_1 { hArray: level0 },
            },
            flags: 0,
        };
        // SAFETY: `resource` names a live array created with SURFACE_LDST.
        check(unsafe { sys::cuSurfObjectCreate(&mut this.surface, &resource) }, "cuSurfObjectCreate")?;
        let clamp = sys::CUaddress_mode::CU_TR_ADDRESS_MODE_CLAMP;
        let point = sys::CUfilter_mode::CU_TR_FILTER_MODE_POINT;
        let texture = sys::CUDA_TEXTURE_DESC {
            addressMode: [clamp; 3],
            filterMode: point,
            flags: 0,
            maxAnisotropy: 0,
            mipmapFilterMode: point,
            mipmapLevelBias: 0.0,
            minMipmapLevelClamp: 0.0,
            maxMipmapLevelClamp: 0.0,
            borderColor: [0.0; 4],
            reserved: [0; 12],
        };
        // SAFETY: `resource` names a live array; `texture` is fully initialised; no view.
        let r = unsafe { sys::cuTexObjectCreate(&mut this.texture, &resource, &texture, std::ptr::null()) };
        check(r, "cuTexObjectCreate")?;
        Ok(this)
    }

    /// The surface object a kernel writes through.
    pub fn surface(&self) -> sys::CUsurfObject {
        self.surface
    }

    /// The texture object a kernel reads through (`tex2D<float4>(t, x + 0.5f, y + 0.5f)`).
    pub fn texture(&self) -> sys::CUtexObject {
        self.texture
    }
}

impl Drop for ExternalImage {
    fn drop(&mut self) {
        // Errors here cannot be handled; the objects are gone with the context anyway.
        let _ = self.ctx.bind();
        // Each object is destroyed once, children first; the stream that used them is idle.
        if self.texture != 0 {
            // SAFETY: a texture object of this context, made over the array below.
            unsafe { sys::cuTexObjectDestroy(self.texture) };
        }
        if self.surface != 0 {
            // SAFETY: a surface object of this context, made over the array below.
            unsafe { sys::cuSurfObjectDestroy(self.surface) };
        }
        if !self.mipmapped.is_null() {
            // SAFETY: the mapped array of `memory`; nothing made over it is left.
            unsafe { sys::cuMipmappedArrayDestroy(self.mipmapped) };
        }
        // SAFETY: the imported memory, destroyed last: nothing mapped from it is left.
        unsafe { sys::cuDestroyExternalMemory(self.memory) };
    }
}

/// A shared buffer as CUDA sees it: linear device memory, `pitch` bytes
/// from one row to the next (`cuExternalMemoryGetMappedBuffer`).
pub struct ExternalBuffer {
    ctx: Context,
    memory: sys::CUexternalMemory,
    pointer: sys::CUdeviceptr,
    size: u64,
    pitch: u64,
}

// SAFETY: as for ExternalImage: usable from any thread with the context current.
unsafe impl Send for ExternalBuffer {}

impl ExternalBuffer {
    /// Imports `memory`, the dedicated allocation of a buffer holding one
    /// frame of `desc` in packed rows (from
    /// [`crate::vk::shared_buffer::SharedBuffer::export`], or a handle of your
    /// own through the `unsafe` [`ExportedMemory::from_raw`]), and maps its
    /// first `desc.bytes()` as a device pointer.
    ///
    /// Checked: the allocation holds at least `desc.bytes()`
    /// ([`crate::Error::Invalid`] if not; the handle is closed).
    pub fn import(ctx: Context, memory: ExportedMemory, desc: &FrameDesc) -> Result<Self> {
        let memory = import_memory(&ctx, memory, desc)?;
        let mut this = Self { ctx, memory, pointer: 0, size: desc.bytes(), pitch: desc.row_pitch() };
        let buffer =
            sys::CUDA_EXTERNAL_MEMORY_BUFFER_DESC { offset: 0, size: this.size, flags: 0, reserved: [0; 16] };
        // SAFETY: `memory` was just imported and holds at least `size` bytes; `buffer` is initialised.
        let r = unsafe { sys::cuExternalMemoryGetMappedBuffer(&mut this.pointer, memory, &buffer) };
        check(r, "cuExternalMemoryGetMappedBuffer")?;
        Ok(this)
    }

    /// The device pointer to the first row.
    pub fn pointer(&self) -> sys::CUdeviceptr {
        self.pointer
    }

    /// Bytes mapped at [`ExternalBuffer::pointer`] (the frame's: row pitch × height).
    pub fn size(&self) -> u64 {
        self.size
    }

    /// Bytes from one row to the next.
    pub fn pitch(&self) -> u64 {
        self.pitch
    }
}

impl Drop for ExternalBuffer {
    fn drop(&mut self) {
        let _ = self.ctx.bind();
        // The stream that used them is idle.
        if self.pointer != 0 {
            // SAFETY: a mapped buffer is freed with cuMemFree, before its memory object.
            unsafe { sys::cuMemFree_v2(self.pointer) };
        }
        // SAFETY: the imported memory, destroyed last: nothing mapped from it is left.
        unsafe { sys::cuDestroyExternalMemory(self.memory) };
    }
}

/// Imports dedicated exported memory that must hold a frame of `desc` (the handle is consumed).
fn import_memory(ctx: &Context, memory: ExportedMemory, desc: &FrameDesc) -> Result<sys::CUexternalMemory> {
    let (handle, size) = memory.into_parts();
    fits(size, desc)?;
    ctx.bind()?;
    let desc = platform::cuda_memory_desc(&handle, size);
    let mut memory = std::ptr::null_mut();
    // SAFETY: `desc` is fully initialised; `memory` is an out-pointer.
    check(unsafe { sys::cuImportExternalMemory(&mut memory, &desc) }, "cuImportExternalMemory")?;
    platform::imported(handle);
    Ok(memory)
}

/// Whether an allocation of `size` bytes can hold a frame of `desc`: a
/// mapping larger than the memory behind it would let a kernel write past it.
fn fits(size: u64, desc: &FrameDesc) -> Result<()> {
    if size < desc.bytes() {
        return Err(crate::Error::invalid(format!(
            "importing {size} bytes of memory as a {desc} frame, which needs {} bytes: the allocation is too \
             small for the frame (or the size given is not the allocation's)",
            desc.bytes()
        )));
    }
    Ok(())
}

/// A Vulkan semaphore imported into CUDA: a timeline (the frame plan's), or
/// a binary semaphore (only the bench's `binary` peer pattern uses one).
pub struct ExternalSemaphore {
    ctx: Context,
    raw: sys::CUexternalSemaphore,
    /// The timeline's name in the frame plan.
    pub name: &'static str,
}

// SAFETY: as for ExternalImage: usable from any thread with the context current.
unsafe impl Send for ExternalSemaphore {}

impl ExternalSemaphore {
    /// Imports an exported timeline semaphore (see [`crate::platform`]).
    pub fn import(ctx: Context, handle: Handle, name: &'static str) -> Result<Self> {
        Self::import_as(ctx, handle, name, true)
    }

    /// Imports an exported binary semaphore: its waits and signals ignore the value.
    pub fn import_binary(ctx: Context, handle: Handle, name: &'static str) -> Result<Self> {
        Self::import_as(ctx, handle, name, false)
    }

    fn import_as(ctx: Context, handle: Handle, name: &'static str, timeline: bool) -> Result<Self> {
        ctx.bind()?;
        let desc = platform::cuda_semaphore_desc(&handle, timeline);
        let mut raw = std::ptr::null_mut();
        // SAFETY: `desc` is fully initialised; `raw` is an out-pointer.
        check(unsafe { sys::cuImportExternalSemaphore(&mut raw, &desc) }, "cuImportExternalSemaphore")?;
        platform::imported(handle);
        Ok(Self { ctx, raw, name })
    }

    /// Enqueues on `stream` a wait until the timeline reaches `value`.
    ///
    /// The call returns at once, but the next CUDA call on this stream may
    /// block the calling thread until the value is reached: submit CUDA work
    /// from its own thread.
    pub fn wait(&self, stream: &dyn Stream, value: u64) -> Result<()> {
        // SAFETY: all-zero is valid for this plain-data struct (no enums inside).
        let mut params: sys::CUDA_EXTERNAL_SEMAPHORE_WAIT_PARAMS = unsafe { std::mem::zeroed() };
        params.params.fence.value = value;
        // SAFETY: one semaphore, one params struct; `stream` is a live stream of this context (see Stream).
        let r = unsafe { sys::cuWaitExternalSemaphoresAsync(&self.raw, &params, 1, stream.raw()) };
        check(r, "cuWaitExternalSemaphoresAsync")
    }

    /// Enqueues on `stream` setting the timeline to `value` once prior work is done.
    pub fn signal(&self, stream: &dyn Stream, value: u64) -> Result<()> {
        // SAFETY: all-zero is valid for this plain-data struct (no enums inside).
        let mut params: sys::CUDA_EXTERNAL_SEMAPHORE_SIGNAL_PARAMS = unsafe { std::mem::zeroed() };
        params.params.fence.value = value;
        // SAFETY: one semaphore, one params struct; `stream` is a live stream of this context (see Stream).
        let r = unsafe { sys::cuSignalExternalSemaphoresAsync(&self.raw, &params, 1, stream.raw()) };
        check(r, "cuSignalExternalSemaphoresAsync")
    }
}

impl Drop for ExternalSemaphore {
    fn drop(&mut self) {
        let _ = self.ctx.bind();
        // SAFETY: destroyed once; the stream that used it is idle.
        unsafe { sys::cuDestroyExternalSemaphore(self.raw) };
    }
}

#[cfg(test)]
mod tests {
    use super::fits;
    use crate::{Format, FrameDesc};
    use ash::vk;

    #[test]
    fn an_import_larger_than_its_allocation_is_refused() {
        let desc = FrameDesc::new(vk::Extent2D { width: 333, height: 211 }).format(Format::Rgba32f);
        let bytes = 333 * 211 * 16;
        assert!(fits(bytes, &desc).is_ok());
        assert!(fits(bytes + 4096, &desc).is_ok()); // padded, as NVIDIA's allocations are
        let e = fits(bytes - 1, &desc).unwrap_err();
        assert!(matches!(e, crate::Error::Invalid { .. }), "{e:?}");
        assert!(e.to_string().contains(&format!("needs {bytes} bytes")), "{e}");
    }
}
