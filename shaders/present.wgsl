// The viewer's present pass: one fullscreen triangle that shows the ready
// shared frame. The letterbox is the viewport (set per frame); the area
// around it is cleared to black. Compiled to SPIR-V by build.rs (naga).
//
// Fragment entries: `fs_main` samples a shared image (array layout;
// `fs_image_loaded` for sRGB images); the
// `fs_buffer_*` ones, one per format, read a shared buffer (buffer layout) as
// it is, packed rows of the frame's format, and filter it themselves, so no
// per-frame copy into an image is needed.

struct VsOut {
    @builtin(position) position: vec4<f32>,
    @location(0) uv: vec2<f32>,
};

@vertex
fn vs_main(@builtin(vertex_index) index: u32) -> VsOut {
    // (0,0), (2,0), (0,2): a triangle that covers the viewport; uv (0,0) is the top left.
    let uv = vec2<f32>(f32((index << 1u) & 2u), f32(index & 2u));
    var out: VsOut;
    // WGSL clip space has y up; naga flips it into Vulkan's y-down space.
    out.position = vec4<f32>(uv.x * 2.0 - 1.0, 1.0 - uv.y * 2.0, 0.0, 1.0);
    out.uv = uv;
    return out;
}

// #include frame.wgsl.inc

var<immediate> show: Show;

// The filtered colour, linear, as the target shows it.
fn shown(filtered: vec3<f32>) -> vec4<f32> {
    return shown_as(filtered, show);
}

@fragment
fn fs_main(in: VsOut) -> @location(0) vec4<f32> {
    return shown(textureSample(frame_texture, frame_sampler, in.uv).rgb);
}

// sRGB images: loaded and filtered here (`image_loaded`).
@fragment
fn fs_image_loaded(in: VsOut) -> @location(0) vec4<f32> {
    return shown(image_loaded(in.uv));
}

// The buffer texel a pixel shows when the frame is drawn at its own size:
// the pixel's own, counted from the letterbox's corner (exact integers, no
// filtering).
fn exact_index(position: vec4<f32>) -> u32 {
    return (u32(position.y) - show.top) * show.width + (u32(position.x) - show.left);
}

// The four texels around a buffer pixel's centre: bilinear filtering as the
// sampler of `fs_main` does it.
fn taps(uv: vec2<f32>) -> Taps {
    return taps_of(uv, show.width, show.height);
}

// One entry per buffer format, so each pixel's loads are the format's own:
// one texel at the frame's own size, else four, filtered.
@fragment
fn fs_buffer_rgba8(in: VsOut) -> @location(0) vec4<f32> {
    if (show.exact != 0u) {
        return shown(rgba8(exact_index(in.position)));
    }
    let t = taps(in.uv);
    return shown(bilinear(t, rgba8(t.i00), rgba8(t.i10), rgba8(t.i01), rgba8(t.i11)));
}

@fragment
fn fs_buffer_rgba8_srgb(in: VsOut) -> @location(0) vec4<f32> {
    if (show.exact != 0u) {
        return shown(rgba8_srgb(exact_index(in.position)));
    }
    let t = taps(in.uv);
    return shown(bilinear(t, rgba8_srgb(t.i00), rgba8_srgb(t.i10), rgba8_srgb(t.i01), rgba8_srgb(t.i11)));
}

@fragment
fn fs_buffer_bgra8(in: VsOut) -> @location(0) vec4<f32> {
    if (show.exact != 0u) {
        return shown(bgra8(exact_index(in.position)));
    }
    let t = taps(in.uv);
    return shown(bilinear(t, bgra8(t.i00), bgra8(t.i10), bgra8(t.i01), bgra8(t.i11)));
}

@fragment
fn fs_buffer_rgba16f(in: VsOut) -> @location(0) vec4<f32> {
    if (show.exact != 0u) {
        return shown(rgba16f(exact_index(in.position)));
    }
    let t = taps(in.uv);
    return shown(bilinear(t, rgba16f(t.i00), rgba16f(t.i10), rgba16f(t.i01), rgba16f(t.i11)));
}

@fragment
fn fs_buffer_rgba32f(in: VsOut) -> @location(0) vec4<f32> {
    if (show.exact != 0u) {
        return shown(rgba32f(exact_index(in.position)));
    }
    let t = taps(in.uv);
    return shown(bilinear(t, rgba32f(t.i00), rgba32f(t.i10), rgba32f(t.i01), rgba32f(t.i11)));
}

@fragment
fn fs_buffer_r32f(in: VsOut) -> @location(0) vec4<f32> {
    if (show.exact != 0u) {
        return shown(r32f(exact_index(in.position)));
    }
    let t = taps(in.uv);
    return shown(bilinear(t, r32f(t.i00), r32f(t.i10), r32f(t.i01), r32f(t.i11)));
}
