#!/usr/bin/env bash
# Issue 52 on the GPU machine (one call; carry .gl and .gpu/fault: the e2e test
# binary and vkcuda of the commit, stripped, and vkcuda-before, the commit before):
#   - a Vulkan device lost mid-run (injected: device-lost@N) made again, a page
#     connected before it getting frames after it equal to the reference, the CPU
#     reference and the CUDA producer in a child; layers 1.4.309 and 1.3.239;
#   - window: the same in the viewer's window (CPU present under Xvfb; carry .xkit): the
#     CUDA producer and the CPU reference in a child, the window's frame after the device
#     was made again equal to the reference; both layers;
#   - python: a kernel fault on the caller's stream (CuPy) raises CUDA's error, which the
#     notebook widget's status then says, and a window (Xvfb: carry .xkit) writes over its
#     last frame (the wheel in .gpu/fault/wheel); both layers;
#   - last (a kernel's fault): a page connected before its --kernel faulted gets the
#     fix's frames within 6 s of the fix running, after a 15 s first session; both
#     layers, then the commit before (which held them back as long as that session ran).
#   bash docs/results/2026-11-28-device-lost/gpu.sh [lost] [window] [python] [fix]
set -uo pipefail
cd "$(dirname "$0")/../../.."
F=.gpu/fault R=$OUT/device-lost.txt
export VKCUDA_CACHE_DIR=/tmp/ptx
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$R"
layer() { # new | old (in a subshell: the old layer's environment stays in it)
    [ "$1" = old ] && export VKCUDA_OLD_LAYER=1
    source .gl/env.sh >/dev/null; unset VK_LAYER_PATH
}
e2e() { VKCUDA_BIN=$F/${BIN:-vkcuda} timeout 200 $F/e2e "$1" 2>&1 | grep -E "^test |^e2e:|lost device|made again|fault and fix|frame .* came|no '|equals no|within 4 levels" | tee -a "$R"; }
parts=${*:-lost fix}
want() { [[ " $parts " == *" $1 "* ]]; }
want lost && for l in new old; do (layer $l; echo "== layer $l: a lost device" | tee -a "$R"; e2e a_lost_device); done
want window && for l in new old; do
    (layer $l; source .xkit/env.sh >/dev/null; echo "== layer $l: a lost device, the window" | tee -a "$R"; e2e window_lost_device)
done
if want python; then
    python3 -m pip install -q --no-index --no-deps --target /tmp/site $F/wheel/vkcuda-*.whl
    for l in new old; do
        (layer $l; echo "== layer $l: Python, a kernel fault on the caller's stream" | tee -a "$R"
         PYTHONPATH=/tmp/site timeout 200 python3 -m pytest -p no:cacheprovider -q -rfs -s python/tests/test_gpu.py \
            -k kernel_fault_on_the_callers 2>&1 | grep -E "^fault|passed|failed|Error" | tee -a "$R"
         source .xkit/env.sh >/dev/null
         PYTHONPATH=/tmp/site timeout 200 python3 -m pytest -p no:cacheprovider -q -rfs -s python/tests/test_window.py \
            -k cuda_fault 2>&1 | grep -E "the window after|passed|failed|Error" | tee -a "$R")
    done
fi
want fix || exit 0
for l in new old; do (layer $l; echo "== layer $l: a fault and its fix" | tee -a "$R"; e2e cuda_serve_a_page_gets); done
(layer new; echo "== the commit before, layer new: a fault and its fix" | tee -a "$R"; BIN=vkcuda-before e2e cuda_serve_a_page_gets)
