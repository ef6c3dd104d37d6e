// Packs an image of any strides into the shared frames' RGBA layout, rows
// packed: what the Python module's show() runs on the caller's own stream.
// Element types of 1, 2 or 4 bytes (uint8, float16, float32) are moved as
// bits, so the frame holds exactly the caller's values. Grey becomes
// (v, v, v, opaque), RGB gets `opaque` as its alpha.

// Four elements moved as one (16, 8 or 4 bytes): what a pixel of each size is.
template <typename T> struct Vec4;
template <> struct Vec4<unsigned char> { typedef uchar4 type; };
template <> struct Vec4<unsigned short> { typedef ushort4 type; };
template <> struct Vec4<unsigned int> { typedef uint4 type; };

template <typename T>
__device__ void pack_as(const unsigned char* src, long long sy, long long sx, long long sc, int channels,
                        int width, int height, T* dst, T opaque) {
    typedef typename Vec4<T>::type V;
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= width || y >= height) return;
    const unsigned char* p = src + y * sy + x * sx;
    T* out = dst + ((size_t)y * width + x) * 4;
    // RGBA with its channels side by side and the pixel aligned: one load, one store.
    if (channels == 4 && sc == (long long)sizeof(T) && ((size_t)p % sizeof(V)) == 0) {
        *(V*)out = *(const V*)p;
        return;
    }
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

// `dropped` (device memory, or null): the last pack into this slot whose
// frame was dropped unshown. A pack whose frame is dropped while it waits or runs
// skips the blocks not yet begun: nobody reads the slot before its next pack.
extern "C" __global__ void vk_pack(const unsigned char* src, long long sy, long long sx, long long sc,
                                   int channels, int size, int width, int height, void* dst,
                                   unsigned int opaque, const volatile unsigned long long* dropped,
                                   unsigned long long id) {
    __shared__ int skip;
    if (threadIdx.x == 0 && threadIdx.y == 0) skip = dropped != 0 && *dropped >= id;
    __syncthreads();
    if (skip) return;
    switch (size) {
    case 1: pack_as<unsigned char>(src, sy, sx, sc, channels, width, height, (unsigned char*)dst,
                                   (unsigned char)opaque); break;
    case 2: pack_as<unsigned short>(src, sy, sx, sc, channels, width, height, (unsigned short*)dst,
                                    (unsigned short)opaque); break;
    default: pack_as<unsigned int>(src, sy, sx, sc, channels, width, height, (unsigned int*)dst, opaque);
    }
}
