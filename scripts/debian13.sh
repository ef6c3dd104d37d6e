#!/usr/bin/env bash
# A Debian 13 ("trixie") root on a Debian 12 machine, for testing under the
# validation layer and Mesa that today's users run (layer 1.4.309, Mesa 25):
# that layer needs glibc 2.38, which Debian 12 lacks, so it runs in a chroot.
# Packages come from the Debian mirror this machine's apt already uses.
#
#   scripts/debian13.sh root            make (or reuse) the root, with the test packages
#   scripts/debian13.sh run CMD...      run CMD inside it, in this checkout, as root
#
#   VKCUDA_DEBIAN13   where the root lives (default /var/tmp/vkcuda-debian13)
#
# `run` bind-mounts /proc, /dev, /sys and this checkout (at the same path) and
# unmounts them afterwards, however CMD ends.
set -euo pipefail
root=${VKCUDA_DEBIAN13:-/var/tmp/vkcuda-debian13}
repo=$(cd "$(dirname "$0")/.." && pwd)
# What the e2e suite needs there: loader, lavapipe, the layer, Xvfb and the X tools,
# the X11 client libraries winit loads, weston for the Wayland tests.
packages=(libvulkan1 mesa-vulkan-drivers vulkan-validationlayers xvfb xdotool x11-apps x11-utils
    libxkbcommon-x11-0 libx11-xcb1 libxcursor1 libxrandr2 libxi6 libwayland-client0 libwayland-cursor0
    weston procps python3 ca-certificates python3-numpy python3-pytest python3-venv)

mirror() {
    # Some of these globs match nothing: cat's complaint is not an error here.
    { cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources 2>/dev/null || true; } |
        grep -oE '^(URIs:|deb) +[a-z]+://[^ ]+/debian/?( |$)' | head -n1 | awk '{print $2}'
}

make_root() {
    local stamp="$root/.vkcuda-packages"
    if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "${packages[*]}" ]; then
        return 0
    fi
    local m
    m=$(mirror)
    [ -n "$m" ] || { echo "debian13.sh: no Debian mirror in this machine's apt sources" >&2; exit 1; }
    if [ ! -x "$root/usr/bin/apt-get" ]; then
        command -v debootstrap >/dev/null ||
            DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap >/dev/null
        echo "debian13.sh: debootstrap trixie into $root (a few minutes, once)" >&2
        rm -rf "$root.partial"
        debootstrap --variant=minbase trixie "$root.partial" "$m" >/dev/null
        mv "$root.partial" "$root"
    fi
    echo "debian13.sh: installing the test packages in $root" >&2
    chroot "$root" env DEBIAN_FRONTEND=noninteractive sh -c \
        "apt-get update -qq && apt-get install -y -qq --no-install-recommends ${packages[*]} >/dev/null"
    echo "${packages[*]}" >"$stamp"
}

run_in_root() {
    make_root
    local mounts=(proc dev sys "${repo#/}")
    mkdir -p "$root$repo" "$root/tmp"
    mount -t proc proc "$root/proc"
    mount --rbind /dev "$root/dev"
    mount --rbind /sys "$root/sys"
    mount --bind "$repo" "$root$repo"
    # shellcheck disable=SC2064  # the paths are fixed now
    trap "for m in ${mounts[*]}; do umount -R \"$root/\$m\" 2>/dev/null || umount -l \"$root/\$m\"; done" EXIT
    chroot "$root" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root TERM=dumb \
        ${CI:+CI=$CI} ${VKCUDA_REPEAT:+VKCUDA_REPEAT=$VKCUDA_REPEAT} sh -c 'cd "$0" && exec "$@"' "$repo" "$@"
}

case "${1:-}" in
root) make_root; echo "$root: Debian $(cat "$root/etc/debian_version")" ;;
run) shift; run_in_root "$@" ;;
*) echo "usage: debian13.sh root | run CMD..." >&2; exit 2 ;;
esac
