#!/usr/bin/env bash
# One GPU, the build of this change (.gpu/new: vkcuda, the e2e test binary, examples/minimal,
# tests/timeline.rs): under layer 1.4.309 and then 1.3.239, every CUDA e2e test (the
# viewer's window tests through Xvfb from .xkit), the kernel and golden tests, minimal in
# both layouts with --validate, the timeline test, and the fault matrix with the CUDA
# producer (FRAMES=6 SPREAD=1: each fault at 6 frames per configuration, 8 configurations).
#   bash docs/results/2026-11-26-sound-core/e2e.sh [new|old]...   (default: new old)
set -uo pipefail
cd "$(dirname "$0")/../../.."
R=$OUT/r; mkdir -p $R
export VKCUDA_BIN=.gpu/new/vkcuda VKCUDA_CACHE_DIR=/tmp/vkcuda-ptx
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tee $R/device.txt
for layer in ${@:-new old}; do
    ( unset VK_LAYER_PATH
      if [ $layer = old ]; then VKCUDA_OLD_LAYER=1 source .gl/env.sh >/dev/null; else source .gl/env.sh >/dev/null; fi
      source .xkit/env.sh >/dev/null
      echo "== layer $layer: VK_LAYER_PATH=${VK_LAYER_PATH:-unset}" | tee $R/layer-$layer.txt
      for t in cuda_ kernel golden; do
          timeout 200 .gpu/new/e2e $t >$R/e2e-$t-$layer.txt 2>&1; echo "rc=$?" >>$R/e2e-$t-$layer.txt
          echo "e2e $t: $(grep -E '^test result|passed' $R/e2e-$t-$layer.txt | tail -1) $(tail -1 $R/e2e-$t-$layer.txt)"
      done
      for l in array buffer; do
          timeout 60 .gpu/new/minimal --layout $l --validate 2>&1 | tail -2 | tee -a $R/minimal-$layer.txt
      done
      timeout 60 .gpu/new/timeline --nocapture 2>&1 | grep -E "skipped|validation|test result" | tee $R/timeline-$layer.txt
      PRODUCER=cuda FRAMES=6 SPREAD=1 JOBS=14 timeout 150 bash scripts/fault-matrix.sh >$R/faults-$layer.txt 2>&1
      echo "faults: $(tail -1 $R/faults-$layer.txt)" )
done
