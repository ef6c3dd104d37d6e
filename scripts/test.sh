#!/usr/bin/env bash
# The test command: installs what the tests need (only when missing), then runs
# formatting and lint checks, the unit tests and the end-to-end tests. Without
# an NVIDIA GPU the end-to-end runs use Mesa's lavapipe and the CPU producer
# with validation, headless and in a real X window (Xvfb); the CUDA tests
# report "skipped: no NVIDIA GPU".
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/deps.sh
need_cargo
need_packages libvulkan1 mesa-vulkan-drivers vulkan-validationlayers \
    xvfb xdotool x11-apps libxkbcommon-x11-0 libx11-xcb1 libxcursor1 libxrandr2 libxi6
cargo fmt --check
cargo clippy --release --all-targets -- -D warnings
cargo build --release --examples
RUSTDOCFLAGS="-D warnings" cargo doc --no-deps --lib --quiet
cargo test --release
