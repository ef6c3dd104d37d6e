#!/usr/bin/env bash
# Third run (nvidia-h100-x2): the hand-overs' sleeps. VKX_SPIN_US: the
# mailbox's waits (the producer's take, the consumer's wait for a made frame,
# an every-frame put) spin that long for a change before sleeping;
# VKX_SPIN_AHEAD: the caller's run-ahead wait polls instead of sleeping.
set -uo pipefail
cd "$(dirname "$0")/../../.."
R=$OUT/r; mkdir -p $R
trap 'tar czf $OUT/show-threads-3.tgz -C $OUT r' EXIT
source .gl/env.sh
site=/tmp/vkcuda-site; rm -rf $site
python3 -m pip install -q --no-index --no-deps --target $site .gpu/wheels/vkcuda-*.whl
export PYTHONPATH=$site PYTHONUNBUFFERED=1
B="python3 python/bench/show_bench.py --vkcuda .gpu/vkcuda --threads --repeats 3"
$B --json $R/base.json 2>&1 | tee $R/base.txt
VKX_SPIN_US=50 $B --json $R/spin50.json 2>&1 | tee $R/spin50.txt
VKX_SPIN_US=50 VKX_SPIN_AHEAD=1 $B --json $R/spin50-ahead.json 2>&1 | tee $R/spin50-ahead.txt
VKX_SPIN_US=50 VKX_INFLIGHT=3 $B --json $R/spin50-i3.json 2>&1 | tee $R/spin50-i3.txt
