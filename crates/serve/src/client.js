// The vkcuda view's one client, for the browser page (page.html, over its
// WebSocket) and the notebook widget (widget.js, over Jupyter's comm): both
// embed this file. It speaks crates/serve/src/protocol.rs: JSON messages
// both ways, frames as a 32-byte header and an image (raw RGBA, JPEG, VP8
// or PNG). It fits the canvas to its box in device pixels, says what it can
// decode (VP8 through WebCodecs, where the page is a secure context), decodes
// frames strictly in order (an older frame is never drawn over a newer one),
// scales an image sent smaller up to the canvas, acknowledges each frame
// once drawn, and sends keys and the pointer.

"use strict";

const VKCUDA_KEYS = new Set([" ", "ArrowLeft", "ArrowRight", "+", "=", "-", "e", "E", "d", "D", "r", "R"]);
const VKCUDA_KINDS = ["raw", "jpeg", "vp8", "png"];

// The frame header (protocol.rs, Header::write).
function vkcudaHeader(bytes) {
  const v = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const magic = String.fromCharCode(bytes[0], bytes[1], bytes[2], bytes[3]);
  if (bytes.byteLength < 32 || magic !== "VKF2") throw new Error("not a vkcuda frame");
  return {
    kind: VKCUDA_KINDS[bytes[4]], key: (bytes[5] & 1) === 1, quality: bytes[6],
    frame: Number(v.getBigUint64(8, true)), w: v.getUint32(16, true), h: v.getUint32(20, true),
    stamp: Number(v.getBigUint64(24, true)) / 1000, image: bytes.subarray(32),
  };
}

// Whether this page can decode VP8 (WebCodecs exists only in a secure context).
async function vkcudaVideoCodecs() {
  if (typeof VideoDecoder === "undefined") return [];
  try {
    const s = await VideoDecoder.isConfigSupported({ codec: "vp8", optimizeForLatency: true });
    return s.supported ? ["vp8"] : [];
  } catch (e) { return []; }
}

// A view on `canvas`: `send(message)` carries messages to the server; the
// caller hands it what arrives (`frame(bytes)`, `message(object)`). Its
// `state` is what tests and the status line read.
function connect(canvas, send, { mode = "auto", quality = null } = {}) {
  const ctx = canvas.getContext("2d", { alpha: false });
  const state = { frames: 0, last: null, canvas: [0, 0], closed: null, bytes: 0, status: null, statuses: 0,
                  rate: null, video: [], decodeErrors: 0, drawn: -1 };
  const arrivals = [], latencies = [];
  state.latencies = latencies; // the last 60 frames' latencies, ms
  let chain = Promise.resolve(), decoder = null, decoderSize = "", needKey = true, open = false;

  const say = (m) => { if (open) send(m); };
  const sayMode = () => say(quality === null ? { t: "mode", mode } : { t: "mode", mode, quality });

  // The canvas follows its box, in device pixels; the last picture stays, scaled, until a new one.
  function fit(w, h) {
    w = Math.max(1, Math.round(w)); h = Math.max(1, Math.round(h));
    if (w === state.canvas[0] && h === state.canvas[1]) return;
    let keep = null;
    if (state.frames) {
      keep = document.createElement("canvas"); keep.width = canvas.width; keep.height = canvas.height;
      keep.getContext("2d").drawImage(canvas, 0, 0);
    }
    state.canvas = [w, h]; canvas.width = w; canvas.height = h;
    if (keep) ctx.drawImage(keep, 0, 0, w, h);
    say({ t: "canvas", w, h });
  }
  const resized = new ResizeObserver((entries) => {
    const e = entries[0], box = e.devicePixelContentBoxSize && e.devicePixelContentBoxSize[0];
    if (box) fit(box.inlineSize, box.blockSize);
    else fit(e.contentRect.width * devicePixelRatio, e.contentRect.height * devicePixelRatio);
  });
  resized.observe(canvas);

  // Frames no faster than this display shows them: its rate, from 30 animation frames.
  const times = [];
  const tick = (t) => {
    times.push(t);
    if (times.length < 31) return requestAnimationFrame(tick);
    state.rate = Math.round(30000 / (times[30] - times[0])); say({ t: "rate", fps: state.rate });
  };
  requestAnimationFrame(tick);

  // Frames arrived and not yet acknowledged, oldest first (decoded in that
  // order; numbers start again when the run does). Each acknowledgement says
  // how many were ahead of its frame when it arrived: frames that wait here
  // tell the server this page, not the link, is the narrowest part.
  const atPage = [];
  function ack(f) {
    atPage.splice(0, atPage.indexOf(f) + 1);
    say({ t: "ack", frame: f.frame, ahead: f.ahead });
  }

  // Draws an image (a bitmap or a video frame) over the whole canvas, then acknowledges.
  function drawn(image, f) {
    if (f.frame > state.drawn) {
      if (f.w === canvas.width && f.h === canvas.height) ctx.drawImage(image, 0, 0);
      else ctx.drawImage(image, 0, 0, canvas.width, canvas.height);
      state.drawn = f.frame;
      shown(f);
    }
    ack(f);
  }

  function shown(f) {
    const now = performance.now();
    state.frames++; state.bytes += f.image.byteLength + 32;
    state.last = { frame: f.frame, w: f.w, h: f.h, kind: f.kind, quality: f.quality, key: f.key };
    arrivals.push([now, f.image.byteLength + 32]);
    latencies.push(Date.now() - f.stamp); if (latencies.length > 60) latencies.shift();
  }

  function videoDecoder(f) {
    const size = f.w + "x" + f.h;
    if (decoder && decoderSize === size && decoder.state === "configured") return decoder;
    if (decoder && decoder.state !== "closed") decoder.close();
    const pending = new Map();
    decoder = new VideoDecoder({
      output: (frame) => { const h = pending.get(frame.timestamp); pending.delete(frame.timestamp);
        if (h) drawn(frame, h); frame.close(); },
      error: () => { state.decodeErrors++; decoder = null; needKey = true; say({ t: "keyframe" }); },
    });
    decoder.pending = pending;
    decoder.configure({ codec: "vp8", codedWidth: f.w, codedHeight: f.h, optimizeForLatency: true });
    decoderSize = size; needKey = true;
    return decoder;
  }

  async function decode(f) {
    if (f.kind === "raw") {
      if (f.frame > state.drawn) {
        const pixels = new Uint8ClampedArray(f.image.buffer.slice(f.image.byteOffset, f.image.byteOffset + f.w * f.h * 4));
        ctx.putImageData(new ImageData(pixels, f.w, f.h), 0, 0); state.drawn = f.frame; shown(f);
      }
      return ack(f);
    }
    if (f.kind === "vp8") {
      const d = videoDecoder(f);
      if (needKey && !f.key) { ack(f); return say({ t: "keyframe" }); }
      needKey = false;
      d.pending.set(f.frame, f);
      d.decode(new EncodedVideoChunk({ type: f.key ? "key" : "delta", timestamp: f.frame, data: f.image }));
      return;
    }
    const type = f.kind === "png" ? "image/png" : "image/jpeg";
    const bitmap = await createImageBitmap(new Blob([f.image], { type }),
      { colorSpaceConversion: "none", premultiplyAlpha: "none" });
    drawn(bitmap, f); bitmap.close();
  }

  // Frames are decoded one after the other, in the order they came.
  function frame(bytes) {
    let f;
    try { f = vkcudaHeader(bytes); } catch (e) { return; }
    f.ahead = atPage.length; atPage.push(f);
    chain = chain.then(() => decode(f)).catch(() => { state.decodeErrors++; ack(f); });
  }

  function message(m) {
    if (m.t === "status") { state.status = m; state.statuses++; }
    else if (m.t === "pong") state.rtt = performance.now() - m.c;
    else if (m.t === "closed") state.closed = m.reason || "closed";
  }

  // Said once the connection is open: what this page decodes, its mode, canvas and rate.
  async function opened() {
    open = true;
    state.video = await vkcudaVideoCodecs();
    say({ t: "hello", video: state.video });
    sayMode();
    const [w, h] = state.canvas; if (w) say({ t: "canvas", w, h });
    if (state.rate) say({ t: "rate", fps: state.rate });
  }

  // What the status line says: the canvas, what arrives and how, the latency.
  function describe() {
    const now = performance.now();
    while (arrivals.length && arrivals[0][0] < now - 1000) arrivals.shift();
    const bits = arrivals.reduce((a, b) => a + b[1], 0) * 8;
    const sorted = [...latencies].sort((a, b) => a - b), lat = sorted.length ? sorted[sorted.length >> 1] : null;
    const l = state.last, me = state.status ? state.status.client : null;
    const parts = [state.canvas[0] + "x" + state.canvas[1]];
    if (l) parts.push(l.kind + (l.w !== state.canvas[0] || l.h !== state.canvas[1] ? " " + l.w + "x" + l.h : "") +
      (l.kind === "jpeg" ? " q" + l.quality : l.kind === "vp8" ? " qp" + l.quality : " exact"));
    parts.push(arrivals.length + " fps", (bits / 1e6).toFixed(1) + " Mbit/s", (lat === null ? "?" : lat.toFixed(0)) + " ms");
    if (me && me.capacity) parts.push("link " + (me.capacity / 1e6).toFixed(1) + " Mbit/s");
    if (me && me.skipped) parts.push(me.skipped + " skipped");
    state.latency = lat; state.mbits = bits / 1e6; state.fps = arrivals.length;
    return parts.join(" · ");
  }

  function setMode(m, q) { mode = m; quality = q === undefined ? null : q; sayMode(); if (m !== "video") needKey = true; }

  // Keys act on the run; the pointer, in canvas pixels, at most once per animation frame.
  function key(e) {
    if (!VKCUDA_KEYS.has(e.key)) return false;
    say({ t: "key", key: e.key }); return true;
  }
  let pending = null;
  function pointer(e, out) {
    const r = canvas.getBoundingClientRect();
    pending = out ? { t: "pointer", buttons: 0 } :
      { t: "pointer", x: (e.clientX - r.left) * canvas.width / r.width, y: (e.clientY - r.top) * canvas.height / r.height, buttons: e.buttons & 7 };
    requestAnimationFrame(() => { if (pending) { say(pending); pending = null; } });
  }
  const onPointer = (e) => pointer(e, false), onLeave = (e) => pointer(e, true);
  for (const type of ["pointermove", "pointerdown", "pointerup"]) canvas.addEventListener(type, onPointer);
  canvas.addEventListener("pointerleave", onLeave);

  function close() {
    open = false; resized.disconnect();
    for (const type of ["pointermove", "pointerdown", "pointerup"]) canvas.removeEventListener(type, onPointer);
    canvas.removeEventListener("pointerleave", onLeave);
    if (decoder && decoder.state !== "closed") decoder.close();
  }

  // Why the producer's frames stopped (a kernel's fault, the caller's CUDA error), while it
  // stands: said over the last frame; null otherwise.
  function fault() {
    const run = state.status && state.status.run;
    return (run && run.error) || null;
  }

  return { state, frame, message, opened, describe, fault, setMode, key, close, ping: () => say({ t: "ping", c: performance.now() }) };
}
