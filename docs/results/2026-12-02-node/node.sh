# The first hour on a stock CUDA node (docs/results/2026-12-02-node): the wheel alone, the table's rows, both layers.
# From the repository root on the GPU machine, carrying .gl (../shared/gpu/prepare.sh), target/dist and target/dist-module.
set -u
W=$(ls target/dist/vkcuda-*.whl); echo "== wheel $(basename $W) $(du -k $W | cut -f1) KiB"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; cat /etc/os-release | grep PRETTY; ldd --version | head -1
echo "env: $(env | grep -E '^(VK_|__EGL|NVIDIA_DRIVER)' | tr '\n' ' ')"
echo "system libs: $(ldconfig -p | grep -E 'libvulkan.so.1|libEGL.so.1 |libGLdispatch.so.0' | wc -l) of libvulkan/libEGL/libGLdispatch"
M=$(ls target/dist-module/vkcuda-*.whl); echo "== the module alone (no command, no libraries: the wheel as it was) $(du -k $M | cut -f1) KiB"
python3 -m pip install -q --no-index --no-deps --target /tmp/module "$M"
echo "== pip install (torch's venv, no index)"; python3 -m pip install -q --no-index --no-deps "$W" && which vkcuda
SITE=$(python3 -c "import vkcuda,os;print(os.path.dirname(vkcuda.__file__))")
imp='import time;t=time.perf_counter();import vkcuda;print(round((time.perf_counter()-t)*1e3,1))'
for i in 1 2 3 4 5 6 7 8 9; do echo "$(PYTHONPATH=/tmp/module python3 -c "$imp")/$(python3 -c "$imp")"; done | tr '\n' ' '; echo " ms: import vkcuda, module alone/whole wheel, interleaved (9 rounds)"
echo "== vkcuda doctor"; vkcuda doctor; echo "doctor exit $?"
python3 -m vkcuda doctor >/tmp/pd.txt; echo "python -m vkcuda doctor exit $? ($(grep -c '' /tmp/pd.txt) lines)"; tail -7 /tmp/pd.txt
echo "== vkcuda --headless --verify (CUDA): 1920x1080, 97x61, 1x1, buffer layout 33x17"
for a in "--size 1920x1080 --frames 240" "--size 97x61 --frames 120" "--size 1x1 --frames 60" "--size 33x17 --layout buffer --frames 60"; do
  vkcuda --headless --verify $a --out /tmp/f 2>&1 | grep -E "producer|fps|mismatches|bundled|error" | tr '\n' ' '; echo " [exit ${PIPESTATUS[0]} for $a]"; rm -rf /tmp/f
done
echo "== the README's Python example, headless and served"; python3 docs/results/2026-12-02-node/readme_node.py; echo "exit $?"
echo "== the table: each row, with the wheel's libraries and with them hidden"
mkdir -p /opt/deb; for p in libvulkan1 libglvnd0 libglx0 libegl1; do mkdir -p /opt/deb/$p; dpkg -x .gl/${p}_*.deb /opt/deb/$p; done
row() { # LD dirs...
  local ld=""; for p in "$@"; do ld=$ld:/opt/deb/$p/usr/lib/x86_64-linux-gnu; done
  for state in bundled hidden; do
    [ $state = hidden ] && mv $SITE/_libs $SITE/_libs.off
    out=$(LD_LIBRARY_PATH=${ld#:} vkcuda --headless --verify --frames 20 --size 64x36 --out /tmp/r 2>&1); c=$?
    echo "[$* | $state] exit $c: $(echo "$out" | grep -E 'bundled|mismatches|error' | tr '\n' ' ' | cut -c1-700)"
    rm -rf /tmp/r; [ $state = hidden ] && mv $SITE/_libs.off $SITE/_libs
  done
}
row; row libvulkan1; row libvulkan1 libglvnd0; row libvulkan1 libglvnd0 libglx0; row libvulkan1 libglvnd0 libglx0 libegl1
echo "== doctor with the bundle hidden, the system loader only"; mv $SITE/_libs $SITE/_libs.off
LD_LIBRARY_PATH=/opt/deb/libvulkan1/usr/lib/x86_64-linux-gnu vkcuda doctor | head -12; echo "exit ${PIPESTATUS[0]}"
echo "== doctor with nothing: no loader at all"; vkcuda doctor | head -4; echo "exit ${PIPESTATUS[0]}"
echo "== a container without graphics (NVIDIA_DRIVER_CAPABILITIES=compute,utility), bundle hidden, system loader"
NVIDIA_DRIVER_CAPABILITIES=compute,utility LD_LIBRARY_PATH=/opt/deb/libvulkan1/usr/lib/x86_64-linux-gnu vkcuda --headless --frames 3 2>&1 | tail -2
mv $SITE/_libs.off $SITE/_libs
echo "== both validation layers (the loaders and layers of .gl installed now)"
source .gl/env.sh >/dev/null 2>&1; vkcuda doctor | grep -E "loader|validation layer"
for layer in current old; do
  if [ $layer = old ]; then unset VK_LAYER_PATH; export VKCUDA_OLD_LAYER=1; fi
  vkcuda doctor | grep -E "Vulkan loader|validation layer"
  for a in "--size 1920x1080 --frames 120" "--size 97x61 --frames 60" "--size 1x1 --frames 30"; do
    vkcuda --headless --verify --validate $a --out /tmp/f 2>&1 | grep -E "mismatches|validation:|error" | tr '\n' ' '; echo " [exit ${PIPESTATUS[0]} $layer $a]"; rm -rf /tmp/f
  done
  VALIDATE=1 python3 docs/results/2026-12-02-node/readme_node.py; echo "exit $? ($layer)"
done
