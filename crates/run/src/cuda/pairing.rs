//! Which CUDA device is which Vulkan device. CUDA numbers the devices it
//! can see (`CUDA_VISIBLE_DEVICES` may hide, reorder or name them by UUID;
//! `CUDA_DEVICE_ORDER` changes its own ordering); Vulkan numbers every device
//! in its loader's order. An index therefore never pairs them: the device
//! UUID, which both report, does. A wrong pair shows up as
//! `CUDA_ERROR_INVALID_VALUE` on the import, or as another GPU's pixels.

use std::fmt::Write as _;

use anyhow::Result;

use crate::base::kinds::ProducerKind;
use crate::error::usage::{Field, Message};
use crate::UsageError;
use vkcuda::cuda::{self, CudaDevice};
use vkcuda::vk::device::{format_uuid, list_gpus, GpuInfo};
use vkcuda::vk::instance::Instance;

/// `--gpu all`: the Vulkan indices of the devices to run on ([`Pairing::all`]),
/// after one line naming the NVIDIA devices CUDA cannot see.
pub fn every_gpu(instance: &Instance, producer: ProducerKind) -> Result<Vec<usize>> {
    let pairing = Pairing::new(instance, producer)?;
    if let Some(line) = pairing.unpaired() {
        eprintln!("vkcuda: {line}");
    }
    let gpus: Vec<usize> = pairing.all(producer).iter().map(|g| g.index).collect();
    if gpus.is_empty() {
        let why = format!(": no GPU has a CUDA twin; devices:\n{}", pairing.listing());
        return Err(UsageError::new(Message::new().field(Field::AllGpus, "").text(why)).into());
    }
    Ok(gpus)
}

/// `--gpu all`: runs `work` on every item at once, a thread each, and
/// returns the results in the items' order (a thread that panicked: an error).
pub fn on_each<T: Sync, R: Send>(items: &[T], work: impl Fn(&T) -> Result<R> + Sync) -> Vec<Result<R>> {
    std::thread::scope(|scope| {
        let threads: Vec<_> = items.iter().map(|item| scope.spawn(|| work(item))).collect();
        threads
            .into_iter()
            .map(|t| t.join().unwrap_or_else(|_| Err(anyhow::anyhow!("a GPU's thread panicked"))))
            .collect()
    })
}

/// The Vulkan devices and the CUDA devices, each in its own order.
pub struct Pairing {
    /// Vulkan's devices, in `vkEnumeratePhysicalDevices` order.
    pub gpus: Vec<GpuInfo>,
    /// CUDA's visible devices in CUDA's order, or why there are none to use.
    pub cuda: Result<Vec<CudaDevice>, String>,
}

impl Pairing {
    /// Lists both; CUDA only when the producer may use it.
    pub fn new(instance: &Instance, producer: ProducerKind) -> Result<Self> {
        let gpus = list_gpus(instance)?;
        let cuda = match producer {
            ProducerKind::Cpu => Err("the CPU producer was asked for".to_string()),
            _ => cuda::load_driver().and_then(|()| cuda::list_devices()).map_err(|e| format!("{e:#}")),
        };
        Ok(Self { gpus, cuda })
    }

    /// The CUDA device with `g`'s UUID, if CUDA can see it.
    pub fn twin(&self, g: &GpuInfo) -> Option<&CudaDevice> {
        self.cuda.as_ref().ok()?.iter().find(|c| c.uuid == g.uuid)
    }

    /// The Vulkan device with `c`'s UUID.
    pub fn vulkan_twin(&self, c: &CudaDevice) -> Option<&GpuInfo> {
        self.gpus.iter().find(|g| g.uuid == c.uuid)
    }

    /// The device `--gpu` names: its index, or a prefix of its UUID (with or without dashes).
    pub fn select(&self, sel: &str) -> Result<&GpuInfo, UsageError> {
        let prefix = sel.to_ascii_lowercase().replace('-', "");
        self.gpus
            .iter()
            .find(|g| sel.parse::<usize>().ok() == Some(g.index))
            .or_else(|| {
                let uuid = |g: &GpuInfo| format_uuid(&g.uuid).replace('-', "");
                self.gpus.iter().find(|g| !prefix.is_empty() && uuid(g).starts_with(&prefix))
            })
            .ok_or_else(|| {
                let why = format!(" names no device; devices:\n{}", self.listing());
                UsageError::new(Message::new().field(Field::Gpu, sel).text(why))
            })
    }

    /// `--gpu all`: every device with a CUDA twin, or, with the CPU producer, every device.
    pub fn all(&self, producer: ProducerKind) -> Vec<&GpuInfo> {
        match producer {
            ProducerKind::Cpu => self.gpus.iter().collect(),
            _ => self.gpus.iter().filter(|g| self.twin(g).is_some()).collect(),
        }
    }

    /// One line naming the NVIDIA Vulkan devices CUDA cannot see (hidden by
    /// `CUDA_VISIBLE_DEVICES`), if there are any and CUDA is in use. Other
    /// vendors' devices never have a CUDA twin and are not named.
    pub fn unpaired(&self) -> Option<String> {
        self.cuda.as_ref().ok()?;
        let alone: Vec<String> = self
            .gpus
            .iter()
            .filter(|g| g.driver.starts_with("NVIDIA") && self.twin(g).is_none())
            .map(|g| format!("{} ({}, UUID {})", g.index, g.name, format_uuid(&g.uuid)))
            .collect();
        (!alone.is_empty()).then(|| {
            format!(
                "Vulkan device{} {} {} no visible CUDA twin ({})",
                if alone.len() == 1 { "" } else { "s" },
                alone.join(", "),
                if alone.len() == 1 { "has" } else { "have" },
                visible_devices()
            )
        })
    }

    /// Every device, one per line (for errors).
    pub fn listing(&self) -> String {
        let mut s: Vec<String> = self.gpus.iter().map(|g| format!("  {g}")).collect();
        match &self.cuda {
            Ok(d) if d.is_empty() => s.push("  no CUDA device".into()),
            Ok(d) => s.extend(d.iter().map(|c| format!("  {c}"))),
            Err(e) => s.push(format!("  no CUDA device ({e})")),
        }
        s.join("\n")
    }

    /// `--list-gpus`: both orders, each device with its twin's number in the other.
    pub fn table(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(out, "Vulkan order (every device)           {}", visible_devices());
        let _ = writeln!(out, "  {:<7}{:<32}{:<38}CUDA", "Vulkan", "name", "UUID");
        for g in &self.gpus {
            let twin = self.twin(g).map_or_else(|| "-".to_string(), |c| c.ordinal.to_string());
            let _ = writeln!(out, "  {:<7}{:<32}{:<38}{twin}", g.index, clip(&g.name), format_uuid(&g.uuid));
        }
        match &self.cuda {
            Ok(devices) => {
                let _ = writeln!(out, "CUDA order (the devices CUDA can see)");
                let _ = writeln!(out, "  {:<7}{:<32}{:<38}Vulkan", "CUDA", "name", "UUID");
                for c in devices {
                    let twin = self.vulkan_twin(c).map_or_else(|| "-".to_string(), |g| g.index.to_string());
                    let _ = writeln!(
                        out,
                        "  {:<7}{:<32}{:<38}{twin}",
                        c.ordinal,
                        clip(&c.name),
                        format_uuid(&c.uuid)
                    );
                }
            }
            Err(e) => {
                let _ = writeln!(out, "CUDA: no device ({e})");
            }
        }
        if let Some(line) = self.unpaired() {
            let _ = writeln!(out, "{line}");
        }
        out
    }
}

/// `CUDA_VISIBLE_DEVICES` as this process sees it, for messages.
fn visible_devices() -> String {
    match std::env::var("CUDA_VISIBLE_DEVICES") {
        Ok(v) => format!("CUDA_VISIBLE_DEVICES={v}"),
        Err(_) => "CUDA_VISIBLE_DEVICES unset".into(),
    }
}

/// A device name cut to its column.
fn clip(name: &str) -> String {
    name.chars().take(30).collect()
}
