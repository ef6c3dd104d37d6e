//! The core's errors: one type, [`Error`], whose variants an engine branches
//! on (device lost, out of memory, timed out, an extension or format the
//! device lacks …), each with the context of what vkcuda was doing.
//!
//! Adding context keeps the variant: `.context("importing image 0")` on an
//! out-of-memory error is still [`Error::OutOfMemory`], its message now
//! "importing image 0: …".

use std::fmt;
use std::time::Duration;

use ash::vk;
use cudarc::driver::sys::CUresult;

use crate::format::{Format, Layout};

/// `Result` with the core's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What went wrong in the core.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// The Vulkan device was lost (`VK_ERROR_DEVICE_LOST`): nothing on it runs any more.
    DeviceLost {
        /// What vkcuda was doing.
        context: String,
    },
    /// A Vulkan or CUDA allocation failed for want of memory.
    OutOfMemory {
        /// What vkcuda was doing, and the call's own words.
        context: String,
    },
    /// A bounded wait ran out of time ([`crate::vk::WAIT_TIMEOUT`]).
    TimedOut {
        /// What was awaited.
        what: String,
        /// How long it waited.
        after: Duration,
    },
    /// A wait gave up because the other side said it failed: that side's
    /// error is the cause, this only its consequence.
    Cancelled {
        /// What was awaited.
        what: String,
    },
    /// The device was created without an extension vkcuda needs, or lacks it.
    MissingExtension {
        /// The extension.
        extension: String,
        /// What vkcuda was doing.
        context: String,
    },
    /// The device cannot do what was asked (a version, a queue, a limit, an
    /// export), or the request itself cannot be met (a frame plan's values).
    Unsupported {
        /// What, and why.
        context: String,
    },
    /// The device cannot share frames of this format in this layout with
    /// CUDA (the driver's answer to `vkGetPhysicalDeviceImageFormatProperties2`
    /// or `vkGetPhysicalDeviceExternalBufferProperties` with the export's
    /// handle type, or a limit).
    FormatUnsupported {
        /// The format asked for.
        format: Format,
        /// The layout asked for.
        layout: Layout,
        /// Why, in the driver's terms, and what vkcuda was doing.
        context: String,
    },
    /// A call broke a rule of the API that vkcuda checks (a timeline signal
    /// that would not rise, an import larger than the memory behind it);
    /// nothing was done. The message names the rule (its VUID where Vulkan
    /// states it).
    Invalid {
        /// The rule, and what vkcuda was doing.
        context: String,
    },
    /// A library could not be loaded (libvulkan, libcuda).
    Library {
        /// Which, and what to do.
        context: String,
    },
    /// Any other failed Vulkan call.
    Vulkan {
        /// The call and what vkcuda was doing.
        context: String,
        /// Its result.
        result: vk::Result,
    },
    /// A failed CUDA driver call (a kernel fault shows here, sticky).
    Cuda {
        /// The call and what vkcuda was doing.
        context: String,
        /// Its result.
        result: CUresult,
    },
}

impl Error {
    /// An [`Error::Unsupported`] with this context.
    pub(crate) fn unsupported(context: impl Into<String>) -> Self {
        Error::Unsupported { context: context.into() }
    }

    /// An [`Error::Invalid`] with this context.
    pub(crate) fn invalid(context: impl Into<String>) -> Self {
        Error::Invalid { context: context.into() }
    }

    /// A failed Vulkan call: device lost and out-of-memory results get their own variants.
    pub(crate) fn vulkan(result: vk::Result) -> Self {
        let context = String::new();
        match result {
            vk::Result::ERROR_DEVICE_LOST => Error::DeviceLost { context },
            vk::Result::ERROR_OUT_OF_DEVICE_MEMORY | vk::Result::ERROR_OUT_OF_HOST_MEMORY => {
                Error::OutOfMemory { context: format!("{result:?}") }
            }
            result => Error::Vulkan { context, result },
        }
    }

    /// A failed CUDA driver call.
    pub(crate) fn cuda(result: CUresult) -> Self {
        match result {
            CUresult::CUDA_ERROR_OUT_OF_MEMORY => Error::OutOfMemory { context: format!("{result:?}") },
            result => Error::Cuda { context: String::new(), result },
        }
    }

    /// The same error, with `outer` (what vkcuda was doing) in front of its context.
    pub fn context(mut self, outer: impl fmt::Display) -> Self {
        let slot = match &mut self {
            Error::DeviceLost { context }
            | Error::OutOfMemory { context }
            | Error::MissingExtension { context, .. }
            | Error::Unsupported { context }
            | Error::Invalid { context }
            | Error::FormatUnsupported { context, .. }
            | Error::Library { context }
            | Error::Vulkan { context, .. }
            | Error::Cuda { context, .. } => context,
            Error::TimedOut { what, .. } | Error::Cancelled { what } => what,
        };
        *slot = match slot.is_empty() {
            true => outer.to_string(),
            false => format!("{outer}: {slot}"),
        };
        self
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // "context: " in front, when there is a context.
        let at = |context: &str| match context.is_empty() {
            true => String::new(),
            false => format!("{context}: "),
        };
        match self {
            Error::DeviceLost { context } => write!(f, "{}the Vulkan device was lost", at(context)),
            Error::OutOfMemory { context } => write!(f, "{}out of memory", at(context)),
            Error::TimedOut { what, after } => write!(f, "timed out after {after:?} waiting for {what}"),
            Error::Cancelled { what } => write!(f, "gave up waiting for {what}: the other side failed"),
            Error::MissingExtension { extension, context } => {
                write!(f, "{}{extension} is missing", at(context))
            }
            Error::Unsupported { context } | Error::Invalid { context } | Error::Library { context } => {
                f.write_str(context)
            }
            Error::FormatUnsupported { format, layout, context } => {
                write!(
                    f,
                    "{context}: this device cannot share {format} frames in the {layout} layout with CUDA"
                )
            }
            Error::Vulkan { context, result } if context.is_empty() => {
                write!(f, "a Vulkan call failed: {result}")
            }
            Error::Vulkan { context, result } => write!(f, "{context} failed: {result}"),
            Error::Cuda { context, result } if context.is_empty() => {
                write!(f, "a CUDA call failed: {result:?}")
            }
            Error::Cuda { context, result } => write!(f, "{context} failed: {result:?}"),
        }
    }
}

impl std::error::Error for Error {}

impl From<vk::Result> for Error {
    fn from(result: vk::Result) -> Self {
        Error::vulkan(result)
    }
}

impl From<gpu_allocator::AllocationError> for Error {
    fn from(e: gpu_allocator::AllocationError) -> Self {
        match e {
            gpu_allocator::AllocationError::OutOfMemory => Error::OutOfMemory { context: String::new() },
            e => Error::unsupported(format!("gpu-allocator: {e}")),
        }
    }
}

impl From<cudarc::driver::DriverError> for Error {
    fn from(e: cudarc::driver::DriverError) -> Self {
        Error::cuda(e.0)
    }
}

/// `.context(…)` and `.with_context(|| …)` on results whose error becomes an
/// [`Error`] (a `vk::Result`, a CUDA error, an [`Error`]), as anyhow's.
pub(crate) trait Context<T> {
    /// Puts `context` in front of the error's.
    fn context(self, context: impl fmt::Display) -> Result<T>;
    /// Puts `context()` in front of the error's (evaluated only on an error).
    fn with_context<C: fmt::Display>(self, context: impl FnOnce() -> C) -> Result<T>;
}

impl<T, E: Into<Error>> Context<T> for std::result::Result<T, E> {
    fn context(self, context: impl fmt::Display) -> Result<T> {
        self.map_err(|e| e.into().context(context))
    }
    fn with_context<C: fmt::Display>(self, context: impl FnOnce() -> C) -> Result<T> {
        self.map_err(|e| e.into().context(context()))
    }
}

/// Returns an [`Error::Unsupported`] with a formatted context.
macro_rules! bail {
    ($($arg:tt)*) => {
        return Err($crate::error::Error::unsupported(format!($($arg)*)))
    };
}
pub(crate) use bail;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn context_keeps_the_variant() {
        let e: Result<()> = Err(vk::Result::ERROR_DEVICE_LOST).context("vkQueueSubmit2 (frame 3)");
        let e = e.context("consumer").unwrap_err();
        assert!(matches!(e, Error::DeviceLost { .. }), "{e:?}");
        assert_eq!(e.to_string(), "consumer: vkQueueSubmit2 (frame 3): the Vulkan device was lost");
        let oom: Error = Error::from(vk::Result::ERROR_OUT_OF_DEVICE_MEMORY).context("shared image 0");
        assert!(matches!(oom, Error::OutOfMemory { .. }));
        assert_eq!(oom.to_string(), "shared image 0: ERROR_OUT_OF_DEVICE_MEMORY: out of memory");
        let other = Error::from(vk::Result::ERROR_INITIALIZATION_FAILED).context("vkCreateFence");
        assert!(other.to_string().starts_with("vkCreateFence failed: "), "{other}");
        let cuda = Error::from(cudarc::driver::DriverError(CUresult::CUDA_ERROR_LAUNCH_FAILED));
        assert!(matches!(
            cuda.context("the stream"),
            Error::Cuda { result: CUresult::CUDA_ERROR_LAUNCH_FAILED, .. }
        ));
    }
}
