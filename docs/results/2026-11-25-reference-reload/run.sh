#!/usr/bin/env bash
# On the H100 machine, from the repo's root, with .gl, .xkit and .gpu carried
# (.gpu: vkcuda, vkcuda-base = the build before, e2e, cpu_reference; all built
# on the Debian 12 machine and stripped). Writes its logs under $OUT.
#   bash run.sh reference   # steps 1-3     bash run.sh reload   # step 4
set -uo pipefail
source .gl/env.sh; source .xkit/env.sh
export VKCUDA_CACHE_DIR=/tmp/vkcuda-ptx
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; nproc
if [ "${1:-}" = reference ]; then
# 1. The CPU reference on one of this machine's cores.
.gpu/cpu_reference >"$OUT/cpu-reference.txt" 2>&1; cat "$OUT/cpu-reference.txt"
# 2. Verified 1080p RGBA8 dumps, the build before and this one in turns.
for round in 1 2 3; do
    for b in base new; do
        bin=.gpu/vkcuda; [ $b = base ] && bin=.gpu/vkcuda-base
        rm -rf /tmp/d; echo "== $b round $round"
        $bin --headless --frames 3000 --size 1920x1080 --dump-every 1 --verify --out /tmp/d 2>&1 |
            grep -E "fps|PNG writer|mismatch"
    done
done >"$OUT/verify-dump.txt" 2>&1
grep -A1 "^==" "$OUT/verify-dump.txt" | grep -E "==|fps"
# 3. Every format verified against the new reference at odd sizes, validated, per layer.
for layer in 1.4.309 1.3.239; do
    (   [ $layer = 1.3.239 ] && { export VKCUDA_OLD_LAYER=1; source .gl/env.sh; }
        for f in rgba8 rgba8-srgb bgra8 rgba16f rgba32f r32f; do
            for run in 97x61:gradient 97x61:julia 1917x1079:gradient; do
                size=${run%:*} scene=${run#*:}
                rm -rf /tmp/f; printf "%s %s %s %s: " $layer $size $f $scene
                .gpu/vkcuda --headless --producer cuda --scene $scene --format $f --size $size --frames 60 \
                    --dump-every 1 --verify --validate --out /tmp/f 2>&1 |
                    grep -E "verify:|validation:|error" | tr '\n' ' '; echo
            done
        done
        VKCUDA_BIN=.gpu/vkcuda .gpu/e2e cuda_window_kernel_hot_reload 2>&1 | grep -E "^e2e:|^test |FAILED|older"
    )
done >"$OUT/formats-reload-e2e.txt" 2>&1
grep -c "0 mismatches" "$OUT/formats-reload-e2e.txt"; grep -E "^e2e:|^test " "$OUT/formats-reload-e2e.txt"
fi
if [ "${1:-}" = reload ]; then
# 4. Hot reload: 1,000 saves with this build and with the build before, in turns, twice;
# then the viewer's hot-reload test (validated) under each layer.
for round in 1 2; do
    for b in new base; do
        bin=.gpu/vkcuda limit=2; [ $b = base ] && bin=.gpu/vkcuda-base limit=1000
        echo "== $b round $round"
        SAVES=1000 LIMIT_MIB=$limit VKCUDA_BIN=$bin bash scripts/gpu-reload-soak.sh
    done
done >"$OUT/reload-soak.txt" 2>&1
cat "$OUT/reload-soak.txt"
for layer in 1.4.309 1.3.239; do
    (   [ $layer = 1.3.239 ] && { export VKCUDA_OLD_LAYER=1; source .gl/env.sh; }
        echo "== layer $layer"
        VKCUDA_BIN=.gpu/vkcuda .gpu/e2e cuda_window_kernel 2>&1
    )
done >"$OUT/reload-e2e.txt" 2>&1
grep -E "^==|^e2e:|^test " "$OUT/reload-e2e.txt"
fi
