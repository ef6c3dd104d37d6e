//! What an X server offers a Vulkan driver to present with.

use x11rb::connection::RequestConnection;

/// Why NVIDIA's Vulkan driver cannot present to the X server of `DISPLAY`,
/// if it cannot. It presents through NVIDIA's own X driver (extension
/// `NV-GLX`) or through DRI3 (Xwayland); on any other server (Xvfb, VNC
/// servers) driver 580's `vkGetPhysicalDeviceSurfaceSupportKHR` crashes the
/// process instead of answering "no" (docs/viewer.md), so the viewer must not
/// ask. `None` when it can, or when the server cannot
/// be asked (then Vulkan itself is asked).
pub fn nvidia_cannot_present() -> Option<String> {
    let (conn, _) = x11rb::connect(None).ok()?;
    let has = |name: &'static str| conn.extension_information(name).ok().flatten().is_some();
    let (nv, dri3) = (has("NV-GLX"), has("DRI3"));
    (!nv && !dri3).then(|| {
        "its X server has neither NV-GLX (NVIDIA's X driver) nor DRI3 (Xwayland), which NVIDIA's Vulkan \
         presents through (Xvfb, VNC and other virtual X servers have neither)"
            .into()
    })
}
