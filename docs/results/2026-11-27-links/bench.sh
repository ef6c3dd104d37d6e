#!/usr/bin/env bash
# Issue 51's bench on the GPU machine (one call, no validation layer: timings).
#   - codecs: the codec choice (codecs/: VP8, VP9, H.264, AV1 beside JPEG q80 at equal
#     PSNR, 1080p julia and gradient, 4 encoder threads);
#   - link_bench rows: this change's view (new), the commit before it (old: fixed JPEG
#     q80, 2 unacknowledged + 1 waiting) and viser's path (viser_path.py: a JPEG loop,
#     no acknowledgements), julia 1920x1080 frames (CUDA producer), 1080p and 720p
#     canvases, over loopback, 100 Mbit/s + 20 ms, 20 Mbit/s + 40 ms, 5 Mbit/s + 80 ms
#     and a drop from 50 to 5 Mbit/s (40 ms): a network namespace, tbf both ways, a relay
#     adding the round trip. One client asking 60 frames/s (a 60 Hz page); loopback also
#     as fast as it decodes; 8 clients; the producer alone; a still picture; odd sizes.
#   bash docs/results/2026-11-27-links/bench.sh codecs 1920x1080 1280x720 extras
#   (rtt: the round-trip drain against vkcuda-prev on the slow links, repeated;
#   ab,LINK,CANVAS,N[,RATE]: vkcuda-prev and vkcuda over one link, interleaved, N times;
#   emu,LINK,CANVAS,N: vkcuda-prev through link_bench-prev, the emulator before TCP_NODELAY;
#   vs,LINK,CANVAS,N,RATE,BUILD...: builds named by their files in .gpu/bench, interleaved;
#   table,CANVAS,BUILD...: old, viser and the builds over every link; links,LINK,CANVAS,BUILD...:
#   the same over one link; extra,BUILD: the producer alone and 8 clients;
#   SLOG=1: each row's server log as server-BUILD-LINK-CANVAS-ROUND.txt;
#   AHEAD="new vkcuda-x ...": the builds whose client says the frames ahead of each, default new;
#   SCENE=gradient: vkcuda's rows on the gradient scene, not julia;
#   COST=N: vkcuda's julia at N iterations a pixel, not 64: a slower producer, frames
#   sent nearer in the animation)
#   (prev:WxH: vkcuda-prev, the commit measured before, row by row beside new)
#   (carry .gl and .gpu/bench; SECS=5; TRACE=1: each one-client row's frames and status
#   lines as trace-BUILD-LINK-CANVAS.jsonl; one part or several per call)
set -uo pipefail
cd "$(dirname "$0")/../../.."
R=$OUT/bench; mkdir -p "$R"
B=.gpu/bench
V=docs/results/2026-11-27-links/viser_path.py
SECS=${SECS:-5}
export VKCUDA_CACHE_DIR=/tmp/vkcuda-ptx
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$R/device.txt"
source .gl/env.sh >/dev/null
unset VK_LAYER_PATH
# iproute2 (ip, tc) carried from Debian 12 with its libraries, when the machine has none.
command -v ip >/dev/null || export PATH=$PWD/$B/net:$PATH
ip -V && tc -V
row() { # SERVER LINK CANVAS CLIENTS [link_bench flags]
    local s=$1 build=$1 lb=$B/link_bench
    case $s in
    new) s=new:$B/vkcuda ;; old) s=old:$B/vkcuda-old ;; viser) s=viser:$V ;;
    prev) s=new:$B/vkcuda-prev ;; # the commit measured before this one, same protocol
    # vkcuda-prev through the link emulator before its relay and client set TCP_NODELAY
    prev-nagle) s=new:$B/vkcuda-prev lb=$B/link_bench-prev ;;
    vkcuda-*) s=new:$B/${s%%~*} ;; # another build of this view, by its file's name (~TAG: a row name)
    esac
    local trace=() name=${2//\//_}
    name=${name//:/_} # the device tool brings back no name with a colon
    # A row asking another rate than 60 frames/s says so in its files' names (else the
    # rows of one link, canvas and round, at two rates, write one file).
    local tag=""
    [[ " ${*:5} " =~ \ --rate\ ([0-9.]+)\  ]] && [ "${BASH_REMATCH[1]}" != 60 ] && tag=-rate${BASH_REMATCH[1]}
    # So does another scene (a gradient row wrote over a julia row's trace in bench-30).
    [ -n "${SCENE:-}" ] && tag+=-$SCENE
    [ -n "${COST:-}" ] && tag+=-cost$COST
    [ -n "${TRACE:-}" ] && [ "$4" = 1 ] && trace=(--trace "$R/trace-$build-$name-$3$tag-${ROUND:-1}.jsonl")
    [ -n "${SLOG:-}" ] && trace+=(--server-log "$R/server-$build-$name-$3$tag-${ROUND:-1}.txt")
    # Builds whose page says the frames ahead of each (AHEAD: their names; the view from
    # the page's count on): their client says so too (earlier builds reject it).
    [[ " ${AHEAD:-new} " == *" $build "* ]] && trace+=(--ahead)
    # SCENE=gradient: vkcuda's servers draw the gradient (the PSNR's reference too).
    [ -n "${SCENE:-}" ] && trace+=(--scene "$SCENE")
    [ -n "${COST:-}" ] && trace+=(--cost "$COST")
    timeout $((SECS + 60)) "$lb" "$s" "$2" "$3" "$4" "$SECS" "${@:5}" "${trace[@]}" 2>>"$R/errors.txt" |
        sed "s/^{/{\"build\":\"$build\",/" | tee -a "$R/rows.jsonl"
}
for part in "$@"; do
    case $part in
    codecs) timeout 300 "$B/vkcuda-codecs" 60 4 /tmp/streams 2>/dev/null | tee "$R/codecs.txt" ;;
    codecs-gradient) timeout 240 "$B/vkcuda-codecs" 30 4 /tmp/streams gradient 2>/dev/null | tee "$R/codecs-gradient.txt" ;;
    extras)
        row new loopback 1920x1080 0
        row new loopback 1920x1080 8
        row new 100/20 1920x1080 8
        row new 20/40 1920x1080 1 --still
        row new 20/40 1277x719 1 --size 1919x1079 ;;
    rtt)
        # The drain now and then (ProbeRTT) against the commit before it (vkcuda-prev),
        # rows interleaved; the slow link three times a canvas (a queue the first frames
        # leave is a matter of luck).
        for i in 1 2 3; do for c in 1920x1080 1280x720; do row prev 5/80 $c 1; row new 5/80 $c 1; done; done
        for i in 1 2; do for l in 20/40 100/20; do row prev $l 1920x1080 1; row new $l 1920x1080 1; done; done
        row prev drop:50/5/40 1920x1080 1; row new drop:50/5/40 1920x1080 1
        row prev loopback 1920x1080 1; row new loopback 1920x1080 1 ;;
    ab,*)
        # ab,LINK,CANVAS,N[,RATE]: vkcuda-prev and vkcuda, rows interleaved, N times
        # (RATE: the client's frames a second, 0 as fast as it decodes).
        IFS=, read -r _ link canvas n rate <<<"$part"
        for i in $(seq "$n"); do
            row prev "$link" "$canvas" 1 --rate "${rate:-60}"
            row new "$link" "$canvas" 1 --rate "${rate:-60}"
        done ;;
    vs,*)
        # vs,LINK,CANVAS,N,RATE,BUILD...: builds of this view (files in .gpu/bench), interleaved.
        IFS=, read -r _ link canvas n rate builds <<<"$part"
        for ROUND in $(seq "$n"); do
            for b in ${builds//,/ }; do row "$b" "$link" "$canvas" 1 --rate "$rate"; done
        done ;;
    table,*)
        # table,CANVAS,BUILD...: old, viser and builds of this view over every link, and
        # loopback as fast as it decodes (old and the builds), one row each.
        IFS=, read -r _ canvas builds <<<"$part"
        for link in loopback 100/20 20/40 5/80 drop:50/5/40; do
            for server in old viser ${builds//,/ }; do row "$server" "$link" "$canvas" 1; done
        done
        for server in old ${builds//,/ }; do row "$server" loopback "$canvas" 1 --rate 0; done ;;
    links,*)
        # links,LINK,CANVAS,BUILD...: old, viser and builds over one link, one row each.
        IFS=, read -r _ link canvas builds <<<"$part"
        for server in old viser ${builds//,/ }; do row "$server" "$link" "$canvas" 1; done ;;
    extra,*)
        # extra,BUILD: the producer alone, 8 clients over loopback and over 100 Mbit/s.
        b=${part#extra,}
        row "$b" loopback 1920x1080 0
        row "$b" loopback 1920x1080 8
        row "$b" 100/20 1920x1080 8 ;;
    emu,*)
        # emu,LINK,CANVAS,N: vkcuda-prev through the emulator with Nagle and without.
        IFS=, read -r _ link canvas n <<<"$part"
        for i in $(seq "$n"); do row prev-nagle "$link" "$canvas" 1; row prev "$link" "$canvas" 1; done ;;
    new:*x*)
        # This change's rows alone (the baselines' binaries did not change).
        for link in loopback 100/20 20/40 5/80 drop:50/5/40; do
            row new $link "${part#new:}" 1
        done
        row new loopback "${part#new:}" 1 --rate 0 ;;
    prev:*x*)
        # The commit measured before (vkcuda-prev), beside new in the same call.
        for link in 100/20 20/40 5/80; do
            row prev $link "${part#prev:}" 1
            row new $link "${part#prev:}" 1
        done
        row prev loopback "${part#prev:}" 1 --rate 0 ;;
    *x*)
        for link in loopback 100/20 20/40 5/80 drop:50/5/40; do
            for server in new old viser; do
                row $server $link "$part" 1
            done
        done
        row new loopback "$part" 1 --rate 0
        row old loopback "$part" 1 --rate 0 ;;
    esac
done
echo "rows: $(wc -l <"$R/rows.jsonl" 2>/dev/null)"
