/* Umbrella header for the protobuf-c code generated from the specs directory. */
#ifndef CKILNSPECS_H
#define CKILNSPECS_H
#include "kiln_model.pb-c.h"
#include "kiln_compiled.pb-c.h"
#include "onnx_subset.pb-c.h"
#endif
