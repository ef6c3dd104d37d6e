# Racy paced configurations repeated: bash .gpu/s13.sh LAYER
for f in "hot_reload 8" "cuda_window_faulting 6" "cuda_low_latency_window_sigint 6" "cuda_window_endless_kernel_ended_by 6"; do
  set -- $f
  bash .gpu/s12.sh $LAYER $1 $2 > /tmp/r.txt 2>&1
  echo "$1 x$2: $(grep -c ' \.\.\. ok$' /tmp/r.txt) ok, $(grep -c 'FAILED' /tmp/r.txt) failed"
  grep -B2 -A30 FAILED /tmp/r.txt | head -60
done
