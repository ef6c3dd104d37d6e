#!/usr/bin/env bash
# One GPU, build 2a1e747 (.gpu/wheels then): probe.py in each mode and path
# under layer 1.4.309, then .gpu/odd.py (now the test
# test_odd_sizes_shown_and_written_in_place). Output: probe-h100.txt.
set -uo pipefail
cd "$(dirname "$0")/../../.."
export XLA_PYTHON_CLIENT_PREALLOCATE=false PYTHONUNBUFFERED=1
source .gl/env.sh >/dev/null
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader
rm -rf /tmp/s; python3 -m pip install -q --no-index --no-deps --target /tmp/s .gpu/wheels/vkcuda-*.whl
for mode in newest every; do for where in show frame; do
  echo "== $mode $where"; d=$(mktemp -d)
  PYTHONPATH=/tmp/s timeout 60 python3 docs/results/2026-11-26-faults-odd/probe.py $mode $where $d 2>&1 | grep -v "^\s*$" | cut -c1-400 | tail -12
  echo "rc ${PIPESTATUS[0]}"
done; done
