// The viewer's present pass: one fullscreen triangle that samples the ready
// shared image. The letterbox is the viewport (set per frame); the area
// around it is cleared to black. Compiled to SPIR-V by build.rs (naga).

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

// How to show the frame (`Show` in src/app/present/draw.rs): float frames are
// scaled by the exposure and clamped; R32F is shown grey; an sRGB frame,
// which the sampler decoded to linear, is encoded again for the 8-bit target.
struct Show {
    exposure: f32,
    mono: u32,
    encode_srgb: u32,
    pad: u32,
};
var<immediate> show: Show;

fn srgb(c: vec3<f32>) -> vec3<f32> {
    let lo = c * 12.92;
    let hi = 1.055 * pow(c, vec3<f32>(1.0 / 2.4)) - 0.055;
    return select(hi, lo, c <= vec3<f32>(0.0031308));
}

@fragment
fn fs_main(in: VsOut) -> @location(0) vec4<f32> {
    var c = textureSample(frame_texture, frame_sampler, in.uv).rgb;
    if (show.mono != 0u) {
        c = c.rrr;
    }
    c = clamp(c * show.exposure, vec3<f32>(0.0), vec3<f32>(1.0));
    if (show.encode_srgb != 0u) {
        c = srgb(c);
    }
    return vec4<f32>(c, 1.0);
}
