#!/usr/bin/env bash
# Issue 51 on the GPU machine, correctness (one call): under layer 1.4.309 and then
# 1.3.239, every run validated:
#   - the watchers' compute draw against the CPU reference, every format, RGBA8 and
#     I420 in both ranges, odd sizes (crates/run/tests/watch.rs, built: .gpu/check/watch);
#   - e2e "serve" (the browser view without a browser: raw frames of the CPU and the CUDA
#     producer at odd canvases, every format drawn, 8 clients, a stalled client, fuzzing,
#     half-sent requests, the pointer into a --kernel, the view's stop);
#   - the wheel's test_serve.py and test_widget.py with PyTorch CUDA tensors (torch's
#     current stream);
# and first, whether a shaped link can be made here (network namespace, veth, tbf).
#   bash docs/results/2026-11-27-links/check.sh       (carry .gl and .gpu/check)
set -uo pipefail
cd "$(dirname "$0")/../../.."
R=$OUT/check; mkdir -p "$R"
C=.gpu/check
torch_site=$(python3 -c 'import site; print(site.getsitepackages()[0])')
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$R/device.txt"
nproc | sed 's/^/cores: /' | tee -a "$R/device.txt"
# A link here? (link_bench needs it in the next call.)
( ip netns add vkcheck && ip link add vkchk0 type veth peer name vkchk1 && ip link set vkchk1 netns vkcheck &&
  ip netns exec vkcheck tc qdisc add dev vkchk1 root tbf rate 20mbit burst 16kb latency 50ms &&
  tc qdisc add dev vkchk0 root tbf rate 20mbit burst 16kb latency 50ms && echo "link: namespace, veth and tbf: ok" ) 2>&1 |
    tee -a "$R/device.txt"
ip netns del vkcheck 2>/dev/null; ip link del vkchk0 2>/dev/null
site=/tmp/site-links
python3 -m pip install -q --no-index --find-links .gpu/check/pydeps --target $site "$C"/vkcuda-*.whl \
    anywidget ipykernel jupyter_client websocket-client 2>&1 | grep -v WARNING
export VKCUDA_BIN=$C/vkcuda VKCUDA_CACHE_DIR=/tmp/vkcuda-ptx
for layer in new old; do
    ( unset VK_LAYER_PATH
      if [ $layer = old ]; then VKCUDA_OLD_LAYER=1 source .gl/env.sh >/dev/null; else source .gl/env.sh >/dev/null; fi
      L=$R/$layer.txt
      version=1.4.309; [ $layer = old ] && version=1.3.239
      echo "== layer $version" | tee "$L"
      timeout 120 "$C/watch" --nocapture >>"$L" 2>&1; echo "watch rc=$?" >>"$L"
      timeout 300 "$C/e2e" serve >>"$L" 2>&1; echo "e2e rc=$?" >>"$L"
      PYTHONPATH=$site:$torch_site timeout 150 python3 -m pytest -q -s -p no:cacheprovider \
          python/tests/test_serve.py python/tests/test_widget.py >>"$L" 2>&1
      echo "python rc=$?" >>"$L"
      grep -E "^  (Rgba|Bgra|R32)|test result|^test |^e2e:|^widget:|passed|failed|rc=" "$L" | tail -40 )
done
