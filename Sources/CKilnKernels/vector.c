// The vector families' per-ISA configs, built once from kiln_vector.inc.
#include <pthread.h>

#include "kiln_kernels.h"

// Each family's entry points for one ISA's name suffix.
#define KILN_VECTOR_SET_UNARY(c, isa) (c)->unary = kiln_f32_unary__##isa;
#define KILN_VECTOR_SET_BINARY(c, isa) (c)->binary_nd = kiln_binary_nd__##isa;
#define KILN_VECTOR_SET_NORMALIZATION(c, isa) \
    (c)->reduce = kiln_f32_reduce__##isa; \
    (c)->softmax = kiln_f32_softmax_nd__##isa; \
    (c)->layer_norm = kiln_f32_layer_norm__##isa; \
    (c)->attention = kiln_f32_attention__##isa;
#define KILN_VECTOR_SET_POOL2D(c, isa) (c)->pool2d = kiln_f32_pool2d__##isa;
#define KILN_VECTOR_SET_POOL2D_NHWC(c, isa) (c)->pool2d_nhwc = kiln_f32_pool2d_nhwc__##isa;
#define KILN_VECTOR_SET_DWCONV2D(c, isa) (c)->dwconv2d = kiln_f32_dwconv2d__##isa;
#define KILN_VECTOR_SET_DWCONV2D_NHWC(c, isa) (c)->dwconv2d_nhwc = kiln_f32_dwconv2d_nhwc__##isa;
#define KILN_VECTOR_SET_RECURRENT(c, isa) \
    (c)->lstm_gates = kiln_f32_lstm_gates__##isa; \
    (c)->gru_reset = kiln_f32_gru_reset__##isa; \
    (c)->gru_gates = kiln_f32_gru_gates__##isa;
#define KILN_VECTOR_SET_WINOGRAD(c, isa) (c)->winograd = kiln_f32_winograd__##isa;
#define KILN_VECTOR_SET_INTEGER(c, isa) (c)->u8s8_gemm = kiln_u8s8_gemm__##isa;

// A row's statements where its code is built; elsewhere nothing.
#define KILN_VECTOR_IF_ANY(...) __VA_ARGS__
#if defined(__x86_64__)
#define KILN_VECTOR_IF_X86(...) __VA_ARGS__
#else
#define KILN_VECTOR_IF_X86(...)
#endif

// Only the scalar rows in the first pass (every ISA's starting point).
#define KILN_VECTOR_SCALAR_ONLY_scalar(...) __VA_ARGS__
#define KILN_VECTOR_SCALAR_ONLY_avx2(...)
#define KILN_VECTOR_SCALAR_ONLY_avx512(...)
#define KILN_VECTOR_SCALAR_ONLY_neon(...)

static kiln_vector_config kiln_vector_configs[KILN_ISA_COUNT];
static uint32_t kiln_vector_built_isas[KILN_VECTOR_FAMILY_COUNT];
static pthread_once_t kiln_vector_once = PTHREAD_ONCE_INIT;

static void kiln_vector_build(void) {
    // Every ISA starts from the scalar rows, then takes its own.
    for (int i = 0; i < KILN_ISA_COUNT; i++) {
        kiln_vector_config *c = &kiln_vector_configs[i];
#define KILN_VECTOR(FAMILY, ISA, isa, BUILT) KILN_VECTOR_SCALAR_ONLY_##isa(KILN_VECTOR_SET_##FAMILY(c, isa))
#include "kiln_vector.inc"
#undef KILN_VECTOR
    }
#define KILN_VECTOR(FAMILY, ISA, isa, BUILT) \
    KILN_VECTOR_IF_##BUILT(KILN_VECTOR_SET_##FAMILY(&kiln_vector_configs[KILN_ISA_##ISA], isa) \
                           kiln_vector_built_isas[KILN_VECTOR_##FAMILY] |= 1u << KILN_ISA_##ISA;)
#include "kiln_vector.inc"
#undef KILN_VECTOR
}

const kiln_vector_config *kiln_vector_config_of(int isa) {
    pthread_once(&kiln_vector_once, kiln_vector_build);
    return &kiln_vector_configs[isa >= 0 && isa < KILN_ISA_COUNT ? isa : KILN_ISA_SCALAR];
}

uint32_t kiln_vector_isas(int family) {
    uint32_t isas = 0;
#define KILN_VECTOR(FAMILY, ISA, isa, BUILT) if (family == KILN_VECTOR_##FAMILY) isas |= 1u << KILN_ISA_##ISA;
#include "kiln_vector.inc"
#undef KILN_VECTOR
    return isas;
}

int kiln_vector_built(int family, int isa) {
    pthread_once(&kiln_vector_once, kiln_vector_build);
    if (family < 0 || family >= KILN_VECTOR_FAMILY_COUNT || isa < 0 || isa >= KILN_ISA_COUNT) return 0;
    return (kiln_vector_built_isas[family] >> isa) & 1u;
}
