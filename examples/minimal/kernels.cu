// examples/minimal.rs's kernels, one per layout: what `CudaFrames::begin` hands out for the
// frame is a surface (array) or a pointer and a row pitch (buffer). Compiled with NVRTC.
__device__ uchar4 pixel(int x, int y, unsigned int g) { return make_uchar4(x + g, y + 2 * g, x ^ y, 255); }

extern "C" __global__ void fill_surface(unsigned long long surface, int w, int h, unsigned int g) {
    int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= w || y >= h) return;
    surf2Dwrite(pixel(x, y, g), surface, x * 4, y);
}

extern "C" __global__ void fill_linear(unsigned char *out, unsigned long long pitch, int w, int h, unsigned int g) {
    int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= w || y >= h) return;
    ((uchar4 *)(out + y * pitch))[x] = pixel(x, y, g);
}

// Reads the frame back through the texture object (8-bit texels come back normalised to
// 0..1) and counts the texels that differ from what `fill_surface` wrote.
extern "C" __global__ void check_texture(unsigned long long texture, int w, int h, unsigned int g, unsigned int *wrong) {
    int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= w || y >= h) return;
    float4 t = tex2D<float4>(texture, x + 0.5f, y + 0.5f);
    uchar4 p = pixel(x, y, g);
    if (lrintf(t.x * 255) != p.x || lrintf(t.y * 255) != p.y || lrintf(t.z * 255) != p.z || lrintf(t.w * 255) != p.w)
        atomicAdd(wrong, 1u);
}
