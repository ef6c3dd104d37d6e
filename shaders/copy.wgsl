// The headless consumer's copy of a shared buffer on a queue with compute
// (crates/run/src/present/shader_copy.rs): 16 bytes per invocation and
// step, then the last words (a frame's size is a multiple of 4 bytes, not
// always of 16). Compiled to SPIR-V by build.rs (naga).

@group(0) @binding(0) var<storage, read> src_quads: array<vec4<u32>>;
@group(0) @binding(1) var<storage, read_write> dst_quads: array<vec4<u32>>;
@group(0) @binding(2) var<storage, read> src_words: array<u32>;
@group(0) @binding(3) var<storage, read_write> dst_words: array<u32>;

// How much to copy: `quads` 16-byte elements, then up to `words` 4-byte ones.
struct Span {
    quads: u32,
    words: u32,
};
var<immediate> span: Span;

@compute @workgroup_size(256)
fn copy(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let stride = groups.x * 256u;
    for (var i = id.x; i < span.quads; i += stride) {
        dst_quads[i] = src_quads[i];
    }
    let tail = span.quads * 4u + id.x;
    if (tail < span.words) {
        dst_words[tail] = src_words[tail];
    }
}
