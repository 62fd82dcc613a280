// The activations that GEMM and depthwise kernels apply to their accumulators, for one vector ISA:
// included by kiln_simd_activate.h once per ISA after it defines
//   KILN_ACT_TARGET, KILN_ACT_NAME (the function's name), KILN_ACT_VEC, KILN_ACT_SET1(f),
//   KILN_ACT_ZERO(), KILN_ACT_MAX(a, b), KILN_ACT_MIN(a, b), KILN_ACT_MUL(a, b),
//   KILN_ACT_FMA(a, b, c) (a·b + c), KILN_ACT_LEAKY(v, alpha) (v < 0 ? alpha·v : v), KILN_ACT_EXP(v),
//   KILN_ACT_DIV(a, b), KILN_ACT_ADD(a, b), KILN_ACT_NEG(v), KILN_ACT_ABS(v),
//   KILN_ACT_COPYSIGN(m, s) (|m| with the sign of s).
// NaN is handled as in the scalar forms: max/min return their second operand when either is NaN,
// so relu and clip keep a NaN and the clamp of hard sigmoid and hard swish maps it to 1 as
// fminf/fmaxf do. Only the activations `kiln_unary_in_registers` accepts reach here.
KILN_ACT_TARGET static inline __attribute__((always_inline)) void KILN_ACT_NAME(KILN_ACT_VEC *v, const int count,
                                                                            const kiln_tile_args *t) {
    const KILN_ACT_VEC zero = KILN_ACT_ZERO(), one = KILN_ACT_SET1(1.0f);
    switch (t->activation) {
    case KILN_UNARY_RELU:
        for (int i = 0; i < count; i++) v[i] = KILN_ACT_MAX(zero, v[i]);
        return;
    case KILN_UNARY_HARD_SWISH: {
        const KILN_ACT_VEC sixth = KILN_ACT_SET1(1.0f / 6.0f), half = KILN_ACT_SET1(0.5f);
        for (int i = 0; i < count; i++)
            v[i] = KILN_ACT_MUL(v[i], KILN_ACT_MAX(KILN_ACT_MIN(KILN_ACT_FMA(v[i], sixth, half), one), zero));
        return;
    }
    case KILN_UNARY_HARD_SIGMOID: {
        const KILN_ACT_VEC a = KILN_ACT_SET1(t->alpha), b = KILN_ACT_SET1(t->beta);
        for (int i = 0; i < count; i++) v[i] = KILN_ACT_MAX(KILN_ACT_MIN(KILN_ACT_FMA(a, v[i], b), one), zero);
        return;
    }
    case KILN_UNARY_CLIP: {
        const KILN_ACT_VEC a = KILN_ACT_SET1(t->alpha), b = KILN_ACT_SET1(t->beta);
        for (int i = 0; i < count; i++) v[i] = KILN_ACT_MIN(b, KILN_ACT_MAX(a, v[i]));
        return;
    }
    case KILN_UNARY_LEAKY_RELU: {
        const KILN_ACT_VEC a = KILN_ACT_SET1(t->alpha);
        for (int i = 0; i < count; i++) v[i] = KILN_ACT_LEAKY(v[i], a);
        return;
    }
    // 1 / (1 + exp(-x)) and x / (1 + exp(-x)), as the scalar kiln_sigmoid.
    case KILN_UNARY_SIGMOID:
        for (int i = 0; i < count; i++) v[i] = KILN_ACT_DIV(one, KILN_ACT_ADD(one, KILN_ACT_EXP(KILN_ACT_NEG(v[i]))));
        return;
    case KILN_UNARY_SILU:
        for (int i = 0; i < count; i++) v[i] = KILN_ACT_DIV(v[i], KILN_ACT_ADD(one, KILN_ACT_EXP(KILN_ACT_NEG(v[i]))));
        return;
    // 0.5 · x · (1 + erf(x / √2)) with erf as the scalar kiln_erf (Abramowitz & Stegun 7.1.26).
    case KILN_UNARY_GELU: {
        const KILN_ACT_VEC p = KILN_ACT_SET1(0.3275911f), half = KILN_ACT_SET1(0.5f), root = KILN_ACT_SET1(0.70710678118654752f);
        for (int i = 0; i < count; i++) {
            const KILN_ACT_VEC z = KILN_ACT_MUL(v[i], root), az = KILN_ACT_ABS(z);
            const KILN_ACT_VEC t = KILN_ACT_DIV(one, KILN_ACT_FMA(p, az, one));
            KILN_ACT_VEC q = KILN_ACT_FMA(t, KILN_ACT_SET1(1.061405429f), KILN_ACT_SET1(-1.453152027f));
            q = KILN_ACT_FMA(q, t, KILN_ACT_SET1(1.421413741f));
            q = KILN_ACT_FMA(q, t, KILN_ACT_SET1(-0.284496736f));
            q = KILN_ACT_FMA(q, t, KILN_ACT_SET1(0.254829592f));
            q = KILN_ACT_MUL(q, t);
            const KILN_ACT_VEC y = KILN_ACT_FMA(KILN_ACT_NEG(q), KILN_ACT_EXP(KILN_ACT_NEG(KILN_ACT_MUL(az, az))), one);
            v[i] = KILN_ACT_MUL(KILN_ACT_MUL(half, v[i]), KILN_ACT_ADD(one, KILN_ACT_COPYSIGN(y, z)));
        }
        return;
    }
    // 0.5 · x · (1 + tanh(√(2/π) · (x + 0.044715 · x³))) with tanh as the scalar kiln_tanh.
    case KILN_UNARY_GELU_TANH: {
        const KILN_ACT_VEC c = KILN_ACT_SET1(0.7978845608028654f), k = KILN_ACT_SET1(0.044715f), half = KILN_ACT_SET1(0.5f);
        for (int i = 0; i < count; i++) {
            const KILN_ACT_VEC x = v[i], u = KILN_ACT_MUL(c, KILN_ACT_FMA(KILN_ACT_MUL(k, x), KILN_ACT_MUL(x, x), x));
            const KILN_ACT_VEC e = KILN_ACT_EXP(KILN_ACT_MUL(KILN_ACT_SET1(-2.0f), KILN_ACT_ABS(u)));
            const KILN_ACT_VEC th = KILN_ACT_DIV(KILN_ACT_ADD(one, KILN_ACT_NEG(e)), KILN_ACT_ADD(one, e));
            v[i] = KILN_ACT_MUL(KILN_ACT_MUL(half, x), KILN_ACT_ADD(one, KILN_ACT_COPYSIGN(th, u)));
        }
        return;
    }
    default:
        return;
    }
}
#undef KILN_ACT_TARGET
#undef KILN_ACT_NAME
#undef KILN_ACT_VEC
#undef KILN_ACT_SET1
#undef KILN_ACT_ZERO
#undef KILN_ACT_MAX
#undef KILN_ACT_MIN
#undef KILN_ACT_MUL
#undef KILN_ACT_FMA
#undef KILN_ACT_LEAKY
#undef KILN_ACT_EXP
#undef KILN_ACT_DIV
#undef KILN_ACT_ADD
#undef KILN_ACT_NEG
#undef KILN_ACT_ABS
#undef KILN_ACT_COPYSIGN
