//! The handshake after both ends greeted: each says which GPU and which
//! driver its frames live on, and each refuses the other where they differ.
//! Vulkan imports memory another process exported only where the
//! `VkPhysicalDeviceIDProperties` of both match: `deviceUUID` (the same GPU)
//! and `driverUUID` (a driver that can read the other's handles).

use std::fmt;
use std::time::Duration;

use anyhow::Result;
use serde::{Deserialize, Serialize};

use crate::drive::child::channel::{Channel, Received};

/// Which GPU and which driver an end's frames live on, as Vulkan names them
/// (`VkPhysicalDeviceIDProperties`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct GpuIdentity {
    /// `deviceUUID`: the physical device.
    pub device: [u8; 16],
    /// `driverUUID`: the driver (its version and ICD); memory crosses only between equal ones.
    pub driver: [u8; 16],
}

/// Which end a message words things for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// The job sharing its frames (the door's side).
    Job,
    /// A process attaching to it.
    Viewer,
}

impl Role {
    /// "this job's", "this viewer's".
    fn ours(self) -> &'static str {
        match self {
            Role::Job => "this job's",
            Role::Viewer => "this viewer's",
        }
    }

    /// The other end's: "the viewer's", "the job's".
    fn theirs(self) -> &'static str {
        match self {
            Role::Job => "the viewer's",
            Role::Viewer => "the job's",
        }
    }
}

/// Two ends whose frames cannot cross: which differs, in the words of one end.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mismatch {
    /// Whose words.
    pub role: Role,
    /// This end's.
    pub ours: GpuIdentity,
    /// The other end's.
    pub theirs: GpuIdentity,
}

impl Mismatch {
    /// The two ends are on different GPUs.
    pub fn device_differs(&self) -> bool {
        self.ours.device != self.theirs.device
    }

    /// The two ends' drivers differ.
    pub fn driver_differs(&self) -> bool {
        self.ours.driver != self.theirs.driver
    }
}

impl fmt::Display for Mismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (ours, theirs) = (self.role.ours(), self.role.theirs());
        if self.device_differs() {
            write!(
                f,
                "another GPU: {theirs} deviceUUID is {}, {ours} {}; frames are shared on one GPU \
                 only, so attach from a process that opens the job's device (CUDA_VISIBLE_DEVICES, the GPU choice)",
                hex(&self.theirs.device),
                hex(&self.ours.device)
            )?;
            if self.driver_differs() {
                write!(f, " (the drivers differ too)")?;
            }
            return Ok(());
        }
        write!(
            f,
            "another driver on the same GPU: {theirs} driverUUID is {}, {ours} {}; a driver imports \
             memory only from the same driver (the same version, the same ICD: not lavapipe beside \
             NVIDIA), so run both under one driver",
            hex(&self.theirs.driver),
            hex(&self.ours.driver)
        )
    }
}

/// A UUID as 32 hex digits in the 8-4-4-4-12 groups `nvidia-smi -L` shows.
pub fn hex(uuid: &[u8; 16]) -> String {
    let mut out = String::with_capacity(36);
    for (i, byte) in uuid.iter().enumerate() {
        if matches!(i, 4 | 6 | 8 | 10) {
            out.push('-');
        }
        out.push_str(&format!("{byte:02x}"));
    }
    out
}

/// What the exchange found.
#[derive(Debug)]
pub enum Met {
    /// Both on one GPU and one driver: frames can cross.
    Matched(GpuIdentity),
    /// They cannot.
    Mismatched(Mismatch),
    /// The other end said nothing within the wait.
    Silent,
    /// The other end closed.
    Left,
}

/// Says `ours`, then reads the other end's identity (for at most `within`)
/// and compares. A malformed message is an error: the caller closes that end.
pub fn exchange(channel: &Channel, ours: &GpuIdentity, role: Role, within: Duration) -> Result<Met> {
    channel.send(ours)?;
    channel.read_timeout(Some(within))?;
    let theirs = channel.recv::<GpuIdentity>();
    channel.read_timeout(None)?;
    Ok(match theirs? {
        Received::Message(theirs) if theirs == *ours => Met::Matched(theirs),
        Received::Message(theirs) => Met::Mismatched(Mismatch { role, ours: *ours, theirs }),
        Received::Quiet => Met::Silent,
        Received::Closed => Met::Left,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: GpuIdentity = GpuIdentity { device: [1; 16], driver: [2; 16] };

    #[test]
    fn a_mismatch_says_which_differs() {
        let gpu = Mismatch { role: Role::Viewer, ours: A, theirs: GpuIdentity { device: [3; 16], ..A } };
        let words = gpu.to_string();
        assert!(words.starts_with("another GPU: the job's deviceUUID is 03030303-"), "{words}");
        assert!(!words.contains("drivers differ"), "{words}");
        let driver = Mismatch { role: Role::Job, ours: A, theirs: GpuIdentity { driver: [4; 16], ..A } };
        let words = driver.to_string();
        assert!(words.starts_with("another driver on the same GPU: the viewer's driverUUID"), "{words}");
        let both =
            Mismatch { role: Role::Job, ours: A, theirs: GpuIdentity { device: [5; 16], driver: [6; 16] } };
        assert!(both.to_string().contains("the drivers differ too"), "{both}");
    }

    #[test]
    fn uuids_read_as_nvidia_smi_shows_them() {
        let uuid: [u8; 16] = std::array::from_fn(|i| i as u8 * 17);
        assert_eq!(hex(&uuid), "00112233-4455-6677-8899-aabbccddeeff");
    }
}
