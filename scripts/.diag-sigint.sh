B=target/release/vkcuda
$B --headless --producer cuda --frames 1000000 --size 160x90 --out /tmp/sigc > /tmp/sigc.log 2>&1 &
pid=$!; sleep 3; kill -INT $pid; for i in $(seq 1 20); do sleep 1; kill -0 $pid 2>/dev/null || break; done
if kill -0 $pid 2>/dev/null; then echo "STILL RUNNING after SIGINT"; cat /proc/$pid/task/*/stat 2>/dev/null | awk '{print $2, $3}' | sort | uniq -c; for t in /proc/$pid/task/*; do echo "$(cat $t/comm): $(cat $t/wchan 2>/dev/null)"; done; kill -9 $pid; else wait $pid; echo "exit=$?"; fi
tail -5 /tmp/sigc.log; ls /tmp/sigc | wc -l
