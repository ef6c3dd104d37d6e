#!/usr/bin/env bash
# Issue 52: no graphics pipeline left (the swapchain's window draws with compute and
# copies the drawing in), on the GPU machine (carry .gl, .xkit and of .gpu/ng what the
# parts use: vkcuda and e2e of this commit, vkcuda-base of ca5ecab, the commit before,
# and the wheels of both installed into wheel.site and wheel-base.site, their module
# stripped; all of it is over the 64 MiB a call carries, so timing goes in a call of
# its own):
#   timing  no layer: the compute draw (`--consume draw`; its shader gained a BGRA8
#           output) of this commit beside the commit before, CUDA producer, julia
#           1920x1080 into 1920x1080 and 1280x720, array and buffer, interleaved, 3 repeats;
#           then Python's show() of a 64x64 torch tensor, both wheels in turn, 5 runs each
#           (this commit checks once that CUDA's driver loads before a CUDA array is read);
#   matrix  the draw matrix alone (CUDA producer, both layers);
#   ab      Python's show() A/B again: 10 runs each, the order alternating;
#   correct both layers: the draw matrix with the CUDA producer, e2e cpu_present (the
#           CPU path's window, its buffers now taken by the shared `Turns`), Python's GPU
#           tests (cuda.core's __cuda_array_interface__, torch, CuPy) and the window's
#           fault notice (CuPy faults a kernel: run last in each layer's part);
#   fault   last: the viewer's kernel fault written over its last frame (a CUDA trap),
#           both layers.
#   LAYERS="new old" bash docs/results/2026-11-28-no-graphics/gpu.sh [timing] [matrix] [ab] [correct] [fault]
set -uo pipefail
cd "$(dirname "$0")/../../.."
G=.gpu/ng R=$OUT/no-graphics.txt
export VKCUDA_CACHE_DIR=/tmp/ptx
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$R"
layer() { # none | new | old (in a subshell: the layer's environment stays in it; a run
    # without --validate loads no layer)
    [ "$1" = old ] && export VKCUDA_OLD_LAYER=1
    source .gl/env.sh >/dev/null; unset VK_LAYER_PATH
    source .xkit/env.sh >/dev/null
}
parts=${*:-timing correct fault}
want() { [[ " $parts " == *" $1 "* ]]; }
summary() { grep -E "frames, .* fps|median per frame|mismatches|validation:|error" | tr '\n' ' '; echo; }
py() { PYTHONPATH=$1 timeout 300 python3 -m pytest -p no:cacheprovider -q -rfs -s "${@:2}" 2>&1; }
mkdir -p /tmp/ab
[ -d $G/wheel.site ] && cp -r $G/wheel.site /tmp/site && cp -r $G/wheel.site /tmp/ab/site-after
[ -d $G/wheel-base.site ] && cp -r $G/wheel-base.site /tmp/ab/site-before
layers=${LAYERS:-new old}

want timing && (layer none; echo "== timing (no layer): base = ca5ecab, this = this commit" | tee -a "$R"
    for rep in 1 2 3; do for layout in array buffer; do for target in 1920x1080 1280x720; do
        for bin in vkcuda-base vkcuda; do
            printf '%s %s %s rep%s: ' "$bin" "$layout" "$target" "$rep" | tee -a "$R"
            timeout 120 $G/$bin --headless --producer cuda --scene julia --size 1920x1080 --layout "$layout" \
                --consume draw --target-size "$target" --frames 3000 --dump-every 0 2>&1 | summary | tee -a "$R"
        done
    done; done; done
    [ -d /tmp/ab/site-before ] || exit 0  # the wheels were not carried
    echo "== Python show(), before = ca5ecab's wheel, after = this commit's" | tee -a "$R"
    timeout 400 python3 docs/results/2026-11-25-gpu-checks/guard-ab-gpu.py 2>&1 | tee -a "$R")

want matrix && for l in $layers; do (layer $l
    echo "== layer $l: the draw matrix, CUDA producer" | tee -a "$R"
    VKCUDA_BIN=$G/vkcuda PRODUCER=cuda timeout 500 bash scripts/draw-matrix.sh 2>&1 | tail -3 | tee -a "$R")
done

want ab && (layer none; echo "== Python show() again, 10 runs, order alternating" | tee -a "$R"
    RUNS=10 ALTERNATE=1 timeout 500 python3 docs/results/2026-11-25-gpu-checks/guard-ab-gpu.py 2>&1 | tee -a "$R")

want correct && for l in $layers; do (layer $l
    echo "== layer $l: the draw matrix, CUDA producer" | tee -a "$R"
    VKCUDA_BIN=$G/vkcuda PRODUCER=cuda timeout 500 bash scripts/draw-matrix.sh 2>&1 | tail -3 | tee -a "$R"
    echo "== layer $l: e2e cpu_present" | tee -a "$R"
    VKCUDA_BIN=$G/vkcuda timeout 400 $G/e2e cpu_present 2>&1 | grep -E "^test .*(FAIL|skipped)|^e2e:|within 4 levels" | tee -a "$R"
    echo "== layer $l: Python on the GPU" | tee -a "$R"
    py /tmp/site python/tests/test_gpu.py python/tests/test_headless.py -k "not kernel_fault" | tail -3 | tee -a "$R"
    py /tmp/site python/tests/test_window.py -k "cuda_fault or fails_is_written" | grep -E "the window after|swapchain:|passed|failed|Error" | tee -a "$R")
done

want fault && for l in $layers; do (layer $l
    echo "== layer $l: the viewer's kernel fault over its last frame" | tee -a "$R"
    VKCUDA_BIN=$G/vkcuda timeout 200 $G/e2e cuda_window_fault_is_written 2>&1 | grep -E "^test |^e2e:" | tee -a "$R")
done
