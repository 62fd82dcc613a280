// The activations that GEMM and depthwise kernels apply to their accumulators, for one vector ISA:
// included by kiln_simd_activate.h once per ISA after it defines
//   KILN_ACT_TARGET, KILN_ACT_NAME (the function's name), KILN_ACT_VEC, KILN_ACT_SET1(f),
//   KILN_ACT_ZERO(), KILN_ACT_MAX(a, b), KILN_ACT_MIN(a, b), KILN_ACT_MUL(a, b),
//   KILN_ACT_FMA(a, b, c) (a·b + c), KILN_ACT_LEAKY(v, alpha) (v < 0 ? alpha·v : v), KILN_ACT_EXP(v),
//   KILN_ACT_DIV(a, b), KILN_ACT_ADD(a, b), KILN_ACT_NEG(v).
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
