#!/usr/bin/env bash
# Issue 46's wheel and widget on the H100, under layer 1.4.309 and then 1.3.239:
# the manylinux_2_28 wheel (scripts/wheel.sh's, carried in .gpu/new/wheels) installed
# with the carried Jupyter pieces (.gpu/new/pydeps: anywidget, ipykernel, jupyter_client,
# websocket-client), then the GPU tensor tests, the serve= tests and the widget through a
# real kernel (python/tests/test_gpu.py, test_serve.py, test_widget.py). The kernel-fault
# tests run last, once (after a CUDA_ERROR_ILLEGAL_ADDRESS, later processes' Vulkan batches
# never run on that H100: docs/results/2026-11-26-run-layer).
#   bash docs/results/2026-11-26-browser-view/python46.sh [new|old]...   (default: new old)
set -uo pipefail
cd "$(dirname "$0")/../../.."
R=$OUT/python46; mkdir -p $R
site=/tmp/site46
rm -rf $site
python3 -m pip install -q --no-index --find-links .gpu/new/pydeps --target $site .gpu/new/wheels/vkcuda-*.whl anywidget ipykernel jupyter_client websocket-client 2>&1 | grep -v WARNING | tail -3
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $R/device.txt
PYTHONPATH=$site python3 -c 'import sys, vkcuda, torch; print("vkcuda", vkcuda.__version__, "Python", sys.version.split()[0], "torch", torch.__version__)' | tee -a $R/device.txt
ls .gpu/new/wheels | tee -a $R/device.txt
for layer in ${@:-new old}; do
    ( unset VK_LAYER_PATH
      if [ $layer = old ]; then VKCUDA_OLD_LAYER=1 source .gl/env.sh >/dev/null; else source .gl/env.sh >/dev/null; fi
      L=$R/$layer.txt
      echo "== layer $layer" | tee $L
      PYTHONPATH=$site:$(python3 -c 'import site; print(site.getsitepackages()[0])') timeout 500 python3 -m pytest -q -p no:cacheprovider \
          python/tests/test_serve.py python/tests/test_widget.py python/tests/test_gpu.py -k "not fault" >>$L 2>&1
      echo "rc=$?" >>$L
      tail -3 $L )
done
echo "== the kernel-fault tests, last" | tee $R/faults.txt
( source .gl/env.sh >/dev/null
  PYTHONPATH=$site:$(python3 -c 'import site; print(site.getsitepackages()[0])') timeout 120 python3 -m pytest -q -p no:cacheprovider \
      python/tests/test_gpu.py -k "fault" >>$R/faults.txt 2>&1; echo "rc=$?" >>$R/faults.txt; tail -3 $R/faults.txt )
