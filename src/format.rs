//! What one shared frame is: its pixel [`Format`], its extent, and its
//! [`Layout`] (how CUDA sees the memory), together a [`FrameDesc`].
//!
//! Both layouts follow the same frame plan, barriers and timelines; only
//! the Vulkan object (an image or a buffer) and the CUDA view (a surface and
//! texture over an array, or a device pointer and pitch) differ.

use std::fmt;

use ash::vk;
use cudarc::driver::sys::CUarray_format;

/// The pixel formats a shared frame can have.
///
/// In CUDA, every format is written as its channels in memory order: an
/// 8-bit format as `uchar4` (BGRA8: blue first), RGBA16F as four halves
/// (`ushort4` bits or `__half`), RGBA32F as `float4`, R32F as `float`. CUDA
/// knows no colour spaces: for RGBA8 sRGB the kernel writes sRGB-encoded
/// bytes, which Vulkan's sampler decodes.
///
/// ```
/// use vkcuda::Format;
/// assert_eq!(Format::Rgba16f.bytes_per_pixel(), 8);
/// assert!(Format::R32f.is_float() && !Format::Bgra8.is_float());
/// assert_eq!(Format::Bgra8.vk(), ash::vk::Format::B8G8R8A8_UNORM);
/// assert_eq!(Format::Rgba8Srgb.to_string(), "rgba8-srgb");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize), serde(rename_all = "kebab-case"))]
pub enum Format {
    /// `R8G8B8A8_UNORM`.
    Rgba8,
    /// `R8G8B8A8_SRGB`: sRGB-encoded colour, linear alpha.
    Rgba8Srgb,
    /// `B8G8R8A8_UNORM`: the byte order of most swapchains and video surfaces.
    Bgra8,
    /// `R16G16B16A16_SFLOAT`: half-float HDR colour.
    Rgba16f,
    /// `R32G32B32A32_SFLOAT`: full-float colour (AOVs, accumulation).
    Rgba32f,
    /// `R32_SFLOAT`: one float channel (depth, masks, single AOVs).
    R32f,
}

impl Format {
    /// Every format, in the order they are listed and benchmarked.
    pub const ALL: [Format; 6] =
        [Format::Rgba8, Format::Rgba8Srgb, Format::Bgra8, Format::Rgba16f, Format::Rgba32f, Format::R32f];

    /// The Vulkan format.
    pub fn vk(self) -> vk::Format {
        match self {
            Format::Rgba8 => vk::Format::R8G8B8A8_UNORM,
            Format::Rgba8Srgb => vk::Format::R8G8B8A8_SRGB,
            Format::Bgra8 => vk::Format::B8G8R8A8_UNORM,
            Format::Rgba16f => vk::Format::R16G16B16A16_SFLOAT,
            Format::Rgba32f => vk::Format::R32G32B32A32_SFLOAT,
            Format::R32f => vk::Format::R32_SFLOAT,
        }
    }

    /// Bytes per pixel.
    pub fn bytes_per_pixel(self) -> u32 {
        match self {
            Format::Rgba8 | Format::Rgba8Srgb | Format::Bgra8 | Format::R32f => 4,
            Format::Rgba16f => 8,
            Format::Rgba32f => 16,
        }
    }

    /// Channels per pixel.
    pub fn channels(self) -> u32 {
        match self {
            Format::R32f => 1,
            _ => 4,
        }
    }

    /// Whether the channels are floating point.
    pub fn is_float(self) -> bool {
        matches!(self, Format::Rgba16f | Format::Rgba32f | Format::R32f)
    }

    /// The CUDA array's channel format (`CUDA_ARRAY3D_DESCRIPTOR::Format`).
    pub fn cuda_array_format(self) -> CUarray_format {
        match self {
            Format::Rgba8 | Format::Rgba8Srgb | Format::Bgra8 => CUarray_format::CU_AD_FORMAT_UNSIGNED_INT8,
            Format::Rgba16f => CUarray_format::CU_AD_FORMAT_HALF,
            Format::Rgba32f | Format::R32f => CUarray_format::CU_AD_FORMAT_FLOAT,
        }
    }

    /// The short name (`rgba8`, `rgba8-srgb`, `bgra8`, `rgba16f`, `rgba32f`, `r32f`).
    pub fn name(self) -> &'static str {
        match self {
            Format::Rgba8 => "rgba8",
            Format::Rgba8Srgb => "rgba8-srgb",
            Format::Bgra8 => "bgra8",
            Format::Rgba16f => "rgba16f",
            Format::Rgba32f => "rgba32f",
            Format::R32f => "r32f",
        }
    }
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.name())
    }
}

/// How a shared frame's memory is laid out, and so how each API sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize), serde(rename_all = "lowercase"))]
pub enum Layout {
    /// A `VkImage` (OPTIMAL tiling) that CUDA maps as an array, written
    /// through a surface object and readable through a texture object.
    Array,
    /// A `VkBuffer` that CUDA maps as linear memory
    /// (`cuExternalMemoryGetMappedBuffer`): a device pointer and a row pitch,
    /// what tensor libraries and most CUDA renderers write. The Vulkan side
    /// copies it into an image, or reads it directly.
    Buffer,
}

impl fmt::Display for Layout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(match self {
            Layout::Array => "array",
            Layout::Buffer => "buffer",
        })
    }
}

/// One shared frame: format, extent and layout (every frame of a
/// [`crate::interop::SharedFrames`] has the same).
///
/// ```
/// use ash::vk;
/// use vkcuda::{Format, FrameDesc, Layout};
/// let extent = vk::Extent2D { width: 1917, height: 1079 };
/// let desc = FrameDesc::new(extent).format(Format::Rgba32f).layout(Layout::Buffer);
/// // Linear frames are packed: a row is width x 16 bytes, whatever the driver's alignment.
/// assert_eq!(desc.row_pitch(), 1917 * 16);
/// assert_eq!(desc.bytes(), 1917 * 16 * 1079);
/// assert_eq!(desc.to_string(), "1917x1079 rgba32f buffer");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FrameDesc {
    /// The pixel format.
    pub format: Format,
    /// Width and height in pixels.
    pub extent: vk::Extent2D,
    /// Array or linear buffer.
    pub layout: Layout,
}

impl FrameDesc {
    /// An RGBA8 array frame of `extent` (the layout of the demo's scenes).
    pub fn new(extent: vk::Extent2D) -> Self {
        Self { format: Format::Rgba8, extent, layout: Layout::Array }
    }

    /// The same frame in `format`.
    pub fn format(self, format: Format) -> Self {
        Self { format, ..self }
    }

    /// The same frame in `layout`.
    pub fn layout(self, layout: Layout) -> Self {
        Self { layout, ..self }
    }

    /// Bytes from one row to the next in the buffer layout (rows are packed:
    /// width × bytes per pixel), and in every tightly packed host copy.
    pub fn row_pitch(&self) -> u64 {
        u64::from(self.extent.width) * u64::from(self.format.bytes_per_pixel())
    }

    /// Bytes of the packed frame (row pitch × height).
    pub fn bytes(&self) -> u64 {
        self.row_pitch() * u64::from(self.extent.height)
    }
}

impl fmt::Display for FrameDesc {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}x{} {} {}", self.extent.width, self.extent.height, self.format, self.layout)
    }
}
