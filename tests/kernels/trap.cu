// Faults on its first frame: the run must end with a clear message.
#include "vkcuda.h"

extern "C" __global__ void render(vk_frame f)
{
    __trap();
}
