#!/usr/bin/env bash
# Builds the wheel that installs on cluster nodes: abi3 for CPython 3.10
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
if ! PYTHONPATH=$tools "$python" -c 'import ziglang, auditwheel' 2>/dev/null || [ ! -x "$tools/bin/maturin" ]; then
    echo "vkcuda: installing maturin, ziglang and auditwheel (from PyPI) into $tools" >&2
    "$python" -m pip install -q --disable-pip-version-check --target "$tools" 'maturin>=1.5,<2' ziglang auditwheel
fi
rm -rf "$dist"
PYTHONPATH=$tools PATH="$tools/bin:$PATH" "$tools/bin/maturin" build --release --strip --quiet \
    --zig --compatibility manylinux_2_28 --manifest-path python/Cargo.toml --interpreter "$python" -o "$dist"
wheel=$(ls "$dist"/vkcuda-*.whl)
echo "vkcuda: built $(basename "$wheel")"
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
PYTHONPATH=$site "$py310" -m pytest -q -p no:cacheprovider python/tests/test_headless.py python/tests/test_serve.py
