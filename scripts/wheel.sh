#!/usr/bin/env bash
# Builds the wheel that installs on cluster nodes (with the vkcuda command, and
# the Vulkan loader and glvnd libraries for nodes that lack them): abi3 for CPython 3.10
# (PyTorch's floor) and later, tagged manylinux_2_28 (glibc 2.28: RHEL 8 and
# its rebuilds, Ubuntu 20.04 and later), linked by zig against glibc 2.28's
# symbols (maturin --zig; ziglang from PyPI), libjpeg-turbo built in; libvulkan
# and libcuda are loaded at run time, so it imports where they are missing.
# Then auditwheel checks the tag, and the wheel is installed for CPython 3.10
# and its headless tests (NumPy on this machine's Vulkan) run against it.
#   bash scripts/wheel.sh            → target/dist/vkcuda-*-cp310-abi3-manylinux_2_28_x86_64.whl
#   VKCUDA_WHEEL_NO_TEST=1 bash scripts/wheel.sh   build and audit only
set -euo pipefail
cd "$(dirname "$0")/.."
python=${PYTHON:-python3}
# Absolute: the zig wrappers run python -m ziglang from build folders (CMake's for libjpeg-turbo).
tools=$PWD/target/wheel-tools
dist=target/dist
if ! PYTHONPATH=$tools "$python" -c 'import ziglang, auditwheel' 2>/dev/null || [ ! -x "$tools/bin/maturin" ] ||
    [ ! -x "$tools/bin/cargo-zigbuild" ]; then
    echo "vkcuda: installing maturin, cargo-zigbuild, ziglang and auditwheel (from PyPI) into $tools" >&2
    # Afresh: pip --target skips folders that exist (bin/ would miss the new tools).
    rm -rf "$tools"
    "$python" -m pip install -q --disable-pip-version-check --target "$tools" 'maturin>=1.5,<2' cargo-zigbuild ziglang auditwheel
fi
# What the wheel carries beside the module: the Vulkan loader and glvnd's libraries for a
# node that has none (scripts/bundle-libs.sh), and the vkcuda command, linked against glibc
# 2.28's symbols as the module is. Staged into the package folder for maturin, then removed.
bash scripts/bundle-libs.sh
echo "vkcuda: building the vkcuda command for glibc 2.28 (cargo-zigbuild)" >&2
PYTHONPATH=$tools PATH="$tools/bin:$PATH" "$tools/bin/cargo-zigbuild" zigbuild --release --quiet \
    -p vkcuda-cli --bin vkcuda --target x86_64-unknown-linux-gnu.2.28
stage=python/vkcuda
trap 'rm -rf "$stage/_bin" "$stage/_libs"' EXIT
rm -rf "$stage/_bin" "$stage/_libs"
mkdir -p "$stage/_bin" "$stage/_libs"
install -m 755 target/x86_64-unknown-linux-gnu/release/vkcuda "$stage/_bin/vkcuda"
strip "$stage/_bin/vkcuda"
cp -r target/bundled/*.so.* target/bundled/LICENSES "$stage/_libs/"
rm -rf "$dist"
PYTHONPATH=$tools PATH="$tools/bin:$PATH" "$tools/bin/maturin" build --release --strip --quiet \
    --zig --compatibility manylinux_2_28 --manifest-path python/Cargo.toml --interpreter "$python" -o "$dist"
wheel=$(ls "$dist"/vkcuda-*.whl)
echo "vkcuda: built $(basename "$wheel") ($(du -k "$wheel" | cut -f1) KiB)"
# The command, the libraries and their licences are in it, the command executable.
listing=$(unzip -Z "$wheel")
for f in vkcuda/_bin/vkcuda vkcuda/_libs/libvulkan.so.1 vkcuda/_libs/libGLdispatch.so.0 vkcuda/_libs/libEGL.so.1 \
    vkcuda/_libs/LICENSES/vulkan-loader.txt vkcuda/_libs/LICENSES/libglvnd.txt; do
    echo "$listing" | grep -q " $f\$" || { echo "wheel.sh: $f is not in $(basename "$wheel")" >&2; exit 1; }
done
echo "$listing" | grep ' vkcuda/_bin/vkcuda$' | grep -q '^-rwx' ||
    { echo "wheel.sh: vkcuda/_bin/vkcuda is not executable in the wheel" >&2; exit 1; }
case "$wheel" in
    *-cp310-abi3-manylinux_2_28_x86_64.whl) ;;
    *) echo "wheel.sh: $wheel is not tagged cp310-abi3-manylinux_2_28_x86_64" >&2; exit 1 ;;
esac
audit=$(PYTHONPATH=$tools "$python" -m auditwheel show "$wheel")
echo "$audit" | head -3
echo "$audit" | grep -q 'consistent with.*' && echo "$audit" | tr '\n' ' ' | grep -q '"manylinux_2_28_x86_64"' ||
    { echo "wheel.sh: auditwheel does not find it manylinux_2_28: $audit" >&2; exit 1; }
[ -n "${VKCUDA_WHEEL_NO_TEST:-}" ] && exit 0
# CPython 3.10, the floor: the wheel installed alone, the headless tests against it.
py310=
for candidate in python3.10 "${PYENV_ROOT:-$HOME/.pyenv}"/versions/3.10*/bin/python3.10; do
    if "$candidate" -c pass 2>/dev/null; then py310=$candidate; break; fi
done
if [ -z "$py310" ]; then
    echo "wheel.sh: skipped: no python3.10 to install the wheel for" >&2
    exit 0
fi
site=target/wheel-py310
rm -rf "$site"
"$py310" -m pip install -q --disable-pip-version-check --target "$site" "$wheel" numpy pytest websocket-client
PYTHONPATH=$site "$py310" -c 'import sys, vkcuda; print("vkcuda", vkcuda.__version__, "on Python", sys.version.split()[0])'
# The command pip installed runs the wheel's binary.
PYTHONPATH=$site "$site/bin/vkcuda" --version
PYTHONPATH=$site "$py310" -m pytest -q -p no:cacheprovider python/tests/test_headless.py python/tests/test_serve.py
