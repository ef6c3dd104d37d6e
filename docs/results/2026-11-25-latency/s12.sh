# usage: bash .gpu/s12.sh LAYER(new|old) [filter] [repeats]
layer=$1; filter=${2:-cuda_}; reps=${3:-1}
source .gl/env.sh; source .xkit/env.sh; export VKCUDA_BIN=.gpu/vkcuda VKCUDA_CACHE_DIR=/tmp/ptx
[ "$layer" = old ] && { export VKCUDA_OLD_LAYER=1; source .gl/env.sh; }
echo "##### layer $layer: $(ls ${VK_LAYER_PATH:-/usr/share/vulkan/explicit_layer.d} | head -3) filter $filter x$reps"
for i in $(seq $reps); do .gpu/e2e $filter 2>&1 | grep -v "^Xlib"; done
