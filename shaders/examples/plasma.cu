// Plasma: sums of sines over position and time, the classic demo effect.
//   vkcuda --kernel shaders/examples/plasma.cu [--param SPEED]
#include "vkcuda.h"

extern "C" __global__ void render(vk_frame f)
{
    VK_PIXEL(f, x, y);
    float speed = f.params[0] > 0.0f ? f.params[0] : 1.0f;
    float t = f.time * speed;
    float u = (x - 0.5f * f.width) / f.height, v = (y - 0.5f * f.height) / f.height;
    float p = sinf(u * 10.0f + t) + sinf((v * 10.0f + t) * 0.5f) + sinf((u * 10.0f + v * 10.0f + t) * 0.5f)
              + sinf(sqrtf(100.0f * (u * u + v * v) + 1.0f) + t);
    float r = 0.5f + 0.5f * sinf(3.14159f * p);
    float g = 0.5f + 0.5f * sinf(3.14159f * p + 2.094f);
    float b = 0.5f + 0.5f * sinf(3.14159f * p + 4.188f);
    vk_put(f, x, y, make_float4(r, g, b, 1.0f));
}
