// The built-in gradient scene's work, as a user kernel: the same pixels as
// `--scene gradient` (shaders/scenes.cu), so `vkcuda bench` can compare a
// user kernel's cost with the built-in one's.
//   vkcuda --kernel shaders/examples/gradient.cu
#include "vkcuda.h"

extern "C" __global__ void render(vk_frame f)
{
    VK_PIXEL(f, x, y);
    unsigned int t = f.index;
    uchar4 p = make_uchar4(x + t * 4u, y + t * 2u, (((x >> 5) ^ (y >> 5)) & 1u) * 128u + t, 255);
    vk_put8(f.target, x, y, p);
}
