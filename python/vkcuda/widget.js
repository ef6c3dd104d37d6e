// The notebook widget's view (anywidget): the browser view's client
// (client.js, which the widget's module starts with) on Jupyter's comm, in an
// output cell. Frames come as one message with one buffer each; JSON both
// ways. Hello when the view opens, goodbye when its output goes.
function render({ model, el }) {
  const box = document.createElement("div");
  box.className = "vkcuda-widget";
  const canvas = document.createElement("canvas");
  canvas.tabIndex = 0;
  const line = document.createElement("div");
  line.className = "vkcuda-status";
  line.textContent = "waiting for a frame";
  // Why the frames stopped (the caller's CUDA error), over the last frame while it stands.
  const fault = document.createElement("div");
  fault.className = "vkcuda-fault";
  fault.hidden = true;
  box.append(canvas, fault, line);
  el.append(box);
  const size = model.get("size");
  if (size && size.length === 2) {
    canvas.style.width = size[0] + "px"; canvas.style.height = size[1] + "px"; canvas.style.aspectRatio = "auto";
  }
  const mode = model.get("mode");
  const view = connect(canvas, (m) => model.send(m), { mode, quality: mode === "jpeg" ? model.get("quality") : null });
  canvas.vkcuda = view.state; // what tests read
  const onMessage = (msg, buffers) => {
    if (msg.t === "frame" && buffers && buffers.length) {
      const d = buffers[0];
      return view.frame(new Uint8Array(d.buffer, d.byteOffset, d.byteLength));
    }
    view.message(msg);
    if (msg.t === "closed") line.textContent = `vkcuda: ${msg.reason || "the viewer closed"} (the last frame stays)`;
  };
  model.on("msg:custom", onMessage);
  view.opened();
  const timer = setInterval(() => {
    fault.textContent = view.fault() || ""; fault.hidden = !view.fault();
    if (!view.state.closed && view.state.frames) line.textContent = view.describe();
  }, 500);
  // On the window, capturing: it runs before the notebook's shortcuts (Notebook 7 matches
  // them capturing on the document), so the viewer's keys reach it and no others are taken.
  const onKey = (e) => {
    if (e.target === canvas && view.key(e)) { e.preventDefault(); e.stopPropagation(); }
  };
  window.addEventListener("keydown", onKey, true);
  return () => {
    model.send({ t: "bye" });
    view.close(); clearInterval(timer);
    model.off("msg:custom", onMessage); window.removeEventListener("keydown", onKey, true);
  };
}
export default { render };
