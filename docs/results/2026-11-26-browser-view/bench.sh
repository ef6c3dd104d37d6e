#!/usr/bin/env bash
# The browser view on the H100, measured with a client that decodes and
# acknowledges (watch_client: decodes JPEG q80 with zune-jpeg), beside viser's path for
# the same frames (viser_path.py): per frame size (1080p, 4K) and canvas
# (1920x1080, 1280x720), SECS seconds each after a second of warm-up; vkcuda's
# client once as fast as it decodes and once at 60 frames/s (what a page on a
# 60 Hz display asks for). Also the producer's fps with and without a watching client (vkcuda --json, SIGINT
# after SECS+2 s). No validation layer (a timing run).
#   bash docs/results/2026-11-26-browser-view/bench.sh   (SECS=8)
set -uo pipefail
cd "$(dirname "$0")/../../.."
R=$OUT/bench; mkdir -p $R
SECS=${SECS:-8}
B=.gpu/new
export VKCUDA_CACHE_DIR=/tmp/vkcuda-ptx
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tee $R/device.txt
python3 -c 'import cv2' 2>/dev/null && echo "cv2 present" | tee -a $R/device.txt
source .gl/env.sh >/dev/null
# The encoder choice (examples/encoders.rs): libjpeg-turbo beside jpeg-encoder on this CPU.
$B/encoders | tee $R/encoders.txt
served() { # SIZE CANVAS(or none) [RATE] → producer fps and, with a canvas, the client's line
    local size=$1 canvas=$2 rate=${3:-0} tag=$1-$2-${3:-0}
    $B/vkcuda --headless --serve 0 --size $size --scene julia --json $R/run-$tag.json >$R/run-$tag.out 2>$R/run-$tag.err &
    local pid=$!
    for _ in $(seq 100); do grep -q "watch it at" $R/run-$tag.err && break; sleep 0.1; done
    local port=$(grep -o 'http://[^ ]*' $R/run-$tag.err | cut -d: -f3 | tr -d /)
    if [ $canvas != none ]; then
        timeout $((SECS + 20)) $B/watch_client ws://127.0.0.1:$port/ws $canvas $SECS jpeg $pid $rate >$R/client-$tag.json 2>>$R/client-$tag.err
    else
        sleep $((SECS + 1))
    fi
    kill -INT $pid; wait $pid
    python3 -c "import json;print('vkcuda $tag producer_fps', round(json.load(open('$R/run-$tag.json'))['fps'],1))"
    [ $canvas != none ] && echo "vkcuda $tag client $(cat $R/client-$tag.json)"
}
viser() { # SIZE CANVAS
    local tag=viser-$1-$2 pf=$R/port-$1-$2
    rm -f $pf; python3 docs/results/2026-11-26-browser-view/viser_path.py $1 $2 $pf 2>$R/$tag.err &
    local pid=$!
    for _ in $(seq 300); do [ -s $pf ] && break; sleep 0.1; done
    timeout $((SECS + 30)) $B/watch_client ws://127.0.0.1:$(cat $pf)/ws $2 $SECS jpeg $pid >$R/$tag.json 2>>$R/$tag.err
    kill $pid 2>/dev/null; wait $pid 2>/dev/null
    echo "viser $1-$2 client $(cat $R/$tag.json) ($(head -1 $R/$tag.err))"
}
for size in 1920x1080 3840x2160; do
    served $size none
    for canvas in 1920x1080 1280x720; do
        served $size $canvas
        served $size $canvas 60
        viser $size $canvas
    done
done 2>&1 | tee $R/bench.txt
tail -n 3 $R/viser-*.err $R/client-*.err 2>/dev/null | tee -a $R/bench.txt
rm -f $R/port-*
