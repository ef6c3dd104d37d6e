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

@group(0) @binding(0) var frame_texture: texture_2d<f32>;
@group(0) @binding(1) var frame_sampler: sampler;

// Bindings 2-4 (the `fs_buffer_*` entries): the shared buffer, as 32-bit
// words, as 64-bit pairs (RGBA16F: one load per pixel) and as 128-bit
// quads (RGBA32F: one load per pixel).
@group(0) @binding(2) var<storage, read> words: array<u32>;
@group(0) @binding(3) var<storage, read> pairs: array<vec2<u32>>;
@group(0) @binding(4) var<storage, read> quads: array<vec4<u32>>;

// How to show the frame (`Show` in crates/run/src/present/draw.rs): float
// frames are scaled by the exposure and clamped; R32F is shown grey; an sRGB
// frame, decoded to linear before filtering, is encoded again for the 8-bit
// target. `width`, `height` and `exact` describe a buffer (`fs_buffer_*`).
struct Show {
    exposure: f32,
    mono: u32,
    encode_srgb: u32,
    width: u32,
    height: u32,
    // 1: the frame is drawn at its own size, so every pixel is one texel.
    exact: u32,
    // The letterbox's top left corner in the target, in pixels.
    left: u32,
    top: u32,
};
var<immediate> show: Show;

fn srgb(c: vec3<f32>) -> vec3<f32> {
    let lo = c * 12.92;
    let hi = 1.055 * pow(c, vec3<f32>(1.0 / 2.4)) - 0.055;
    return select(hi, lo, c <= vec3<f32>(0.0031308));
}

fn srgb_to_linear(c: vec3<f32>) -> vec3<f32> {
    let lo = c / 12.92;
    let hi = pow((c + 0.055) / 1.055, vec3<f32>(2.4));
    return select(hi, lo, c <= vec3<f32>(0.04045));
}

// The filtered colour, linear, as the target shows it.
fn shown(filtered: vec3<f32>) -> vec4<f32> {
    var c = filtered;
    if (show.mono != 0u) {
        c = c.rrr;
    }
    c = clamp(c * show.exposure, vec3<f32>(0.0), vec3<f32>(1.0));
    if (show.encode_srgb != 0u) {
        c = srgb(c);
    }
    return vec4<f32>(c, 1.0);
}

@fragment
fn fs_main(in: VsOut) -> @location(0) vec4<f32> {
    return shown(textureSample(frame_texture, frame_sampler, in.uv).rgb);
}

// sRGB images: the four texels around the pixel's centre loaded (each decoded
// exactly) and filtered here, as the reference does. NVIDIA's sampler filters
// sRGB texels less precisely: at sharp edges up to 17 levels off the
// reference, where every other format is within 4 (docs/results.md).
@fragment
fn fs_image_loaded(in: VsOut) -> @location(0) vec4<f32> {
    let dims = vec2<i32>(textureDimensions(frame_texture));
    let p = in.uv * vec2<f32>(dims) - 0.5;
    let base = floor(p);
    let a = p - base;
    let lo = clamp(vec2<i32>(base), vec2<i32>(0), dims - 1);
    let hi = clamp(vec2<i32>(base) + 1, vec2<i32>(0), dims - 1);
    let c00 = textureLoad(frame_texture, lo, 0).rgb;
    let c10 = textureLoad(frame_texture, vec2<i32>(hi.x, lo.y), 0).rgb;
    let c01 = textureLoad(frame_texture, vec2<i32>(lo.x, hi.y), 0).rgb;
    let c11 = textureLoad(frame_texture, hi, 0).rgb;
    return shown(mix(mix(c00, c10, a.x), mix(c01, c11, a.x), a.y));
}

// The buffer texel a pixel shows when the frame is drawn at its own size:
// the pixel's own, counted from the letterbox's corner (exact integers, no
// filtering).
fn exact_index(position: vec4<f32>) -> u32 {
    return (u32(position.y) - show.top) * show.width + (u32(position.x) - show.left);
}

// The four texels around a buffer pixel's centre, clamped to the edge, and
// the weights between them: bilinear filtering as the sampler of `fs_main`
// does it (and the CPU reference, `scene::drawn_reference`).
struct Taps {
    i00: u32,
    i10: u32,
    i01: u32,
    i11: u32,
    a: vec2<f32>,
};

fn taps(uv: vec2<f32>) -> Taps {
    let size = vec2<f32>(f32(show.width), f32(show.height));
    let last = vec2<i32>(i32(show.width) - 1, i32(show.height) - 1);
    var t: Taps;
    let p = uv * size - 0.5;
    let base = floor(p);
    t.a = p - base;
    let lo = clamp(vec2<i32>(base), vec2<i32>(0), last);
    let hi = clamp(vec2<i32>(base) + 1, vec2<i32>(0), last);
    let row0 = u32(lo.y) * show.width;
    let row1 = u32(hi.y) * show.width;
    t.i00 = row0 + u32(lo.x);
    t.i10 = row0 + u32(hi.x);
    t.i01 = row1 + u32(lo.x);
    t.i11 = row1 + u32(hi.x);
    return t;
}

fn bilinear(t: Taps, c00: vec3<f32>, c10: vec3<f32>, c01: vec3<f32>, c11: vec3<f32>) -> vec3<f32> {
    return mix(mix(c00, c10, t.a.x), mix(c01, c11, t.a.x), t.a.y);
}

// A texel of each buffer format, as linear RGB.
fn rgba8(i: u32) -> vec3<f32> {
    return unpack4x8unorm(words[i]).rgb;
}

// sRGB bytes are decoded before filtering, as the sampler does.
fn rgba8_srgb(i: u32) -> vec3<f32> {
    return srgb_to_linear(unpack4x8unorm(words[i]).rgb);
}

fn bgra8(i: u32) -> vec3<f32> {
    return unpack4x8unorm(words[i]).bgr;
}

fn rgba16f(i: u32) -> vec3<f32> {
    let p = pairs[i];
    return vec3<f32>(unpack2x16float(p.x), unpack2x16float(p.y).x);
}

fn rgba32f(i: u32) -> vec3<f32> {
    return bitcast<vec4<f32>>(quads[i]).rgb;
}

// One float channel, shown grey (`shown` repeats red).
fn r32f(i: u32) -> vec3<f32> {
    return vec3<f32>(bitcast<f32>(words[i]), 0.0, 0.0);
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
