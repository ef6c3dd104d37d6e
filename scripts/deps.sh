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
