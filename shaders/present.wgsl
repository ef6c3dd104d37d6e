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

@fragment
fn fs_main(in: VsOut) -> @location(0) vec4<f32> {
    return textureSample(frame_texture, frame_sampler, in.uv);
}
