#!/usr/bin/env bash
# The demo: installs what it needs (only when missing), builds, and runs the
# viewer in a window; with no display it runs --headless and writes verified
# PNG frames to ./frames. With an NVIDIA GPU, CUDA renders; without one, the
# CPU producer on lavapipe. Extra arguments go to vkcuda (see `vkcuda --help`).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/deps.sh
need_cargo
# cmake and nasm build libjpeg-turbo (the browser view's JPEG encoder) from its source;
# libvpx-dev is its VP8 encoder, linked statically (.cargo/config.toml).
need_packages libvulkan1 mesa-vulkan-drivers libxkbcommon-x11-0 libx11-xcb1 libxcursor1 libxrandr2 libxi6 cmake nasm libvpx-dev
cargo build --release --quiet
if [ -n "${DISPLAY:-}${WAYLAND_DISPLAY:-}" ]; then
    exec target/release/vkcuda "$@"
fi
echo "vkcuda: no display: running --headless (frames go to ./frames)" >&2
# Defaults the caller's own arguments replace.
frames=(--frames 300)
verify=(--verify)
for a in "$@"; do
    case "$a" in
        --frames | --frames=*) frames=() ;;
        --verify) verify=() ;;
    esac
done
exec target/release/vkcuda --headless "${frames[@]}" "${verify[@]}" "$@"
