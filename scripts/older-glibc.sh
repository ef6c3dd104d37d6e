#!/usr/bin/env bash
# The cluster wheel (scripts/wheel.sh) on an older glibc than this machine's:
# an Ubuntu 22.04 ("jammy") root (glibc 2.35, CPython 3.10: the wheel's floor,
# Mesa 23 from jammy-updates: lavapipe with Vulkan 1.3; its validation layer),
# from Ubuntu's archive.
# (Debian 11 has glibc 2.31 but CPython 3.9, below the floor, and a Mesa whose
# lavapipe lacks Vulkan 1.3; RHEL 8's glibc 2.28 needs a mirror this machine
# does not reach.) The wheel and the tests' PyPI packages are installed by this
# machine's pip for CPython 3.10 into a folder the root sees (target/jammy-site:
# the root has no pip of its own); the headless and serve= tests run there.
#
#   bash scripts/older-glibc.sh          (after scripts/wheel.sh)
#   VKCUDA_JAMMY   where the root lives (default /var/tmp/vkcuda-jammy)
set -euo pipefail
root=${VKCUDA_JAMMY:-/var/tmp/vkcuda-jammy}
repo=$(cd "$(dirname "$0")/.." && pwd)
archive=http://archive.ubuntu.com/ubuntu
packages=(libvulkan1 mesa-vulkan-drivers vulkan-validationlayers python3)
wheel=$(ls "$repo"/target/dist/vkcuda-*-manylinux_2_28_x86_64.whl 2>/dev/null | head -n1)
[ -n "$wheel" ] || { echo "older-glibc.sh: no wheel in target/dist: run scripts/wheel.sh first" >&2; exit 1; }
stamp="$root/.vkcuda-packages"
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "${packages[*]}" ]; then
    if [ ! -x "$root/usr/bin/apt-get" ]; then
        command -v debootstrap >/dev/null ||
            DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap >/dev/null
        echo "older-glibc.sh: debootstrap jammy into $root (a few minutes, once)" >&2
        rm -rf "$root.partial"
        # Ubuntu's archive key is not in Debian's keyring: the packages come over the same
        # archive apt then checks with the keys debootstrap installs.
        debootstrap --no-check-gpg --variant=minbase --components=main,universe jammy "$root.partial" "$archive" >/dev/null
        mv "$root.partial" "$root"
    fi
    echo "deb $archive jammy main universe
deb $archive jammy-updates main universe" >"$root/etc/apt/sources.list"
    chroot "$root" env DEBIAN_FRONTEND=noninteractive sh -c \
        "apt-get update -qq && apt-get install -y -qq --no-install-recommends ${packages[*]} >/dev/null"
    echo "${packages[*]}" >"$stamp"
fi
site=$repo/target/jammy-site
rm -rf "$site"
python3 -m pip install -q --disable-pip-version-check --target "$site" --python-version 3.10 --implementation cp \
    --only-binary :all: --platform manylinux2014_x86_64 --platform manylinux_2_28_x86_64 \
    "$wheel" numpy pytest websocket-client exceptiongroup tomli
mounts=(proc dev sys "${repo#/}")
mkdir -p "$root$repo"
mount -t proc proc "$root/proc"
mount --rbind /dev "$root/dev"
mount --rbind /sys "$root/sys"
mount --bind "$repo" "$root$repo"
# shellcheck disable=SC2064  # the paths are fixed now
trap "for m in ${mounts[*]}; do umount -R \"$root/\$m\" 2>/dev/null || umount -l \"$root/\$m\"; done" EXIT
chroot "$root" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root TERM=dumb sh -c '
    set -e
    cd "$0"
    echo "older-glibc: $(. /etc/os-release; echo "$PRETTY_NAME"), glibc $(ldd --version | head -n1 | grep -oE "[0-9.]+$"), $(python3 --version)"
    PYTHONPATH="$1" python3 -c "import vkcuda; print(\"vkcuda\", vkcuda.__version__, \"imports\")"
    PYTHONPATH="$1" python3 -m pytest -q -p no:cacheprovider python/tests/test_headless.py python/tests/test_serve.py
' "$repo" "$site"
