// Packs an image of any strides into the shared frames' RGBA layout, rows
// packed: what the Python module's show() runs on the caller's own stream.
// Element types of 1, 2 or 4 bytes (uint8, float16, float32) are moved as
// bits, so the frame holds exactly the caller's values. Grey becomes
// (v, v, v, opaque), RGB gets `opaque` as its alpha.

template <typename T>
__device__ void pack_as(const unsigned char* src, long long sy, long long sx, long long sc, int channels,
                        int width, int height, T* dst, T opaque) {
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= width || y >= height) return;
    const unsigned char* p = src + y * sy + x * sx;
    T* out = dst + ((size_t)y * width + x) * 4;
    T c0 = *(const T*)p;
    if (channels == 1) {
        out[0] = c0; out[1] = c0; out[2] = c0; out[3] = opaque;
        return;
    }
    out[0] = c0;
    out[1] = *(const T*)(p + sc);
    out[2] = *(const T*)(p + 2 * sc);
    out[3] = channels == 4 ? *(const T*)(p + 3 * sc) : opaque;
}

extern "C" __global__ void vk_pack(const unsigned char* src, long long sy, long long sx, long long sc,
                                   int channels, int size, int width, int height, void* dst,
                                   unsigned int opaque) {
    switch (size) {
    case 1: pack_as<unsigned char>(src, sy, sx, sc, channels, width, height, (unsigned char*)dst,
                                   (unsigned char)opaque); break;
    case 2: pack_as<unsigned short>(src, sy, sx, sc, channels, width, height, (unsigned short*)dst,
                                    (unsigned short)opaque); break;
    default: pack_as<unsigned int>(src, sy, sx, sc, channels, width, height, (unsigned int*)dst, opaque);
    }
}
