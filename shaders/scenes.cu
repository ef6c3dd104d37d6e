// vkcuda scene kernels. Compiled at run time by NVRTC (no includes needed:
// surf2Dwrite, make_uchar4 and cudaSurfaceObject_t are NVRTC built-ins).
//
// Each kernel mirrors its CPU reference in src/app/scene.rs line by line, in
// integer arithmetic, so the pipeline's output can be checked bit for bit.
// One thread writes one pixel. Each scene has two entry points: `<scene>`
// writes a surface (the interop path; x is a byte offset for surf2Dwrite, 4
// bytes per RGBA8 texel), `<scene>_linear` writes linear device memory (the
// staging baseline of `vkcuda bench`). Both call the same pixel function.

#define FRAC 28

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

extern "C" __global__ void gradient(cudaSurfaceObject_t surf, int w, int h, unsigned int t)
{
    PIXEL_XY
    surf2Dwrite(gradient_px(x, y, t), surf, x * 4, y);
}

extern "C" __global__ void julia(cudaSurfaceObject_t surf, int w, int h, unsigned int t,
                                 int cr, int ci, int step, unsigned int cost)
{
    PIXEL_XY
    surf2Dwrite(julia_px(x, y, w, h, t, cr, ci, step, cost), surf, x * 4, y);
}

extern "C" __global__ void gradient_linear(uchar4 *out, int w, int h, unsigned int t)
{
    PIXEL_XY
    out[(size_t)y * w + x] = gradient_px(x, y, t);
}

extern "C" __global__ void julia_linear(uchar4 *out, int w, int h, unsigned int t,
                                        int cr, int ci, int step, unsigned int cost)
{
    PIXEL_XY
    out[(size_t)y * w + x] = julia_px(x, y, w, h, t, cr, ci, step, cost);
}

// Test only (`--fault-at`): a kernel that traps, to check that a CUDA fault
// is reported with its error name and that nothing hangs after it.
extern "C" __global__ void fault()
{
    __trap();
}
