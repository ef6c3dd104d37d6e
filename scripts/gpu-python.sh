#!/usr/bin/env bash
# On the GPU machine: installs the carried wheel (.gpu/wheels, built here by
# `maturin build --release --strip`) into a folder of its own and runs the
# Python suite against the machine's torch, CuPy, JAX and cuda.core, under the
# validation layer env.sh picked (1.4.309; VKCUDA_OLD_LAYER=1: 1.3.239).
#   bash scripts/gpu-python.sh [pytest arguments]
set -euo pipefail
cd "$(dirname "$0")/.."
site=/tmp/vkcuda-site
rm -rf "$site"
python3 -m pip install -q --no-index --no-deps --target "$site" .gpu/wheels/vkcuda-*.whl
# JAX takes most of the GPU's memory at its first use unless told not to.
export XLA_PYTHON_CLIENT_PREALLOCATE=false PYTHONUNBUFFERED=1
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
python3 -c 'import torch, cupy, jax; print("torch", torch.__version__, "cupy", cupy.__version__, "jax", jax.__version__)' || true
PYTHONPATH=$site python3 -m pytest -p no:cacheprovider -q -rs python/tests "$@"
