#!/usr/bin/env bash
# The libraries the wheel carries for a node that lacks them (a CUDA
# container: the NVIDIA driver mounted, but no Vulkan loader and no glvnd):
#   libvulkan.so.1      the Khronos Vulkan loader (Apache-2.0)
#   libGLdispatch.so.0  glvnd's dispatch, which libEGL needs
#   libEGL.so.1         glvnd's EGL: NVIDIA's Vulkan driver (libGLX_nvidia.so.0)
#                       opens it by name in vkCreateInstance and fails without it
# That set is the smallest that starts NVIDIA's driver (docs/results/2026-12-02-node:
# the loader alone, + GLdispatch, + GLdispatch and GLX, + GLdispatch and OpenGL
# all fail; + GLdispatch and EGL works). The loader and glvnd are built from
# Debian 13's sources (vulkan-loader 1.4.309, libglvnd 1.7.0) by zig against
# glibc 2.28's symbols, so they load wherever the wheel's own tag
# (manylinux_2_28) does; Debian's binaries need glibc 2.34.
#
#   bash scripts/bundle-libs.sh     → target/bundled/{libvulkan.so.1,...,LICENSES/}
# Built once: a second call with the same versions does nothing.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
out=$repo/target/bundled
loader=1.4.309.0 glvnd=1.7.0
stamp="vulkan-loader $loader, libglvnd $glvnd, glibc 2.28, RUNPATH \$ORIGIN, prefix /usr"
[ -f "$out/.stamp" ] && [ "$(cat "$out/.stamp")" = "$stamp" ] && exit 0
source scripts/deps.sh
need_packages cmake lz4 pkg-config libx11-dev libxcb1-dev libxrandr-dev libwayland-dev
tools=$repo/target/bundle-tools
if ! PYTHONPATH=$tools python3 -c 'import ziglang, mesonbuild' 2>/dev/null || [ ! -x "$tools/bin/ninja" ]; then
    echo "vkcuda: installing ziglang, meson and ninja (from PyPI) into $tools" >&2
    python3 -m pip install -q --disable-pip-version-check --target "$tools" ziglang meson ninja
fi
work=$repo/target/bundle-build
rm -rf "$work" "$out"
mkdir -p "$work/lists/partial" "$out/LICENSES"
# zig as the C compiler, for glibc 2.28's symbols; X11's and Wayland's headers (types
# only: the loader links neither) come from this machine, after zig's own libc headers.
# zig's linker reads `-Wl,--version-script FILE` (meson's spelling) only as `--version-script=FILE`.
cat >"$work/zcc" <<EOF
#!/bin/bash
args=()
while [ \$# -gt 0 ]; do
    if [ "\$1" = -Wl,--version-script ]; then args+=("-Wl,--version-script=\$2"); shift 2; else args+=("\$1"); shift; fi
done
PYTHONPATH=$tools exec python3 -m ziglang cc -target x86_64-linux-gnu.2.28 -idirafter /usr/include "\${args[@]}"
EOF
chmod +x "$work/zcc"
# Debian 13's sources, from the mirror this machine's apt already uses.
mirror=$({ cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources 2>/dev/null || true; } |
    grep -oE '^(URIs:|deb) +[a-z]+://[^ ]+/debian/?( |$)' | head -n1 | awk '{print $2}')
[ -n "$mirror" ] || { echo "bundle-libs.sh: no Debian mirror in this machine's apt sources" >&2; exit 1; }
echo "deb-src $mirror trixie main" >"$work/sources.list"
apt=(-o Dir::Etc::SourceList="$work/sources.list" -o Dir::Etc::SourceParts=/dev/null -o Dir::State::Lists="$work/lists")
(cd "$work" && apt-get "${apt[@]}" update -qq &&
    apt-get "${apt[@]}" source --download-only -qq "vulkan-loader=${loader}-1" 2>&1 | grep -v unsandboxed || true)
# libglvnd's Debian tarball is not always on the mirror: the upstream one is all this needs.
(cd "$work" && apt-get "${apt[@]}" source --download-only -qq libglvnd >/dev/null 2>&1 || true)
[ -f "$work/vulkan-loader_${loader}.orig.tar.xz" ] && [ -f "$work/libglvnd_${glvnd}.orig.tar.gz" ] ||
    { echo "bundle-libs.sh: Debian's sources of vulkan-loader $loader and libglvnd $glvnd could not be fetched" >&2; exit 1; }
tar -C "$work" -xJf "$work/vulkan-loader_${loader}.orig.tar.xz"
tar -C "$work" -xzf "$work/libglvnd_${glvnd}.orig.tar.gz"
src=$work/vulkan-loader-$loader
export CC=$work/zcc
echo "vkcuda: building the Vulkan loader $loader (glibc 2.28)" >&2
cmake -S "$src/vulkan-headers" -B "$work/headers" -DCMAKE_INSTALL_PREFIX="$work/headers-install" >/dev/null
cmake --install "$work/headers" >/dev/null
# Debian's tarball leaves out the loader's generated sources: made from the headers' registry.
# The prefix /usr makes the loader search /etc/vulkan, as a distribution's does.
cmake -S "$src" -B "$work/loader" -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$work/headers-install" \
    -DCMAKE_INSTALL_PREFIX=/usr -DLOADER_CODEGEN=ON -DVULKAN_HEADERS_INSTALL_DIR="$work/headers-install" -DBUILD_TESTS=OFF -DUPDATE_DEPS=OFF -DBUILD_WSI_XCB_SUPPORT=ON -DBUILD_WSI_XLIB_SUPPORT=ON \
    -DBUILD_WSI_WAYLAND_SUPPORT=ON -DBUILD_WSI_XLIB_XRANDR_SUPPORT=ON -DCMAKE_ASM_COMPILER="$work/zcc" >/dev/null
mkdir -p "$src/loader/generated"
cmake --build "$work/loader" --target loader_codegen >/dev/null
cmake --build "$work/loader" --parallel 2 >/dev/null
cp -L "$work/loader/loader/libvulkan.so.1" "$out/"
cp "$src/LICENSE.txt" "$out/LICENSES/vulkan-loader.txt"
echo "vkcuda: building glvnd $glvnd's libGLdispatch and libEGL (glibc 2.28)" >&2
# RUNPATH $ORIGIN: libEGL finds the libGLdispatch beside it, wherever the folder is (auditwheel
# then resolves it there too, not to the system's). The prefix /usr and /etc: libEGL reads the
# drivers' vendor files (NVIDIA's 10_nvidia.json) from /usr/share and /etc/glvnd/egl_vendor.d,
# where distributions and NVIDIA's container toolkit put them (meson's /usr/local finds none).
PYTHONPATH=$tools PATH="$tools/bin:$PATH" LDFLAGS='-Wl,-rpath,$ORIGIN' python3 -m mesonbuild.mesonmain setup \
    "$work/glvnd" "$work/libglvnd-$glvnd" --buildtype=release --prefix=/usr --sysconfdir=/etc -Dx11=disabled -Dglx=disabled -Dgles1=false -Dgles2=false -Dheaders=false >/dev/null
PYTHONPATH=$tools PATH="$tools/bin:$PATH" ninja -C "$work/glvnd" >/dev/null
# Installed (into a folder of the build's): meson drops its build-tree RUNPATHs there.
PYTHONPATH=$tools PATH="$tools/bin:$PATH" python3 -m mesonbuild.mesonmain install -C "$work/glvnd" \
    --destdir "$work/glvnd-install" >/dev/null
installed=$(dirname "$(find "$work/glvnd-install" -name libEGL.so.1 | head -n1)")
cp -L "$installed/libGLdispatch.so.0" "$installed/libEGL.so.1" "$out/"
# The licence text is the README's closing part, from its "### libglvnd ###" heading on.
sed -n '/^### libglvnd ###/,$p' "$work/libglvnd-$glvnd/README.md" >"$out/LICENSES/libglvnd.txt"
[ -s "$out/LICENSES/libglvnd.txt" ] || { echo "bundle-libs.sh: libglvnd's licence text not found" >&2; exit 1; }
strip "$out"/*.so.*
# Each must need glibc 2.28 at most, or the wheel's tag would lie.
for lib in "$out"/*.so.*; do
    newest=$(objdump -T "$lib" | grep -oE 'GLIBC_[0-9.]+' | sort -uV | tail -n1)
    printf '%s\n%s\n' "$newest" GLIBC_2.28 | sort -V -C ||
        { echo "bundle-libs.sh: $(basename "$lib") needs $newest" >&2; exit 1; }
done
echo "$stamp" >"$out/.stamp"
ls -l "$out"
