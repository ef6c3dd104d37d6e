// vkcuda scene kernels. Compiled at run time by NVRTC, with shaders/vkcuda.h
// (the kernel contract) as its one header.
//
// Each kernel mirrors its CPU reference in crates/run/src/scene/mod.rs line by line, in
// integer arithmetic, so the pipeline's output can be checked bit for bit.
// One thread writes one pixel, through `put`, into an `Out`: a surface (the
// array layout; x is a byte offset for surf2Dwrite) or linear memory (the
// buffer layout, and the staging baseline of `vkcuda bench`), in any of
// vkcuda's formats. `put` (vk_put8) mirrors `store` in crates/run/src/scene/mod.rs.

#define FRAC 28

#include "vkcuda.h" // vk_target (the frame to write) and vk_put8

typedef vk_target Out;

__device__ void put(const Out &o, unsigned int x, unsigned int y, uchar4 p)
{
    vk_put8(o, x, y, p); // RGBA8_SRGB: CUDA knows no colour spaces, the bytes are sRGB-encoded
}

__device__ uchar4 gradient_px(unsigned int x, unsigned int y, unsigned int t)
{
    unsigned int r = x + t * 4u;
    unsigned int g = y + t * 2u;
    unsigned int b = (((x >> 5) ^ (y >> 5)) & 1u) * 128u + t;
    return make_uchar4(r, g, b, 255);
}

__device__ uchar4 julia_px(unsigned int x, unsigned int y, int w, int h, unsigned int t,
                           int cr_, int ci_, int step_, unsigned int cost)
{
    long long step = step_;
    long long zr = ((long long)x - (long long)((unsigned int)w / 2)) * step;
    long long zi = ((long long)y - (long long)((unsigned int)h / 2)) * step;
    long long cr = cr_, ci = ci_;
    long long four = 4LL << FRAC;
    unsigned int escaped = cost;
    // Always `cost` iterations: z freezes once it escapes, so the cost is exact.
    for (unsigned int k = 0; k < cost; ++k) {
        long long zr2 = (zr * zr) >> FRAC;
        long long zi2 = (zi * zi) >> FRAC;
        if (escaped == cost && zr2 + zi2 > four) escaped = k;
        if (escaped == cost) {
            zi = ((2 * zr * zi) >> FRAC) + ci;
            zr = zr2 - zi2 + cr;
        }
    }
    if (escaped == cost) return make_uchar4(16, 12, 40, 255);
    unsigned int n = escaped * 7u + t;
    return make_uchar4(n, (n * 3u) >> 1, 255u - (n & 255u), 255);
}

#define PIXEL_XY                                             \
    unsigned int x = blockIdx.x * blockDim.x + threadIdx.x; \
    unsigned int y = blockIdx.y * blockDim.y + threadIdx.y; \
    if (x >= (unsigned int)w || y >= (unsigned int)h) return;

extern "C" __global__ void gradient(Out out, int w, int h, unsigned int t)
{
    PIXEL_XY
    put(out, x, y, gradient_px(x, y, t));
}

extern "C" __global__ void julia(Out out, int w, int h, unsigned int t, int cr, int ci, int step,
                                 unsigned int cost)
{
    PIXEL_XY
    put(out, x, y, julia_px(x, y, w, h, t, cr, ci, step, cost));
}

// Test only (`--inject cuda-fault@N`): a kernel that traps, to check that a
// CUDA fault is reported with its error name and that nothing hangs after it.
extern "C" __global__ void fault()
{
    __trap();
}
