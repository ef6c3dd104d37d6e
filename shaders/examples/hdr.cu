// HDR: glowing rings whose centres reach 8x the white level. Run it with a
// float format so the values above 1 survive (the viewer's E/D keys change
// the exposure; an OpenEXR dump keeps them):
//   vkcuda --kernel shaders/examples/hdr.cu --format rgba16f
#include "vkcuda.h"

extern "C" __global__ void render(vk_frame f)
{
    VK_PIXEL(f, x, y);
    float3 sum = make_float3(0.02f, 0.02f, 0.03f);
    for (int i = 0; i < 3; ++i) {
        float a = f.time * (0.5f + 0.2f * i) + 2.094f * i;
        float cx = 0.5f * f.width + 0.25f * f.height * cosf(a), cy = 0.5f * f.height + 0.25f * f.height * sinf(a);
        float d = sqrtf((x - cx) * (x - cx) + (y - cy) * (y - cy)) / f.height;
        float ring = 0.004f / (fabsf(d - 0.08f) + 0.0005f); // 8 at the ring, falling off as 1/distance
        float3 tint = i == 0 ? make_float3(1.0f, 0.4f, 0.2f) : i == 1 ? make_float3(0.3f, 1.0f, 0.4f) : make_float3(0.3f, 0.5f, 1.0f);
        sum = make_float3(sum.x + ring * tint.x, sum.y + ring * tint.y, sum.z + ring * tint.z);
    }
    vk_put(f, x, y, make_float4(sum.x, sum.y, sum.z, 1.0f));
}
