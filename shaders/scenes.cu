// vkcuda scene kernels. Compiled at run time by NVRTC (no includes needed:
// surf2Dwrite, make_uchar4 and cudaSurfaceObject_t are NVRTC built-ins).
//
// Each kernel mirrors its CPU reference in src/scene.rs line by line, in
// integer arithmetic, so the pipeline's output can be checked bit for bit.
// One thread writes one pixel; x is a byte offset for surf2Dwrite (4 bytes
// per RGBA8 texel).

#define FRAC 28

extern "C" __global__ void gradient(cudaSurfaceObject_t surf, int w, int h, unsigned int t)
{
    unsigned int x = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= (unsigned int)w || y >= (unsigned int)h) return;
    unsigned int r = x + t * 4u;
    unsigned int g = y + t * 2u;
    unsigned int b = (((x >> 5) ^ (y >> 5)) & 1u) * 128u + t;
    surf2Dwrite(make_uchar4(r, g, b, 255), surf, x * 4, y);
}

extern "C" __global__ void julia(cudaSurfaceObject_t surf, int w, int h, unsigned int t,
                                 int cr_, int ci_, int step_, unsigned int cost)
{
    unsigned int x = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= (unsigned int)w || y >= (unsigned int)h) return;
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
    uchar4 px;
    if (escaped == cost) {
        px = make_uchar4(16, 12, 40, 255);
    } else {
        unsigned int n = escaped * 7u + t;
        px = make_uchar4(n, (n * 3u) >> 1, 255u - (n & 255u), 255);
    }
    surf2Dwrite(px, surf, x * 4, y);
}
