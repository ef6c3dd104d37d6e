#!/usr/bin/env bash
# One GPU, the commit before this session (228862e, .gpu/base) and this change (.gpu/new), in
# turn: `vkcuda bench` (split-2 and binary, transfer and compute queues, 1080p, cheap, 3
# repeats x 0.3 s) and python/bench/show_bench.py (1080p torch, RGBA8 and RGBA32F, newest wins
# and every frame, 3 repeats; its "CLI" column is that build's own vkcuda): ROUNDS rounds
# (default 2), alternating which build goes first (base first; FIRST=new: new first).
# Layer 1.4.309's loader, no validation (timings).
set -uo pipefail
cd "$(dirname "$0")/../../.."
R=$OUT/r; mkdir -p $R
source .gl/env.sh >/dev/null
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tee $R/device.txt
for w in base new; do
    rm -rf /tmp/ab/site-$w; mkdir -p /tmp/ab
    python3 -m pip install -q --no-index --no-deps --target /tmp/ab/site-$w .gpu/$w/wheels/vkcuda-*.whl
done
export PYTHONUNBUFFERED=1 VKCUDA_CACHE_DIR=/tmp/vkcuda-ptx
orders=("base new" "new base")
[ "${FIRST:-base}" = new ] && orders=("new base" "base new")
for ((i = 0; i < ${ROUNDS:-2}; i++)); do
    for w in ${orders[i % 2]}; do
        echo "== $w" | tee -a $R/cli.txt $R/show.txt >/dev/null
        timeout 60 .gpu/$w/vkcuda bench --variants split-2,binary --queues transfer,compute --sizes 1920x1080 \
            --loads cheap --repeats 3 --seconds 0.3 2>&1 | grep -E "^(queue|transfer|compute) " >> $R/cli.txt
        PYTHONPATH=/tmp/ab/site-$w timeout 110 python3 python/bench/show_bench.py --vkcuda .gpu/$w/vkcuda \
            --repeats 3 2>&1 | grep -E "^device|^\| |rror" >> $R/show.txt
    done
done
cat $R/cli.txt; cat $R/show.txt
