#!/usr/bin/env bash
# The test command: installs what the tests need (only when missing), then runs
# the checks. Without an NVIDIA GPU the end-to-end runs use Mesa's lavapipe and
# the CPU producer with validation; the CUDA tests report "skipped: no NVIDIA GPU".
#
#   scripts/test.sh         the quick pass (about 10 minutes on 2 cores, once built):
#                           formatting, lints, every unit test, the end-to-end tests
#                           of headless runs and bad input on this machine's
#                           validation layer, the Python module's headless tests
#   scripts/test.sh --all   everything (what CI runs, through .ci/run; about 45
#                           minutes): the whole end-to-end suite (windows, the
#                           browser view over shaped links, signals, shards), the
#                           fault, stall, format and draw matrices, the wheel on a
#                           stock node and an older glibc, the Slurm recipe, and
#                           the end-to-end suite again under the layer today's
#                           users run (1.4.309, Mesa 25) in a Debian 13 root
#                           (scripts/debian13.sh; that layer needs glibc 2.38).
#
# VKCUDA_SKIP_DEBIAN13=1 skips the Debian 13 and Ubuntu 22.04 roots (e.g. on a
# machine that is not Debian 12 and not root).
set -euo pipefail
cd "$(dirname "$0")/.."
case "${1:-}" in
    "") all= ;;
    --all) all=1 ;;
    *) echo "usage: scripts/test.sh [--all]" >&2; exit 2 ;;
esac
started=$SECONDS
source scripts/deps.sh
need_cargo
need_packages libvulkan1 mesa-vulkan-drivers vulkan-validationlayers \
    xvfb xdotool x11-apps libxkbcommon-x11-0 libx11-xcb1 libxcursor1 libxrandr2 libxi6 weston \
    cmake nasm chromium chromium-driver libvpx-dev iproute2 openssh-server openssh-client openssl
# NVRTC (no GPU needed) for check-kernel's tests; without it they say "skipped".
need_nvrtc || echo "vkcuda: NVRTC could not be installed: the kernel-compile tests will say skipped" >&2
cargo fmt --check
cargo clippy --release --all-targets -- -D warnings
if [ -z "$all" ]; then
    echo "== unit tests (every package), the architecture test, the core's timeline test"
    cargo clippy --release -p vkcuda-python --all-targets -- -D warnings
    cargo test --release --lib --bins --test architecture --test timeline
    cargo test --release -p vkcuda-python --lib
    echo "== end-to-end: headless runs and bad input, validation layer $(dpkg-query -W -f='${Version}' vulkan-validationlayers)"
    cargo test --release -p vkcuda-cli --test e2e -- area=headless,area=bad_input
    echo "== the Python module's headless tests"
    bash scripts/python-test.sh python/tests/test_headless.py
    echo "test.sh: the quick pass took $((SECONDS - started)) s; everything (what CI runs): scripts/test.sh --all"
    exit 0
fi
cargo build --release --examples
RUSTDOCFLAGS="-D warnings" cargo doc --no-deps --lib --quiet
# Every package's docs as a maintainer reads them (the front ends' private items too): links resolve.
RUSTDOCFLAGS="-D warnings" cargo doc --no-deps --workspace --document-private-items --quiet
echo "== the interop core alone, as an integrator depends on it (default: CUDA 13.0's headers)"
core=(-p vkcuda)
cargo clippy --release "${core[@]}" --lib -- -D warnings
# Another CUDA version, as an engine on it picks one (cudarc's headers differ: each must compile).
for cuda in cuda-12080 cuda-11080; do
    cargo check --release -p vkcuda --no-default-features --features "$cuda" --lib --quiet
done
# examples/minimal compiles its kernel with NVRTC: the engine's choice too.
cargo clippy --release "${core[@]}" --features cudarc/nvrtc --examples -- -D warnings
cargo build --release "${core[@]}" --features cudarc/nvrtc --lib --example minimal
RUSTDOCFLAGS="-D warnings" cargo doc --no-deps --lib "${core[@]}" --quiet
# What docs.rs builds ([package.metadata.docs.rs]: the default CUDA version and serde).
RUSTDOCFLAGS="-D warnings" cargo doc --no-deps --lib "${core[@]}" --features serde --quiet
cargo tree "${core[@]}" -e normal --depth 1
# Packages the core and builds it alone (what crates.io would get), with its default CUDA version.
cargo publish --dry-run --allow-dirty --quiet -p vkcuda
echo "== the documented bench-table command (docs/results/2026-11-22-bench) rebuilds its table unchanged"
doc=docs/results/2026-11-22-bench/README.md
copy=$(mktemp); cp "$doc" "$copy"
python3 scripts/bench-table.py docs/results/2026-11-22-bench/h100-*.json --readme "$copy"
cmp -s "$doc" "$copy" || { echo "test.sh: bench-table.py changes the table in $doc" >&2; diff "$doc" "$copy" | head; exit 1; }
rm -f "$copy"
echo "== the Python module (python/): built with maturin, tested with pytest and NumPy on this machine's Vulkan"
cargo clippy --release -p vkcuda-python --all-targets -- -D warnings
cargo test --release -p vkcuda-python --lib
bash scripts/python-test.sh
echo "== the wheel for cluster nodes: abi3 CPython 3.10+, manylinux_2_28 (zig), audited, its headless tests on CPython 3.10 (scripts/wheel.sh)"
bash scripts/wheel.sh
if [ -z "${VKCUDA_SKIP_DEBIAN13:-}" ]; then
    echo "== the same wheel on an older glibc: an Ubuntu 22.04 root (glibc 2.35, CPython 3.10), its headless tests (scripts/older-glibc.sh)"
    bash scripts/older-glibc.sh
    echo "== the wheel on a stock node (no Vulkan loader, no glvnd; Debian 13 root, lavapipe): its vkcuda command, doctor, the headless e2e tests (scripts/node-test.sh)"
    bash scripts/node-test.sh
fi
echo "== the signal tests again with SIGINT ignored, as a job started with & or nohup has it"
(trap '' INT; PYTHONPATH=target/python-site:target/python-tools python3 -m pytest -q -p no:cacheprovider \
    python/tests/test_headless.py -k "signal_module or ctrl_c")
echo "== unit and end-to-end tests: validation layer $(dpkg-query -W -f='${Version}' vulkan-validationlayers), Mesa $(dpkg-query -W -f='${Version}' mesa-vulkan-drivers)"
cargo test --release
# The tests that need an NVIDIA GPU are #[ignore]d (cargo test lists them as ignored): run them where one is.
if nvidia-smi -L >/dev/null 2>&1; then
    cargo test --release -p vkcuda-run --test feed -- --ignored
    cargo test --release -p vkcuda --test timeline -- --ignored
fi
echo "== every failure stops validly: each fault at 30 frames x 8 configurations, CPU producer (scripts/fault-matrix.sh)"
bash scripts/fault-matrix.sh
echo "== a frame that never comes stops validly, by SIGINT and by timeout, 6 and 2 times per configuration (scripts/stall-matrix.sh)"
bash scripts/stall-matrix.sh
echo "== every format x layout x sync x images x consumer, verified and validated (scripts/format-matrix.sh)"
bash scripts/format-matrix.sh
echo "== the draw (a compute shader): every format x layout, magnified, minified and at its own size, julia, verified and validated (scripts/draw-matrix.sh)"
PRODUCER=cpu bash scripts/draw-matrix.sh | grep -v '^ok '
echo "== the README's Slurm recipe under a real Slurm, with the wheel's vkcuda: a 4-task array, a preempted and a killed task resumed, the final check (scripts/slurm-test.sh)"
# The recipe as the README gives it: the wheel's `vkcuda` command (installed by scripts/wheel.sh), where it was built.
if [ -x target/wheel-py310/bin/vkcuda ]; then
    PYTHONPATH=$PWD/target/wheel-py310 VKCUDA_BIN=$PWD/target/wheel-py310/bin/vkcuda bash scripts/slurm-test.sh
else
    bash scripts/slurm-test.sh
fi
if [ -z "${VKCUDA_SKIP_DEBIAN13:-}" ]; then
    e2e=$(cargo test --release --no-run --message-format=json 2>/dev/null |
        grep -o '"executable":"[^"]*/e2e-[^"]*"' | cut -d'"' -f4 | head -n1)
    [ -x "$e2e" ] || { echo "test.sh: no e2e test binary" >&2; exit 1; }
    bash scripts/debian13.sh root
    echo "== end-to-end tests again in Debian 13: validation layer 1.4.309, Mesa 25"
    bash scripts/debian13.sh run sh -c 'dpkg-query -W vulkan-validationlayers mesa-vulkan-drivers'
    # The layer's false report that examples/host_wait_race.rs reproduces: the fix must hold.
    bash scripts/debian13.sh run target/release/examples/host_wait_race --barrier --lock
    bash scripts/debian13.sh run "$e2e"
    # The watchers' compute draw against the CPU reference, every format, RGBA8 and I420.
    watch=$(cargo test --release -p vkcuda-run --test watch --no-run --message-format=json 2>/dev/null |
        grep -o '"executable":"[^"]*/watch-[^"]*"' | cut -d'"' -f4 | head -n1)
    [ -x "$watch" ] || { echo "test.sh: no watch test binary" >&2; exit 1; }
    bash scripts/debian13.sh run "$watch"
    # The producer's child killed at 30 frames and restarted: frames, descriptors, memory, this layer.
    child=$(cargo test --release -p vkcuda-run --test child --no-run --message-format=json 2>/dev/null |
        grep -o '"executable":"[^"]*/child-[^"]*"' | cut -d'"' -f4 | head -n1)
    [ -x "$child" ] || { echo "test.sh: no child test binary" >&2; exit 1; }
    bash scripts/debian13.sh run "$child"
    bash scripts/debian13.sh run bash scripts/fault-matrix.sh
    bash scripts/debian13.sh run bash scripts/stall-matrix.sh
    bash scripts/debian13.sh run bash scripts/format-matrix.sh
    # Every draw but a swapchain's is the compute draw: the draw matrix under this layer too.
    bash scripts/debian13.sh run env PRODUCER=cpu bash scripts/draw-matrix.sh | grep -v '^ok '
    echo "== the Python module again in Debian 13 (its python3, NumPy and pytest; the wheel built above)"
    bash scripts/debian13.sh run env PYTHONPATH=target/python-site python3 -m pytest -q -p no:cacheprovider python/tests
fi
echo "test.sh --all took $((SECONDS - started)) s"
