// Never ends (an empty volatile asm is a side effect, so the loop is kept):
// the viewer must stay responsive to Esc and SIGINT and say what happened.
#include "vkcuda.h"

extern "C" __global__ void render(vk_frame f)
{
    for (;;) {
        asm volatile("" ::: "memory");
    }
}
