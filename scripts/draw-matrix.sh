#!/usr/bin/env bash
# The draw pass at every format × layout, into targets larger and smaller
# than the frame (magnified ×3 and ×16, minified) and at the frame's own
# size, letterboxed above and below or left and right, with the julia scene (sharp
# edges: where a sampler's precision shows): a verified, validated headless
# run each (--consume draw --verify --validate). One line per run, then
# "draw-matrix: N passed, N failed".
#   PRODUCER, JOBS, VKCUDA_BIN, ARGS: scripts/lib-matrix.sh (PRODUCER default cuda)
set -uo pipefail
default_producer=cuda
source "$(dirname "$0")/lib-matrix.sh"
one() {
    local format=$1 layout=$2 size=$3 target=$4 bin=$5 producer=$6 work=$7
    local dir="$work/$format-$layout-$size-$target"
    timeout 300 "$bin" --headless --producer "$producer" --scene julia --size "$size" --format "$format" \
        --layout "$layout" --consume draw --target-size "$target" --frames 6 --dump-every 1 \
        --verify --validate $ARGS --out "$dir" >"$dir.log" 2>&1
    local rc=$? ok=1
    grep -q '6 frames compared, 0 mismatches' "$dir.log" && grep -q 'validation: 0 errors, 0 warnings' "$dir.log" &&
        [ $rc = 0 ] || ok=0
    printf '%-4s %-10s %-6s %-9s -> %-9s rc=%s | %s | %s\n' "$([ $ok = 1 ] && echo ok || echo FAIL)" "$format" \
        "$layout" "$size" "$target" "$rc" "$(grep -o 'verify: .*' "$dir.log")" "$(grep -o 'validation: .*' "$dir.log")"
    rm -rf "$dir"
}
export -f one
for format in rgba8 rgba8-srgb bgra8 rgba16f rgba32f r32f; do
    for layout in array buffer; do
        for pair in "641x359 1919x1081" "61x33 1919x1081" "1917x1079 1001x703" "97x61 1001x703" \
            "97x61 97x200" "641x359 900x359"; do
            echo "$format $layout $pair"
        done
    done
done | xargs -P "$JOBS" -L 1 bash -c 'one "$@" '"$BIN $PRODUCER $work" _ >"$work/results"
sort "$work/results"
passed=$(grep -c '^ok ' "$work/results")
failed=$(grep -c '^FAIL ' "$work/results")
echo "draw-matrix: $passed passed, $failed failed"
[ "$failed" = 0 ] && [ "$passed" -gt 0 ]
