#!/usr/bin/env bash
# The demo: installs what it needs (only when missing), builds, and runs.
# With an NVIDIA GPU, CUDA renders; without one, the CPU producer on lavapipe.
# Extra arguments go to vkcuda (see `vkcuda --help`).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/deps.sh
need_cargo
need_packages libvulkan1 mesa-vulkan-drivers
cargo build --release --quiet
# The windowed viewer is not built yet (issue 3): the demo runs headless and
# writes verified PNG frames to ./frames.
exec target/release/vkcuda --headless --frames 300 --verify "$@"
