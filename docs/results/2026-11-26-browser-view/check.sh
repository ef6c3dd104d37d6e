#!/usr/bin/env bash
# The browser view's correctness on the H100 under layer 1.4.309 and then
# 1.3.239: the e2e serve tests (raw frames against the CPU reference at odd
# canvas sizes from the CPU and CUDA producers, the pointer reaching a
# --kernel, 8 clients, a stalled client, fuzzing, a port in use; the
# Chromium tests say skipped: no browser there), then the Python module's
# serve= tests (NumPy) with the carried wheel.
#   bash docs/results/2026-11-26-browser-view/check.sh
set -uo pipefail
cd "$(dirname "$0")/../../.."
R=$OUT/check; mkdir -p $R
export VKCUDA_BIN=.gpu/new/vkcuda VKCUDA_CACHE_DIR=/tmp/vkcuda-ptx
pip install -q --no-deps --target /tmp/site .gpu/new/wheels/*.whl .gpu/new/wheels/websocket_client-*.whl >/dev/null 2>&1
for layer in new old; do
    ( unset VK_LAYER_PATH
      if [ $layer = old ]; then VKCUDA_OLD_LAYER=1 source .gl/env.sh >/dev/null; else source .gl/env.sh >/dev/null; fi
      L=$R/$layer.txt
      echo "== layer $layer" | tee $L
      timeout 400 .gpu/new/e2e serve >>$L 2>&1; echo "rc=$?" >>$L
      PYTHONPATH=/tmp/site timeout 120 python3 -m pytest -q -p no:cacheprovider python/tests/test_serve.py >>$L 2>&1; echo "rc=$?" >>$L
      grep -E "^test |^  |e2e: |passed|failed|rc=" $L | grep -v "^  [A-Z]" | tail -40 )
done
