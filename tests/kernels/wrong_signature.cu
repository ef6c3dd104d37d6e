// Compiles, but its entry point does not take a vk_frame.
extern "C" __global__ void render(float *out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = 1.0f;
}
