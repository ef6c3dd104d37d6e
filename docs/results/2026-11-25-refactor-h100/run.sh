#!/usr/bin/env bash
# On the H100 machine, from the repo's root, with .gl, .xkit and .gpu carried
# (.gpu: vkcuda, e2e, minimal, timeline, wheels/: built on the Debian 12
# machine, stripped). One layer per call: `bash run.sh` (1.4.309) or
# `VKCUDA_OLD_LAYER=1 bash run.sh` (1.3.239). Logs under $OUT.
set -uo pipefail
source .gl/env.sh; source .xkit/env.sh
layer=1.4.309; [ -n "${VKCUDA_OLD_LAYER:-}" ] && layer=1.3.239
export VKCUDA_BIN=.gpu/vkcuda VKCUDA_CACHE_DIR=/tmp/vkcuda-ptx
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
log="$OUT/h100-$layer.txt"
{
    echo "== layer $layer: e2e cuda_ (the CUDA producer headless and in the viewer under Xvfb)"
    .gpu/e2e cuda_ 2>&1
    echo "== stall matrix, CUDA producer (a stalled producer and a kernel that never ends)"
    PRODUCER=cuda JOBS=14 bash scripts/stall-matrix.sh 2>&1 | tail -n 3
    echo "== examples/minimal (the core alone), both layouts, validated"
    for layout in array buffer; do .gpu/minimal --validate --layout $layout 2>&1 | grep -v '^vkcuda: compiled'; done
    echo "== tests/timeline.rs"
    .gpu/timeline --nocapture 2>&1 | grep -E "skipped|validation|test result"
    echo "== Python suite (torch, CuPy, JAX, cuda.core)"
    bash scripts/gpu-python.sh 2>&1 | tail -n 4
} >"$log" 2>&1
grep -E "^==|^e2e:|FAILED|stall-matrix|minimal:|test result|passed|failed" "$log"
