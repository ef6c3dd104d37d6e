// A kernel with a compile error on line 6, for the check-kernel tests.
#include "vkcuda.h"

extern "C" __global__ void render(vk_frame f)
{
    VK_PIXEL(f, x, y)
    vk_put(f, x, y, make_float4(1, 0, 0, 1)) // missing semicolon above and here
}
