#pragma once
__device__ float4 helper_colour(int x, int y) { return make_float4((x & 15) / 15.0f, (y & 15) / 15.0f, 0.5f, 1.0f); }
