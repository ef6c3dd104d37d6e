// A ray-marched signed-distance scene: a sphere and a torus above a checker
// floor, a sun light with soft shadows. The camera circles with time; in the
// viewer (once it passes the pointer: issue 23) the mouse's x turns it.
//   vkcuda --kernel shaders/examples/sdf.cu
#include "vkcuda.h"

struct v3 { float x, y, z; };
__device__ v3 operator+(v3 a, v3 b) { return {a.x + b.x, a.y + b.y, a.z + b.z}; }
__device__ v3 operator-(v3 a, v3 b) { return {a.x - b.x, a.y - b.y, a.z - b.z}; }
__device__ v3 operator*(v3 a, float s) { return {a.x * s, a.y * s, a.z * s}; }
__device__ float dot(v3 a, v3 b) { return a.x * b.x + a.y * b.y + a.z * b.z; }
__device__ float len(v3 a) { return sqrtf(dot(a, a)); }
__device__ v3 norm(v3 a) { return a * (1.0f / len(a)); }

__device__ float scene(v3 p)
{
    float sphere = len(p - v3{0.0f, 1.0f, 0.0f}) - 1.0f;
    v3 q = p - v3{2.2f, 0.6f, 0.5f};
    float ring = sqrtf(q.x * q.x + q.z * q.z) - 0.8f;
    float torus = sqrtf(ring * ring + q.y * q.y) - 0.25f;
    float floor = p.y;
    return fminf(fminf(sphere, torus), floor);
}

__device__ v3 normal(v3 p)
{
    const float e = 1e-3f;
    return norm(v3{scene(p + v3{e, 0, 0}) - scene(p - v3{e, 0, 0}), scene(p + v3{0, e, 0}) - scene(p - v3{0, e, 0}),
                   scene(p + v3{0, 0, e}) - scene(p - v3{0, 0, e})});
}

__device__ float shadow(v3 p, v3 l)
{
    float k = 1.0f, t = 0.02f;
    for (int i = 0; i < 48 && t < 12.0f; ++i) {
        float h = scene(p + l * t);
        if (h < 1e-4f) return 0.0f;
        k = fminf(k, 8.0f * h / t);
        t += h;
    }
    return k;
}

extern "C" __global__ void render(vk_frame f)
{
    VK_PIXEL(f, x, y);
    float turn = f.mouse_x >= 0.0f ? 6.2832f * f.mouse_x / f.width : 0.3f * f.time;
    v3 eye = {6.0f * sinf(turn), 2.5f, 6.0f * cosf(turn)};
    v3 fwd = norm(v3{0.8f, 0.8f, 0.0f} - eye);
    v3 right = norm(v3{-fwd.z, 0.0f, fwd.x}); // fwd x (0, 1, 0)
    v3 up = {right.y * fwd.z - right.z * fwd.y, right.z * fwd.x - right.x * fwd.z, right.x * fwd.y - right.y * fwd.x};
    float u = (2.0f * x - f.width) / f.height, v = (f.height - 2.0f * y) / f.height;
    v3 dir = norm(fwd * 1.6f + right * u + up * v);
    float t = 0.0f;
    bool hit = false;
    for (int i = 0; i < 128 && t < 40.0f; ++i) {
        float d = scene(eye + dir * t);
        if (d < 1e-3f * t) { hit = true; break; }
        t += d;
    }
    float3 c = make_float3(0.55f + 0.25f * v, 0.7f + 0.2f * v, 0.95f); // sky
    if (hit) {
        v3 p = eye + dir * t, n = normal(p), l = norm(v3{0.6f, 0.8f, 0.3f});
        float diffuse = fmaxf(dot(n, l), 0.0f) * shadow(p + n * 2e-3f, l);
        float checker = (p.y < 1e-2f && ((int)floorf(p.x) + (int)floorf(p.z)) & 1) ? 0.35f : 0.8f;
        float light = 0.15f + 0.85f * diffuse;
        c = make_float3(checker * light, checker * light * 0.95f, checker * light * 0.9f);
        float fog = expf(-0.02f * t * t * 0.1f);
        c = make_float3(c.x * fog + 0.6f * (1 - fog), c.y * fog + 0.75f * (1 - fog), c.z * fog + 0.95f * (1 - fog));
    }
    vk_put(f, x, y, make_float4(c.x, c.y, c.z, 1.0f));
}
