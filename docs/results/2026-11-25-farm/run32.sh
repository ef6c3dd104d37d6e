set -u
source .gl/env.sh >/dev/null 2>&1
B=$PWD/.gpu/bin/vkcuda
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u; echo "layer: ${VKCUDA_OLD_LAYER:+1.3.239}${VKCUDA_OLD_LAYER:-1.4.309}"
for i in 1 2 3; do
  d=/tmp/term4k-$i; rm -rf $d
  $B --headless --producer cuda --size 3840x2160 --format rgba32f --frames 1000000 --validate --out $d > $d.log 2>&1 & pid=$!
  for _ in $(seq 600); do ls $d 2>/dev/null | grep -q '^frame' && break; sleep 0.05; done
  t0=$(date +%s.%N); kill -TERM $pid; wait $pid; rc=$?; t1=$(date +%s.%N)
  n=$(grep -o 'stopped after [0-9]*' $d.log | grep -o '[0-9]*$')
  $B check-dump $d --frames $n > $d.check 2>&1; c=$?
  echo "SIGTERM 4K rgba32f cuda, run $i: exit $rc $(python3 -c "print(round($t1-$t0,2))") s after the signal; stopped after $n frames; check-dump exit $c: $(cat $d.check); $(grep -o 'validation: .*' $d.log)"
  rm -rf $d
done
opts="--headless --producer cuda --size 1917x1079 --frames 3000 --verify --validate"
$B $opts --out /tmp/single > /tmp/single.log 2>&1 || { echo single failed; tail -3 /tmp/single.log; }
for sig in TERM KILL; do for after in 50 400; do
  d=/tmp/res-$sig-$after; rm -rf $d
  $B $opts --out $d > $d.log 2>&1 & pid=$!
  for _ in $(seq 600); do [ "$(ls $d 2>/dev/null | grep -c '^frame')" -ge $after ] && break; sleep 0.01; done
  kill -$sig $pid; wait $pid; rc=$?
  kept=$(ls $d | grep -c '^frame'); tmps=$(ls -A $d | grep -c 'tmp$')
  $B $opts --resume --out $d > $d.r.log 2>&1; rr=$?
  diff -r /tmp/single $d >/dev/null && same=byte-equal || same=DIFFERENT
  echo "SIG$sig after >=$after: exit $rc, $kept frames there, $tmps temporary; resume exit $rr: $(grep -o 'resumed: .*' $d.r.log); $(grep -o 'removed [0-9]* temporary files' $d.r.log); $(grep -o 'verify: [0-9]* frames compared, [0-9]* mismatches' $d.r.log); $(grep -o 'validation: .*' $d.r.log); $same"
  rm -rf $d
done; done
