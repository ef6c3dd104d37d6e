#!/usr/bin/env bash
# Frames at every size: for each frame size, the copy consumer and the draw
# consumer (into odd targets), both sync schemes: a verified, validated
# headless run with every frame dumped, then every PNG decoded
# (scripts/png-check.py). Then sizes the device cannot make or hold must be
# refused with exit 2 and nothing written. One line per run, then
# "size-matrix: N passed, N failed".
#   PRODUCER, VKCUDA_BIN, ARGS: scripts/lib-matrix.sh (PRODUCER default cuda);
#             ARGS may pick the layout (frames stay RGBA8: every file is a PNG)
#   SIZES     frame sizes                        default: the matrix below
#   LIMIT     the device's maxImageDimension2D  default 32768 (H100)
set -uo pipefail
default_producer=cuda
source "$(dirname "$0")/lib-matrix.sh"
LIMIT=${LIMIT:-32768}
# 1x1; 1xN and Nx1; odd x odd; primes; widths not multiples of 4, 16 or 64; 4K; 8K; the limit.
SIZES=${SIZES:-"1x1 3x2 1x777 777x1 7x1001 1917x1079 641x359 1021x1019 65x63 1922x1081 3840x2160 7680x4320 ${LIMIT}x4 4x${LIMIT}"}
TARGETS=(1x1 3x2 1001x703 17x1999 1919x1081)
out=$work
passed=0 failed=0 n=0
for size in $SIZES; do
    w=${size%x*} h=${size#*x}
    frames=6
    ((w * h > 4000000)) && frames=3
    for consume in copy draw; do
        for sync in split shared; do
            extra="" want=$size
            if [ $consume = draw ]; then
                want=${TARGETS[$((n % ${#TARGETS[@]}))]}
                n=$((n + 1))
                extra="--consume draw --target-size $want"
            fi
            log="$out/run.log"
            timeout 300 "$BIN" --headless --producer "$PRODUCER" --size "$size" --frames $frames --dump-every 1 \
                --verify --validate --sync $sync $extra $ARGS --out "$out/frames" >"$log" 2>&1
            rc=$?
            check=$(python3 scripts/png-check.py "$out/frames" "$want" $frames 2>&1)
            ok=$([ $rc = 0 ] && grep -q ' 0 mismatches' "$log" && grep -q 'validation: 0 errors, 0 warnings' "$log" &&
                [[ $check == decoded* ]] && echo 1 || echo 0)
            printf '%-4s %-10s %-5s %-6s -> %-9s rc=%s | %s | %s | %s\n' "$([ $ok = 1 ] && echo ok || echo FAIL)" \
                "$size" "$consume" "$sync" "$want" "$rc" "$(grep -o '[0-9]* frames compared, [0-9]* mismatches' "$log")" \
                "$(grep -o 'validation: .*' "$log")" "$check"
            [ $ok = 1 ] || { grep -m3 'error' "$log" | cut -c1-300; }
            [ $ok = 1 ] && passed=$((passed + 1)) || failed=$((failed + 1))
            rm -rf "$out/frames"
        done
    done
done
# Refused: past the limit (a side, and a draw target), and more than memory holds.
for bad in "--size $((LIMIT + 1))x1" "--size 64x64 --consume draw --target-size 1x$((LIMIT + 1))" \
    "--size ${LIMIT}x${LIMIT} --buffers 3"; do
    timeout 120 "$BIN" --headless --producer "$PRODUCER" $bad $ARGS --frames 2 --dump-every 1 --out "$out/refused" \
        >"$out/bad.log" 2>&1
    rc=$?
    lines=$(grep -c '^vkcuda: error' "$out/bad.log")
    ok=$([ $rc = 2 ] && [ "$lines" = 1 ] && [ ! -e "$out/refused" ] && echo 1 || echo 0)
    printf '%-4s refused %-60s rc=%s | %s\n' "$([ $ok = 1 ] && echo ok || echo FAIL)" "$bad" "$rc" \
        "$(grep -m1 '^vkcuda: error' "$out/bad.log" | cut -c1-200)"
    [ $ok = 1 ] && passed=$((passed + 1)) || failed=$((failed + 1))
    rm -rf "$out/refused"
done
echo "size-matrix: $passed passed, $failed failed"
[ $failed = 0 ]
