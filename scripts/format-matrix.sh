#!/usr/bin/env bash
# Every format x layout x sync scheme x image count x consumer: one verified,
# validated headless run each (--dump-every 1 --verify --validate, odd sizes),
# every dumped file decoded: PNG by scripts/png-check.py, OpenEXR by its magic
# and by the run's own round-trip check (the unit test
# every_format_is_written_losslessly_and_verified). A run passes with exit 0,
# "N frames compared, 0 mismatches", "validation: 0 errors, 0 warnings", and
# exactly the expected files. Prints failures and "format-matrix: N passed, N failed".
#
#   PRODUCER, JOBS, VKCUDA_BIN, ARGS: scripts/lib-matrix.sh (PRODUCER default cpu)
#   FRAMES     frames per run                        default 10
#   VERBOSE    print every run's line
set -uo pipefail
default_producer=cpu
source "$(dirname "$0")/lib-matrix.sh"
FRAMES=${FRAMES:-10}

one() {
    local format=$1 layout=$2 sync=$3 buffers=$4 consume=$5 bin=$6 producer=$7 frames=$8 work=$9
    local key="$format $layout $sync-$buffers $consume" dir="$work/$format-$layout-$sync-$buffers-$consume"
    local extra="" ext=png size=97x61
    if [ "$consume" = draw ]; then
        extra="--consume draw --target-size 133x91" size=133x91
    else
        case $format in rgba16f | rgba32f | r32f) ext=exr ;; esac
    fi
    timeout 300 "$bin" --headless --producer "$producer" --size 97x61 --frames "$frames" --dump-every 1 \
        --verify --validate --format "$format" --layout "$layout" --sync "$sync" --buffers "$buffers" \
        $extra $ARGS --out "$dir" >"$dir.log" 2>&1
    local rc=$? why=""
    grep -q "$frames frames compared, 0 mismatches" "$dir.log" || why="$why verify"
    grep -q 'validation: 0 errors, 0 warnings' "$dir.log" || why="$why validation"
    [ "$(ls "$dir" 2>/dev/null | grep -c "^frame_[0-9]*\.$ext\$")" = "$frames" ] || why="$why files"
    [ "$(ls -A "$dir" 2>/dev/null | grep -vc "^frame_[0-9]*\.$ext\$")" = 0 ] || why="$why stray"
    if [ "$ext" = png ]; then
        python3 scripts/png-check.py "$dir" "$size" "$frames" >/dev/null 2>&1 || why="$why png-check"
    else
        for f in "$dir"/*.exr; do
            [ "$(head -c4 "$f" | od -An -tx1 | tr -d ' ')" = 762f3101 ] || { why="$why exr-magic"; break; }
        done
    fi
    [ "$rc" = 0 ] || why="rc=$rc$why"
    if [ -z "$why" ]; then echo "ok $key"; else echo "FAIL $key:$why"; tail -n 3 "$dir.log" | sed 's/^/    /'; fi
    rm -rf "$dir"
}
export -f one

for format in rgba8 rgba8-srgb bgra8 rgba16f rgba32f r32f; do
    for layout in array buffer; do
        for sync in split shared; do
            for buffers in 1 2; do
                for consume in copy draw; do
                    echo "$format $layout $sync $buffers $consume"
                done
            done
        done
    done
done | xargs -P "$JOBS" -L 1 bash -c 'one "$@" '"$BIN $PRODUCER $FRAMES $work" _ >"$work/results"
[ -n "${VERBOSE:-}" ] && cat "$work/results" || grep -v '^ok ' "$work/results"
passed=$(grep -c '^ok ' "$work/results")
failed=$(grep -c '^FAIL ' "$work/results")
echo "format-matrix: $passed passed, $failed failed"
[ "$failed" = 0 ] && [ "$passed" -gt 0 ]
