#!/usr/bin/env bash
# The wheel on a stock node: in the Debian 13 root (scripts/debian13.sh), with
# the system's Vulkan loader and glvnd hidden, as a CUDA container has neither
# (Mesa's lavapipe stays: it is the driver here). `pip install` of the wheel
# into a fresh virtual environment, then:
#   - `vkcuda doctor` and `python -m vkcuda doctor`: exit 1 (lavapipe, no CUDA),
#     the bundled loader and glvnd named as in use;
#   - `vkcuda --headless --verify --validate`: the bundled loader said, 0 mismatches,
#     0 validation messages; the same from Python (NumPy frames, read back);
#   - the headless end-to-end tests with the wheel's command as the only vkcuda;
#   - with the driver manifests hidden too: `vkcuda doctor` exits 2 and names the
#     missing piece; a run fails with the cure and "run `vkcuda doctor`".
# Everything hidden is put back, however the test ends.
#
#   bash scripts/node-test.sh       (after scripts/wheel.sh and cargo test --no-run)
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${1:-}" != --inside ]; then
    wheel=$(ls "$PWD"/target/dist/vkcuda-*-manylinux_2_28_x86_64.whl 2>/dev/null | head -n1)
    [ -n "$wheel" ] || { echo "node-test.sh: no wheel in target/dist: run scripts/wheel.sh first" >&2; exit 1; }
    e2e=$(cargo test --release -p vkcuda-cli --test e2e --no-run --message-format=json 2>/dev/null |
        grep -o '"executable":"[^"]*/e2e-[^"]*"' | cut -d'"' -f4 | head -n1)
    [ -x "$e2e" ] || { echo "node-test.sh: no e2e test binary" >&2; exit 1; }
    exec bash scripts/debian13.sh run bash scripts/node-test.sh --inside "$wheel" "$e2e"
fi
wheel=$2 e2e=$3
lib=/usr/lib/x86_64-linux-gnu icd=/usr/share/vulkan/icd.d hidden=/var/tmp/vkcuda-node-hidden
restore() {
    if [ -d "$hidden/lib" ]; then mv "$hidden"/lib/* "$lib/" 2>/dev/null || true; fi
    if [ -d "$hidden/icd.d" ]; then mv "$hidden/icd.d" "$icd"; fi
    rm -rf "$hidden"
    ldconfig
}
# A run killed half-way left its hidden files: put them back first.
restore
trap restore EXIT
mkdir -p "$hidden/lib"
mv "$lib"/libvulkan.so.1* "$lib"/libEGL.so.1* "$lib"/libGLdispatch.so.0* "$hidden/lib/"
ldconfig
passed=0 failed=0
ok() { passed=$((passed + 1)); echo "node-test: ok: $1"; }
bad() { failed=$((failed + 1)); echo "node-test: FAILED: $1" >&2; }
# expect NAME CODE NEEDLE... < output: the exit code and each line.
expect() {
    local name=$1 want=$2 got=$3 out=$4; shift 4
    [ "$got" = "$want" ] || { bad "$name: exit $got, expected $want"; echo "$out" >&2; return; }
    for needle in "$@"; do
        grep -qF -- "$needle" <<<"$out" || { bad "$name: no '$needle'"; echo "$out" >&2; return; }
    done
    ok "$name"
}
if python3 -c 'import ctypes; ctypes.CDLL("libvulkan.so.1")' 2>/dev/null; then
    echo "node-test.sh: the system's libvulkan.so.1 still loads: nothing was hidden" >&2; exit 1
fi
venv=/tmp/vkcuda-node
rm -rf "$venv"
python3 -m venv --system-site-packages "$venv"
"$venv/bin/pip" install -q --no-index --no-deps --disable-pip-version-check "$wheel"
echo "node-test: $(. /etc/os-release; echo "$PRETTY_NAME"), $(python3 --version); vkcuda is $(command -v "$venv/bin/vkcuda")"
set +e
out=$("$venv/bin/vkcuda" doctor 2>&1); code=$?
echo "$out"
expect "vkcuda doctor (lavapipe, no CUDA): 1, the bundled loader and glvnd in use" 1 "$code" "$out" \
    "[ok] Vulkan loader: bundled with vkcuda: $venv/lib/" "libEGL.so.1: bundled with vkcuda" \
    "libGLdispatch.so.0: bundled with vkcuda" "[ok] Vulkan devices: 1" "--headless --producer cpu  yes"
out=$("$venv/bin/python" -m vkcuda doctor 2>&1); code=$?
expect "python -m vkcuda doctor: the same" 1 "$code" "$out" "[ok] Vulkan loader: bundled with vkcuda" \
    "Viewer(headless=True), host arrays   yes"
frames=/tmp/vkcuda-node-frames
rm -rf "$frames"
out=$("$venv/bin/vkcuda" --headless --frames 30 --size 97x61 --verify --validate --out "$frames" 2>&1); code=$?
expect "vkcuda --headless --verify --validate on the bundled loader" 0 "$code" "$out" \
    "the system has no Vulkan loader (libvulkan.so.1): using the one bundled with vkcuda" \
    "30 frames compared, 0 mismatches" "validation: 0 errors, 0 warnings"
out=$("$venv/bin/python" - 2>&1 <<'PY'
import numpy as np, tempfile, vkcuda
frame = (np.arange(61 * 97 * 4) % 251).astype(np.uint8).reshape(61, 97, 4)
with tempfile.TemporaryDirectory() as out:
    with vkcuda.Viewer(out=out, headless=True, validate=True) as v:
        for _ in range(10):
            v.show(frame)
        stats = v.stats()
    same = (vkcuda.read_frame(f"{out}/frame_000009.png") == frame).all()
    print("python: frames equal", bool(same), "validation", stats["validation_errors"], stats["validation_warnings"])
PY
); code=$?
expect "Python headless on the bundled loader: the frame read back equals the array" 0 "$code" "$out" \
    "python: frames equal True validation 0 0"
bin=$(ls "$venv"/lib/python3*/site-packages/vkcuda/_bin/vkcuda)
VKCUDA_BIN=$bin "$e2e" "cpu_split,cpu_shared,cpu_random,dump_every,non_utf8,timelines_starting,draw_consumer,area=bad_input"
code=$?
[ "$code" = 0 ] && ok "the headless end-to-end tests with the wheel's vkcuda" || bad "the wheel's vkcuda: end-to-end tests"
mv "$icd" "$hidden/icd.d"
out=$("$venv/bin/vkcuda" doctor 2>&1); code=$?
echo "$out"
expect "vkcuda doctor without a driver: 2, the missing manifests named, the cure" 2 "$code" "$out" \
    "[no] Vulkan drivers (ICD files): 0 found" \
    "-> no Vulkan driver is installed (no NVIDIA GPU here): Mesa's lavapipe: apt install mesa-vulkan-drivers"
out=$("$venv/bin/vkcuda" --headless --frames 3 --size 32x32 2>&1); code=$?
expect "a run without a driver: 1, the cure and the doctor" 1 "$code" "$out" "no Vulkan 1.3 driver found" \
    "apt install mesa-vulkan-drivers; run \`vkcuda doctor\`"
echo "node-test: $passed passed, $failed failed"
[ "$failed" = 0 ]
