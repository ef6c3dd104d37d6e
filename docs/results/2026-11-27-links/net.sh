#!/usr/bin/env bash
# Fills .gpu/bench/net with this machine's iproute2 (ip, tc) and the libraries
# they load, for a GPU machine without them: bench.sh puts it on PATH there.
# Each tool is a wrapper that runs the binary with its libraries
# (`ip netns exec NS tc` finds the wrapper on PATH too).
#   bash docs/results/2026-11-27-links/net.sh    # here, from the project's root
set -euo pipefail
cd "$(dirname "$0")/../../.."
net=.gpu/bench/net
rm -rf "$net" && mkdir -p "$net/bin" "$net/lib"
for tool in ip tc; do
    bin=$(command -v "$tool") || { echo "net.sh: no $tool here (apt-get install iproute2)" >&2; exit 1; }
    cp "$bin" "$net/bin/"
    # Every library but the C library and the loader (the GPU machine's own are newer).
    ldd "$bin" | awk '/=> \// { print $3 }' | grep -vE '/(libc|libm)\.so' | xargs -r cp -Lu -t "$net/lib"
    printf '#!/bin/sh\nd=$(dirname "$(readlink -f "$0")")\nLD_LIBRARY_PATH=$d/lib exec "$d/bin/%s" "$@"\n' "$tool" >"$net/$tool"
    chmod +x "$net/$tool"
done
strip "$net/bin/"* 2>/dev/null || true
du -sh "$net"
