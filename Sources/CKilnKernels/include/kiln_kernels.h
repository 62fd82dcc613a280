// Kiln compute kernels: CPU feature detection, float32 GEMM with packed (and possibly
// compressed) weights, elementwise maps, normalization, pooling, convolution.
//
// Kernel names follow `<dtype>_<op>_<tile>__<isa>`. Every kernel has a `__scalar`
// reference; ISA variants are compiled with `__attribute__((target(...)))` and only
// called when `kiln_cpu_features()` reports the ISA (including OS-enabled register state).
#ifndef KILN_KERNELS_H
#define KILN_KERNELS_H

#include <stddef.h>
#include <stdint.h>

// One header per family.
#include "kiln_cpu.h"
#include "kiln_gemm.h"
#include "kiln_elementwise.h"
#include "kiln_nhwc.h"
#include "kiln_vector.h"

#endif
