set -u
B=.gpu/bin/vkcuda
for layer in new old; do
  if [ $layer = old ]; then export VKCUDA_OLD_LAYER=1; fi
  (source .gl/env.sh >/dev/null 2>&1
  for fmt in rgba8-srgb rgba8 bgra8 rgba16f rgba32f r32f; do for layout in array buffer; do for st in "641x359 1919x1081" "97x61 1001x703" "1917x1079 1001x703" "61x33 1919x1081"; do
    set -- $st
    out=$($B --headless --producer cuda --size $1 --format $fmt --layout $layout --consume draw --queue graphics --target-size $2 --frames 6 --dump-every 1 --verify --validate --scene ${SCENE:-gradient} --out /tmp/s 2>&1)
    rc=$?; rm -rf /tmp/s
    v=$(echo "$out" | grep -o 'verify: .*'); val=$(echo "$out" | grep -o 'validation: .*')
    echo "$layer $fmt $layout $1 -> $2 rc=$rc | $v | $val"
  done; done; done)
done
