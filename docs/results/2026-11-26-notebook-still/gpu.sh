#!/usr/bin/env bash
# Issue 46's last pieces on the H100 (2026-11-26): a frame reaches the watchers as soon
# as the GPU has drawn it (the consumer retires finished frames while it waits), and the
# notebook widget shows the last frame shown.
#   ab      the hot path before and after: python-cost's ab.py (1080p RGBA8 PyTorch
#           tensor, 20,000 shows after 1,000, newest wins and every frame), the wheel of
#           the commit before (.gpu/ab/base) and of this change (.gpu/ab/new), both plain
#           maturin builds, alternating, 5 runs each (h100/ab2.txt; h100/ab.txt: a first
#           run at ab.py's default 3,000 after 300, 3 runs each)
#   new|old the zig wheel (.gpu/new/wheels) with the carried Jupyter pieces: test_serve.py,
#           test_widget.py and test_gpu.py (faults excluded) under layer 1.4.309 / 1.3.239
#   faults  test_gpu.py's kernel-fault tests, last (a fault's after-effect on that H100:
#           docs/results/2026-11-26-run-layer)
#   bash docs/results/2026-11-26-notebook-still/gpu.sh ab new old faults
set -uo pipefail
cd "$(dirname "$0")/../../.."
R=$OUT/notebook-still; mkdir -p $R
torch_site=$(python3 -c 'import site; print(site.getsitepackages()[0])')
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $R/device.txt
for step in "$@"; do
    case $step in
    ab)
        for side in base new; do
            rm -rf /tmp/ab-$side
            python3 -m pip install -q --no-deps --target /tmp/ab-$side .gpu/ab/$side/vkcuda-*.whl 2>&1 | grep -v WARNING
        done
        ( source .gl/env.sh >/dev/null
          for i in 1 2 3 4 5; do
              for side in base new; do
                  PYTHONPATH=/tmp/ab-$side:$torch_site timeout 60 python3 docs/results/2026-11-25-python-cost/ab.py $side 20000 1000 2>&1 |
                      tee -a $R/ab2.txt
              done
          done ) ;;
    new|old)
        site=/tmp/site-still
        [ -d $site ] || python3 -m pip install -q --no-index --find-links .gpu/new/pydeps --target $site \
            .gpu/new/wheels/vkcuda-*.whl anywidget ipykernel jupyter_client websocket-client 2>&1 | grep -v WARNING
        ( unset VK_LAYER_PATH
          if [ $step = old ]; then VKCUDA_OLD_LAYER=1 source .gl/env.sh >/dev/null; else source .gl/env.sh >/dev/null; fi
          L=$R/$step.txt
          echo "== layer $step: $(ls .gpu/new/wheels)" | tee $L
          PYTHONPATH=$site:$torch_site timeout 200 python3 -m pytest -q -s -p no:cacheprovider \
              python/tests/test_serve.py python/tests/test_widget.py python/tests/test_gpu.py -k "not fault" >>$L 2>&1
          echo "rc=$?" >>$L
          grep -E "^widget:|passed|failed" $L | tail -4 ) ;;
    faults)
        ( source .gl/env.sh >/dev/null
          PYTHONPATH=/tmp/site-still:$torch_site timeout 60 python3 -m pytest -q -p no:cacheprovider \
              python/tests/test_gpu.py -k "fault" >$R/faults.txt 2>&1; echo "rc=$?" >>$R/faults.txt; tail -2 $R/faults.txt ) ;;
    esac
done
