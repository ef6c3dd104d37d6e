// Includes a file next to it, as nvcc would find it.
#include "vkcuda.h"
#include "includes_helper.h"

extern "C" __global__ void render(vk_frame f)
{
    VK_PIXEL(f, x, y);
    vk_put(f, x, y, helper_colour(x, y));
}
