# Sourced by the matrix scripts (fault-matrix.sh, format-matrix.sh,
# size-matrix.sh): the settings they share and a work folder removed on exit.
#   VKCUDA_BIN the binary                               default target/release/vkcuda
#   PRODUCER   cpu (lavapipe, CI) or cuda (NVIDIA)      default: the script's
#   JOBS       runs in parallel                         default: nproc (cuda: at most 16)
#   ARGS       more vkcuda arguments for every run, e.g. "--layout buffer --format rgba16f"
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 2
BIN=${VKCUDA_BIN:-target/release/vkcuda}
PRODUCER=${PRODUCER:-$default_producer}
# CUDA runs at most 16 at once by default: every CUDA and Vulkan process takes
# the NVIDIA driver's global lock to make and free its objects, and 32 at once
# on one GPU spent most of their life waiting for it (docs/results/2026-11-25-gpu-checks).
jobs_default=$(nproc)
[ "$PRODUCER" = cuda ] && [ "$jobs_default" -gt 16 ] && jobs_default=16
JOBS=${JOBS:-$jobs_default}
export ARGS=${ARGS:-}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# bounded LIMIT LOG COMMAND...: runs COMMAND with its output written to LOG;
# its exit code, or, if it is still running after LIMIT seconds, 124 after
# LOG gets each of its threads' name, state and kernel wait (/proc: where a
# hung run waits, e.g. in a driver's teardown; with EU_STACK=<eu-stack command>
# its user-space stacks too), and the process is killed.
bounded() {
    local limit=$1 log=$2
    shift 2
    "$@" >"$log" 2>&1 &
    local pid=$! until=$((SECONDS + limit))
    while kill -0 "$pid" 2>/dev/null && [ $SECONDS -lt $until ]; do sleep 0.2; done
    if kill -0 "$pid" 2>/dev/null; then
        {
            echo "HUNG: still running after ${limit}s; its threads:"
            for t in /proc/$pid/task/*; do
                echo "  $(cat $t/comm 2>/dev/null) state=$(awk '{print $3}' $t/stat 2>/dev/null) wchan=$(cat $t/wchan 2>/dev/null) syscall=$(cut -d' ' -f1 $t/syscall 2>/dev/null)"
                sed 's/^/      /' $t/stack 2>/dev/null | head -8
            done
            # Where each thread waits in user space too, when a stack tool is named.
            [ -n "${EU_STACK:-}" ] && timeout 30 $EU_STACK -p "$pid" 2>&1 | head -300 | sed 's/^/    /'
        } >>"$log"
        kill -9 "$pid" 2>/dev/null
        wait "$pid" 2>/dev/null
        return 124
    fi
    wait "$pid"
}
export -f bounded
