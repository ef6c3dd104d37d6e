#!/usr/bin/env bash
# Every failure stops validly: injects each fault (test-only `--inject
# FAULT@FRAME`) at many frames, in every configuration that can race (1 and 2
# images, both sync schemes, copy and draw consumers), with SIGINT or SIGTERM
# arriving during a third of them, and checks each run: the documented exit
# code, one error line, no validation message, no partial file, no hang.
# Prints one line per fault x configuration and "fault-matrix: N passed, N failed".
#
#   PRODUCER, JOBS, VKCUDA_BIN, ARGS: scripts/lib-matrix.sh (PRODUCER default cpu)
#   FRAMES     the frames a fault is injected at: 0..FRAMES-1   default 30
#   SPREAD     set: each fault takes the next FRAMES frames (fault i: i*FRAMES ..), so a
#              configuration sees FRAMES x faults different frames in fewer runs
#   FAULTS     default: png-write consumer-error producer-panic mismatch (+ cuda-fault for cuda)
#   VERBOSE    print every run's line as it ends (default: only failures)
#   KEEP       a folder: failed runs' logs are copied there
#   RUN_LIMIT  seconds a run may take before it counts as hung   default 120; cuda: 15 x JOBS
#              (at JOBS=32 on one H200, runs waited up to 146 s in the driver's lock, none hung)
set -uo pipefail
default_producer=cpu
source "$(dirname "$0")/lib-matrix.sh"
FRAMES=${FRAMES:-30}
default_faults="png-write consumer-error producer-panic mismatch"
[ "$PRODUCER" = cuda ] && default_faults="$default_faults cuda-fault"
FAULTS=${FAULTS:-$default_faults}
limit_default=120
[ "$PRODUCER" = cuda ] && [ $((15 * JOBS)) -gt 120 ] && limit_default=$((15 * JOBS))
export RUN_LIMIT=${RUN_LIMIT:-$limit_default}

# One run: prints "ok" or "FAIL <why>" with the run's key.
one() {
    local fault=$1 sync=$2 buffers=$3 consume=$4 k=$5 bin=$6 producer=$7 work=$8
    local key="$fault@$k $sync-$buffers $consume" dir="$work/$fault-$sync-$buffers-$consume-$k"
    local signal="" want
    # A third of the runs also get a signal: SIGINT at the fault's frame, or SIGTERM one frame later.
    case $((k % 3)) in 1) signal="--inject sigint@$k" ;; 2) signal="--inject sigterm@$((k + 1))" ;; esac
    local extra=""
    [ "$consume" = draw ] && extra="--consume draw --target-size 37x23"
    bounded "$RUN_LIMIT" "$dir.log" "$bin" --headless --producer "$producer" --size 61x33 --frames 80 --dump-every 1 \
        --verify --validate --sync "$sync" --buffers "$buffers" $extra $ARGS --inject "$fault@$k" $signal \
        --out "$dir/out"
    local rc=$?
    local errors=$(grep -c '^vkcuda: error' "$dir.log")
    local messages=$(grep -ci 'validation error\|validation warning' "$dir.log")
    local partial=$(ls -A "$dir/out" 2>/dev/null | grep -Ecv '^frame_[0-9]+\.(png|exr)$')
    case $fault in
        mismatch) want="3" ;;   # the run completes (or a signal stops it first: 130/143)
        *) want="1" ;;
    esac
    # A signal that lands before the fault's frame stops the run gracefully first.
    local ok=0
    case "$rc" in
        "$want") ok=1 ;;
        130 | 143) [ -n "$signal" ] && ok=1 ;;
    esac
    # Exit 1 needs exactly one error line; 3 prints one too.
    if [ "$rc" = 1 ] || [ "$rc" = 3 ]; then [ "$errors" = 1 ] || ok=0; fi
    [ "$messages" = 0 ] && [ "$partial" = 0 ] || ok=0
    if [ $ok = 1 ]; then
        echo "ok $key rc=$rc"
    else
        echo "FAIL $key rc=$rc errors=$errors validation=$messages partial=$partial: $(grep -m2 -i 'error' "$dir.log" | cut -c1-300 | tr '\n' ' ')"
        grep -A40 '^HUNG' "$dir.log" | head -60
        [ -n "${KEEP:-}" ] && cp "$dir.log" "$KEEP/${key//[ @]/_}.log"
    fi
    rm -rf "$dir"
}
export -f one

first=0
for fault in $FAULTS; do
    for sync in split shared; do
        for buffers in 1 2; do
            for consume in copy draw; do
                for ((k = first; k < first + FRAMES; k++)); do
                    mkdir -p "$work/$fault-$sync-$buffers-$consume-$k"
                    echo "$fault $sync $buffers $consume $k"
                done
            done
        done
    done
    [ -n "${SPREAD:-}" ] && first=$((first + FRAMES))
done | xargs -P "$JOBS" -L 1 bash -c 'one "$@" '"$BIN $PRODUCER $work" _ | tee "$work/results" |
    { [ -n "${VERBOSE:-}" ] && cat || grep '^FAIL'; }

passed=0 failed=0
for fault in $FAULTS; do
    for sync in split shared; do
        for buffers in 1 2; do
            for consume in copy draw; do
                n=$(grep -c "^ok $fault@.*$sync-$buffers $consume " "$work/results")
                f=$(grep -c "^FAIL $fault@.*$sync-$buffers $consume " "$work/results")
                codes=$(grep " $fault@.*$sync-$buffers $consume " "$work/results" | grep -o 'rc=[0-9]*' | sort | uniq -c | awk '{printf "%s×%s ", $1, $2}')
                printf '%-15s %-6s %s images %-5s: %s ok, %s failed  (%s)\n' "$fault" "$sync" "$buffers" "$consume" "$n" "$f" "$codes"
                passed=$((passed + n)) failed=$((failed + f))
            done
        done
    done
done
grep '^FAIL' "$work/results" | head -n 20
echo "fault-matrix: $passed passed, $failed failed"
[ "$failed" = 0 ]
