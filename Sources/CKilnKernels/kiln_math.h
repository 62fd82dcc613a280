// Vectorizable float32 approximations shared by the kernel files (inlined into each ISA
// variant). Internal to CKilnKernels.
#ifndef KILN_MATH_H
#define KILN_MATH_H

#include <stdint.h>

// Vectorizable approximations (inlined into each ISA variant): exp with range reduction
// and a degree-6 polynomial (relative error ~2e-7), erf after Abramowitz & Stegun 7.1.26
// (absolute error <= 1.5e-7), tanh and sigmoid from exp.
static inline __attribute__((always_inline)) float kiln_exp(float x) {
    // At most 88.3: n stays ≤ 127 and the result finite (as the vector form's; see kiln_simd_activate.h).
    x = x < -87.3f ? -87.3f : (x > 88.3f ? 88.3f : x);
    const float n = __builtin_floorf(x * 1.44269504088896341f + 0.5f);
    const float r = x - n * 0.693359375f + n * 2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;
    // NaN passes the clamp; it must not reach the int conversion (undefined in C), and the
    // polynomial already carries it to the result.
    const int32_t bits = ((int32_t)(n == n ? n : 0.0f) + 127) << 23;
    float scale;
    __builtin_memcpy(&scale, &bits, sizeof scale);
    return p * scale;
}

static inline __attribute__((always_inline)) float kiln_erf(float x) {
    const float ax = __builtin_fabsf(x);
    const float t = 1.0f / (1.0f + 0.3275911f * ax);
    const float poly = t * (0.254829592f + t * (-0.284496736f + t * (1.421413741f + t * (-1.453152027f + t * 1.061405429f))));
    const float y = 1.0f - poly * kiln_exp(-ax * ax);
    return x < 0 ? -y : y;
}

static inline __attribute__((always_inline)) float kiln_tanh(float x) {
    const float e = kiln_exp(-2.0f * __builtin_fabsf(x));
    const float y = (1.0f - e) / (1.0f + e);
    return x < 0 ? -y : y;
}

static inline __attribute__((always_inline)) float kiln_sigmoid(float x) { return 1.0f / (1.0f + kiln_exp(-x)); }

static inline __attribute__((always_inline)) float kiln_gelu(float x) {
    return 0.5f * x * (1.0f + kiln_erf(x * 0.70710678118654752f));
}

#endif
