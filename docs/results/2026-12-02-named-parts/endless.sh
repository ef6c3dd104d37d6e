#!/usr/bin/env bash
# The viewer's endless-kernel stops (Esc, SIGINT, its own give-up), the kernel in
# the viewer's process and in a child, under both layers (carry .gl, .xkit, .gpu/bin).
set -u
cd "$(dirname "$0")/../../.."
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
mkdir -p target/release/examples && cp .gpu/bin/producer_child target/release/examples/
for layer in current old; do
    source .gl/env.sh >/dev/null 2>&1
    if [ $layer = old ]; then unset VK_LAYER_PATH; export VKCUDA_OLD_LAYER=1; source .gl/env.sh >/dev/null 2>&1; fi
    source .xkit/env.sh >/dev/null 2>&1
    export VKCUDA_BIN=$PWD/.gpu/bin/vkcuda VKCUDA_CACHE_DIR=/tmp/ptx
    echo "=== layer $layer: $(.gpu/bin/vkcuda doctor 2>/dev/null | grep -i 'validation layer')"
    .gpu/bin/e2e cuda_window_endless_kernel 2>&1 | grep -E "^test |^e2e:|^[A-Z][a-z]+: exit"
done
