#!/usr/bin/env bash
# Issue 52 on the GPU machine: the kernel's fault written over the viewer's last
# frame (one call; carry .gl, .xkit and .gpu/fault: the e2e test binary and
# vkcuda of the commit, stripped). Under Xvfb NVIDIA's Vulkan cannot present:
# the viewer takes the CPU path, the one that writes the notice. Layers 1.4.309
# and 1.3.239; VKCUDA_E2E_KEEP keeps the window's picture after the fault
# (xwd; assets/viewer-fault-notice.png is it as PNG).
#   bash docs/results/2026-11-28-fault-notice/gpu.sh
set -uo pipefail
cd "$(dirname "$0")/../../.."
source .gl/env.sh >/dev/null
source .xkit/env.sh >/dev/null
unset VK_LAYER_PATH
export VKCUDA_BIN=.gpu/fault/vkcuda VKCUDA_CACHE_DIR=/tmp/ptx VKCUDA_E2E_KEEP=$OUT
F=.gpu/fault R=$OUT/fault.txt
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$R"
(echo "== layer 1.4.309"; timeout 90 $F/e2e cuda_window_fault_is_written) 2>&1 | tee -a "$R"
(export VKCUDA_OLD_LAYER=1; source .gl/env.sh >/dev/null; unset VK_LAYER_PATH
 echo "== layer 1.3.239"; timeout 90 $F/e2e cuda_window_fault_is_written) 2>&1 | tee -a "$R"
