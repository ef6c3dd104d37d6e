#!/usr/bin/env bash
# Real-time AV1 (libaom's real-time mode, SVT-AV1) beside VP8 (libvpx, real time and
# good quality) on julia frames 85 ticks apart (the bench's spacing at ~32 frames/s sent)
# at 1080p, at the bitrates a 20 Mbit/s link leaves the view: bytes a frame and RGB PSNR
# against the exact frames, beside JPEG q80's. Bytes and PSNR do not depend on the
# machine (its speed does: not measured here). Debian 12's ffmpeg 5.1 (libaom 3.6,
# SVT-AV1 1.4.1, libvpx 1.12); the codecs tool writes and scores the frames.
#   bash docs/results/2026-11-27-links/av1.sh [DIR]
set -euo pipefail
cd "$(dirname "$0")"
D=${1:-$(mktemp -d)}
T=../../../target/codecs # the workspace's ignored target folder
C=$T/release/vkcuda-codecs
cargo build --release --manifest-path codecs/Cargo.toml --target-dir "$T" 2>/dev/null
"$C" dump 45 85 "$D"
one() { # NAME, then ffmpeg's encoder arguments
    local name=$1; shift
    ffmpeg -loglevel error -y -i "$D/julia.y4m" "$@" "$D/$name.mkv" 2>/dev/null
    ffmpeg -loglevel error -y -i "$D/$name.mkv" -f rawvideo -pix_fmt yuv420p "$D/$name.yuv"
    local bytes
    bytes=$(ffprobe -v error -show_entries packet=size -of csv=p=0 "$D/$name.mkv" | awk '{s+=$1; n++} END {printf "%.0f", s/n}')
    echo "$name: $bytes B/frame, $("$C" psnr "$D" "$D/$name.yuv" 5)"
    rm "$D/$name.yuv"
}
for b in 16M 22M 28M; do
    one "vp8-realtime-$b" -c:v libvpx -deadline realtime -cpu-used 10 -b:v $b -minrate $b -maxrate $b -bufsize 2M -g 9999
done
one vp8-good-speed2-16M -c:v libvpx -deadline good -cpu-used 2 -b:v 16M -minrate 16M -maxrate 16M -bufsize 2M -g 9999 -lag-in-frames 0
for b in 10M 12M 16M; do
    one "aom-realtime-speed8-$b" -c:v libaom-av1 -usage realtime -cpu-used 8 -b:v $b -g 9999 -row-mt 1 -tiles 2x2 -aq-mode 0
done
one aom-realtime-speed6-16M -c:v libaom-av1 -usage realtime -cpu-used 6 -b:v 16M -g 9999 -row-mt 1 -tiles 2x2 -aq-mode 0
for p in 10 12; do for b in 16M 20M; do
    one "svt-av1-preset$p-low-delay-$b" -c:v libsvtav1 -preset $p -b:v $b -g 9999 -svtav1-params pred-struct=1:rc=2
done; done
