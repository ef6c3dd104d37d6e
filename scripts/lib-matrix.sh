# Sourced by the matrix scripts (fault-matrix.sh, format-matrix.sh,
# size-matrix.sh): the settings they share and a work folder removed on exit.
#   VKCUDA_BIN the binary                               default target/release/vkcuda
#   PRODUCER   cpu (lavapipe, CI) or cuda (NVIDIA)      default: the script's
#   JOBS       runs in parallel                         default: nproc
#   ARGS       more vkcuda arguments for every run, e.g. "--layout buffer --format rgba16f"
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 2
BIN=${VKCUDA_BIN:-target/release/vkcuda}
PRODUCER=${PRODUCER:-$default_producer}
JOBS=${JOBS:-$(nproc)}
export ARGS=${ARGS:-}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
