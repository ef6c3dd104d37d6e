#!/usr/bin/env bash
# A frame that never comes stops validly: a producer stalls at frame 3
# (test-only `--inject producer-stall@3`) or, with the CUDA producer, a kernel
# never ends (tests/kernels/endless.cu); the headless run says it is held up,
# then either SIGINT ends it (within 5 s of the signal) or its own 10 s
# timeout does. Every sync × images × consumer, REPEATS times each (a 1-in-6
# hazard cannot hide): exit 1, one error line saying why, no validation
# message, only whole frames in --out.
# Prints one line per configuration and "stall-matrix: N passed, N failed".
#   PRODUCER, JOBS, VKCUDA_BIN, ARGS: scripts/lib-matrix.sh (PRODUCER default cpu)
#   REPEATS          SIGINT runs per configuration               default 6
#   TIMEOUT_REPEATS  runs per configuration left to the timeout  default 2
#   STALLS           default: inject (+ endless for cuda)
#   KEEP             a folder: failed runs' logs are copied there
set -uo pipefail
default_producer=cpu
source "$(dirname "$0")/lib-matrix.sh"
REPEATS=${REPEATS:-6}
TIMEOUT_REPEATS=${TIMEOUT_REPEATS:-2}
default_stalls=inject
[ "$PRODUCER" = cuda ] && default_stalls="inject endless"
STALLS=${STALLS:-$default_stalls}

# One run: prints "ok" or "FAIL <why>" with the run's key.
one() {
    local stall=$1 end=$2 sync=$3 buffers=$4 consume=$5 k=$6 bin=$7 producer=$8 work=$9
    local key="$stall/$end $sync-$buffers $consume #$k" dir="$work/$stall-$end-$sync-$buffers-$consume-$k"
    local how="--producer $producer --inject producer-stall@3" extra="" want
    [ "$stall" = endless ] && how="--producer cuda --kernel tests/kernels/endless.cu"
    [ "$consume" = draw ] && extra="--consume draw --target-size 37x23"
    timeout -k 5 60 "$bin" --headless $how --size 61x33 --frames 40 --dump-every 1 --validate \
        --sync "$sync" --buffers "$buffers" $extra $ARGS --out "$dir/out" >"$dir.log" 2>&1 &
    local pid=$! late=0
    if [ "$end" = sigint ]; then
        # A state, not a time: the run has said that a frame is held up.
        for _ in $(seq 600); do grep -qs 'is held up for over' "$dir.log" && break; sleep 0.1; done
        local sent=$(date +%s%N)
        kill -INT "$pid"
        want="interrupted by signal 2"
    else
        want="timed out after 10s"
    fi
    wait "$pid"
    local rc=$?
    [ "$end" = sigint ] && [ $(( ($(date +%s%N) - sent) / 1000000 )) -gt 5000 ] && late=1
    local errors=$(grep -c '^vkcuda: error' "$dir.log")
    local said=$(grep '^vkcuda: error' "$dir.log" | grep -c "$want")
    local messages=$(grep -ci 'validation error\|validation warning' "$dir.log")
    local partial=$(ls -A "$dir/out" 2>/dev/null | grep -Ecv '^frame_[0-9]+\.(png|exr)$')
    if [ "$rc" = 1 ] && [ "$errors" = 1 ] && [ "$said" = 1 ] && [ "$messages" = 0 ] && [ "$partial" = 0 ] &&
        [ "$late" = 0 ]; then
        echo "ok $key"
    else
        echo "FAIL $key rc=$rc errors=$errors said=$said validation=$messages partial=$partial late=$late: $(grep -m2 -i 'error' "$dir.log" | cut -c1-300 | tr '\n' ' ')"
        [ -n "${KEEP:-}" ] && cp "$dir.log" "$KEEP/${key//[ \/#]/_}.log"
    fi
    rm -rf "$dir"
}
export -f one

for stall in $STALLS; do
    for end in sigint timeout; do
        n=$REPEATS
        [ "$end" = timeout ] && n=$TIMEOUT_REPEATS
        for sync in split shared; do
            for buffers in 1 2; do
                for consume in copy draw; do
                    for ((k = 0; k < n; k++)); do
                        mkdir -p "$work/$stall-$end-$sync-$buffers-$consume-$k"
                        echo "$stall $end $sync $buffers $consume $k"
                    done
                done
            done
        done
    done
done | xargs -P "$JOBS" -L 1 bash -c 'one "$@" '"$BIN $PRODUCER $work" _ | tee "$work/results" |
    { [ -n "${VERBOSE:-}" ] && cat || grep '^FAIL'; }

passed=$(grep -c '^ok' "$work/results") failed=$(grep -c '^FAIL' "$work/results")
for stall in $STALLS; do
    for end in sigint timeout; do
        printf '%-8s %-8s: %s ok, %s failed\n' "$stall" "$end" "$(grep -c "^ok $stall/$end " "$work/results")" \
            "$(grep -c "^FAIL $stall/$end " "$work/results")"
    done
done
echo "stall-matrix: $passed passed, $failed failed"
[ "$failed" = 0 ]
