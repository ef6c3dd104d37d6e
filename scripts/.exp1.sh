source .gl/env.sh
B=.gpu/vkcuda
V="--variants split-3,split-4,split-6,split-8 --sizes 1920x1080 --loads cheap --repeats 3 --seconds 0.3"
run() { echo "== $*"; "$@" 2>/dev/null | grep -E "^(split|shared)" ; }
run $B bench $V
run $B --queue transfer bench $V
run $B --frames-in-flight 8 bench $V
run $B --cuda-sched blocking bench $V
run $B --cuda-sched spin bench $V
run $B --cuda-sched yield bench $V
run $B --high-priority-stream bench $V
CUDA_DEVICE_MAX_CONNECTIONS=1 run $B bench $V
run $B --consume-copies 8 bench --variants split-1,split-2,split-3 --sizes 1920x1080 --loads cheap --repeats 3 --seconds 0.3
