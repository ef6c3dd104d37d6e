// The notebook widget's view (anywidget): the browser view's page in an
// output cell. Frames come over Jupyter's comm as one buffer each (the view's
// 32-byte header, then JPEG or raw RGBA), drawn at the canvas's size in
// device pixels and acknowledged; keys and the pointer go back.
function render({ model, el }) {
  const box = document.createElement("div");
  box.className = "vkcuda-widget";
  const canvas = document.createElement("canvas");
  canvas.tabIndex = 0;
  const line = document.createElement("div");
  line.className = "vkcuda-status";
  line.textContent = "waiting for a frame";
  box.append(canvas, line);
  el.append(box);
  const size = model.get("size");
  if (size && size.length === 2) {
    canvas.style.width = size[0] + "px"; canvas.style.height = size[1] + "px"; canvas.style.aspectRatio = "auto";
  }
  const ctx = canvas.getContext("2d", { alpha: false });
  const state = { frames: 0, last: null, size: [0, 0], closed: false, arrivals: [] };
  canvas.vkcuda = state; // what tests read
  const send = (m) => { if (!state.closed) model.send(m); };
  send({ t: "mode", mode: model.get("mode"), quality: model.get("quality") });

  const fit = (w, h) => {
    w = Math.max(1, Math.round(w)); h = Math.max(1, Math.round(h));
    if (w === state.size[0] && h === state.size[1]) return;
    // Resizing clears the canvas: the last picture stays, scaled, until a frame of the new size.
    let keep = null;
    if (state.frames) {
      keep = document.createElement("canvas"); keep.width = canvas.width; keep.height = canvas.height;
      keep.getContext("2d").drawImage(canvas, 0, 0);
    }
    state.size = [w, h]; canvas.width = w; canvas.height = h;
    if (keep) ctx.drawImage(keep, 0, 0, w, h);
    send({ t: "canvas", w, h });
  };
  const resized = new ResizeObserver((entries) => {
    const e = entries[0], box = e.devicePixelContentBoxSize && e.devicePixelContentBoxSize[0];
    if (box) fit(box.inlineSize, box.blockSize);
    else fit(e.contentRect.width * devicePixelRatio, e.contentRect.height * devicePixelRatio);
  });
  resized.observe(canvas);
  const times = [];
  const tick = (t) => { times.push(t); if (times.length < 31) requestAnimationFrame(tick); else send({ t: "rate", fps: Math.round(30000 / (times[30] - times[0])) }); };
  requestAnimationFrame(tick);

  const onMessage = async (msg, buffers) => {
    if (msg.t === "closed") {
      state.closed = true; line.textContent = "vkcuda: the viewer closed (the last frame stays)"; return;
    }
    if (msg.t === "status") {
      const now = performance.now();
      while (state.arrivals.length && state.arrivals[0] < now - 1000) state.arrivals.shift();
      line.textContent = `${state.size[0]}x${state.size[1]} · ${state.arrivals.length} fps · ${msg.client.skipped} skipped`;
      return;
    }
    if (msg.t !== "frame" || !buffers || !buffers.length) return;
    const data = buffers[0], bytes = new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
    const v = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    const kind = v.getUint8(4), frame = Number(v.getBigUint64(8, true));
    const w = v.getUint32(16, true), h = v.getUint32(20, true);
    if (kind === 0) {
      ctx.putImageData(new ImageData(new Uint8ClampedArray(bytes.slice(32).buffer), w, h), 0, 0);
    } else {
      const bitmap = await createImageBitmap(new Blob([bytes.subarray(32)], { type: "image/jpeg" }));
      ctx.drawImage(bitmap, 0, 0); bitmap.close();
    }
    send({ t: "ack", frame });
    state.frames++; state.last = { frame, w, h, kind }; state.arrivals.push(performance.now());
  };
  model.on("msg:custom", onMessage);

  const KEYS = new Set([" ", "ArrowLeft", "ArrowRight", "+", "=", "-", "e", "E", "d", "D", "r", "R", "s", "S"]);
  // On the window, capturing: it runs before the notebook's shortcuts (Notebook 7 matches
  // them capturing on the document), so the viewer's keys reach it and no others are taken.
  const onKey = (e) => {
    if (e.target === canvas && KEYS.has(e.key)) { send({ t: "key", key: e.key }); e.preventDefault(); e.stopPropagation(); }
  };
  window.addEventListener("keydown", onKey, true);
  let pending = null;
  const pointer = (e, out) => {
    const r = canvas.getBoundingClientRect();
    pending = out ? { t: "pointer", buttons: 0 } :
      { t: "pointer", x: (e.clientX - r.left) * canvas.width / r.width, y: (e.clientY - r.top) * canvas.height / r.height, buttons: e.buttons & 7 };
    requestAnimationFrame(() => { if (pending) { send(pending); pending = null; } });
  };
  for (const type of ["pointermove", "pointerdown", "pointerup"]) canvas.addEventListener(type, (e) => pointer(e, false));
  canvas.addEventListener("pointerleave", (e) => pointer(e, true));
  return () => { resized.disconnect(); model.off("msg:custom", onMessage); window.removeEventListener("keydown", onKey, true); };
}
export default { render };
