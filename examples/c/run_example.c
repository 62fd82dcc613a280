/* Loads a Kiln model through the C API, prints its signature, runs it on an input read from a
 * raw float32 file or on ramp values, and prints the outputs.
 *
 *   cc run_example.c -I include -L .build/release -lKilnC -Wl,-rpath,.build/release -o run_example
 *   ./run_example examples/TinyClassifier.kiln [features.f32]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kiln.h"

static int fail(const char *what) {
    fprintf(stderr, "error: %s: %s\n", what, kiln_last_error());
    return 1;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s MODEL [INPUT.f32]\n", argv[0]);
        return 64;
    }
    if (kiln_abi_version() != KILN_ABI_VERSION) {
        fprintf(stderr, "error: libKilnC has ABI %u, this program was built for %d\n", kiln_abi_version(), KILN_ABI_VERSION);
        return 1;
    }
    printf("kiln %s, host %s\n", kiln_version(), kiln_host_architecture() ? kiln_host_architecture() : "unsupported");

    kiln_options *options = kiln_options_create();
    kiln_options_set_threads(options, 2);
    kiln_model *model = NULL;
    kiln_status status = kiln_model_load(argv[1], options, &model);
    kiln_options_free(options);
    if (status != KILN_OK) return fail(argv[1]);
    printf("function %s, %s\n", kiln_model_function_name(model, 0),
           kiln_model_architecture(model) ? kiln_model_architecture(model) : "reference interpreter");

    /* The first input: its dtype and shape, dynamic dimensions bound to 1. */
    size_t inputs = 0, rank = 0;
    const char *name = NULL;
    kiln_dtype dtype;
    if (kiln_model_io_count(model, NULL, KILN_INPUTS, &inputs) != KILN_OK || inputs != 1) {
        fprintf(stderr, "error: this example runs models with one input\n");
        kiln_model_free(model);
        return 1;
    }
    if (kiln_model_io_describe(model, NULL, KILN_INPUTS, 0, &name, &dtype, &rank) != KILN_OK) return fail("describe");
    if (dtype != KILN_DTYPE_FLOAT32) {
        fprintf(stderr, "error: this example feeds float32 inputs\n");
        kiln_model_free(model);
        return 1;
    }
    int64_t shape[32];
    size_t count = 1;
    printf("input %s float32[", name);
    for (size_t d = 0; d < rank; d++) {
        const char *symbol = NULL;
        kiln_model_io_dimension(model, NULL, KILN_INPUTS, 0, d, &shape[d], &symbol);
        printf("%s%s", d ? ", " : "", shape[d] < 0 ? symbol : "");
        if (shape[d] < 0) shape[d] = 1; else printf("%lld", (long long)shape[d]);
        count *= (size_t)shape[d];
    }
    printf("]\n");

    float *values = malloc(count * sizeof(float));
    FILE *f = argc > 2 ? fopen(argv[2], "rb") : NULL;
    if (argc > 2 && (!f || fread(values, sizeof(float), count, f) != count)) {
        fprintf(stderr, "error: %s: cannot read %zu float32 values\n", argv[2], count);
        free(values);
        kiln_model_free(model);
        return 1;
    }
    if (f) fclose(f);
    if (argc <= 2) for (size_t i = 0; i < count; i++) values[i] = (float)i / (float)count;

    kiln_tensor *input = NULL;
    if (kiln_tensor_wrap(KILN_DTYPE_FLOAT32, rank, shape, values, count * sizeof(float), &input) != KILN_OK) return fail("tensor");
    kiln_outputs *outputs = NULL;
    const kiln_tensor *const tensors[1] = {input};
    const char *const names[1] = {name};
    if (kiln_model_run(model, NULL, 1, names, tensors, &outputs) != KILN_OK) return fail("run");
    for (size_t i = 0; i < kiln_outputs_count(outputs); i++) {
        const kiln_tensor *t = kiln_outputs_tensor(outputs, i);
        printf("output %s:", kiln_outputs_name(outputs, i));
        if (kiln_tensor_dtype(t) == KILN_DTYPE_FLOAT32) {
            const float *v = kiln_tensor_data(t);
            for (size_t k = 0; k < kiln_tensor_bytes(t) / sizeof(float); k++) printf(" %.9g", v[k]);
        }
        printf("\n");
    }

    /* The same run with the input given as arrays and the outputs described in one call (what a
     * binding with many inputs uses): the same bytes. */
    const kiln_dtype dtypes[1] = {KILN_DTYPE_FLOAT32};
    const size_t ranks[1] = {rank}, sizes[1] = {count * sizeof(float)};
    const void *const data[1] = {values};
    kiln_outputs *again = NULL;
    if (kiln_model_run_arrays(model, NULL, 1, names, dtypes, ranks, shape, data, sizes, &again) != KILN_OK) return fail("run arrays");
    size_t n = kiln_outputs_count(again), same = n == kiln_outputs_count(outputs);
    kiln_dtype *out_dtypes = malloc((n + 1) * sizeof *out_dtypes);
    size_t *out_ranks = malloc((n + 1) * sizeof *out_ranks), *out_bytes = malloc((n + 1) * sizeof *out_bytes);
    int64_t *out_shapes = malloc((32 * n + 1) * sizeof *out_shapes);
    const void **out_data = malloc((n + 1) * sizeof *out_data);
    if (kiln_outputs_describe(again, out_dtypes, out_ranks, out_shapes, 32 * n, out_data, out_bytes) != KILN_OK) return fail("describe");
    for (size_t i = 0, at = 0; same && i < n; at += out_ranks[i], i++) {
        const kiln_tensor *t = kiln_outputs_tensor(outputs, i);
        same = out_dtypes[i] == kiln_tensor_dtype(t) && out_ranks[i] == kiln_tensor_rank(t) && out_bytes[i] == kiln_tensor_bytes(t)
            && memcmp(out_shapes + at, kiln_tensor_shape(t), out_ranks[i] * sizeof(int64_t)) == 0
            && memcmp(out_data[i], kiln_tensor_data(t), out_bytes[i]) == 0;
    }
    printf("arrays run: %s\n", same ? "same outputs" : "DIFFERENT outputs");
    /* Each output taken as a tensor of its own: it outlives the outputs handle, and is freed alone. */
    kiln_tensor **taken = malloc((n + 1) * sizeof *taken);
    if (kiln_outputs_take(again, taken, n) != KILN_OK) return fail("take");
    const int gone = kiln_outputs_tensor(again, 0) == NULL && kiln_outputs_count(again) == n;
    kiln_outputs_free(again);
    for (size_t i = 0; same && i < n; i++) same = kiln_tensor_data(taken[i]) == out_data[i] && kiln_tensor_bytes(taken[i]) == out_bytes[i];
    for (size_t i = 0; i < n; i++) kiln_tensor_free(taken[i]);
    printf("taken outputs: %s\n", same && gone ? "each its own tensor" : "WRONG");
    free(taken), free(out_dtypes), free(out_ranks), free(out_bytes), free(out_shapes), free(out_data);
    if (!same || !gone) return 1;

    /* A wrong input name is an error with a message, not a crash. */
    const char *const wrong[1] = {"nope"};
    kiln_outputs *none = NULL;
    if (kiln_model_run(model, NULL, 1, wrong, tensors, &none) == KILN_ERROR_INVALID_ARGUMENT) {
        char message[256];
        kiln_model_copy_error(model, message, sizeof message);
        printf("wrong name: %s\n", message);
    }
    kiln_outputs_free(outputs);
    kiln_tensor_free(input);
    free(values);
    kiln_model_free(model);
    return 0;
}
