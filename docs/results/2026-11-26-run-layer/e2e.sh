#!/usr/bin/env bash
# One GPU, the build of this change (.gpu/new: vkcuda, the e2e test binary, examples/minimal,
# tests/timeline.rs, crates/run/tests/feed.rs): under layer 1.4.309 and then 1.3.239, every
# CUDA e2e test (the viewer's window tests through Xvfb from .xkit), the kernel and golden
# tests, frames fed from Rust (host and GPU memory), minimal in both layouts with --validate
# (its own instance now), and the timeline test.
#   bash docs/results/2026-11-26-run-layer/e2e.sh [new|old]...   (default: new old)
set -uo pipefail
cd "$(dirname "$0")/../../.."
R=$OUT/r; mkdir -p $R
export VKCUDA_BIN=.gpu/new/vkcuda VKCUDA_CACHE_DIR=/tmp/vkcuda-ptx
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tee $R/device.txt
for layer in ${@:-new old}; do
    ( unset VK_LAYER_PATH
      if [ $layer = old ]; then VKCUDA_OLD_LAYER=1 source .gl/env.sh >/dev/null; else source .gl/env.sh >/dev/null; fi
      source .xkit/env.sh >/dev/null
      L=$R/$layer.txt
      echo "== layer $layer: VK_LAYER_PATH=${VK_LAYER_PATH:-unset}" | tee $L
      for t in cuda_ kernel golden; do
          echo "== e2e $t" >>$L
          timeout 240 .gpu/new/e2e $t >>$L 2>&1; echo "rc=$?" >>$L
      done
      echo "== feed" >>$L
      timeout 60 .gpu/new/feed --nocapture >>$L 2>&1; echo "rc=$?" >>$L
      echo "== timeline" >>$L
      timeout 60 .gpu/new/timeline --nocapture >>$L 2>&1; echo "rc=$?" >>$L
      for l in array buffer; do
          echo "== minimal $l" >>$L
          timeout 60 .gpu/new/minimal --layout $l --validate >>$L 2>&1; echo "rc=$?" >>$L
      done
      grep -E "^== |^test result|e2e: |passed|skipped: |minimal: |rc=" $L | grep -v "^test .* ok$" | tail -40 )
done
