"""Decoding the codec candidates' streams in Chromium as Debian ships it
(headless, software decoders): the streams codecs/ wrote (STREAMS/CODEC-SCENE.bin:
per frame a u32 length, a key byte, the frame), served on loopback, decoded in a
page by WebCodecs' VideoDecoder (VP8, VP9, H.264 Annex B, AV1) and JPEG by
createImageBitmap, every frame in order, each drawn on a 1920x1080 canvas;
milliseconds per frame (the whole stream's time over its frames).

    python3 decode.py STREAMS     (websocket-client on PYTHONPATH)
"""

import http.server
import json
import os
import socketserver
import subprocess
import sys
import tempfile
import threading
import time

import websocket

STREAMS = sys.argv[1]
CHROMIUM = "/usr/bin/chromium"
CODECS = {"vp8": "vp8", "vp9": "vp09.00.41.08", "h264": "avc1.640028", "av1": "av01.0.08M.08"}
PAGE = """<!doctype html><canvas id=c width=1920 height=1080></canvas><script>
async function decode(name, codec) {
  const buf = new Uint8Array(await (await fetch(name + '.bin')).arrayBuffer());
  const frames = []; for (let i = 0; i < buf.length;) { const n = new DataView(buf.buffer).getUint32(i, true);
    frames.push({ key: buf[i + 4] === 1, data: buf.subarray(i + 5, i + 5 + n) }); i += 5 + n; }
  const ctx = document.getElementById('c').getContext('2d');
  const t0 = performance.now();
  if (codec === 'jpeg') {
    for (const f of frames) { const b = await createImageBitmap(new Blob([f.data], { type: 'image/jpeg' })); ctx.drawImage(b, 0, 0); b.close(); }
  } else {
    let done = 0, fail = null;
    const d = new VideoDecoder({ output: (v) => { ctx.drawImage(v, 0, 0); v.close(); done++; }, error: (e) => { fail = String(e); } });
    d.configure({ codec, optimizeForLatency: true });
    frames.forEach((f, i) => d.decode(new EncodedVideoChunk({ type: f.key ? 'key' : 'delta', timestamp: i, data: f.data })));
    await d.flush(); d.close();
    if (fail || done !== frames.length) return { name, error: fail || (done + ' of ' + frames.length) };
  }
  return { name, frames: frames.length, ms: (performance.now() - t0) / frames.length };
}
</script>"""


def main():
    with open(os.path.join(STREAMS, "index.html"), "w") as f:
        f.write(PAGE)
    handler = lambda *a: http.server.SimpleHTTPRequestHandler(*a, directory=STREAMS)  # noqa: E731
    server = socketserver.TCPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    port = server.server_address[1]
    profile = tempfile.mkdtemp(prefix="vkcuda-decode-")
    proc = subprocess.Popen([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--remote-debugging-port=0",
                             f"--user-data-dir={profile}", "about:blank"], stderr=subprocess.PIPE, text=True)
    endpoint = None
    while endpoint is None:
        line = proc.stderr.readline()
        if "DevTools listening on " in line:
            endpoint = line.split("DevTools listening on ")[1].strip()
    ws = websocket.create_connection(endpoint, timeout=300)
    ids = iter(range(1, 10**6))

    def call(method, params, session=None):
        n = next(ids)
        m = {"id": n, "method": method, "params": params}
        if session:
            m["sessionId"] = session
        ws.send(json.dumps(m))
        while True:
            r = json.loads(ws.recv())
            if r.get("id") == n:
                return r.get("result", r)

    target = call("Target.createTarget", {"url": f"http://127.0.0.1:{port}/index.html"})["targetId"]
    session = call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
    time.sleep(1)
    version = call("Browser.getVersion", {})["product"]
    print(f"{version}, headless, software decoders; ms per 1920x1080 frame (decode and draw)")
    print("| scene | codec | frames | ms/frame |")
    print("|---|---|---|---|")
    for scene in ["julia", "gradient"]:
        for codec, name in [("jpeg", "jpeg"), *CODECS.items()]:
            if not os.path.exists(os.path.join(STREAMS, f"{codec}-{scene}.bin")):
                continue
            expr = f"decode('{codec}-{scene}', '{name if codec != 'jpeg' else 'jpeg'}')"
            r = call("Runtime.evaluate", {"expression": expr, "awaitPromise": True, "returnByValue": True}, session)
            v = r["result"].get("value") or {}
            cell = f"{v['ms']:.2f}" if "ms" in v else f"failed: {v.get('error')}"
            print(f"| {scene} | {codec} | {v.get('frames', '')} | {cell} |")
    proc.kill()
    server.shutdown()


main()
