# Sourced by the other scripts: installs Debian/Ubuntu packages only when missing.
#   need_packages PKG...   installs the missing ones with apt-get (as root, or through sudo)
need_packages() {
    local missing=()
    for p in "$@"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
    done
    [ ${#missing[@]} -eq 0 ] && return 0
    if ! command -v apt-get >/dev/null; then
        echo "vkcuda: please install: ${missing[*]} (no apt-get here)" >&2
        return 1
    fi
    local sudo=""
    [ "$(id -u)" -ne 0 ] && sudo="sudo"
    echo "vkcuda: installing ${missing[*]}" >&2
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

need_cargo() {
    command -v cargo >/dev/null && return 0
    echo "vkcuda: cargo not found: install Rust 1.85 or newer (https://rustup.rs), then run this again" >&2
    return 1
}

# NVRTC without a GPU (vkcuda check-kernel and its tests): PyPI's
# nvidia-cuda-nvrtc wheel ships libnvrtc.so.13. Installs it once into
# $VKCUDA_NVRTC_DIR (default ~/.cache/vkcuda/nvrtc) and puts it on LD_LIBRARY_PATH.
need_nvrtc() {
    local dir=${VKCUDA_NVRTC_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/vkcuda/nvrtc}
    local lib=$dir/nvidia/cu13/lib wheel="nvidia-cuda-nvrtc==13.0.88"
    if [ ! -e "$lib/libnvrtc.so.13" ]; then
        python3 -m pip --version >/dev/null 2>&1 || need_packages python3-pip || return 1
        echo "vkcuda: installing NVRTC ($wheel, from PyPI) into $dir" >&2
        python3 -m pip install -q --no-deps --target "$dir" "$wheel" >&2 ||
            python3 -m pip install -q --no-deps --break-system-packages --target "$dir" "$wheel" >&2 || return 1
    fi
    export LD_LIBRARY_PATH="$lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
}
