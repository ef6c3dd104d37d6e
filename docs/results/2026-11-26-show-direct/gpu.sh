#!/usr/bin/env bash
# One GPU: the direct show path (the caller packs straight into the shared
# buffer) against the wheel of the commit before it (slots and the producer's
# copy), both built on the Debian 12 machine: test_gpu.py with the new wheel
# under the layer named by $LAYER (new: 1.4.309, old: 1.3.239), then
# show_bench.py with each wheel in turn, beside the CLI line.
set -uo pipefail
cd "$(dirname "$0")/../../.."
R=$OUT/r; mkdir -p $R
trap 'tar czf $OUT/direct.tgz -C $OUT r' EXIT
if [ "${LAYER:-new}" = old ]; then unset VK_LAYER_PATH; VKCUDA_OLD_LAYER=1 source .gl/env.sh; else source .gl/env.sh; fi
echo "VK_LAYER_PATH=${VK_LAYER_PATH:-unset}" | tee $R/layer.txt
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tee $R/device.txt
for w in after:wheels before:wheels-before; do
    rm -rf /tmp/ab/site-${w%%:*}; mkdir -p /tmp/ab
    python3 -m pip install -q --no-index --no-deps --target /tmp/ab/site-${w%%:*} .gpu/${w#*:}/vkcuda-*.whl
done
export XLA_PYTHON_CLIENT_PREALLOCATE=false PYTHONUNBUFFERED=1
if [ "${TESTS:-1}" = 1 ]; then
    PYTHONPATH=/tmp/ab/site-after timeout ${TEST_LIMIT:-240} python3 -m pytest -p no:cacheprovider -q -rfs ${PYTEST_ARGS:-} python/tests/test_gpu.py 2>&1 | tail -8 | tee $R/test-gpu.txt
fi
if [ "${BENCH:-1}" = 1 ]; then
    for w in before after before after; do
        echo "== $w" | tee -a $R/bench.txt
        PYTHONPATH=/tmp/ab/site-$w timeout 150 python3 python/bench/show_bench.py --vkcuda .gpu/vkcuda --repeats ${REPEATS:-3} 2>&1 | tee -a $R/bench.txt
    done
fi
