#!/usr/bin/env bash
# Issue 74's named parts (the run layer's folders, the grouped parameters named,
# the protocol typed, the controller as pieces) on the GPU machine, under one
# layer a call: LAYER=current (1.4.309) or LAYER=old (1.3.239). Builds nothing:
# carry .gl, .xkit and .gpu/bin (vkcuda, e2e, child, producer_child of one commit)
# and .gpu/wheels (that commit's wheel). Fault tests last.
#   LAYER=current bash docs/results/2026-12-02-named-parts/check.sh
set -u
cd "$(dirname "$0")/../../.."
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
source .gl/env.sh >/dev/null 2>&1
if [ "${LAYER:-current}" = old ]; then unset VK_LAYER_PATH; export VKCUDA_OLD_LAYER=1; source .gl/env.sh >/dev/null 2>&1; fi
source .xkit/env.sh >/dev/null 2>&1
export VKCUDA_BIN=$PWD/.gpu/bin/vkcuda VKCUDA_CACHE_DIR=/tmp/ptx
# The e2e tests find the child beside target/release; the child test beside its own folder.
mkdir -p target/release/examples .gpu/examples && cp .gpu/bin/producer_child target/release/examples/ && cp .gpu/bin/producer_child .gpu/examples/
B=.gpu/bin/vkcuda
echo "=== layer ${LAYER:-current}: $($B doctor 2>/dev/null | grep -i 'validation layer')"
# Every producer at odd sizes, verified against the CPU reference, validated.
for a in "--producer cuda --scene julia --size 97x61" "--producer cuda --scene gradient --size 1920x1080 --layout buffer" \
         "--producer cuda --scene julia --size 33x17 --sync shared" "--producer staging --scene gradient --size 641x479" \
         "--producer-process child --scene julia --size 1x1" "--producer-process child --scene gradient --size 1279x719 --layout buffer"; do
    $B --headless --verify --validate --frames 120 $a --out /tmp/f 2>&1 | grep -E "mismatches|validation:|error" | tr '\n' ' '
    echo " [exit ${PIPESTATUS[0]}: $a]"; rm -rf /tmp/f
done
# The CUDA end-to-end tests but the faults (they go last), the child, the served view.
picked=$(.gpu/bin/e2e --list | awk '($1 == "child" || $2 ~ /^cuda_|^doctor_/) && $2 !~ /fault/ { print $2 }' | paste -sd,)
log=${OUT:-/tmp}/e2e-${LAYER:-current}.txt
.gpu/bin/e2e "$picked" >"$log" 2>&1
grep -E "^test .*skipped|^e2e:" "$log"
grep -A10 -E "^test .* FAILED" "$log" | head -60
.gpu/bin/child 2>&1 | grep -E "^test |test result"
# The Python module with torch, CuPy, JAX, cuda.core: tensors shown, served, read back.
bash scripts/gpu-python.sh python/tests/test_gpu.py 2>&1 | tail -6
echo "=== last, faults"
.gpu/bin/e2e "$(.gpu/bin/e2e --list | awk '$2 ~ /^cuda_/ && $2 ~ /fault/ { print $2 }' | paste -sd,)" 2>&1 | grep -vE "^test .* ok$" | tail -6
