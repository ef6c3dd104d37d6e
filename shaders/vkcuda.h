// vkcuda.h: the contract between vkcuda and a CUDA kernel it runs
// (`vkcuda --kernel FILE`, `vkcuda check-kernel FILE`). Embedded in the
// binary and given to NVRTC as "vkcuda.h": `#include "vkcuda.h"` needs no
// path. The built-in scenes (shaders/scenes.cu) write through it too.
//
// The entry point, one per file (its name: --entry, default "render"):
//
//     #include "vkcuda.h"
//     extern "C" __global__ void render(vk_frame f)
//     {
//         VK_PIXEL(f, x, y);            // this thread's pixel; returns outside the frame
//         vk_put(f, x, y, make_float4(x / (float)f.width, y / (float)f.height, 0.5f, 1.0f));
//     }
//
// vkcuda launches it once per frame on its stream, 16x16 threads per block
// over width x height (--block WxH changes the block), between the wait for
// the consumer and the signal to it: the kernel owns the whole frame.

#pragma once

// The frame's format (vkcuda::Format, in order; --format).
enum vk_format { VK_RGBA8 = 0, VK_RGBA8_SRGB = 1, VK_BGRA8 = 2, VK_RGBA16F = 3, VK_RGBA32F = 4, VK_R32F = 5 };

// Where the frame lives: `pointer` non-zero: linear memory (--layout
// buffer), rows `pitch` bytes apart; else a surface object (--layout array;
// surf2Dwrite takes x in bytes). Mirrors `Out` in crates/run/src/scene/kernels.rs.
struct vk_target {
    unsigned long long surface;
    unsigned long long pointer;
    unsigned long long pitch;
    int format; // enum vk_format
    int pad;
};

// What the kernel is given, by value. Mirrors `KernelFrame` in crates/run/src/kernel/user.rs.
struct vk_frame {
    vk_target target;
    int width, height;    // pixels
    unsigned int index;   // the frame's number, from 0
    float time;           // seconds: headless and bench index / 60 (reproducible dumps); viewer: since start
    float dt;             // seconds since the previous frame (1/60 headless)
    float mouse_x;        // viewer: the pointer in frame pixels (a pixel's centre, x + 0.5);
    float mouse_y;        //   -1 when it is not over the frame, and always headless
    unsigned int buttons; // viewer: buttons held, bit 0 left, 1 right, 2 middle; 0 headless
    float params[8];      // --param values, in order; 0 past the last
};

// This thread's pixel (x, y) of frame `f`; threads outside the frame return.
#define VK_PIXEL(f, x, y)                                   \
    int x = blockIdx.x * blockDim.x + threadIdx.x;          \
    int y = blockIdx.y * blockDim.y + threadIdx.y;          \
    if (x >= (f).width || y >= (f).height) return;

__device__ inline unsigned short vk_half_bits(float v)
{
    unsigned short h;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(v)); // round to nearest even
    return h;
}

template <typename T>
__device__ inline void vk_put_as(const vk_target &t, unsigned int x, unsigned int y, T v)
{
    if (t.pointer) {
        *(T *)(t.pointer + y * t.pitch + x * sizeof(T)) = v;
    } else {
        surf2Dwrite(v, t.surface, x * sizeof(T), y);
    }
}

// Writes 8-bit channels exactly: to 8-bit formats as they are (BGRA8 reordered;
// RGBA8_SRGB: taken as already sRGB-encoded), to float formats as v / 255.
__device__ inline void vk_put8(const vk_target &t, unsigned int x, unsigned int y, uchar4 p)
{
    switch (t.format) {
    case VK_BGRA8:
        vk_put_as(t, x, y, make_uchar4(p.z, p.y, p.x, p.w));
        return;
    case VK_RGBA16F:
        vk_put_as(t, x, y, make_ushort4(vk_half_bits(p.x / 255.0f), vk_half_bits(p.y / 255.0f),
                                        vk_half_bits(p.z / 255.0f), vk_half_bits(p.w / 255.0f)));
        return;
    case VK_RGBA32F:
        vk_put_as(t, x, y, make_float4(p.x / 255.0f, p.y / 255.0f, p.z / 255.0f, p.w / 255.0f));
        return;
    case VK_R32F:
        vk_put_as(t, x, y, p.x / 255.0f);
        return;
    default:
        vk_put_as(t, x, y, p);
    }
}

__device__ inline unsigned char vk_unorm8(float v)
{
    return (unsigned char)__float2int_rn(fminf(fmaxf(v, 0.0f), 1.0f) * 255.0f);
}

__device__ inline float vk_srgb_encode(float v)
{
    v = fminf(fmaxf(v, 0.0f), 1.0f);
    return v <= 0.0031308f ? v * 12.92f : 1.055f * powf(v, 1.0f / 2.4f) - 0.055f;
}

// Writes a linear colour: float formats store it as it is (HDR: values above 1
// are kept); RGBA8 and BGRA8 clamp to 0..1 and round; RGBA8_SRGB encodes to
// sRGB first; R32F stores the red channel.
__device__ inline void vk_put(const vk_frame &f, int x, int y, float4 c)
{
    const vk_target &t = f.target;
    switch (t.format) {
    case VK_RGBA16F:
        vk_put_as(t, x, y, make_ushort4(vk_half_bits(c.x), vk_half_bits(c.y), vk_half_bits(c.z), vk_half_bits(c.w)));
        return;
    case VK_RGBA32F:
        vk_put_as(t, x, y, c);
        return;
    case VK_R32F:
        vk_put_as(t, x, y, c.x);
        return;
    case VK_RGBA8_SRGB:
        c = make_float4(vk_srgb_encode(c.x), vk_srgb_encode(c.y), vk_srgb_encode(c.z), c.w);
        // fall through
    default:
        vk_put8(t, x, y, make_uchar4(vk_unorm8(c.x), vk_unorm8(c.y), vk_unorm8(c.z), vk_unorm8(c.w)));
    }
}
