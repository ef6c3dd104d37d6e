# The child's wire after the layering (channel, offer, producer's messages): CUDA children on the H200, both layers.
set -u
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
source .gl/env.sh >/dev/null 2>&1
export VKCUDA_BIN=$PWD/.gpu/bin/vkcuda VKCUDA_CACHE_DIR=/tmp/ptx
mkdir -p target/release/examples && cp .gpu/bin/producer_child target/release/examples/
B=.gpu/bin/vkcuda
for layer in current old; do
  if [ $layer = old ]; then unset VK_LAYER_PATH; export VKCUDA_OLD_LAYER=1; fi
  echo "=== layer $layer: $($B doctor 2>/dev/null | grep 'validation layer')"
  for a in "--scene julia --size 97x61" "--scene gradient --size 1920x1080" "--scene julia --size 33x17 --layout buffer" "--scene gradient --size 1x1 --sync shared"; do
    $B --headless --producer-process child --verify --validate --frames 120 $a --out /tmp/f 2>&1 | grep -E "producer|mismatches|validation:|error" | tr '\n' ' '; echo " [exit ${PIPESTATUS[0]} child $a]"; rm -rf /tmp/f
  done
  .gpu/bin/e2e "area=child,cuda_serve_raw_frames_match_the_reference,cuda_split,cuda_shared,cuda_staging,cuda_handover,cuda_your_kernel,doctor_,cuda_pairing" 2>&1 | grep -vE "^test .* ok$"
  .gpu/bin/child 2>&1 | grep -E "^test |test result"
done
echo "=== last, faults (layer old): a served --kernel child through faults and fixes, kernel faults"
.gpu/bin/e2e "cuda_serve_a_page_gets_the_fixed_kernel_at_once,cuda_kernel_fault_is_reported_without_hang,cuda_headless_faulting_kernel" 2>&1 | grep -vE "^test .* ok$"
