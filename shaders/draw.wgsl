// The draw pass as a compute shader (crates/run/src/present/compute_draw.rs):
// the ready shared frame letterboxed into a target of another size, filtered
// as a sampler filters it, written into a storage buffer as packed RGBA8 (or
// BGRA8: a swapchain's) rows or as the I420 planes a video or JPEG encoder
// takes (1.5 bytes a pixel: the CPU converts nothing). A compute pass needs
// no graphics pipeline, and no raster unit: every draw of vkcuda is this one. Compiled to SPIR-V by build.rs (naga).
//
// Entries: `from_image` samples a shared image (array layout), `from_buffer`
// reads a shared buffer (buffer layout) as it is. RGBA8 output: one pixel per
// invocation. I420 output: one 8x2 block per invocation (two words of Y in
// each of two rows, one word of U and one of V).

// #include frame.wgsl.inc

// The target (set 1: one per target).
@group(1) @binding(0) var<storage, read_write> drawn: array<u32>;

// `Draw` in compute_draw.rs: how to show the frame, then where.
struct Draw {
    show: Show,
    // The letterbox's size in the target (`show.left`, `show.top`: its corner).
    box_w: u32,
    box_h: u32,
    // The target's size.
    target_w: u32,
    target_h: u32,
    // 0: RGBA8 rows; 1: I420, BT.601 limited range (video); 2: I420, BT.601 full range (JPEG);
    // 3: BGRA8 rows (a B8G8R8A8 swapchain's bytes).
    output: u32,
    // Buffers: 0 RGBA8, 1 RGBA8 sRGB, 2 BGRA8, 3 RGBA16F, 4 RGBA32F, 5 R32F.
    // Images: 0 sampled, 1 loaded and filtered here (sRGB).
    source: u32,
    // In words: a row of Y (I420) or of pixels (RGBA8); where U and V start; a row of U or V.
    y_stride: u32,
    u_offset: u32,
    v_offset: u32,
    c_stride: u32,
    // Rows: invocation (x, y) draws pixel x of rows y, y + row_stride, … (rows_each of
    // them): one on a GPU; many on a CPU device (lavapipe), where an invocation costs far
    // more than a loop's step (a 1280x720 draw: 35 ms one pixel each).
    rows_each: u32,
    row_stride: u32,
};
var<immediate> draw: Draw;

// The filtered colour, linear, as the target shows it.
fn shown(filtered: vec3<f32>) -> vec4<f32> {
    return shown_as(filtered, draw.show);
}

// Whether target pixel `p` is inside the letterbox (the rest is black).
fn in_box(p: vec2<u32>) -> bool {
    let s = draw.show;
    return p.x >= s.left && p.x < s.left + draw.box_w && p.y >= s.top && p.y < s.top + draw.box_h;
}

// Where the pixel's centre falls in the frame, 0..1 (what the fragment shader's `uv` is there).
fn uv_of(p: vec2<u32>) -> vec2<f32> {
    let inside = vec2<f32>(p - vec2<u32>(draw.show.left, draw.show.top)) + 0.5;
    return inside / vec2<f32>(f32(draw.box_w), f32(draw.box_h));
}

// A shared image's colour at target pixel `p` (inside the letterbox).
fn image_colour(p: vec2<u32>) -> vec3<f32> {
    let uv = uv_of(p);
    if (draw.source == 0u) {
        return textureSampleLevel(frame_texture, frame_sampler, uv, 0.0).rgb;
    }
    // sRGB: the four texels loaded (each decoded exactly) and filtered here.
    return image_loaded(uv);
}

// One buffer texel of the frame's format, as linear RGB.
fn texel(i: u32) -> vec3<f32> {
    switch draw.source {
        case 1u: {
            return rgba8_srgb(i);
        }
        case 2u: {
            return bgra8(i);
        }
        case 3u: {
            return rgba16f(i);
        }
        case 4u: {
            return rgba32f(i);
        }
        case 5u: {
            return r32f(i);
        }
        default: {
            return rgba8(i);
        }
    }
}

// A shared buffer's colour at target pixel `p` (inside the letterbox): its own
// texel at the frame's size, else the four around the pixel's centre, filtered.
fn buffer_colour(p: vec2<u32>) -> vec3<f32> {
    if (draw.show.exact != 0u) {
        return texel((p.y - draw.show.top) * draw.show.width + (p.x - draw.show.left));
    }
    let t = taps_of(uv_of(p), draw.show.width, draw.show.height);
    return bilinear(t, texel(t.i00), texel(t.i10), texel(t.i01), texel(t.i11));
}

// The 8-bit levels an RGBA8 target would hold (UNORM conversion: round to nearest).
fn levels(c: vec4<f32>) -> vec3<i32> {
    return vec3<i32>(round(c.rgb * 255.0));
}

// BT.601 luma of 8-bit RGB, in integers (libyuv's and libjpeg's coefficients, / 256).
fn luma(c: vec3<i32>) -> u32 {
    if (draw.output == 2u) {
        return u32((77 * c.r + 150 * c.g + 29 * c.b + 128) >> 8u);
    }
    return u32(((66 * c.r + 129 * c.g + 25 * c.b + 128) >> 8u) + 16);
}

// BT.601 (U, V) of the sum of four pixels' 8-bit RGB.
fn chroma(sum: vec3<i32>) -> vec2<u32> {
    let c = (sum + 2) / 4;
    if (draw.output == 2u) {
        let u = ((-43 * c.r - 85 * c.g + 128 * c.b + 128) >> 8u) + 128;
        let v = ((128 * c.r - 107 * c.g - 21 * c.b + 128) >> 8u) + 128;
        return vec2<u32>(u32(clamp(u, 0, 255)), u32(clamp(v, 0, 255)));
    }
    let u = ((-38 * c.r - 74 * c.g + 112 * c.b + 128) >> 8u) + 128;
    let v = ((112 * c.r - 94 * c.g - 18 * c.b + 128) >> 8u) + 128;
    return vec2<u32>(u32(clamp(u, 0, 255)), u32(clamp(v, 0, 255)));
}

// The target pixel an I420 block's pixel `i` (0..16: 8 across, 2 down) reads:
// columns and rows past the target repeat its last (the planes' padding).
fn block_pixel(block: vec2<u32>, i: u32) -> vec2<u32> {
    let p = vec2<u32>(block.x * 8u + (i & 7u), block.y * 2u + (i >> 3u));
    return min(p, vec2<u32>(draw.target_w - 1u, draw.target_h - 1u));
}

// Writes an I420 block of 16 pixels' 8-bit RGB: 2x4 bytes of Y in each of its
// two rows, 4 bytes of U and of V (one per 2x2 pixels).
fn write_block(block: vec2<u32>, c: array<vec3<i32>, 16>) {
    var y: array<u32, 4>;
    var u = 0u;
    var v = 0u;
    for (var i = 0u; i < 16u; i++) {
        y[i >> 2u] |= luma(c[i]) << ((i & 3u) * 8u);
    }
    for (var k = 0u; k < 4u; k++) {
        let uv = chroma(c[2u * k] + c[2u * k + 1u] + c[8u + 2u * k] + c[9u + 2u * k]);
        u |= uv.x << (k * 8u);
        v |= uv.y << (k * 8u);
    }
    let row = block.y * 2u * draw.y_stride + block.x * 2u;
    drawn[row] = y[0];
    drawn[row + 1u] = y[1];
    drawn[row + draw.y_stride] = y[2];
    drawn[row + draw.y_stride + 1u] = y[3];
    let c_at = block.y * draw.c_stride + block.x;
    drawn[draw.u_offset + c_at] = u;
    drawn[draw.v_offset + c_at] = v;
}

// The 16 pixels of an I420 block, as a bound the shader compiler cannot see
// (`output` is 1 or 2 where it is called): a loop it unrolls 16 times, each
// with the filter and every format inlined, took llvmpipe (lavapipe) ~5 s to
// compile at the first dispatch, past a run's stall bound under load.
fn block_pixels() -> u32 {
    return 16u * min(draw.output, 1u);
}

// Whether the target is packed rows, one pixel per invocation (else I420 blocks).
fn rows() -> bool {
    return draw.output == 0u || draw.output == 3u;
}

// Pixel `p`'s colour as the target's packed word.
fn put(p: vec2<u32>, c: vec4<f32>) {
    if (draw.output == 3u) {
        drawn[p.y * draw.y_stride + p.x] = pack4x8unorm(c.bgra);
    } else {
        drawn[p.y * draw.y_stride + p.x] = pack4x8unorm(c);
    }
}

// Whether this invocation has work: a pixel of the target, or a block that starts in it.
fn covers(id: vec2<u32>) -> bool {
    if (rows()) {
        return id.x < draw.target_w && id.y < draw.target_h;
    }
    return id.x * 8u < draw.target_w && id.y * 2u < draw.target_h;
}

// The two entries differ only in where a pixel's colour comes from: WGSL cannot
// pass that as an argument, and each entry's pipeline binds its own kind of frame.
@compute @workgroup_size(8, 8)
fn from_image(@builtin(global_invocation_id) id: vec3<u32>) {
    if (!covers(id.xy)) {
        return;
    }
    if (rows()) {
        for (var k = 0u; k < draw.rows_each; k++) {
            let p = vec2<u32>(id.x, id.y + k * draw.row_stride);
            if (p.y >= draw.target_h) {
                break;
            }
            var c = vec4<f32>(0.0, 0.0, 0.0, 1.0);
            if (in_box(p)) {
                c = shown(image_colour(p));
            }
            put(p, c);
        }
        return;
    }
    var c: array<vec3<i32>, 16>;
    for (var i = 0u; i < block_pixels(); i++) {
        let p = block_pixel(id.xy, i);
        if (in_box(p)) {
            c[i] = levels(shown(image_colour(p)));
        }
    }
    write_block(id.xy, c);
}

@compute @workgroup_size(8, 8)
fn from_buffer(@builtin(global_invocation_id) id: vec3<u32>) {
    if (!covers(id.xy)) {
        return;
    }
    if (rows()) {
        for (var k = 0u; k < draw.rows_each; k++) {
            let p = vec2<u32>(id.x, id.y + k * draw.row_stride);
            if (p.y >= draw.target_h) {
                break;
            }
            var c = vec4<f32>(0.0, 0.0, 0.0, 1.0);
            if (in_box(p)) {
                c = shown(buffer_colour(p));
            }
            put(p, c);
        }
        return;
    }
    var c: array<vec3<i32>, 16>;
    for (var i = 0u; i < block_pixels(); i++) {
        let p = block_pixel(id.xy, i);
        if (in_box(p)) {
            c[i] = levels(shown(buffer_colour(p)));
        }
    }
    write_block(id.xy, c);
}
