#!/usr/bin/env bash
# The X tools the viewer's tests need on the GPU machine (no apt, no network
# there): Xvfb, xdotool, xwd and xkbcomp with the XKB data and the X client
# libraries winit and softbuffer load, as Debian 12 packages in the ignored
# .xkit/ (about 8 MB), plus .xkit/env.sh.
#
#   bash scripts/gpu-xkit.sh                 # here, once (needs apt's mirror)
#   # GPU run: carry [".gl", ".gpu", ".xkit"]; command starts with
#   #   source .gl/env.sh; source .xkit/env.sh;
#
# env.sh unpacks them into /opt/xkit (nothing of the machine's is replaced),
# puts its binaries first on PATH and its libraries on LD_LIBRARY_PATH, and
# links xkbcomp and the XKB data where Xvfb looks for them (/usr/bin,
# /usr/share/X11/xkb) when the machine has none.
set -euo pipefail
cd "$(dirname "$0")/.."
packages=(xvfb xdotool x11-apps x11-xkb-utils xkb-data
    libx11-6 libx11-xcb1 libxau6 libxdmcp6 libbsd0 libmd0 libxcb1 libxcb-shm0 libxcb-xkb1
    libxext6 libxfixes3 libxi6 libxinerama1 libxrandr2 libxrender1 libxtst6 libxcursor1
    libxkbcommon0 libxkbcommon-x11-0 libxkbfile1 libxfont2 libfontenc1 libfreetype6 libbrotli1
    libpng16-16 libpixman-1-0 libunwind8 libxdo3)
rm -rf .xkit && mkdir -p .xkit /tmp/xkit-lists/partial
o='-oAPT::Architecture=amd64 -oAPT::Architectures=amd64 -oDir::State::Lists=/tmp/xkit-lists'
apt-get $o update -qq
(cd .xkit && apt-get $o download -qq "${packages[@]}" 2>&1 | grep -v unsandboxed || true)
cat > .xkit/env.sh <<'ENV'
# Sourced on the GPU machine after .gl/env.sh (see scripts/gpu-xkit.sh).
rm -rf /opt/xkit && for f in .xkit/*.deb; do dpkg -x "$f" /opt/xkit; done
[ -e /usr/bin/xkbcomp ] || ln -s /opt/xkit/usr/bin/xkbcomp /usr/bin/xkbcomp
[ -e /usr/share/X11/xkb ] || { mkdir -p /usr/share/X11; ln -s /opt/xkit/usr/share/X11/xkb /usr/share/X11/xkb; }
export PATH=/opt/xkit/usr/bin:$PATH
export LD_LIBRARY_PATH=/opt/xkit/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
ENV
ls .xkit | wc -l
du -sh .xkit
