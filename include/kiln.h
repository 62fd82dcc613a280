/*
 * kiln.h — the C API of the Kiln runtime (libkiln.so). See specs/c-api.md.
 *
 * Load a portable package (Name.kiln), a compiled artifact (Name.<arch>.compiled), an archive
 * (Name.kilnarchive) or a directory of them; read its functions' signatures; run a function on
 * tensors. Handles are opaque; every handle a function creates is released by its _free function.
 * Functions that can fail return a kiln_status; on failure the message is available from
 * kiln_last_error() on the calling thread and, for calls on a model, kiln_model_copy_error().
 * A model may be run from many threads at once.
 */
#ifndef KILN_H
#define KILN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The ABI this header describes. kiln_abi_version() returns the library's; they must be equal. */
#define KILN_ABI_VERSION 1

typedef enum kiln_status {
    KILN_OK = 0,
    KILN_ERROR_INVALID_ARGUMENT = 1, /* a NULL handle, unknown name, wrong dtype, shape or size */
    KILN_ERROR_NOT_FOUND = 2,        /* no such file, function, input or output */
    KILN_ERROR_MALFORMED = 3,        /* a damaged or malformed package, artifact, archive or key file */
    KILN_ERROR_KEY = 4,              /* an encrypted artifact without its key, or with another key */
    KILN_ERROR_UNSUPPORTED = 5,      /* nothing in the path runs on this host */
    KILN_ERROR_RUN = 6,              /* the run failed (for example inconsistent dynamic dimensions) */
    KILN_ERROR_INTERNAL = 7
} kiln_status;

typedef enum kiln_dtype {
    KILN_DTYPE_FLOAT32 = 1,
    KILN_DTYPE_FLOAT16 = 2,
    KILN_DTYPE_BFLOAT16 = 3,
    KILN_DTYPE_FLOAT64 = 4,
    KILN_DTYPE_INT64 = 5,
    KILN_DTYPE_INT32 = 6,
    KILN_DTYPE_INT16 = 7,
    KILN_DTYPE_INT8 = 8,
    KILN_DTYPE_UINT8 = 9,
    KILN_DTYPE_BOOL = 10, /* one byte per element, 0 or 1 */
    KILN_DTYPE_UINT16 = 11,
    KILN_DTYPE_UINT32 = 12,
    KILN_DTYPE_UINT64 = 13
} kiln_dtype;

typedef enum kiln_io { KILN_INPUTS = 0, KILN_OUTPUTS = 1 } kiln_io;

typedef struct kiln_options kiln_options;
typedef struct kiln_model kiln_model;
typedef struct kiln_tensor kiln_tensor;
typedef struct kiln_outputs kiln_outputs;

/* Library information. Strings are static. */
uint32_t kiln_abi_version(void);
const char *kiln_version(void);
/* The host's best architecture (for example "x86_64_v3"), or NULL on a CPU Kiln has no kernels for. */
const char *kiln_host_architecture(void);
/* The message of the last failed call on this thread ("" when none); valid until the next failing call. */
const char *kiln_last_error(void);
/* Bytes per element of a dtype (0 for an unknown value). */
size_t kiln_dtype_size(kiln_dtype dtype);

/* Load options: the loader's (specs/loading.md). NULL options mean the defaults. */
kiln_options *kiln_options_create(void);
void kiln_options_free(kiln_options *options);
kiln_status kiln_options_set_model(kiln_options *options, const char *name);      /* one model of a directory */
kiln_status kiln_options_set_threads(kiln_options *options, int threads);         /* per run; default: all cores */
kiln_status kiln_options_set_key_file(kiln_options *options, const char *path);   /* for encrypted artifacts */
kiln_status kiln_options_set_cache_dir(kiln_options *options, const char *path);  /* specialization cache */
kiln_status kiln_options_set_max_arch(kiln_options *options, const char *arch);   /* never choose above it */
kiln_status kiln_options_set_verify(kiln_options *options, int verify);           /* default 1 */
/* 1: input sizes change on most runs (a growing cache): plans derived for new sizes are not
 * cached; default 0. Either way a new size is planned from the previous one. */
kiln_status kiln_options_set_frequent_reshapes(kiln_options *options, int frequent);

/* Models. */
kiln_status kiln_model_load(const char *path, const kiln_options *options, kiln_model **model);
void kiln_model_free(kiln_model *model);
/* Copies the message of the last failed call on this model into buffer (NUL-terminated, truncated
 * to capacity) and returns its full length; 0 when none. */
size_t kiln_model_copy_error(const kiln_model *model, char *buffer, size_t capacity);
size_t kiln_model_function_count(const kiln_model *model);
/* Strings returned for a model are owned by it and valid until kiln_model_free. */
const char *kiln_model_function_name(const kiln_model *model, size_t index);
/* The arch of the compiled artifact running it, or NULL when the reference interpreter runs it. */
const char *kiln_model_architecture(const kiln_model *model);
/* How the loader chose what runs: candidates, verdicts, verification (several lines). */
const char *kiln_model_explanation(const kiln_model *model);

/* Signatures. function NULL means the first function. A dimension's size is -1 when it is bound
 * only at run time; its symbol (for example "batch") is then returned, "" for an anonymous one. */
kiln_status kiln_model_io_count(kiln_model *model, const char *function, kiln_io io, size_t *count);
kiln_status kiln_model_io_describe(kiln_model *model, const char *function, kiln_io io, size_t index,
                                   const char **name, kiln_dtype *dtype, size_t *rank);
kiln_status kiln_model_io_dimension(kiln_model *model, const char *function, kiln_io io, size_t index,
                                    size_t dimension, int64_t *size, const char **symbol);

/* Tensors: dense, row-major. kiln_tensor_create copies data (bytes must equal the element count
 * times kiln_dtype_size); kiln_tensor_wrap borrows it — the caller keeps it alive and unchanged
 * until the tensor is freed. */
kiln_status kiln_tensor_create(kiln_dtype dtype, size_t rank, const int64_t *shape, const void *data, size_t bytes,
                               kiln_tensor **tensor);
kiln_status kiln_tensor_wrap(kiln_dtype dtype, size_t rank, const int64_t *shape, const void *data, size_t bytes,
                             kiln_tensor **tensor);
void kiln_tensor_free(kiln_tensor *tensor);
kiln_dtype kiln_tensor_dtype(const kiln_tensor *tensor);
size_t kiln_tensor_rank(const kiln_tensor *tensor);
const int64_t *kiln_tensor_shape(const kiln_tensor *tensor);
const void *kiln_tensor_data(const kiln_tensor *tensor);
size_t kiln_tensor_bytes(const kiln_tensor *tensor);

/* Runs a function (NULL: the first) on named inputs; every input must be given. Safe from many
 * threads at once. On success *outputs holds the results in the function's output order. */
kiln_status kiln_model_run(kiln_model *model, const char *function, size_t input_count, const char *const *names,
                           const kiln_tensor *const *inputs, kiln_outputs **outputs);
size_t kiln_outputs_count(const kiln_outputs *outputs);
const char *kiln_outputs_name(const kiln_outputs *outputs, size_t index);
/* Owned by outputs: valid until kiln_outputs_free. */
const kiln_tensor *kiln_outputs_tensor(const kiln_outputs *outputs, size_t index);
void kiln_outputs_free(kiln_outputs *outputs);

/* kiln_model_run with every input given by parallel arrays, in one call: names, dtypes, ranks,
 * shapes (all inputs' dimensions one after another, ranks[0] + ranks[1] + ... entries), data and
 * byte counts. The data is borrowed for the call only. Errors name the input. */
kiln_status kiln_model_run_arrays(kiln_model *model, const char *function, size_t input_count, const char *const *names,
                                  const kiln_dtype *dtypes, const size_t *ranks, const int64_t *shapes,
                                  const void *const *data, const size_t *bytes, kiln_outputs **outputs);
/* Every output's dtype, rank, shape (one after another into shapes, which holds capacity entries;
 * 32 per output always suffices), data (owned by outputs) and byte count, in output order. */
kiln_status kiln_outputs_describe(const kiln_outputs *outputs, kiln_dtype *dtypes, size_t *ranks, int64_t *shapes,
                                  size_t capacity, const void **data, size_t *bytes);
/* Moves every output's tensor into tensors (capacity entries, one per output, in output order):
 * each is then the caller's, freed with kiln_tensor_free, so that keeping one output (a row of
 * logits) does not keep the others (a decoder's cache) alive. The outputs keep their names;
 * kiln_outputs_tensor gives NULL and kiln_outputs_describe fails afterwards. */
kiln_status kiln_outputs_take(kiln_outputs *outputs, kiln_tensor **tensors, size_t capacity);

/* State kept between runs (a decoder's key/value cache): a state belongs to one function of a model
 * (NULL: the first) and holds the values of its state inputs. rule NULL takes the pairs the function
 * declares (kiln convert --state); else INPUT=OUTPUT rules, one '*' on both sides standing for the
 * same text ("past_key_values.*=present.*"), separated by commas. One run of a state at a time. */
typedef struct kiln_state kiln_state;
kiln_status kiln_state_create(kiln_model *model, const char *function, const char *rule, kiln_state **state);
void kiln_state_free(kiln_state *state);
/* Empties the state: the next run starts from zero-length values. */
kiln_status kiln_state_reset(kiln_state *state);
/* Bytes of state moved (a buffer grown) or written whole (an unplanned run), and bytes appended in
 * place by planned runs, since the state was made. */
uint64_t kiln_state_copied_bytes(const kiln_state *state);
uint64_t kiln_state_appended_bytes(const kiln_state *state);
/* kiln_model_run_arrays of the state's function with the state supplying its state inputs (not
 * given here); each state's output becomes its next value and is not among the outputs. */
kiln_status kiln_model_run_state(kiln_state *state, size_t input_count, const char *const *names, const kiln_dtype *dtypes,
                                 const size_t *ranks, const int64_t *shapes, const void *const *data, const size_t *bytes,
                                 kiln_outputs **outputs);

#ifdef __cplusplus
}
#endif

#endif /* KILN_H */
