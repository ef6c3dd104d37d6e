//! Timeline semaphores, exportable to CUDA (see [`crate::platform`]), and host-side waits
//! that time out with an error naming what was awaited.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use crate::error::{bail, Context as _, Result};
use ash::vk;

use super::bounded_wait;
use super::device::Device;
use crate::platform::{self, Handle, SEMAPHORE_HANDLE as HANDLE};

/// One timeline semaphore.
///
/// Ownership and ordering: one side signals it (the plan says which; with
/// `--sync shared` both do, in strictly rising order), the other waits.
/// Values only rise for the semaphore's whole life, so a rebuilt interop
/// starts new timelines above the old values. CUDA's import
/// ([`crate::cuda::external::ExternalSemaphore`]) must be destroyed first;
/// destroy this only once no queue or stream uses it.
pub struct Timeline {
    device: Arc<Device>,
    /// Private: `Drop` destroys it, so it must stay the semaphore made here.
    raw: vk::Semaphore,
    /// Its name in the frame plan ("rendered", "released", "frame").
    pub name: &'static str,
    exportable: bool,
    /// The highest value set from the host (or the initial value): what an
    /// exported timeline's host signal is checked against (see [`Timeline::signal`]).
    host_high: AtomicU64,
}

impl Timeline {
    /// Creates a timeline starting at `initial`; exportable to CUDA when `export`.
    /// Exportable without semaphore export enabled on the device is an
    /// [`crate::Error::MissingExtension`].
    pub fn new(device: Arc<Device>, name: &'static str, initial: u64, export: bool) -> Result<Self> {
        if export && device.semaphore_export().is_none() {
            return Err(crate::Error::MissingExtension {
                extension: platform::SEMAPHORE_EXTENSION.to_string_lossy().into_owned(),
                context: format!("making timeline '{name}' exportable to CUDA"),
            });
        }
        let mut kind = vk::SemaphoreTypeCreateInfo::default()
            .semaphore_type(vk::SemaphoreType::TIMELINE)
            .initial_value(initial);
        let mut export_info = vk::ExportSemaphoreCreateInfo::default().handle_types(HANDLE);
        let mut info = vk::SemaphoreCreateInfo::default().push_next(&mut kind);
        if export {
            info = info.push_next(&mut export_info);
        }
        // SAFETY: valid create info chaining locals; destroyed in Drop.
        let raw = unsafe { device.raw().create_semaphore(&info, None) }
            .with_context(|| format!("vkCreateSemaphore (timeline '{name}')"))?;
        Ok(Self { device, raw, name, exportable: export, host_high: AtomicU64::new(initial) })
    }

    /// A timeline of `device` that shares the payload of `handle`, a
    /// timeline another process (or device) exported ([`Timeline::export`]):
    /// for host waits on it here ([`Timeline::wait`]). Needs semaphore
    /// import on `device` (made with `export_semaphores`).
    ///
    /// # Safety
    /// `handle` was exported from a timeline semaphore of a device with the
    /// same `deviceUUID` and driver as `device` (VUID-VkImportSemaphoreFdInfoKHR-handleType-03263).
    pub unsafe fn import(device: Arc<Device>, name: &'static str, handle: Handle) -> Result<Self> {
        let loader = device.semaphore_export().ok_or_else(|| crate::Error::MissingExtension {
            extension: platform::SEMAPHORE_EXTENSION.to_string_lossy().into_owned(),
            context: format!("importing timeline '{name}'"),
        })?;
        let loader = loader.clone();
        let this = Timeline::new(device, name, 0, false)?;
        // SAFETY: `this` is a new timeline of the loader's device that nothing has used; the
        // handle's origin is the caller's promise.
        unsafe { platform::import_semaphore(&loader, this.raw, handle) }?;
        Ok(this)
    }

    /// The semaphore, for a `VkSemaphoreSubmitInfo` (it stays this
    /// `Timeline`'s: destroyed when it drops).
    pub fn raw(&self) -> vk::Semaphore {
        self.raw
    }

    /// The current value.
    pub fn value(&self) -> Result<u64> {
        // SAFETY: a live timeline semaphore.
        unsafe { self.device.raw().get_semaphore_counter_value(self.raw) }
            .with_context(|| format!("reading timeline '{}'", self.name))
    }

    /// Blocks until the value reaches `value`, for at most [`super::WAIT_TIMEOUT`].
    ///
    /// Gives up early with an error once `cancelled()` says the other side
    /// has failed, so a dead producer or consumer never hangs the other.
    ///
    /// This is a host *wait operation* (`vkWaitSemaphores`), not a poll of
    /// `vkGetSemaphoreCounterValue`: only a wait makes the work that signalled
    /// `value` happen-before what the host does next (write a staging buffer,
    /// signal another timeline). A host that polls the counter and then
    /// signals gives the GPU work it unblocks no dependency on the work it
    /// observed; synchronization validation (layer 1.4.309) reports exactly
    /// that as a WRITE_AFTER_READ on the next upload. See docs/sync.md, "Host
    /// waits and host signals".
    pub fn wait(&self, value: u64, cancelled: &dyn Fn() -> bool) -> Result<()> {
        let what = || {
            let now = self.value().map(|v| v.to_string()).unwrap_or_else(|e| e.to_string());
            format!("timeline '{}' to reach {value} (it is at {now})", self.name)
        };
        bounded_wait(&what, cancelled, |slice| self.wait_for(value, slice))
    }

    /// Whether the value reaches `value` within `timeout` (zero: a check that
    /// never blocks). Like [`Timeline::wait`], a host wait operation, so a
    /// `true` orders what the host does next after the work that signalled
    /// `value`; `false` on timeout.
    pub fn wait_for(&self, value: u64, timeout: std::time::Duration) -> Result<bool> {
        let info = vk::SemaphoreWaitInfo::default();
        self.host_wait(info, &[self.raw], &[value], timeout)
            .with_context(|| format!("waiting for timeline '{}' to reach {value}", self.name))
    }

    /// Whether `self` reaches `value` or `other` reaches `other_value` (a
    /// timeline of the same device) within `timeout`: one host wait
    /// (`VK_SEMAPHORE_WAIT_ANY_BIT`) for the first of two events. It orders
    /// nothing: which one was reached, and the ordering [`Timeline::wait_for`]
    /// gives, come from a zero-timeout `wait_for` after it.
    pub fn wait_either(
        &self,
        value: u64,
        other: &Timeline,
        other_value: u64,
        timeout: std::time::Duration,
    ) -> Result<bool> {
        if self.device.raw().handle() != other.device.raw().handle() {
            bail!("timelines '{}' and '{}' are of different devices", self.name, other.name);
        }
        let info = vk::SemaphoreWaitInfo::default().flags(vk::SemaphoreWaitFlags::ANY);
        self.host_wait(info, &[self.raw, other.raw], &[value, other_value], timeout).with_context(|| {
            format!("waiting for timeline '{}' to reach {value} or '{}' {other_value}", self.name, other.name)
        })
    }

    /// `vkWaitSemaphores` on `semaphores` (timelines of this device) reaching
    /// `values`, as `info`'s flags say: `false` on timeout.
    fn host_wait(
        &self,
        info: vk::SemaphoreWaitInfo<'_>,
        semaphores: &[vk::Semaphore],
        values: &[u64],
        timeout: std::time::Duration,
    ) -> std::result::Result<bool, vk::Result> {
        let info = info.semaphores(semaphores).values(values);
        // SAFETY: live timeline semaphores of this device; `info` points into the caller's slices.
        match unsafe { self.device.raw().wait_semaphores(&info, timeout.as_nanos() as u64) } {
            Ok(()) => Ok(true),
            Err(vk::Result::TIMEOUT) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Raises the value to `value` from the host if it is below: used only to
    /// stand in for a side that has stopped, when a run ends after a failure
    /// ([`crate::interop::SharedFrames::stand_in`]).
    ///
    /// An exported timeline is read through one fresh handle to its payload
    /// and signalled through another (each imported from a new export), not
    /// through `raw`: all name one payload, so it is the same operation.
    /// Khronos layer 1.3.239 keeps stale records of an external timeline's
    /// host reads and queue signals (its `SEMAPHORE_STATE::Retire` erases the
    /// oldest entry, not the one retired; a read of the value a handle was
    /// created at is one too) and then reports a valid host signal on that
    /// handle as VUID-VkSemaphoreSignalInfo-value-03259; a handle that was
    /// never read and never waited on has none.
    ///
    /// # Safety
    /// As for [`Timeline::signal`] (VUID-VkSemaphoreSignalInfo-value-03259):
    /// no signal operation of this timeline that a queue or a CUDA stream has
    /// been given and not yet executed has a value of `value` or less. The
    /// rule that `value` is above the current value (…-03258) is met here: a
    /// timeline already at `value` is left alone.
    pub unsafe fn raise_to(&self, value: u64) -> Result<()> {
        let Some(loader) = self.device.semaphore_export().filter(|_| self.exportable) else {
            if self.value()? < value {
                // SAFETY: above `value()` (03258); no pending signal at or below it (the caller's promise).
                unsafe { self.signal(value) }?;
            }
            return Ok(());
        };
        let fresh = || -> Result<Timeline> {
            let handle = Timeline::new(self.device.clone(), self.name, 0, false)?;
            // SAFETY: `handle` is a new timeline of the loader's device that nothing has used.
            unsafe { platform::import_semaphore(loader, handle.raw, self.export()?) }?;
            Ok(handle)
        };
        if fresh()?.value()? < value {
            // SAFETY: one payload with `self`: the caller's promise holds for it (03259), and the
            // read just above saw it below `value` (03258). Unchecked: a check would read the
            // signalling handle, which is what layer 1.3.239 must not see.
            unsafe { fresh()?.signal_unchecked(value) }?;
            self.host_high.fetch_max(value, Ordering::Relaxed);
        }
        Ok(())
    }

    /// Sets the value from the host (a host producer's signal), serialized
    /// with the device's submits ([`Device::queue_op`]).
    ///
    /// Checked: `value` is above the current value
    /// (VUID-VkSemaphoreSignalInfo-value-03258); [`crate::Error::Invalid`]
    /// if not, and nothing is signalled. An exported timeline is checked
    /// against the highest value set from the host instead (CUDA's signals
    /// are not seen): reading its value on the handle that then signals makes
    /// layer 1.3.239 report the valid signal as …-03259 (see
    /// [`Timeline::raise_to`]).
    ///
    /// # Safety
    /// No signal operation of this timeline that a queue or a CUDA stream has
    /// been given and not yet executed has a value of `value` or less
    /// (VUID-VkSemaphoreSignalInfo-value-03259): the host may only signal a
    /// timeline it alone signals (the frame plan names each timeline's
    /// signaller), or one whose other signallers have stopped.
    pub unsafe fn signal(&self, value: u64) -> Result<()> {
        let now = match self.exportable {
            true => self.host_high.load(Ordering::Relaxed),
            false => self.value()?,
        };
        if value <= now {
            return Err(crate::Error::invalid(format!(
                "signalling timeline '{}' to {value} from the host: it is already at {now}, and a timeline's \
                 value only rises (VUID-VkSemaphoreSignalInfo-value-03258)",
                self.name
            )));
        }
        // SAFETY: above the value (checked), below every pending signal (the caller's promise).
        unsafe { self.signal_unchecked(value) }
    }

    /// [`Timeline::signal`] without the check.
    ///
    /// # Safety
    /// `value` is above the timeline's value and below every pending signal (03258, 03259).
    unsafe fn signal_unchecked(&self, value: u64) -> Result<()> {
        let info = vk::SemaphoreSignalInfo::default().semaphore(self.raw).value(value);
        let signalled = self.device.queue_op(|| {
            // SAFETY: a live timeline; the caller's promises.
            unsafe { self.device.raw().signal_semaphore(&info) }
        });
        signalled.with_context(|| format!("signalling timeline '{}' to {value} from the host", self.name))?;
        self.host_high.fetch_max(value, Ordering::Relaxed);
        Ok(())
    }

    /// Whether the timeline was made exportable ([`Timeline::export`] works).
    pub fn exportable(&self) -> bool {
        self.exportable
    }

    /// A new handle to the semaphore, for CUDA to import (see [`crate::platform`]).
    pub fn export(&self) -> Result<Handle> {
        let (Some(loader), true) = (self.device.semaphore_export(), self.exportable) else {
            bail!("timeline '{}' was not created exportable", self.name);
        };
        platform::export_semaphore(loader, self.raw)
    }
}

impl Drop for Timeline {
    fn drop(&mut self) {
        // SAFETY: teardown waited for the queue; CUDA's import was destroyed first.
        unsafe { self.device.raw().destroy_semaphore(self.raw, None) };
    }
}
