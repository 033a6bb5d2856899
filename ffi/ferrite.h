/*
 * ferrite.h: the one public C ABI of ferrite, a C11 engine core for LLM inference.
 *
 * Shape: what cbindgen emits (plain C, fixed-width fields, opaque handles, explicit append-only enum
 * values, no macros beyond the include guard and the C++ guard), so the Rust declarations in
 * ffi/ferrite-sys are generated mechanically and checked for drift.
 *
 * Conventions that hold for every function below unless its comment says otherwise:
 * - Fallible calls return fer_status; FER_STATUS_OK is 0. Out-parameters are written only through
 *   trailing pointers; on failure every non-NULL out-parameter is zeroed (or set to NULL; a token
 *   to -1 and an id for which 0 is valid to UINT32_MAX / UINT64_MAX, where the function says so),
 *   a NULL handle or another NULL argument included: they are cleared before any check that can
 *   fail. Exceptions are named: a length out-parameter of
 *   BUFFER_TOO_SMALL carries the size needed. Claims: C-ABI-007.
 * - Every pointer argument is checked: NULL gives FER_STATUS_NULL_ARG, never a crash.
 * - Nothing aborts, exits or prints. A failing call also leaves a detailed message for the calling
 *   thread, read with fer_last_error_message(); a successful call clears it.
 * - Loaders that take a path read regular files only: anything else (a directory, a FIFO, a
 *   device such as /dev/zero, a socket) and a path that does not exist are INVALID_ARG naming the
 *   path, answered at once (the type is checked before the file is opened, and the open does not
 *   wait: a FIFO without a writer cannot block the call), and a loader reads no more than the
 *   file's size. Claims: C-ABI-008.
 * - _free(NULL) is a no-op.
 */

#ifndef FERRITE_H
#define FERRITE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/**
 * Version of this ABI: bumped when an existing declaration changes shape or meaning. Additions
 * (new functions, types, enum values) keep it, as they break no caller.
 */
enum fer_abi {
  FER_ABI_VERSION = 1,
};

/**
 * Status codes, grouped by range: 0 success; 1-99 caller errors; 100-199 resources; 200-299
 * device; 300-399 data. Values are append-only; a retired value stays here as a comment.
 */
enum fer_status_code {
  FER_STATUS_OK = 0,
  /** A required pointer argument was NULL. */
  FER_STATUS_NULL_ARG = 1,
  /** An argument is out of range or inconsistent (bad dtype, rank, stride, index, alignment). */
  FER_STATUS_INVALID_ARG = 2,
  /** A caller buffer is too small; the needed size is reported through the length out-parameter. */
  FER_STATUS_BUFFER_TOO_SMALL = 3,
  /** The object is in use (another thread is running on it, or it has live children). */
  FER_STATUS_BUSY = 4,
  /** The call is not allowed in the object's current state. */
  FER_STATUS_MISUSE = 5,
  /** Shapes of the tensors do not agree with each other or with the operation. */
  FER_STATUS_SHAPE_MISMATCH = 6,
  /** A size computation (element count, byte extent) overflows 63 bits. */
  FER_STATUS_SIZE_OVERFLOW = 7,
  /** The operation was cancelled (fer_engine_seq_cancel) before it finished; nothing changed. */
  FER_STATUS_CANCELLED = 8,
  /** Memory could not be allocated. */
  FER_STATUS_OUT_OF_MEMORY = 100,
  /** The governor refused the request: it does not fit the budget. */
  FER_STATUS_BUDGET_EXCEEDED = 101,
  /** The library was built with the feature, but no device answers (no GPU or no driver). */
  FER_STATUS_NO_DEVICE = 200,
  /** The device reported an error. */
  FER_STATUS_DEVICE_ERROR = 201,
  /** The feature, dtype or instruction set is not available in this build or on this CPU. */
  FER_STATUS_UNSUPPORTED = 202,
  /** The input is not in the expected format. */
  FER_STATUS_BAD_FORMAT = 300,
  /** The input is in the expected format but damaged (truncated, inconsistent, out of bounds). */
  FER_STATUS_CORRUPT = 301,
  /** The input text is not valid UTF-8. */
  FER_STATUS_INVALID_UTF8 = 302,
  /** Every logit is masked (-inf) after processing: there is nothing to sample. */
  FER_STATUS_NO_CANDIDATES = 303,
  /** A chat template raised an error (raise_exception) or failed while rendering this conversation;
   *  the message is the template's own. The request's error, not the engine's. */
  FER_STATUS_TEMPLATE_ERROR = 304,
};
typedef int32_t fer_status;

/**
 * Element types. Values are append-only. 16-31 are reserved for block-quantized formats: dense
 * kernels (fer_tensor) refuse any of 16-31 with FER_STATUS_UNSUPPORTED, and any other unknown value
 * with FER_STATUS_INVALID_ARG; the block kernels (fer_qmatrix) take the named ones.
 */
enum fer_dtype_code {
  FER_DTYPE_INVALID = 0,
  FER_DTYPE_F32 = 1,
  /** IEEE 754 binary16. */
  FER_DTYPE_F16 = 2,
  /** bfloat16: the upper half of an f32; conversions from f32 round to nearest even. */
  FER_DTYPE_BF16 = 3,
  /** 32-bit signed integer (gather indices). */
  FER_DTYPE_I32 = 4,
  /** 64-bit signed integer (gather indices). */
  FER_DTYPE_I64 = 5,
  /** Unsigned byte. */
  FER_DTYPE_U8 = 6,
  /** OCP MX v1.0 MXFP4, 17-byte blocks of 32 elements (reserved). */
  FER_DTYPE_MXFP4 = 16,
  /** GGUF Q4_0 (reserved). */
  FER_DTYPE_Q4_0 = 17,
  /** GGUF Q4_1 (reserved). */
  FER_DTYPE_Q4_1 = 18,
  /** GGUF Q8_0 (reserved). */
  FER_DTYPE_Q8_0 = 19,
  /** GGUF Q5_0: blocks of 32, f16 d, 32 high bits, 16 bytes of low nibbles. */
  FER_DTYPE_Q5_0 = 20,
  /** GGUF Q5_1: blocks of 32, f16 d and m, 32 high bits, 16 bytes of low nibbles. */
  FER_DTYPE_Q5_1 = 21,
  /** GGUF Q2_K: super-blocks of 256 (84 bytes). */
  FER_DTYPE_Q2_K = 22,
  /** GGUF Q3_K: super-blocks of 256 (110 bytes). */
  FER_DTYPE_Q3_K = 23,
  /** GGUF Q4_K: super-blocks of 256 (144 bytes), packed 6-bit scales and minimums. */
  FER_DTYPE_Q4_K = 24,
  /** GGUF Q5_K: super-blocks of 256 (176 bytes). */
  FER_DTYPE_Q5_K = 25,
  /** GGUF Q6_K: super-blocks of 256 (210 bytes). */
  FER_DTYPE_Q6_K = 26,
  /** GGUF IQ4_NL: blocks of 32 (18 bytes), 4-bit indices into a fixed non-linear table. */
  FER_DTYPE_IQ4_NL = 27,
  /** GGUF IQ4_XS: super-blocks of 256 (136 bytes), IQ4_NL's table with 6-bit sub-block scales. */
  FER_DTYPE_IQ4_XS = 28,
};
typedef int32_t fer_dtype;

/** Limits of the tensor descriptor. */
enum fer_tensor_limits {
  /** Highest rank a fer_tensor can describe. */
  FER_TENSOR_MAX_RANK = 8,
};

/**
 * A strided view of caller-owned memory. ferrite never frees or keeps `data`.
 *
 * `shape[i]` for i < rank is the extent of axis i (>= 0); `strides[i]` is the distance in BYTES
 * between consecutive elements along axis i (any sign; 0 broadcasts an input along that axis).
 * Entries at i >= rank are ignored. A rank-0 tensor is a scalar of one element.
 *
 * Validation on entry to every kernel (fer_tensor_check does the same alone): known, element-
 * addressable dtype; 0 <= rank <= FER_TENSOR_MAX_RANK; shape entries >= 0; element count and byte
 * extent fit in 63 bits; `data` and every stride a multiple of the element size; `data` non-NULL
 * unless the tensor has no elements. Outputs must not interleave: with the axes of extent > 1 sorted
 * by |stride|, each stride must be at least the byte span of the axes below it. This excludes every
 * layout that maps two elements to one address, and also the rare non-overlapping interleaved ones
 * (e.g. shape [3, 2] with byte strides [8, 12]), which ferrite refuses with INVALID_ARG.
 */
typedef struct fer_tensor {
  void *data;
  fer_dtype dtype;
  int32_t rank;
  int64_t shape[FER_TENSOR_MAX_RANK];
  int64_t strides[FER_TENSOR_MAX_RANK];
} fer_tensor;

/** Bits of fer_cpu_features(). Append-only. */
enum fer_cpu_feature {
  FER_CPU_FEATURE_SSE42 = 1,
  FER_CPU_FEATURE_AVX = 2,
  FER_CPU_FEATURE_AVX2 = 4,
  FER_CPU_FEATURE_FMA = 8,
  FER_CPU_FEATURE_F16C = 16,
  FER_CPU_FEATURE_AVX512F = 32,
  FER_CPU_FEATURE_AVX512BW = 64,
  FER_CPU_FEATURE_AVX512BF16 = 128,
  FER_CPU_FEATURE_AVXVNNI = 256,
  FER_CPU_FEATURE_AVX512VL = 512,
  FER_CPU_FEATURE_AVX512VNNI = 1024,
  FER_CPU_FEATURE_AVX512DQ = 2048,
};

/**
 * Instruction-set levels a thread pool can be pinned to. Every level computes bit-identical results
 * (the same operation order and rounding); they differ only in speed. The one exception is the
 * payload of a NaN result: IEEE 754 leaves open which input NaN an operation passes on and
 * compilers may swap the operands of a commutative add, so a NaN result is NaN at every level but
 * its payload bits may differ.
 */
enum fer_isa_code {
  /** The best level this CPU supports. */
  FER_ISA_AUTO = 0,
  /** Plain C, no vector intrinsics. Always available. */
  FER_ISA_PORTABLE = 1,
  /** AVX2 + FMA + F16C. */
  FER_ISA_AVX2 = 2,
  /**
   * AVX2 + FMA + F16C and AVX-512 F, BW, VL and DQ, with the OS saving the ZMM and mask state
   * (XCR0). FER_ISA_AUTO chooses it on a CPU that has it; asking for it on a CPU without it
   * gives FER_STATUS_UNSUPPORTED.
   */
  FER_ISA_AVX512 = 3,
};
typedef int32_t fer_isa;

/**
 * An explicit pool of worker threads. Kernels split their work into a fixed number of tasks that
 * depends only on the shapes (never on the thread count or on scheduling), so results are bit-
 * identical for every thread count. Thread-safety: one call at a time per pool; a second thread
 * entering a pool that is running gets FER_STATUS_BUSY. Kernels accept a NULL pool and then run on
 * the calling thread at FER_ISA_AUTO.
 */
typedef struct fer_threadpool fer_threadpool;

/** Options for fer_threadpool_create. Start from fer_threadpool_options_init. */
typedef struct fer_threadpool_options {
  /** sizeof(fer_threadpool_options) as the caller was compiled; lets the struct grow. */
  uint32_t struct_size;
  /** Threads including the caller's: 1 runs everything on the caller; 0 means one per online CPU. */
  uint32_t n_threads;
  /** Instruction-set level (fer_isa_code). Asking for a level the CPU lacks gives UNSUPPORTED. */
  fer_isa isa;
  uint32_t reserved;
} fer_threadpool_options;

/** Returns FER_ABI_VERSION as this library was built. */
uint32_t fer_abi_version(void);

/** Returns the library version, e.g. "0.1.0". Static storage; never NULL. */
const char *fer_version_string(void);

/**
 * Returns one line describing the build: compiler, optimisation, sanitizers, whether CUDA is
 * compiled in. Static storage; never NULL.
 */
const char *fer_build_info(void);

/** Returns a static description of a status code ("unknown status" for an unknown value). */
const char *fer_status_str(fer_status status);

/**
 * Copies the calling thread's message for its most recent failing call into buf (NUL-terminated).
 * *out_len receives the message length without the NUL (0 when the last call succeeded). When cap
 * is too small the message is truncated to cap-1 bytes and FER_STATUS_BUFFER_TOO_SMALL is returned;
 * buf may be NULL when cap is 0. Reading does not clear the message, and this function is the one
 * exception to "a failing call leaves a message": its own failures leave the message as it was.
 */
fer_status fer_last_error_message(char *buf, size_t cap, size_t *out_len);

/** Returns the fer_cpu_feature bits of the CPU this runs on (detected once per process). */
uint64_t fer_cpu_features(void);

/** Size in bytes of one element of dtype into *out_size; UNSUPPORTED for block formats. */
fer_status fer_dtype_size(fer_dtype dtype, size_t *out_size);

/** Validates a tensor descriptor as the kernels do on entry (see fer_tensor). */
fer_status fer_tensor_check(const fer_tensor *tensor);

/**
 * Fills *out as a contiguous row-major view of `data` with the given dtype and shape (copied from
 * shape[0..rank]), then validates it. On failure *out is zeroed.
 */
fer_status fer_tensor_init_contiguous(fer_tensor *out, void *data, fer_dtype dtype, int32_t rank,
                                      const int64_t *shape);

/** The checks that decide whether AMX's int8 tiles run (fer_amx_info.failed_check). Append-only. */
enum fer_amx_check {
  /** None failed: AMX runs. */
  FER_AMX_CHECK_NONE = 0,
  /** CPUID leaf 7 does not list AMX-TILE and AMX-INT8 (or this is not an x86-64 CPU). */
  FER_AMX_CHECK_CPUID = 1,
  /** The OS does not enable the tile state in XCR0 (bits 17 and 18), read with XGETBV. */
  FER_AMX_CHECK_XCR0 = 2,
  /** Linux refused the process the tile data (arch_prctl ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA). */
  FER_AMX_CHECK_PERMISSION = 3,
  /** A small tile product did not give the scalar result. */
  FER_AMX_CHECK_CANARY = 4,
  /** Turned off by the caller (FERRITE_AMX=0). */
  FER_AMX_CHECK_DISABLED = 5,
};

/** Whether AMX's int8 tiles run in this process, and if not, the first check that failed. */
typedef struct fer_amx_info {
  /** 1: the tile routes may run; 0: they do not (the VNNI or AVX2 routes run instead). */
  uint32_t usable;
  /** fer_amx_check: the first check that failed, FER_AMX_CHECK_NONE when usable. */
  uint32_t failed_check;
  /** Why, in words, NUL-terminated ("AMX int8: CPUID lists no AMX-TILE", ...). */
  char reason[160];
} fer_amx_info;

/**
 * Runs the AMX gate once per process (later calls report its result): CPUID AMX-TILE and
 * AMX-INT8, XCR0 bits 17-18, the Linux permission request for the tile data, and a canary tile
 * product checked against the scalar result; any failure leaves AMX off with the reason. The
 * environment variable FERRITE_AMX=0, read at the first call, turns it off. Thread-safe.
 */
fer_status fer_amx_info_get(fer_amx_info *out_info);

/** Fills *opts with defaults: struct_size set, n_threads 0 (one per CPU), isa FER_ISA_AUTO. */
fer_status fer_threadpool_options_init(fer_threadpool_options *opts);

/**
 * Creates a pool. opts may be NULL for the defaults. n_threads above 1024 is INVALID_ARG. On
 * failure *out_pool is NULL and no thread is left running. Free with fer_threadpool_free.
 */
fer_status fer_threadpool_create(const fer_threadpool_options *opts, fer_threadpool **out_pool);

/** Joins the workers and frees the pool. NULL is a no-op. The pool must not be running. */
void fer_threadpool_free(fer_threadpool *pool);

/** Reports the pool's thread count (including the caller's). */
fer_status fer_threadpool_n_threads(const fer_threadpool *pool, uint32_t *out_n_threads);

/** Reports the instruction-set level the pool's kernels run at (never FER_ISA_AUTO). */
fer_status fer_threadpool_isa(const fer_threadpool *pool, fer_isa *out_isa);

/**
 * out = a + b with numpy broadcasting: shapes are aligned at their last axis; each axis of a and b
 * is either equal to out's or 1 (a missing leading axis counts as 1); out's shape must be exactly
 * the broadcast shape. a, b and out share one dtype: F32, F16 or BF16 (F16/BF16 add in f32 and
 * round to nearest even). out may be exactly a or exactly b (same data and strides); any other
 * overlap with an input is INVALID_ARG. On any error nothing is written.
 * Claims: C-ADD-001..C-ADD-003, C-ABI-004.
 */
fer_status fer_add(fer_threadpool *pool, const fer_tensor *a, const fer_tensor *b,
                   const fer_tensor *out);

/**
 * Gather along axis 0: out[i..., j...] = data[idx(indices[i...]), j...]. indices are I64 (or I32);
 * a negative index counts from the end (ONNX); any index outside [-rows, rows) is INVALID_ARG and
 * nothing is written. out's shape is indices' shape followed by data's shape without axis 0; data
 * has rank >= 1; data and out share one dtype (any element-addressable dtype; the copy is exact).
 * out may not overlap data or indices. Claims: C-GATHER-001..C-GATHER-003.
 */
fer_status fer_gather(fer_threadpool *pool, const fer_tensor *data, const fer_tensor *indices,
                      const fer_tensor *out);

/**
 * Mean over the last axis with keepdims: out has x's shape with the last axis 1. x has rank >= 1;
 * x and out share one dtype: F32, F16 or BF16. Sums accumulate in f32 in a fixed order (element j
 * of a row goes to partial sum j mod 32; the 32 partials combine in a fixed tree; the sum is
 * divided by the length), so results are bit-identical (NaN payloads aside, see fer_isa_code)
 * across ISA levels and thread counts. A last axis of length 0 gives NaN. out may not overlap x.
 * Claims: C-MEAN-001..C-MEAN-002.
 */
fer_status fer_reduce_mean(fer_threadpool *pool, const fer_tensor *x, const fer_tensor *out);

/** How the B operand of fer_matmul is laid out. Values are append-only. */
enum fer_matmul_b_layout_code {
  /** b has shape [K, N]: out = a x b. */
  FER_MATMUL_B_KN = 0,
  /** b has shape [N, K], as model weights are stored: out = a x b^T. */
  FER_MATMUL_B_NK = 1,
};
typedef int32_t fer_matmul_b_layout;

/**
 * Bytes of scratch fer_matmul needs for these arguments on this pool (pool may be NULL): the
 * exact amount it allocates, or requires from the caller, for the route it will take. A route
 * that needs none reports 0 (M = 1 with a contiguous f32 row of a; K = 0; empty out).
 * Claims: C-MM-005.
 */
fer_status fer_matmul_workspace_bytes(const fer_threadpool *pool, const fer_tensor *a,
                                      const fer_tensor *b, fer_matmul_b_layout b_layout,
                                      const fer_tensor *out, size_t *out_bytes);

/**
 * out[M, N] = a[M, K] x b, with b [K, N] or [N, K] (b_layout). a, b and out are rank 2, any
 * strides, each F32, F16 or BF16 independently. Each output element is one f32 chain
 * acc = fma(a[i, k], b[k, j], acc) over k = 0 .. K-1 from acc = 0, rounded once to out's dtype
 * (nearest even), so results are bit-identical across ISA levels and thread counts, and row i of
 * out does not depend on the other rows of a (M = 1 decode and M > 1 prefill agree bit for bit).
 * K = 0 gives zeros. f16/bf16 operands are widened panel by panel, never as a whole copy.
 * out may not overlap a or b. workspace: NULL lets the call allocate its scratch itself;
 * otherwise it must be 64-byte aligned and hold fer_matmul_workspace_bytes() bytes
 * (BUFFER_TOO_SMALL otherwise). On any error nothing is written. Claims: C-MM-001..C-MM-005.
 */
fer_status fer_matmul(fer_threadpool *pool, const fer_tensor *a, const fer_tensor *b,
                      fer_matmul_b_layout b_layout, const fer_tensor *out, void *workspace,
                      size_t workspace_bytes);

/* ---------------------------------------------------------------------------------------------
 * Block-quantized weights: the GGUF block types in ggml's layouts (ggml-common.h) and OCP MX
 * v1.0 MXFP4 in the original system's 17-byte block (byte 0 an E8M0 scale, bytes 1-16 E2M1 codes;
 * element o < 16 the low nibble of byte 1 + o, element o >= 16 the high nibble of byte 1 + o - 16).
 * Blocks hold consecutive elements of a row: 32 for MXFP4, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0 and
 * IQ4_NL; 256 (super-blocks) for Q2_K, Q3_K, Q4_K, Q5_K, Q6_K and IQ4_XS. Values are llama.cpp's
 * dequantize_row_* results, bit for bit, each operation rounded to f32 on its own (no fma):
 * Q4_0 (q - 8) d; Q4_1 q d + m; Q5_0 (q - 16) d and Q5_1 q d + m with 5-bit q; Q8_0 q d; IQ4_NL
 * d t[q] (t ggml's 16-entry kvalues_iq4nl); Q2_K (d sc) q - dmin m per 16 elements (sc, m the
 * nibbles of the sub-block's scale byte); Q3_K (d (sc - 32)) (q - 4 h') per 16 (6-bit sc, h' 1
 * where the high bit is clear); Q4_K (d sc) q - dmin m and Q5_K the same with 5-bit q, per 32
 * (6-bit sc, m); Q6_K (d sc) (q - 32) per 16 (int8 sc, 6-bit q); IQ4_XS (d (ls - 32)) t[q] per 32
 * (6-bit ls); MXFP4 e2m1(code) 2^(scale - 127). d and dmin are f16. Every product is exact in
 * f32 (f16 scales times small integers); only the additions of a minimum round.
 */

/** A row-major matrix of blocks: row n starts at data + n * row_stride. */
typedef struct fer_qmatrix {
  /** The blocks; may be unaligned (blocks are 17 to 210 bytes, see fer_qblock_size). */
  const void *data;
  /** Size of the buffer at data, for the bounds check. */
  uint64_t bytes;
  /** A block-quantized dtype: FER_DTYPE_MXFP4, FER_DTYPE_Q4_0 .. FER_DTYPE_IQ4_XS (16 - 28). */
  fer_dtype dtype;
  int32_t reserved;
  /** Rows (N, the output features of a weight). */
  int64_t rows;
  /** Columns (K), a multiple of the dtype's block (32 or 256). */
  int64_t cols;
  /** Bytes from one row to the next, at least cols / block blocks. */
  int64_t row_stride;
} fer_qmatrix;

/**
 * Elements and bytes of one block of a block-quantized dtype: MXFP4 32/17, Q4_0 32/18, Q4_1
 * 32/20, Q8_0 32/34, Q5_0 32/22, Q5_1 32/24, Q2_K 256/84, Q3_K 256/110, Q4_K 256/144, Q5_K
 * 256/176, Q6_K 256/210, IQ4_NL 32/18, IQ4_XS 256/136. INVALID_ARG (both outputs 0) for other
 * dtypes. Claims: C-Q-102.
 */
fer_status fer_qblock_size(fer_dtype dtype, int64_t *out_block_elems, int64_t *out_block_bytes);

/**
 * Checks a matrix as a loader must before use: its structure (as every kernel does: a known
 * format, cols a multiple of its block (INVALID_ARG naming the block), a row_stride that covers
 * a row, a buffer that covers every row: CORRUPT when short) and every scale: an E8M0 code 255
 * (NaN) or an f16 scale d, minimum m or dmin that is NaN or infinite is CORRUPT, naming the row
 * and block. Kernels do not re-read the scales. Claims: C-Q-003, C-Q-102.
 */
fer_status fer_qmatrix_check(const fer_qmatrix *w);

/**
 * out[rows, cols] = the dequantized values of w (the formulas above), rounded to out's float
 * dtype. Claims: C-Q-001, C-Q-101.
 */
fer_status fer_dequantize(fer_threadpool *pool, const fer_qmatrix *w, const fer_tensor *out);

/** Scratch fer_matmul_quant needs for these arguments (as fer_matmul_workspace_bytes). */
fer_status fer_matmul_quant_workspace_bytes(const fer_threadpool *pool, const fer_tensor *a,
                                            const fer_qmatrix *w, const fer_tensor *out,
                                            size_t *out_bytes);

/**
 * out[M, N] = a[M, K] x w^T for a block-quantized weight w [N, K] of any block dtype, without a
 * dense copy of w: M = 1 dequantizes in registers as it streams the blocks (integer codes times
 * their sub-block's scale); M > 1 dequantizes one cache-sized panel at a time. Bit-identical to
 * fer_matmul(a, dequantized w, FER_MATMUL_B_NK), so every contract of fer_matmul holds (the fma
 * chain, ISA and thread independence, rows independent of M, the workspace). Claims: C-Q-002,
 * C-Q-103.
 */
fer_status fer_matmul_quant(fer_threadpool *pool, const fer_tensor *a, const fer_qmatrix *w,
                            const fer_tensor *out, void *workspace, size_t workspace_bytes);

/** Scratch fer_matmul_quant_i8 needs for these arguments: A's rows rounded to 8 bits, each part
 * rounded up to 64 bytes: for formats with blocks of 32, K codes and two f32 (d, s) per 32 (K + 8 K
 * / 32 bytes a row); for the super-block formats (Q2_K .. Q6_K, IQ4_XS), K codes, one f32 scale per
 * 256 and sixteen int16 sums per 256 (K + 36 K / 256 bytes a row); plus an f32 copy of A when A is
 * not f32 with unit stride along K. Claims: C-Q-202. */
fer_status fer_matmul_quant_i8_workspace_bytes(const fer_threadpool *pool, const fer_tensor *a,
                                               const fer_qmatrix *w, const fer_tensor *out,
                                               size_t *out_bytes);

/**
 * out[M, N] ~= a[M, K] x w^T with 8-bit activations, the arithmetic of llama.cpp's CPU path: each
 * block of a row of A is rounded to int8 codes q = round_half_even(x * 127 / amax) with the scale
 * d = amax / 127 (amax the block's largest magnitude); blocks are 32 values for MXFP4, Q4_0, Q4_1,
 * Q8_0, Q5_0, Q5_1 and IQ4_NL (Q8_0/Q8_1-style) and 256 values with per-16 sums of q for Q2_K,
 * Q3_K, Q4_K, Q5_K, Q6_K and IQ4_XS (Q8_K-style). Each block product is an exact integer sum of
 * weight codes times q (times the integer sub-scales of a super-block), scaled by the block scales
 * and summed in f32; offsets and minima are applied through the sums of q.
 * Tolerance (claims C-Q-008, C-Q-201): |out - exact| <= sum over activation blocks b (of 32 or 256
 * values, as above) of (amax_b / 254) * sum_{k in b} |w_k|, plus f32 rounding; the exact order of
 * operations is fixed (see c/kernels/quant_i8.h), so results are bit-identical across ISA levels,
 * thread counts and M (a row's output does not depend on the other rows). A block of A holding an
 * infinite or NaN value makes every output NaN; a block whose largest magnitude is below about
 * 2^-121 counts as zero. Arguments, errors and workspace as fer_matmul_quant (cols a multiple of
 * the format's block of 32 or 256). Claims: C-Q-008, C-Q-005, C-Q-201, C-Q-202.
 */
fer_status fer_matmul_quant_i8(fer_threadpool *pool, const fer_tensor *a, const fer_qmatrix *w,
                               const fer_tensor *out, void *workspace, size_t workspace_bytes);

/**
 * Embedding lookup from a block-quantized table [V, D] of any block dtype (D a multiple of its
 * block, 32 or 256): out[i..., :] = the dequantized row table[ids[i...]] rounded to out's float
 * dtype. ids as for fer_embedding (I32 or I64, every id in [0, V) or INVALID_ARG naming the first
 * bad one, nothing written); out is ids' shape plus [D]. Claims: C-Q-006, C-Q-104.
 */
fer_status fer_embedding_quant(fer_threadpool *pool, const fer_qmatrix *table, const fer_tensor *ids,
                               const fer_tensor *out);

/* ---------------------------------------------------------------------------------------------
 * Attention over any KV layout. K and V are rank-3 fer_tensor views [kv_heads, positions,
 * head_dim] whose byte strides say where each element lives, so head-major (BNSH), seq-major
 * (BSNH) and token-major (one token's K and V for every layer together) caches are all read in
 * place, through the strides only; results do not depend on the layout, bit for bit.
 */

/** Options of fer_attention. Start from fer_attention_params_init. */
typedef struct fer_attention_params {
  /** sizeof(fer_attention_params) as the caller was compiled. */
  uint32_t struct_size;
  /** Non-zero: query i (absolute position q_pos0 + i) sees keys 0 .. q_pos0 + i only. */
  int32_t causal;
  /** Multiplier of q.k; 0 means 1 / sqrt(head_dim). */
  float scale;
  /** Sliding window (0: none; needs causal, else INVALID_ARG; negative: INVALID_ARG): the query at
   * absolute position P sees keys max(0, P - window + 1) .. P only (llama.cpp's standard SWA: Gemma
   * 3's local layers). Keys before the 256-key chunk holding the first query's window start
   * (floor((q_pos0 - window + 1) / 256) * 256) are never read, so a cache may release them; a row's
   * result folds its chunk states from the chunk holding its own window start. Claims: C-GEM-010. */
  int32_t window;
  /** Absolute position of the first query (decode: positions already cached); any value >= 0, up
   * to INT64_MAX (a query whose position is past the keys sees all of them). Claims: C-ABI-009. */
  int64_t q_pos0;
} fer_attention_params;

/** Defaults: causal, scale 1 / sqrt(head_dim), q_pos0 0. */
fer_status fer_attention_params_init(fer_attention_params *params);

/** Scratch fer_attention needs for these arguments on this pool: the exact bytes of the tiles
 * (SIZE_OVERFLOW when that number does not fit in size_t; *out_bytes is then 0). */
fer_status fer_attention_workspace_bytes(const fer_threadpool *pool, const fer_tensor *q,
                                         const fer_tensor *k, const fer_tensor *v,
                                         const fer_attention_params *params,
                                         const fer_tensor *out, size_t *out_bytes);

/**
 * Scaled dot-product attention, flash style: keys are visited in tiles of 64 with an online
 * softmax (running maximum and sum), never materialising a score matrix; each chunk of 256 keys
 * keeps a state of its own and a row's result folds the chunk states in chunk order (so decode
 * can split a long context across threads and still give the bits prefill gives). q is [q_heads, n_q, D],
 * k [kv_heads, n_kv, D], v [kv_heads, n_kv, Dv], out [q_heads, n_q, Dv]; q_heads a multiple of
 * kv_heads (grouped-query: q head h reads kv head h / (q_heads / kv_heads)); each tensor F32, F16
 * or BF16 independently, any strides; k and v may also be Q8_0 (8-bit KV: blocks of 32 elements,
 * an f16 scale and 32 int8 codes, 34 bytes), whose last axis then counts blocks (D / 32, strides[2]
 * = 34: a row's blocks packed), read as the exact f32 values the blocks hold (the bits an F32 k or
 * v holding those values gives). Each output row is computed in a fixed order that depends
 * only on its query, the keys and values and the tile and chunk sizes: bit-identical across layouts, thread
 * counts and ISA levels, and a query gives the same row whether it comes alone (decode) or with
 * others (prefill). Scores are dot products in eight lanes (element d in lane d mod 8, a fixed
 * tree), exponentials a fixed polynomial (within 2 ulp of exp). A query that sees no key gets
 * zeros. workspace as for fer_matmul (NULL: allocated by the call). Claims: C-ATT-001..C-ATT-004,
 * C-KV-201.
 */
fer_status fer_attention(fer_threadpool *pool, const fer_tensor *q, const fer_tensor *k,
                         const fer_tensor *v, const fer_attention_params *params,
                         const fer_tensor *out, void *workspace, size_t workspace_bytes);

/* ---------------------------------------------------------------------------------------------
 * Transformer row kernels. Each works on the last axis of tensors of one shape (any rank >= 1,
 * any strides), widens each row to f32, computes in f32 in a fixed order (bit-identical across
 * ISA levels and thread counts) and rounds once to out's dtype. out may be exactly an input (same
 * data, dtype, shape and strides); any other overlap is INVALID_ARG. On error nothing is written.
 */

/**
 * RMSNorm: out = (x * r) * weight with r = 1 / sqrtf(sum(x^2) / D + eps), the sum of squares in
 * the 32-partial order of fer_reduce_mean. x and out share a float dtype; weight is [D] of any
 * float dtype, or NULL for no scale. eps must be finite and >= 0. Claims: C-TK-001.
 */
fer_status fer_rms_norm(fer_threadpool *pool, const fer_tensor *x, const fer_tensor *weight,
                        float eps, const fer_tensor *out);

/** Pairing of the dimensions fer_rope rotates together. Values are append-only. */
enum fer_rope_pairing_code {
  /** (i, i + rot_dims / 2): GPT-NeoX, Llama in HF layout, Qwen. */
  FER_ROPE_NEOX = 0,
  /** (2i, 2i + 1): GPT-J, Llama in Meta / GGUF layout. */
  FER_ROPE_GPTJ = 1,
};
typedef int32_t fer_rope_pairing;

/**
 * Rotary position embedding. x is [T, ..., D] (e.g. [tokens, heads, head_dim]); positions is [T]
 * I32 or I64 (any value). Pair i (i < rot_dims / 2) of token t turns by the angle
 * positions[t] * theta^(-2i / rot_dims), computed in double; cos and sin are rounded to f32 and
 * y0 = x0 cos - x1 sin, y1 = x0 sin + x1 cos in f32. Dimensions from rot_dims on are copied.
 * rot_dims is even, 2 <= rot_dims <= D; theta finite and > 0. Claims: C-TK-002.
 */
fer_status fer_rope(fer_threadpool *pool, const fer_tensor *x, const fer_tensor *positions,
                    fer_rope_pairing pairing, uint32_t rot_dims, float theta,
                    const fer_tensor *out);

/**
 * SiLU: out = x * sigmoid(x), the sigmoid evaluated from t = exp(-|x|) (ferrite's exponential,
 * within 2 ulp, the one attention uses) as 1 / (1 + t) for x >= 0 and t / (1 + t) below; where the
 * sigmoid is 0 (x = -inf or below about -104) the result is -0. The same bits at every ISA level
 * (the AVX2 level runs eight lanes). Claims: C-TK-003.
 */
fer_status fer_silu(fer_threadpool *pool, const fer_tensor *x, const fer_tensor *out);

/** SwiGLU: out = silu(gate) * up (silu as fer_silu), one shape and dtype. Claims: C-TK-003. */
fer_status fer_swiglu(fer_threadpool *pool, const fer_tensor *gate, const fer_tensor *up,
                      const fer_tensor *out);

/**
 * Softmax over the last axis, stabilised by the row maximum: out = expf(x - max) / sum, the sum
 * in the 32-partial order. A row with a NaN or without a value above -inf gives NaN.
 * Claims: C-TK-004.
 */
fer_status fer_softmax(fer_threadpool *pool, const fer_tensor *x, const fer_tensor *out);

/**
 * Index of the maximum over the last axis; ties go to the lowest index; a NaN wins at its first
 * position (numpy). x: float dtype, rank >= 1, last axis non-empty; out: x's shape without the
 * last axis, I32 or I64. Claims: C-TK-005.
 */
fer_status fer_argmax(fer_threadpool *pool, const fer_tensor *x, const fer_tensor *out);

/**
 * Embedding lookup: out[i..., :] = table[ids[i...], :] converted to out's dtype. table is [V, D]
 * of a float dtype; ids any shape, I32 or I64, every id in [0, V) (else INVALID_ARG naming the
 * first bad one, nothing written); out is ids' shape plus [D], any float dtype. Claims: C-TK-006.
 */
fer_status fer_embedding(fer_threadpool *pool, const fer_tensor *table, const fer_tensor *ids,
                         const fer_tensor *out);

/* ---------------------------------------------------------------------------------------------
 * Sampling: a chain of logits processors configured by one struct, and the draw.
 * ------------------------------------------------------------------------------------------- */

/** Bits of fer_sampling_params.flags. Append-only. */
enum fer_sampling_flag {
  /**
   * Accept NaN and +inf logits instead of refusing them with FER_STATUS_INVALID_ARG: a NaN counts
   * as masked (-inf); when any logit is +inf, the +inf tokens are the only candidates and equally
   * likely.
   */
  FER_SAMPLING_FLAG_ALLOW_NONFINITE = 1,
  /**
   * With top_k and top_p both set, run them as one fused processor: the top-k selection hands its
   * survivors straight to the top-p mass walk. The result is identical to the two processors.
   */
  FER_SAMPLING_FLAG_FUSE_TOP_K_TOP_P = 2,
};

/**
 * The processors of the chain, in the order they run, as bits of the `applied` out-parameter of
 * fer_sampler_process (a bit is set when the processor is enabled and ran, whether or not it
 * changed anything). Append-only.
 *
 * Semantics (the Rust oracle in rust_tests/src/oracle/sampling.rs implements each with full sorts):
 * - LOGIT_BIAS: logit[t] += bias for each (t, bias) pair; a bias of -inf bans t.
 * - REPETITION_PENALTY (HF): for each distinct token of prompt ++ generated (the last
 *   repetition_window tokens when > 0): a positive logit is divided by the penalty, a negative one
 *   multiplied; once per distinct token.
 * - FREQUENCY_PENALTY / PRESENCE_PENALTY (OpenAI): over the generated tokens only, logit[t] -=
 *   frequency * count(t) + presence * (count(t) > 0).
 * - NO_REPEAT_NGRAM (HF): every token that would complete an n-gram already present in prompt ++
 *   generated is banned.
 * - MIN_NEW_TOKENS: eos_token_id is banned while fewer than min_new_tokens tokens are generated.
 * - TEMPERATURE: logit /= temperature. GREEDY (temperature 0): only the first maximum survives.
 * - TOP_K: tokens whose logit is >= the k-th largest finite logit survive. Ties at the threshold
 *   all survive, so more than k may; k >= the number of finite logits keeps all. Comparisons
 *   are IEEE float comparisons, so -0 and +0 are equal: a threshold of either zero keeps both.
 * - TOP_P (nucleus): with p_i the softmax of the surviving logits, sorted descending, take the
 *   smallest prefix whose mass (summed in double) reaches top_p; every token whose logit is >= the
 *   last logit of that prefix survives (ties kept). top_p = 1 is off.
 * - MIN_P: tokens with p_i >= min_p * p_max survive, decided as logit_i - logit_max >= ln(min_p)
 *   in double.
 * - TYPICAL_P: tokens sorted by |-ln p_i - H| (H the entropy; ties by id), ascending; the smallest
 *   prefix reaching mass typical_p survives.
 * - XTC (exclude top choices, as text-generation-webui and llama.cpp): with probability
 *   xtc_probability (drawn from the seeded generator, stream 1), when two or more tokens have
 *   p_i >= xtc_threshold, all of them but the least likely (ties: the highest id) are removed.
 * - GRAMMAR: first of all, every token the attached matcher's mask does not allow gets -inf
 *   (fer_sampler_set_matcher).
 * - DRY ("don't repeat yourself", as koboldcpp and llama.cpp), after the sparse processors and
 *   before temperature, over the last dry_penalty_last_n tokens of prompt ++ generated (all when
 *   0). Scanning back from the newest token, the first position i (0 = newest) that ends a
 *   sequence breaker (its head at i, its tail the tokens after it) limits repeats to i minus the
 *   tail's length. For every earlier position j, let m be the length of the longest common suffix
 *   of the window up to j and the whole window, capped at that limit; when m >= dry_allowed_length
 *   the token after j would extend the repeat, and it gets logit -= dry_multiplier x
 *   dry_base^(M - dry_allowed_length) with M the largest such m for that token (the penalty as
 *   (float)((double)multiplier x pow(base, e)), subtracted in float; the exponent is capped at
 *   (int)(88.7228391f / logf(dry_base)) when dry_base > 1.000001). Single-token breakers are never
 *   penalized. Nothing happens when the window holds dry_allowed_length tokens or fewer, or the
 *   limit is below dry_allowed_length.
 * - MIROSTAT (Basu et al.; llama.cpp's v1 and v2), in place of top-k, top-p, min-p, typical-p and
 *   XTC (INVALID_ARG when combined with them): the sampler keeps mu, 2 x tau at creation. With
 *   w_j = exp(l_j - max) in double over the survivors (summed in ascending id order) and p_j their
 *   share: v2 keeps the tokens with -log2(p_j) <= mu (at least the first maximum); v1 estimates
 *   s from the m = 100 most likely tokens (t_i = ln((i+2)/(i+1)), b_i = ln(w_i / w_(i+1)),
 *   s = sum t_i b_i / sum t_i^2, sorted by weight descending then id), takes
 *   k = ((s-1) 2^mu / (1 - vocab^(1-s)))^(1/s), floored, clamped to [1, survivors] (1 when not a
 *   number or fewer than 2 survivors), and keeps the tokens whose weight is >= the k-th largest.
 *   After each draw (fer_sampler_sample*, not fer_sampler_process), mu -= eta x (surprise - tau),
 *   where surprise = -log2 of the drawn token's probability among the kept tokens. So with
 *   mirostat, a sampler's draws depend on its earlier draws: one sampler per sequence.
 */
enum fer_logit_processor {
  FER_PROCESSOR_LOGIT_BIAS = 1,
  FER_PROCESSOR_REPETITION_PENALTY = 2,
  FER_PROCESSOR_FREQUENCY_PENALTY = 4,
  FER_PROCESSOR_PRESENCE_PENALTY = 8,
  FER_PROCESSOR_NO_REPEAT_NGRAM = 16,
  FER_PROCESSOR_MIN_NEW_TOKENS = 32,
  FER_PROCESSOR_TEMPERATURE = 64,
  FER_PROCESSOR_GREEDY = 128,
  FER_PROCESSOR_TOP_K = 256,
  FER_PROCESSOR_TOP_P = 512,
  FER_PROCESSOR_TOP_K_TOP_P_FUSED = 1024,
  FER_PROCESSOR_MIN_P = 2048,
  FER_PROCESSOR_TYPICAL_P = 4096,
  FER_PROCESSOR_XTC = 8192,
  /** The grammar's mask (fer_sampler_set_matcher), before every other processor. */
  FER_PROCESSOR_GRAMMAR = 16384,
  FER_PROCESSOR_DRY = 32768,
  FER_PROCESSOR_MIROSTAT = 65536,
};

/**
 * A configured processor chain with its scratch memory. Created from fer_sampling_params (copied,
 * including the bias arrays), freed with fer_sampler_free. Thread-safety: one call at a time; a
 * second thread entering a sampler in use gets FER_STATUS_BUSY.
 */
typedef struct fer_sampler fer_sampler;

/**
 * Sampling configuration. Start from fer_sampling_params_init (every processor off, temperature
 * 1) and set what you need; each field's neutral value turns its processor off.
 */
typedef struct fer_sampling_params {
  /** sizeof(fer_sampling_params) as the caller was compiled. */
  uint32_t struct_size;
  /** fer_sampling_flag bits. */
  uint32_t flags;
  /** Seed of the counter-based generator (see fer_sampling_uniform). */
  uint64_t seed;
  /** 1 = off; 0 = greedy; otherwise > 0 and finite. */
  float temperature;
  /** 0 = off; otherwise >= 1. */
  int32_t top_k;
  /** 1 = off; otherwise in (0, 1). */
  float top_p;
  /** 0 = off; otherwise in (0, 1]. */
  float min_p;
  /** 1 = off; otherwise in (0, 1). */
  float typical_p;
  /** 1 = off; otherwise > 0 and finite. */
  float repetition_penalty;
  /** 0 = all of prompt ++ generated; N > 0 = the last N tokens. */
  int32_t repetition_window;
  /** 0 = off. */
  float frequency_penalty;
  /** 0 = off. */
  float presence_penalty;
  /** 0 = off; N >= 1 bans repeating any N-gram. */
  int32_t no_repeat_ngram_size;
  /** 0 = off; needs eos_token_id >= 0. */
  int32_t min_new_tokens;
  /** -1 = none. */
  int32_t eos_token_id;
  /** XTC threshold in [0, 1]. */
  float xtc_threshold;
  /** 0 = off; otherwise the chance in (0, 1] that XTC acts on a step. */
  float xtc_probability;
  /** Number of (token, bias) pairs in the two arrays below. */
  uint32_t n_logit_bias;
  uint32_t reserved;
  /** n_logit_bias token ids (each checked against the vocabulary at every call). */
  const int32_t *logit_bias_tokens;
  /** n_logit_bias biases: finite, or -inf to ban. */
  const float *logit_bias_values;
  /** DRY multiplier: 0 = off; otherwise finite and > 0 (llama.cpp suggests 0.8). */
  float dry_multiplier;
  /** DRY base: finite and >= 1 when DRY is on (init: 1.75). */
  float dry_base;
  /** DRY allowed length: repeats up to this long go unpenalized; >= 0 (init: 2). */
  int32_t dry_allowed_length;
  /** DRY window: 0 = all of prompt ++ generated; N > 0 = the last N tokens. */
  int32_t dry_penalty_last_n;
  /**
   * DRY sequence breakers as token sequences: n_dry_breakers sequences of
   * dry_breaker_lengths[i] tokens each (1..64), concatenated in dry_breaker_tokens (ids >= 0; the
   * lengths sum to n_dry_breaker_tokens). Copied at creation. fer_engine_dry_breakers turns
   * strings into these as llama.cpp does.
   */
  uint32_t n_dry_breakers;
  uint32_t n_dry_breaker_tokens;
  const uint32_t *dry_breaker_lengths;
  const int32_t *dry_breaker_tokens;
  /** 0 = off, 1 = mirostat v1, 2 = mirostat v2. */
  int32_t mirostat;
  /** Mirostat's target surprise tau: finite and > 0 (init: 5). */
  float mirostat_tau;
  /** Mirostat's learning rate eta: finite and > 0 (init: 0.1). */
  float mirostat_eta;
  uint32_t reserved2;
} fer_sampling_params;

/** The token history the penalties read. Borrowed for the duration of one call. */
typedef struct fer_sampling_context {
  const int32_t *prompt_tokens;
  size_t n_prompt;
  const int32_t *generated_tokens;
  size_t n_generated;
} fer_sampling_context;

/**
 * Fills *params with every processor off: temperature 1, top_p 1, typical_p 1, penalty 1, eos -1,
 * and the defaults of the processors' other knobs (dry_base 1.75, dry_allowed_length 2,
 * mirostat_tau 5, mirostat_eta 0.1).
 */
fer_status fer_sampling_params_init(fer_sampling_params *params);

/**
 * Validates params (each field as documented; INVALID_ARG names the first bad one) and creates a
 * sampler. On failure *out_sampler is NULL. Claims: C-SAMP-001..C-SAMP-012.
 */
fer_status fer_sampler_create(const fer_sampling_params *params, fer_sampler **out_sampler);

/** Frees a sampler; NULL is a no-op. */
void fer_sampler_free(fer_sampler *sampler);

/**
 * Runs the chain over logits[0..vocab) in place (masked tokens become -inf) and reports in
 * *out_applied which processors ran (fer_logit_processor bits; 0 on failure). out_applied may be
 * NULL when the caller does not want the bits (the chain runs the same; C-ABI-010). Refuses
 * NaN/+inf logits with INVALID_ARG unless FER_SAMPLING_FLAG_ALLOW_NONFINITE (logits are then
 * untouched), token ids outside [0, vocab) in ctx or the bias with INVALID_ARG, and returns
 * NO_CANDIDATES when every logit ends masked (the logits then hold the masked result).
 */
fer_status fer_sampler_process(fer_sampler *sampler, float *logits, size_t vocab,
                               const fer_sampling_context *ctx, uint32_t *out_applied);

/**
 * fer_sampler_process, then a categorical draw from the softmax of the surviving logits with the
 * uniform fer_sampling_uniform(seed, ctx->n_generated): the same seed and history give the same
 * token on any platform and thread count. The draw walks the survivors in ascending id order and
 * picks the first whose running weight exceeds uniform x total. *out_token is -1 on failure;
 * *out_logprob (may be NULL) receives the natural log of the chosen token's probability under the
 * processed distribution. Claims: C-SAMP-008, C-SAMP-009.
 */
fer_status fer_sampler_sample(fer_sampler *sampler, float *logits, size_t vocab,
                              const fer_sampling_context *ctx, int32_t *out_token,
                              float *out_logprob);

/** As fer_sampler_sample with a caller-given uniform in [0, 1) (INVALID_ARG otherwise). */
fer_status fer_sampler_sample_uniform(fer_sampler *sampler, float *logits, size_t vocab,
                                      const fer_sampling_context *ctx, double uniform,
                                      int32_t *out_token, float *out_logprob);

/**
 * Greedy selection without a sampler: the index of the largest logit, the lowest index among
 * equal maxima. NaN gives INVALID_ARG; all -inf gives NO_CANDIDATES; *out_token is -1 on failure.
 * Claims: C-SAMP-007.
 */
fer_status fer_sample_greedy(const float *logits, size_t vocab, int32_t *out_token);

/**
 * The n most likely tokens of logits[0..vocab) (descending, ties by ascending id) with their
 * natural-log probabilities under softmax(logits), into caller arrays of n entries; *out_n gets
 * min(n, number of finite logits). NaN or +inf give INVALID_ARG, all -inf NO_CANDIDATES.
 */
fer_status fer_logits_top_logprobs(const float *logits, size_t vocab, size_t n,
                                   int32_t *out_tokens, float *out_logprobs, size_t *out_n);

/**
 * The uniform in [0, 1) that fer_sampler_sample uses for (seed, counter): the SplitMix64
 * finalizer over seed and counter, top 53 bits. A pure function: no state anywhere.
 */
fer_status fer_sampling_uniform(uint64_t seed, uint64_t counter, double *out_uniform);

/* ---------------------------------------------------------------------------------------------
 * Memory: granule-mapped virtual memory, where residency follows layout.
 * ------------------------------------------------------------------------------------------- */

/** A byte range [offset, offset + length). */
typedef struct fer_byte_range {
  uint64_t offset;
  uint64_t length;
} fer_byte_range;

/**
 * Number of granule windows [k*granule, (k+1)*granule) that hold at least one byte of the ranges
 * (their union: a window covered twice counts once) into *out_granules. This is the committed-bytes
 * rule of granule-mapped memory: committed = granule x windows with a live byte. Empty ranges
 * count nothing. INVALID_ARG for granule_bytes 0 or a range whose end overflows 64 bits.
 * Claims: C-MEM-001.
 */
fer_status fer_granules_covering(const fer_byte_range *ranges, size_t n_ranges, uint64_t granule_bytes,
                                 uint64_t *out_granules);

/** KV cache layouts. Append-only. */
enum fer_kv_layout_code {
  /** [kv_heads, capacity, head_dim] per (layer, K or V) binding (BNSH): each head owns a stripe. */
  FER_KV_LAYOUT_HEAD_MAJOR = 1,
  /** [capacity, kv_heads, head_dim] per binding (BSNH): a token's heads are contiguous. */
  FER_KV_LAYOUT_SEQ_MAJOR = 2,
  /** One reservation per sequence; token t holds every layer's K and V, [capacity, layers, 2, kv_heads, head_dim]. */
  FER_KV_LAYOUT_TOKEN_MAJOR = 3,
};
typedef int32_t fer_kv_layout;

/** The shape of one sequence's KV cache. */
typedef struct fer_kv_geometry {
  /** sizeof(fer_kv_geometry) as the caller was compiled. */
  uint32_t struct_size;
  /** fer_kv_layout_code. */
  fer_kv_layout layout;
  uint32_t n_layers;
  uint32_t n_kv_heads;
  /** Elements per head row; for a block-quantized KV (Q8_0), blocks of 32 elements per row. */
  uint32_t head_dim;
  /** Bytes per element (2 for f16/bf16, 4 for f32), or per block of 32 for Q8_0 (34). */
  uint32_t elem_bytes;
  /** Tokens the reservation holds (the fixed stride of a head-major stripe). */
  uint64_t capacity_tokens;
} fer_kv_geometry;

/**
 * The granules a sequence commits with `live_tokens` live tokens (0 <= live <= capacity): the sum
 * over its reservations (2 x n_layers bindings for head- and seq-major, each starting at a granule
 * boundary; one for token-major) of fer_granules_covering of its live byte ranges. Refuses unknown
 * layouts, zero fields, live > capacity and sizes that overflow 64 bits with INVALID_ARG or
 * SIZE_OVERFLOW. Claims: C-MEM-002.
 */
fer_status fer_kv_committed_granules(const fer_kv_geometry *geometry, uint64_t live_tokens,
                                     uint64_t granule_bytes, uint64_t *out_granules);

/**
 * Writes the live byte ranges of binding `binding` (0 .. n_bindings-1; head- and seq-major: 2 x
 * n_layers bindings, binding = 2 x layer + (0 for K, 1 for V); token-major: one) into ranges[0 ..
 * cap), their count into *out_n (BUFFER_TOO_SMALL with the needed count when cap is too small),
 * and the binding count into *out_n_bindings (may be NULL).
 */
fer_status fer_kv_live_ranges(const fer_kv_geometry *geometry, uint64_t live_tokens, uint32_t binding,
                              fer_byte_range *ranges, size_t cap, size_t *out_n, uint32_t *out_n_bindings);

/** Backends of fer_vmm. */
enum fer_vmm_backend_code {
  /**
   * Host memory, for real: physical granules are ranges of a memfd (fallocate; released by
   * punching holes), mapped MAP_FIXED|MAP_SHARED into a PROT_NONE reservation, read-only maps
   * enforced by the MMU. Physical bytes are what the kernel reports for the memfd (st_blocks).
   */
  FER_VMM_BACKEND_CPU = 1,
  /**
   * The CUDA driver's virtual memory API (cuMemCreate / cuMemAddressReserve / cuMemMap /
   * cuMemSetAccess), loaded from libcuda.so.1 with dlopen: NO_DEVICE where no driver or GPU
   * answers. The default granule is the device's queried minimum granularity. Physical bytes are
   * the ledger's (the driver reports no per-allocation residency).
   */
  FER_VMM_BACKEND_CUDA = 2,
};

/** Access of a mapping. */
enum fer_vmm_access_code {
  FER_VMM_ACCESS_READ_WRITE = 1,
  FER_VMM_ACCESS_READ_ONLY = 2,
};

/**
 * A pool of physical granules on one backend, and the parent of the address ranges they are mapped
 * into. Thread-safety: one call at a time (callers serialise). Freeing it with live ranges or
 * granules is BUSY and frees nothing.
 */
typedef struct fer_vmm fer_vmm;

/** A reserved virtual address range of a fer_vmm: windows of one granule are mapped into it. */
typedef struct fer_vmm_range fer_vmm_range;

typedef struct fer_vmm_options {
  uint32_t struct_size;
  /** fer_vmm_backend_code. */
  int32_t backend;
  /** Granule size in bytes: a multiple of the page size (CPU) or of the device granularity (CUDA);
   * 0 = the backend's default (CPU: 2 MiB, the usual CUDA value; CUDA: the queried minimum). */
  uint64_t granule_bytes;
  /** Most granules that may exist at once (the memfd's size); 0 = 4096. */
  uint64_t max_granules;
} fer_vmm_options;

/** Counters of a fer_vmm, the ledger beside the operating system's own accounting. */
typedef struct fer_vmm_stats {
  uint64_t granule_bytes;
  /** Physical granules alive (created, not released). */
  uint64_t live_granules;
  /** live_granules x granule_bytes: what ferrite's ledger says is resident. */
  uint64_t ledger_bytes;
  /** What the operating system reports as allocated for the backing memfd (st_blocks x 512). */
  uint64_t os_bytes;
  /** Windows currently mapped, over all ranges. */
  uint64_t mapped_windows;
} fer_vmm_stats;

/** Defaults: backend CPU, granule 2 MiB, max_granules 4096. */
fer_status fer_vmm_options_init(fer_vmm_options *opts);

/** Creates a granule pool (opts NULL = defaults). On failure *out_vmm is NULL. Claims: C-MEM-003. */
fer_status fer_vmm_create(const fer_vmm_options *opts, fer_vmm **out_vmm);

/** Frees the pool; BUSY (nothing freed) while ranges or granules are alive. NULL is OK. */
fer_status fer_vmm_free(fer_vmm *vmm);

/** Fills *out_stats. */
fer_status fer_vmm_get_stats(const fer_vmm *vmm, fer_vmm_stats *out_stats);

/**
 * Creates one physical granule (zero-filled) and returns its id. BUDGET_EXCEEDED at max_granules.
 * On failure *out_granule is UINT64_MAX (no granule: 0 is a valid id).
 */
fer_status fer_vmm_granule_create(fer_vmm *vmm, uint64_t *out_granule);

/** Releases a granule's physical memory; BUSY while it is mapped anywhere, INVALID_ARG for an unknown id. */
fer_status fer_vmm_granule_release(fer_vmm *vmm, uint64_t granule);

/** Reserves `bytes` (rounded up to whole granules) of address space, all PROT_NONE. */
fer_status fer_vmm_range_reserve(fer_vmm *vmm, uint64_t bytes, fer_vmm_range **out_range);

/** Unmaps every window of the range and releases its addresses. NULL is OK; BUSY while frozen. */
fer_status fer_vmm_range_free(fer_vmm_range *range);

/** Start address and size of the range (a host pointer for the CPU backend). */
fer_status fer_vmm_range_base(const fer_vmm_range *range, void **out_base, uint64_t *out_bytes);

/**
 * Maps granule `granule` at byte `offset` of the range (a multiple of the granule size, inside the
 * range, not already mapped: INVALID_ARG otherwise) with `access` (fer_vmm_access_code). The same
 * granule may be mapped at several offsets and ranges: writes through one mapping are seen through
 * all. BUSY while the pool is frozen.
 */
fer_status fer_vmm_map(fer_vmm_range *range, uint64_t offset, uint64_t granule, int32_t access);

/** Unmaps the window at `offset` (INVALID_ARG if none is mapped there). BUSY while frozen. */
fer_status fer_vmm_unmap(fer_vmm_range *range, uint64_t offset);

/**
 * Copy-on-write of one window: creates a granule holding a copy of the bytes of the granule mapped
 * at `offset`, and maps it there read-write in its place. Other mappings of the old granule are
 * untouched (they keep seeing the old bytes); the old granule stays alive for its owner to release.
 * *out_granule receives the new id, *out_bytes_copied the bytes copied (one granule); on failure
 * they are UINT64_MAX (no granule) and 0. A governor
 * attached to the pool is charged for the new granule first (BUDGET_EXCEEDED changes nothing).
 * INVALID_ARG when nothing is mapped at offset; BUSY while frozen; UNSUPPORTED on the CUDA backend
 * for now. Claims: C-MEM-007.
 */
fer_status fer_vmm_copy_on_write(fer_vmm_range *range, uint64_t offset, uint64_t *out_granule,
                                 uint64_t *out_bytes_copied);

/** Freezes or thaws the pool: while frozen, map and unmap return BUSY (a captured plan holds it). */
fer_status fer_vmm_set_frozen(fer_vmm *vmm, bool frozen);

/** What a governed byte is for. Append-only. */
enum fer_mem_role_code {
  FER_MEM_ROLE_WEIGHTS = 0,
  FER_MEM_ROLE_KV = 1,
  FER_MEM_ROLE_WORKSPACE = 2,
  FER_MEM_ROLE_ACTIVATIONS = 3,
  /** Caches that may be dropped, such as the dense expansion of block-quantized weights. */
  FER_MEM_ROLE_CACHE = 4,
  /** Number of roles (array sizes below). */
  FER_MEM_ROLE_COUNT = 5,
};
typedef int32_t fer_mem_role;

/**
 * The memory authority of one device: a byte budget, and every charge against it by role. Nothing
 * is allocated through it; holders charge before they commit and release after they decommit, and
 * a refused charge (FER_STATUS_BUDGET_EXCEEDED, with the numbers in the message) changes nothing.
 * Thread-safety: one call at a time. Freeing it while bytes are charged or grants are open is BUSY.
 */
typedef struct fer_governor fer_governor;

/**
 * An open growth grant: headroom reserved against the budget, to be committed (charging only the
 * bytes actually used and returning the rest) or cancelled (returning everything).
 */
typedef struct fer_grant fer_grant;

typedef struct fer_governor_stats {
  uint64_t budget_bytes;
  /** Charged bytes, all roles. */
  uint64_t charged_bytes;
  /** Headroom held by open grants (counts against the budget until committed or cancelled). */
  uint64_t reserved_bytes;
  uint64_t charged_by_role[FER_MEM_ROLE_COUNT];
  /** Calls refused with BUDGET_EXCEEDED. */
  uint64_t refusals;
  uint32_t open_grants;
  uint32_t reserved0;
} fer_governor_stats;

/** Creates a governor with budget_bytes (> 0: a zero budget is INVALID_ARG). Claims: C-GOV-001. */
fer_status fer_governor_create(uint64_t budget_bytes, fer_governor **out_governor);

/** Frees it; BUSY (nothing freed) while anything is charged or a grant is open. NULL is OK. */
fer_status fer_governor_free(fer_governor *governor);

/** Fills *out_stats. */
fer_status fer_governor_get_stats(const fer_governor *governor, fer_governor_stats *out_stats);

/**
 * Charges bytes to role when charged + reserved + bytes fits the budget; otherwise
 * BUDGET_EXCEEDED naming the numbers, and nothing changes.
 */
fer_status fer_governor_charge(fer_governor *governor, fer_mem_role role, uint64_t bytes);

/** Releases bytes from role; INVALID_ARG (nothing changes) when more than the role holds. */
fer_status fer_governor_release(fer_governor *governor, fer_mem_role role, uint64_t bytes);

/** Reserves headroom for a growth of role; BUDGET_EXCEEDED as fer_governor_charge. */
fer_status fer_governor_grant_begin(fer_governor *governor, fer_mem_role role, uint64_t headroom_bytes,
                                    fer_grant **out_grant);

/**
 * Charges the bytes actually used (<= headroom: INVALID_ARG otherwise, and the grant stays open),
 * returns the rest of the headroom and closes the grant.
 */
fer_status fer_grant_commit(fer_grant *grant, uint64_t used_bytes);

/** Returns all the headroom and closes the grant. NULL is OK. */
fer_status fer_grant_cancel(fer_grant *grant);

/**
 * Admission of a sequence by its projected commit: the granules its KV layout commits at
 * max_tokens live tokens (fer_kv_committed_granules) x granule_bytes, charged to FER_MEM_ROLE_KV.
 * Refusal is BUDGET_EXCEEDED with a message naming the projected bytes, the charged bytes and the
 * budget, before any state changes. *out_bytes receives the projection (0 on failure).
 */
fer_status fer_governor_admit_sequence(fer_governor *governor, const fer_kv_geometry *geometry,
                                       uint64_t max_tokens, uint64_t granule_bytes, uint64_t *out_bytes);

/**
 * Puts a vmm's physical granules under a governor: a granule is charged to `role` when its mapping
 * count goes from 0 to 1 and released when it returns to 0, so a granule shared by N mappings is
 * charged once. A map whose charge is refused returns BUDGET_EXCEEDED and maps nothing. Only while
 * nothing is mapped (BUSY otherwise); governor NULL detaches. The governor must outlive the vmm's
 * use of it.
 */
fer_status fer_vmm_set_governor(fer_vmm *vmm, fer_governor *governor, fer_mem_role role);

/**
 * A bounded cache of dense f32 expansions of block-quantized weights: the original system's
 * "cached dense" strategy, kept for comparison with fer_matmul_quant (which needs no dense copy).
 * Entries are keyed by identity: the caller's key plus the matrix's data address, format, shape
 * and stride. The content hash (64-bit FNV-1a over the rows' bytes) is computed once, on insertion;
 * FER_DENSE_CACHE_VERIFY re-hashes on a hit and re-expands when the bytes changed. Least recently
 * used entries are evicted to stay within capacity_bytes. With a governor, every entry's bytes are
 * charged to FER_MEM_ROLE_CACHE while it lives; a new entry the governor refuses is
 * BUDGET_EXCEEDED and changes nothing. One thread at a time per cache.
 */
typedef struct fer_dense_cache fer_dense_cache;

/** Flags of fer_dense_cache_get. */
enum fer_dense_cache_flag {
  /** Re-hash the packed bytes on a hit; a changed matrix is expanded again. */
  FER_DENSE_CACHE_VERIFY = 1,
};

typedef struct fer_dense_cache_stats {
  /** Bytes of dense f32 held now (what the governor is charged). */
  uint64_t bytes;
  uint64_t capacity_bytes;
  uint64_t entries;
  uint64_t hits;
  uint64_t misses;
  uint64_t evictions;
} fer_dense_cache_stats;

/** A cache of at most capacity_bytes of dense f32; governor may be NULL. Claims: C-Q-004. */
fer_status fer_dense_cache_create(uint64_t capacity_bytes, fer_governor *governor,
                                  fer_dense_cache **out_cache);

/** Frees every entry (releasing its charge) and the cache. */
fer_status fer_dense_cache_free(fer_dense_cache *cache);

/**
 * The dense row-major f32 [rows, cols] expansion of w under key, expanded on a miss (on pool).
 * The pointer stays valid until the entry is evicted by a later get or the cache is freed. An
 * expansion larger than the capacity is BUDGET_EXCEEDED. Claims: C-Q-004.
 */
fer_status fer_dense_cache_get(fer_dense_cache *cache, fer_threadpool *pool, uint64_t key,
                               const fer_qmatrix *w, uint32_t flags, const float **out_dense);

fer_status fer_dense_cache_get_stats(const fer_dense_cache *cache, fer_dense_cache_stats *out_stats);

/* ---------------------------------------------------------------------------------------------
 * Weight residency: a model's weights under one stable virtual address, fully resident when they
 * fit the budget, otherwise streamed granule by granule from the model file.
 */

/** How a fer_weight_store holds its bytes (chosen at open, reported in its stats). */
enum fer_weight_strategy_code {
  /** Every granule loaded at open; no page-in ever after. */
  FER_WEIGHTS_FULL_RESIDENT = 1,
  /** Granules paged in from the file on use and evicted under the budget (address kept). */
  FER_WEIGHTS_STREAMING = 2,
};

/** Which resident granule a streaming store gives up. Values are append-only. */
enum fer_weight_eviction_code {
  /**
   * The most recently used granule outside the current request. Decoding reads the layers in the
   * same cyclic order every step; this keeps a stable resident subset (budget - 1 granules hit on
   * every cycle) where LRU evicts each granule just before it is needed again (0 hits).
   */
  FER_WEIGHTS_EVICT_STABLE_SUBSET = 0,
  /** Least recently used, for comparison. */
  FER_WEIGHTS_EVICT_LRU = 1,
};

typedef struct fer_weight_store_options {
  uint32_t struct_size;
  /** fer_weight_eviction_code. */
  int32_t eviction;
  /** Most bytes of weights resident at once, a whole number of granules counts (at least one). */
  uint64_t budget_bytes;
} fer_weight_store_options;

typedef struct fer_weight_store_stats {
  /** fer_weight_strategy_code. */
  int32_t strategy;
  int32_t reserved;
  uint64_t total_bytes;
  uint64_t granule_bytes;
  uint64_t resident_granules;
  /** Granules read from the file at open (full residency). */
  uint64_t loaded_granules;
  /** Granules read from the file on use (streaming). */
  uint64_t page_ins;
  uint64_t evictions;
  /** Granules a request found resident. */
  uint64_t hits;
  /** Bytes copied from the file, at open and on use. */
  uint64_t bytes_read;
} fer_weight_store_stats;

typedef struct fer_weight_store fer_weight_store;

/** Defaults: stable-subset eviction, budget 0 (must be set). */
fer_status fer_weight_store_options_init(fer_weight_store_options *opts);

/**
 * Opens `bytes` of the file `fd` from `file_offset` (mapped read-only; fd may be closed after;
 * an fd that is not a regular file is INVALID_ARG) as weights in a range of `vmm`: FULL_RESIDENT
 * when every granule fits the budget (all loaded now), STREAMING otherwise. Resident granules are
 * mapped read-only (the MMU refuses writes).
 * Claims: C-WS-001..C-WS-003.
 */
fer_status fer_weight_store_open(fer_vmm *vmm, int fd, uint64_t file_offset, uint64_t bytes,
                                 const fer_weight_store_options *opts, fer_weight_store **out_store);

/** Unmaps and releases everything; NULL is OK. */
fer_status fer_weight_store_free(fer_weight_store *store);

/** The stable base address: weight byte i lives at base + i for the store's life. */
fer_status fer_weight_store_base(const fer_weight_store *store, const void **out_base);

/**
 * Makes bytes [offset, offset + bytes) resident (paging in and evicting as the strategy says) and
 * returns base + offset; valid until the next acquire on this store. INVALID_ARG beyond the
 * weights; BUDGET_EXCEEDED when the request spans more granules than the budget holds.
 */
fer_status fer_weight_store_acquire(fer_weight_store *store, uint64_t offset, uint64_t bytes,
                                    const void **out_ptr);

fer_status fer_weight_store_get_stats(const fer_weight_store *store, fer_weight_store_stats *out_stats);

/* ---------------------------------------------------------------------------------------------
 * Mixture of experts over block-quantized experts.
 */

/** Activation between an expert's two projections. Values are append-only. */
enum fer_moe_activation_code {
  FER_MOE_IDENTITY = 0,
  FER_MOE_SILU = 1,
  /** fc1 gives 2 I rows per expert: rows 0 .. I-1 the gate, I .. 2I-1 the up projection;
   * the activation is silu(gate) * up (as fer_swiglu). */
  FER_MOE_SWIGLU = 2,
};
typedef int32_t fer_moe_activation;

/** How the experts' weights are read. Values are append-only. */
enum fer_moe_strategy_code {
  /** fer_matmul_quant on the blocks: no dense copy. */
  FER_MOE_FUSED = 0,
  /** Each selected expert dequantized into a temporary f32 copy on every call. */
  FER_MOE_DEQUANT_EACH_CALL = 1,
  /** Dense expansions kept in a fer_dense_cache (keys: expert and projection). */
  FER_MOE_CACHED_DENSE = 2,
};
typedef int32_t fer_moe_strategy;

/** Options of fer_moe. Start from fer_moe_params_init. */
typedef struct fer_moe_params {
  uint32_t struct_size;
  /** Experts per row, 1 .. n_experts. */
  int32_t top_k;
  fer_moe_activation activation;
  fer_moe_strategy strategy;
  /** With FER_MOE_CACHED_DENSE: the cache (it must hold one expert's projection at least). */
  fer_dense_cache *cache;
} fer_moe_params;

/** Defaults: top_k 1, identity, fused, no cache. */
fer_status fer_moe_params_init(fer_moe_params *params);

/**
 * out[r, :] = sum over the top_k experts e of row r of w_e * fc2_e(act(fc1_e(x[r, :]))).
 * x and out are [rows, H] f32; router_logits [rows, E] f32 (finite: NaN or infinite logits are
 * INVALID_ARG). Selection: the top_k largest logits, ties to the lower expert id; weights: the
 * softmax of the selected logits (renormalised over them), in f64 then rounded. fc1 is one matrix
 * of E * I1 rows (I1 = I, or 2 I for SwiGLU) by H columns, expert e's rows from e * I1; fc2 has
 * E * H rows by I columns. Each projection is fer_matmul_quant (fused) or fer_matmul over the
 * dequantized rows (the other strategies): the strategies give bit-identical outputs. The sum
 * runs over the selected experts in selection order, out = fma(w_e, y_e, out) from 0.
 * Claims: C-MOE-001..C-MOE-003.
 */
fer_status fer_moe(fer_threadpool *pool, const fer_tensor *x, const fer_tensor *router_logits,
                   const fer_qmatrix *fc1, const fer_qmatrix *fc2, const fer_moe_params *params,
                   const fer_tensor *out);

/** KV capacity policies. Append-only. */
enum fer_kv_policy_code {
  /**
   * Capacity grows to the next power of two (clamped to [min_bucket, max_tokens]). A head-major
   * binding is laid out at its capacity (each head's stripe is capacity tokens long), so growing
   * relocates it: every live byte (and the mask) is copied to a new reservation and the addresses a
   * consumer holds change. Seq- and token-major reservations are made for max_tokens once, so their
   * growth commits granules at a stable address and moves nothing.
   */
  FER_KV_POLICY_BUCKETED = 1,
  /** Every layout reserved for max_tokens at creation and committed on demand: growth never moves. */
  FER_KV_POLICY_FIXED_MAX = 2,
};

typedef struct fer_kv_cache_options {
  uint32_t struct_size;
  /** fer_kv_policy_code. */
  int32_t policy;
  /** Layout and shape; capacity_tokens is the hard maximum of a sequence. */
  fer_kv_geometry geometry;
  /** Element type of K and V: F32, F16 or BF16 (its size equal to geometry.elem_bytes), or Q8_0
   *  (geometry.elem_bytes 34 and head_dim counting blocks of 32: fer_kv_geometry). */
  fer_dtype dtype;
  /** Bytes of attention-mask state kept per token beside K and V (0: none). */
  uint32_t mask_bytes_per_token;
  /** Smallest capacity of the bucketed policy (>= 1). */
  uint64_t min_bucket;
} fer_kv_cache_options;

/** A KV cache: the configuration its sequences share, on a fer_vmm (which must outlive it). */
typedef struct fer_kv_cache fer_kv_cache;

/** One sequence's K, V and mask reservations in a fer_kv_cache. */
typedef struct fer_kv_seq fer_kv_seq;

typedef struct fer_kv_seq_stats {
  uint64_t live_tokens;
  uint64_t capacity_tokens;
  /** Capacity changes so far. */
  uint64_t growth_events;
  /** Bytes copied by growth (K, V and mask). */
  uint64_t bytes_moved;
  /** Growth events that changed an address a consumer may hold. */
  uint64_t address_changes;
  /** Physical bytes this sequence has mapped (granules x granule size). */
  uint64_t committed_bytes;
} fer_kv_seq_stats;

/** Fills *opts: struct sizes set, FER_KV_POLICY_BUCKETED, min_bucket 8, the rest 0. */
fer_status fer_kv_cache_options_init(fer_kv_cache_options *opts);

/** Creates a cache on vmm. INVALID_ARG names the first bad option. Claims: C-KV-001. */
fer_status fer_kv_cache_create(fer_vmm *vmm, const fer_kv_cache_options *opts, fer_kv_cache **out_cache);

/** Frees the cache; BUSY (nothing freed) while sequences are alive. NULL is OK. */
fer_status fer_kv_cache_free(fer_kv_cache *cache);

/** Creates an empty sequence (capacity min_bucket, or max_tokens under FIXED_MAX). */
fer_status fer_kv_seq_create(fer_kv_cache *cache, fer_kv_seq **out_seq);

/**
 * Unmaps and releases everything of the sequence. NULL is OK. BUSY while the pool is frozen: then
 * nothing is freed and the sequence stays whole.
 */
fer_status fer_kv_seq_free(fer_kv_seq *seq);

/**
 * Sets the live length to live_tokens (>= the current length; <= max_tokens), growing capacity by
 * the policy and committing the granules the new live bytes need. New positions read as zero.
 * On any failure (BUDGET_EXCEEDED from the pool's governor included) the sequence is unchanged.
 */
fer_status fer_kv_seq_extend(fer_kv_seq *seq, uint64_t live_tokens);

/** Fills *out_stats. */
fer_status fer_kv_seq_get_stats(const fer_kv_seq *seq, fer_kv_seq_stats *out_stats);

/**
 * A strided view [n_kv_heads, live_tokens, head_dim] of K (kv 0) or V (kv 1) of `layer`, in the
 * sequence's layout, for kernels to read and write. Valid until the next fer_kv_seq_extend (a
 * head-major bucketed growth moves it) or fer_kv_seq_free. Positions a fork shares are the same
 * bytes in both sequences: a child's shared windows are read-only (a write faults), and a parent
 * that writes there changes its child too unless it calls fer_kv_seq_make_writable first.
 */
fer_status fer_kv_seq_view(const fer_kv_seq *seq, uint32_t layer, uint32_t kv, fer_tensor *out_view);

/**
 * Rewind: sets the live length to live_tokens (<= the current length). The dropped positions are
 * zeroed in K, V and the mask (so, as after any extend, positions beyond the live length read as
 * zero), copying a window first when it is shared with another sequence (fer_kv_seq_make_writable:
 * the other sharers never see the change). Capacity and committed granules stay: extending again
 * commits nothing. Claims: C-KV-006.
 */
fer_status fer_kv_seq_truncate(fer_kv_seq *seq, uint64_t live_tokens);

/**
 * Sliding-window residency: releases the granules of layer `layer`'s K and V that hold only tokens
 * before first_token (<= the live length), for a layer whose queries no longer see them (a local
 * layer of a sliding-window model: fer_attention_params.window). Each such window is unmapped and
 * its granule released (a granule another sequence still maps stays with it), so committed_bytes
 * and the pool's physical bytes drop by the windows released; the views keep their addresses and
 * strides (a held decode plan stays valid) but the released rows must not be read (they fault).
 * Later extends do not commit them again; truncate below the release point is INVALID_ARG, and a
 * sequence with released tokens cannot be forked (UNSUPPORTED). Idempotent; a smaller first_token
 * than before releases nothing more. Seq- and head-major layouts, not relocating (head-major
 * bucketed) caches or token-major ones, where one window holds every layer's rows (UNSUPPORTED).
 * BUSY while the pool is frozen. Claims: C-KV-101.
 */
fer_status fer_kv_seq_release_before(fer_kv_seq *seq, uint32_t layer, uint64_t first_token);

/**
 * Prefix sharing: a new sequence whose first prefix_tokens (<= parent's live tokens) are the
 * parent's. Every window of K, V and mask that the prefix fills entirely maps the parent's granule
 * read-only (no new bytes: an extra sharer costs nothing for them); a window the prefix fills
 * only in part gets a granule of its own with the prefix bytes copied. A granule lives until its
 * last sharer frees it. The child then extends as any sequence; its new tokens land in its own
 * windows. UNSUPPORTED for a relocating cache (head-major, bucketed); BUSY, with nothing built,
 * while the pool is frozen. Claims: C-KV-005.
 */
fer_status fer_kv_seq_fork(const fer_kv_seq *parent, uint64_t prefix_tokens, fer_kv_seq **out_child);

/**
 * Copy-on-write: makes the windows holding tokens [first_token, first_token + n_tokens) of every
 * binding (and the mask) writable in this sequence. Each such window still shared (mapped
 * read-only from another sequence, or this sequence's own window that a fork maps) is replaced by
 * a private copy of its granule (one granule copied per window, counted); private windows and
 * every other sharer are untouched. All or nothing: a refusal (BUDGET_EXCEEDED, BUSY) changes
 * nothing. Claims: C-KV-005.
 */
fer_status fer_kv_seq_make_writable(fer_kv_seq *seq, uint64_t first_token, uint64_t n_tokens);

/** Sharing counters of a sequence. */
typedef struct fer_kv_seq_sharing {
  /** Windows mapped read-only from another sequence's granules. */
  uint64_t shared_windows;
  /** Windows copied by fer_kv_seq_make_writable. */
  uint64_t cow_copies;
  /** Bytes copied from the parent into partly covered windows at fork. */
  uint64_t fork_bytes_copied;
} fer_kv_seq_sharing;

/** Fills *out_sharing (zeroed on failure). */
fer_status fer_kv_seq_get_sharing(const fer_kv_seq *seq, fer_kv_seq_sharing *out_sharing);

/**
 * The paged KV mode: fixed pages of page_tokens tokens from a pool of n_pages, a free list, a page
 * table per sequence, and reference-counted pages so a fork shares its parent's pages (the first
 * append into a shared, partly filled last page copies it: copy-on-write, counted). Metadata only:
 * page ids index whatever storage the caller keeps. Thread-safety: one call at a time.
 */
typedef struct fer_kv_pages fer_kv_pages;

typedef struct fer_kv_pages_stats {
  uint32_t n_pages;
  uint32_t free_pages;
  uint32_t live_sequences;
  uint32_t reserved;
  /** Pages copied on write so far. */
  uint64_t pages_copied;
} fer_kv_pages_stats;

/** Creates a pool of n_pages pages of page_tokens tokens (both >= 1). Claims: C-KV-004. */
fer_status fer_kv_pages_create(uint32_t n_pages, uint32_t page_tokens, fer_kv_pages **out_pages);

/** Frees the pool; BUSY (nothing freed) while sequences are alive. NULL is OK. */
fer_status fer_kv_pages_free(fer_kv_pages *pages);

/** Creates an empty sequence; *out_seq is its id (UINT32_MAX on failure: 0 is a valid id). */
fer_status fer_kv_pages_seq_create(fer_kv_pages *pages, uint32_t *out_seq);

/**
 * Appends n_tokens to the sequence, taking pages from the free list (and copying a shared last page
 * first). BUDGET_EXCEEDED when the free list is short; all or nothing.
 */
fer_status fer_kv_pages_append(fer_kv_pages *pages, uint32_t seq, uint32_t n_tokens);

/**
 * Forks a sequence: the child shares every page of the parent (reference counts + 1). *out_child
 * is the child's id (UINT32_MAX on failure).
 */
fer_status fer_kv_pages_fork(fer_kv_pages *pages, uint32_t seq, uint32_t *out_child);

/** Removes a sequence; its pages return to the free list when no other sequence holds them. */
fer_status fer_kv_pages_seq_free(fer_kv_pages *pages, uint32_t seq);

/**
 * Copies the sequence's page table into pages_out[0 .. cap) and its length in pages into *out_n
 * (BUFFER_TOO_SMALL with the needed count when cap is short); *out_tokens (may be NULL) gets its
 * token count.
 */
fer_status fer_kv_pages_table(const fer_kv_pages *pages, uint32_t seq, uint32_t *pages_out, size_t cap,
                              size_t *out_n, uint64_t *out_tokens);

/** Fills *out_stats. */
fer_status fer_kv_pages_get_stats(const fer_kv_pages *pages, fer_kv_pages_stats *out_stats);

/** true when this library was built with its CUDA kernels compiled in. */
bool fer_cuda_is_built(void);

/**
 * Number of CUDA devices into *out_count (0 on failure). NULL_ARG for a NULL pointer (checked
 * first, built with CUDA or not); UNSUPPORTED when CUDA is not built in; NO_DEVICE when the driver
 * or a GPU does not answer.
 */
fer_status fer_cuda_device_count(int32_t *out_count);

/**
 * Placeholder CUDA kernel mirroring fer_add's row broadcast on host memory: out[r, c] = a[r, c] +
 * b[c] for contiguous f32 a and out of shape [rows, width] and b of shape [width]. Copies to the
 * device, runs, copies back. Statuses as fer_cuda_device_count, plus INVALID_ARG for negative or
 * overflowing sizes. Claims: C-CUDA-001.
 */
fer_status fer_cuda_add_f32_rows(const float *a, const float *b, float *out, int64_t rows,
                                 int64_t width);

/**
 * Byte-level BPE (and WordLevel) tokenizer, loaded from a Hugging Face tokenizer.json or from the
 * tokenizer.ggml.* metadata of a GGUF file. Immutable after loading and shareable between threads:
 * every encode/decode call may run concurrently (a per-tokenizer word cache is taken by one call at
 * a time; a concurrent call runs uncached, with identical results). Freed with fer_tokenizer_free,
 * which returns BUSY and frees nothing while detokenizers or grammar vocabularies made from it are
 * alive.
 * Claims: C-TOK-001..C-TOK-012, C-TOK-014..C-TOK-016.
 */
typedef struct fer_tokenizer fer_tokenizer;

/** A streaming detokenizer: one sequence, one thread at a time. */
typedef struct fer_detokenizer fer_detokenizer;

/** Flags of fer_tokenizer_encode (bit set). */
enum fer_encode_flag {
  /** Apply the post-processor's template (e.g. BOS first) for a single sequence. */
  FER_ENCODE_ADD_SPECIAL = 1,
  /**
   * Replace each maximal ill-formed UTF-8 subsequence with U+FFFD (as Python's
   * bytes.decode("utf-8", "replace") does) and encode the result. Without it, ill-formed input is
   * refused with FER_STATUS_INVALID_UTF8 naming the byte offset, and nothing is written.
   */
  FER_ENCODE_REPLACE_INVALID_UTF8 = 2,
  /** Treat the text of special (and other added) tokens as ordinary text. */
  FER_ENCODE_NO_SPECIAL_SPLIT = 4,
};

/** Flags of fer_tokenizer_decode and fer_detokenizer_create (bit set). */
enum fer_decode_flag {
  /** Leave out special tokens (control tokens such as BOS/EOS). */
  FER_DECODE_SKIP_SPECIAL = 1,
  /**
   * Replace ill-formed UTF-8 in the output (e.g. half of a character whose bytes span tokens) with
   * U+FFFD as the reference decoders do. Without it the exact bytes are returned.
   */
  FER_DECODE_REPLACE_INVALID_UTF8 = 2,
};

/** What a tokenizer is, read back with fer_tokenizer_get_info. */
typedef struct fer_tokenizer_info {
  /** Number of ids: model vocabulary plus added tokens (ids are < vocab_size). */
  uint32_t vocab_size;
  /** Number of merges of a BPE model (0 for WordLevel). */
  uint32_t n_merges;
  /** Number of added tokens (special or not) matched before the model runs. */
  uint32_t n_added;
  /** 1 when the model works on bytes (byte-level pre-tokenizer), 0 on characters. */
  uint32_t byte_level;
  /** -1 where the vocabulary has none. */
  int32_t bos_id;
  int32_t eos_id;
  int32_t pad_id;
  int32_t unk_id;
} fer_tokenizer_info;

/**
 * Parses a tokenizer.json image (json[0..len), UTF-8, not NUL-terminated) into *out (NULL on
 * failure). BAD_FORMAT for text that is not JSON or lacks the model; UNSUPPORTED naming the
 * component for parts ferrite does not implement (e.g. a Unigram model, BPE dropout); CORRUPT naming
 * the entry for inconsistent data (a merge whose parts are not in the vocabulary, a duplicate id, an
 * id past the vocabulary). Claims: C-TOK-001, C-TOK-008.
 */
fer_status fer_tokenizer_from_json(const char *json, size_t len, fer_tokenizer **out);

/**
 * fer_tokenizer_from_json on a file's content; INVALID_ARG naming the path when it is not a
 * regular file (see the conventions at the top: a FIFO, directory or device is refused without
 * being read) or cannot be read. At most the file's size is read. Claims: C-ABI-008.
 */
fer_status fer_tokenizer_from_json_file(const char *path, fer_tokenizer **out);

/**
 * Builds a tokenizer from a GGUF file's tokenizer.ggml.* metadata, as llama.cpp reads it: model
 * gpt2 (byte-level BPE; pre-tokenizer types default, gpt-2, llama3/llama-bpe, qwen2, smollm,
 * starcoder, refact, command-r, codeshell, mpt, olmo, phi-2, falcon, ...) or llama (SentencePiece
 * BPE by token score, with byte fallback). Control and unknown tokens are matched as special tokens,
 * user-defined ones always. The file is only read during the call. Statuses as
 * fer_tokenizer_from_json plus the GGUF parser's (CORRUPT naming the field); UNSUPPORTED naming
 * another model or pre-tokenizer type; INVALID_ARG naming the path when it is not a regular file
 * (C-ABI-008) or cannot be opened. Claims: C-TOK-002, C-TOK-014..C-TOK-016.
 */
fer_status fer_tokenizer_from_gguf_file(const char *path, fer_tokenizer **out);

/**
 * Frees a tokenizer; NULL is a no-op; BUSY (nothing freed) while detokenizers or grammar
 * vocabularies (fer_grammar_vocab_create) of it are alive.
 */
fer_status fer_tokenizer_free(fer_tokenizer *tok);

/** Fills *out_info. */
fer_status fer_tokenizer_get_info(const fer_tokenizer *tok, fer_tokenizer_info *out_info);

/**
 * Encodes text[0..len) into ids[0..cap) and the count into *out_n. When cap is short, returns
 * BUFFER_TOO_SMALL with *out_n = the count needed (ids then holds the first cap ids); ids may be
 * NULL when cap is 0, to ask for the count. Ill-formed UTF-8: see FER_ENCODE_REPLACE_INVALID_UTF8.
 * Thread-safe. Claims: C-TOK-003..C-TOK-006.
 */
fer_status fer_tokenizer_encode(const fer_tokenizer *tok, const char *text, size_t len,
                                uint32_t flags, int32_t *ids, size_t cap, size_t *out_n);

/**
 * Decodes ids[0..n) through the tokenizer's decoders into out[0..cap) and the byte count into
 * *out_len (no NUL is written). BUFFER_TOO_SMALL with *out_len = the bytes needed when cap is short
 * (out may be NULL when cap is 0); INVALID_ARG naming the position of an id outside the vocabulary.
 * Thread-safe. Claims: C-TOK-007.
 */
fer_status fer_tokenizer_decode(const fer_tokenizer *tok, const int32_t *ids, size_t n,
                                uint32_t flags, char *out, size_t cap, size_t *out_len);

/**
 * DRY's sequence breakers (fer_sampling_params.dry_breaker_*) for strings[0..n_strings), made as
 * llama.cpp makes them: each token whose text (decoded alone, specials kept) contains a string is
 * a breaker of its own; each token whose text ends with a start of a string heads a breaker whose
 * tail is the rest of that string, encoded without specials (at most 19 tail tokens; strings cut
 * at 40 bytes; empty strings skipped; duplicates per token dropped). Breakers come in token order.
 * Writes their lengths and concatenated tokens and their counts into *out_n_breakers and
 * *out_n_tokens; when either array is short, BUFFER_TOO_SMALL with the counts needed (the arrays
 * may be NULL when their caps are 0, to ask for the counts). Reads the whole vocabulary: call it
 * once per set of strings and keep the result. Claims: C-SAMP-015.
 */
fer_status fer_tokenizer_dry_breakers(const fer_tokenizer *tok, const char *const *strings, size_t n_strings,
                                      uint32_t *out_lengths, size_t lengths_cap, int32_t *out_tokens,
                                      size_t tokens_cap, size_t *out_n_breakers, size_t *out_n_tokens);

/** The id of a token's exact text (model vocabulary or added token) into *out_id; -1 and INVALID_ARG if none. */
fer_status fer_tokenizer_token_to_id(const fer_tokenizer *tok, const char *text, size_t len,
                                     int32_t *out_id);

/**
 * Creates a streaming detokenizer over tok (which must outlive it) with fer_decode_flag flags.
 * UNSUPPORTED for a decoder that strips the end of the text (a Strip decoder with stop > 0: where
 * the end is cannot be known while streaming). Claims: C-TOK-009.
 */
fer_status fer_detokenizer_create(const fer_tokenizer *tok, uint32_t flags, fer_detokenizer **out);

/**
 * Adds one token and writes the text that became complete into out[0..cap), *out_len bytes:
 * only whole UTF-8 characters are emitted; bytes of a character still incomplete wait for the next
 * token. The concatenation of all outputs plus fer_detokenizer_flush equals fer_tokenizer_decode of
 * all ids. BUFFER_TOO_SMALL with *out_len = bytes needed leaves the state unchanged (push the same id
 * again with more room); INVALID_ARG for an id outside the vocabulary, state unchanged.
 */
fer_status fer_detokenizer_push(fer_detokenizer *d, int32_t id, char *out, size_t cap, size_t *out_len);

/**
 * Writes what is still held back (an incomplete character at the end: its bytes, or U+FFFD with
 * FER_DECODE_REPLACE_INVALID_UTF8) and resets the detokenizer for a new sequence. BUFFER_TOO_SMALL as
 * fer_detokenizer_push.
 */
fer_status fer_detokenizer_flush(fer_detokenizer *d, char *out, size_t cap, size_t *out_len);

/** Frees a detokenizer; NULL is a no-op. */
void fer_detokenizer_free(fer_detokenizer *d);

/* ---------------------------------------------------------------------------------------------
 * Structured output: a grammar (a JSON Schema, a regular expression or a GBNF grammar) compiled
 * against a vocabulary, and per sequence a matcher that gives each step's mask of allowed tokens,
 * as llguidance computes it (its masks are the reference: scripts/grammar/LLGUIDANCE.md).
 *
 * Three objects, each read-only once made and shared by any number of users: a fer_grammar_vocab
 * (a tokenizer's tokens as a trie, the width of the model's logits and its end-of-sequence token),
 * a fer_grammar compiled against it, and per sequence a fer_matcher (one thread at a time). A
 * vocabulary and a grammar may be used by any number of threads at once. Lifetimes are checked:
 * fer_tokenizer_free returns BUSY while vocabularies made from it are alive, fer_grammar_vocab_free
 * while grammars compiled against it are, fer_grammar_free while matchers of it are (an engine
 * sequence's matcher included). A grammar keeps up to 8 freed matchers, back at their start with
 * their lazily built lexer states warm, for its next fer_matcher_create (freed with the grammar).
 * Claims: C-GRM-001..C-GRM-011.
 * ------------------------------------------------------------------------------------------- */

/** A tokenizer's vocabulary as the grammar matchers see it. */
typedef struct fer_grammar_vocab fer_grammar_vocab;

/** A compiled grammar. */
typedef struct fer_grammar fer_grammar;

/** One sequence's position in a grammar. */
typedef struct fer_matcher fer_matcher;

/** What a grammar's source text is. Append-only. */
enum fer_grammar_kind_code {
  /**
   * A JSON Schema (JSON text): the output is one JSON value that validates against it. Keywords
   * JSON Schema defines that ferrite does not build are refused with UNSUPPORTED naming the
   * keyword and its JSON pointer (never ignored); keywords it does not define are ignored. The
   * schema's top-level "x-guidance" object sets llguidance's options (whitespace_flexible,
   * whitespace_pattern, item_separator, key_separator).
   */
  FER_GRAMMAR_JSON_SCHEMA = 1,
  /** A regular expression (Rust regex syntax; the whole output matches it). */
  FER_GRAMMAR_REGEX = 2,
  /** A grammar in llama.cpp's GBNF (the rule `root` is the output). */
  FER_GRAMMAR_GBNF = 3,
};
typedef int32_t fer_grammar_kind;

/** Flags of fer_grammar_compile (bit set). Append-only. */
enum fer_grammar_flag {
  /**
   * JSON Schema only: no whitespace between tokens of the JSON text (llguidance's
   * whitespace_flexible = false). Without it, whitespace ([ \t\n\r]+) may stand once between any
   * two tokens of the JSON text, never before the first nor after the last (llguidance's default).
   */
  FER_GRAMMAR_JSON_COMPACT = 1,
  /**
   * No forced tokens (llguidance's no_forcing): every mask is every token whose bytes keep the
   * output a prefix of a word, also where the grammar allows one next byte only (without it the
   * mask is then the first token of the forced bytes' canonical tokenization alone). For callers
   * that feed tokenizations other than the tokenizer's own.
   */
  FER_GRAMMAR_NO_FORCING = 2,
};

/** What a vocabulary is, read back with fer_grammar_vocab_get_info. */
typedef struct fer_grammar_vocab_info {
  /** The width of the logits and of the mask in tokens (ids are < n_vocab). */
  uint32_t n_vocab;
  /** 32-bit words of a mask: (n_vocab + 31) / 32. */
  uint32_t mask_words;
  /** The end-of-sequence token the masks allow where the output may end. */
  int32_t eos_id;
  /** Tokens a mask can allow (those with bytes, control tokens left out). */
  uint32_t n_text_tokens;
} fer_grammar_vocab_info;

/** A matcher's state, read back with fer_matcher_get_state. */
typedef struct fer_matcher_state {
  /** Tokens accepted since the start (the end of sequence included). */
  uint32_t n_tokens;
  /** 1 when the output so far is a whole word of the language (the end of sequence is allowed). */
  uint32_t accepting;
  /** 1 once the end-of-sequence token was accepted (the mask then allows it alone). */
  uint32_t ended;
  uint32_t reserved;
} fer_matcher_state;

/**
 * Makes the vocabulary of tok (which must outlive it) for a model with n_vocab logits (0: the
 * tokenizer's size; ids past the tokenizer are never allowed) and end-of-sequence token eos_id (-1:
 * the tokenizer's; INVALID_ARG when it has none, or the id is not below n_vocab). Control tokens
 * (special added tokens, and added tokens written <...>) are never allowed. INVALID_ARG when
 * n_vocab is below the tokenizer's size. *out is NULL on failure. Thread-safe.
 */
fer_status fer_grammar_vocab_create(const fer_tokenizer *tok, uint32_t n_vocab, int32_t eos_id,
                                    fer_grammar_vocab **out);

/** Frees a vocabulary; NULL is a no-op; BUSY (nothing freed) while grammars compiled against it are alive. */
fer_status fer_grammar_vocab_free(fer_grammar_vocab *vocab);

/** Fills *out_info. */
fer_status fer_grammar_vocab_get_info(const fer_grammar_vocab *vocab, fer_grammar_vocab_info *out_info);

/**
 * Compiles src[0..len) (UTF-8, not NUL-terminated) of the given kind with fer_grammar_flag flags
 * against vocab (which must outlive it) into *out (NULL on failure). Refusals leave a message with
 * the position and what was expected: BAD_FORMAT for text that does not parse (a JSON Schema that
 * is not JSON, a regular expression or GBNF with a syntax error); INVALID_ARG for a grammar whose
 * language is empty (it could never end: refused here, not at run time), a schema that is not a
 * schema, an undefined rule, an unknown kind or flag; UNSUPPORTED naming a JSON Schema keyword
 * ferrite does not build; INVALID_ARG naming the limit for a grammar past the size limits (rules,
 * symbols, nesting; lazily built lexer states are bounded too, at mask time). Thread-safe.
 */
fer_status fer_grammar_compile(const fer_grammar_vocab *vocab, fer_grammar_kind kind, const char *src, size_t len,
                               uint32_t flags, fer_grammar **out);

/** Frees a grammar; NULL is a no-op; BUSY (nothing freed) while matchers of it are alive. */
fer_status fer_grammar_free(fer_grammar *grammar);

/** A matcher at the start of grammar (which must outlive it) into *out (NULL on failure). */
fer_status fer_matcher_create(const fer_grammar *grammar, fer_matcher **out);

/** Frees a matcher; NULL is a no-op. A matcher an engine sequence holds is freed with the sequence. */
void fer_matcher_free(fer_matcher *matcher);

/**
 * Writes the mask of the tokens allowed next: bit t % 32 of mask[t / 32] (llguidance's int32
 * layout), mask_words words at least (fer_grammar_vocab_info.mask_words; the words past them are
 * left alone). A token is allowed when its bytes keep the output a prefix of a word of the
 * language, the end of sequence when the output is a word; where the grammar forces bytes, the mask
 * is the first token of their canonical tokenization alone, as llguidance's is. Once the end of
 * sequence was accepted, the mask holds it alone. No allocation in the steady state.
 * BUFFER_TOO_SMALL when words is short; INVALID_ARG when a lazily built lexer passed its state
 * limit (the grammar is too complex; the mask is then all zero).
 */
fer_status fer_matcher_fill_mask(fer_matcher *matcher, uint32_t *mask, size_t words);

/** Advances by one token; INVALID_ARG naming the token (nothing changed) when the mask would not allow it. */
fer_status fer_matcher_accept(fer_matcher *matcher, int32_t token);

/** Takes back the last n accepted tokens; INVALID_ARG (nothing changed) when fewer were accepted. */
fer_status fer_matcher_rollback(fer_matcher *matcher, uint32_t n);

/** Fills *out_state. */
fer_status fer_matcher_get_state(const fer_matcher *matcher, fer_matcher_state *out_state);

/**
 * The tokens forced from here (each step's mask a single token other than the end of sequence),
 * up to cap of them, into ids[0..cap) and their count into *out_n; the matcher is left as it was.
 * ids may be NULL when cap is 0.
 */
fer_status fer_matcher_forced_tokens(fer_matcher *matcher, int32_t *ids, size_t cap, size_t *out_n);

/**
 * Makes the sampler apply matcher's mask before every other processor (a token the mask does not
 * allow gets -inf; FER_PROCESSOR_GRAMMAR in the applied bits), reading the matcher's state at each
 * fer_sampler_process / fer_sampler_sample call; the logits' width must then be the matcher's
 * n_vocab (INVALID_ARG otherwise). The sampler borrows the matcher (it must outlive its use or be
 * detached with NULL) and never advances it: accept the sampled token with fer_matcher_accept, or
 * feed it to the engine sequence that holds the matcher.
 */
fer_status fer_sampler_set_matcher(fer_sampler *sampler, fer_matcher *matcher);

/* ---------------------------------------------------------------------------------------------
 * The engine: a model (GGUF: architectures llama, qwen2, qwen3), its tokenizer, a thread pool and a
 * memory governor, configured once by an explicit fer_engine_config. Sequences (requests) are
 * admitted by the governor by their projected KV commit; each is prefilled, then advanced one token
 * at a time on its own (with a captured decode plan) or together with others in one batched step.
 * No process-global state: engines in one process are independent. Thread-safety: one call at a
 * time per engine (a second thread gets BUSY), except fer_engine_seq_cancel, which any thread may
 * call at any time. Claims: C-ENG-009..C-ENG-019.
 */
typedef struct fer_engine fer_engine;
typedef struct fer_engine_seq fer_engine_seq;

/** How block-quantized projections multiply. Append-only. */
enum fer_matmul_mode_code {
  /** 8-bit activations and integer block dots (fer_matmul_quant_i8; llama.cpp's arithmetic). */
  FER_MATMUL_I8 = 0,
  /** The exact f32 product of the dequantized weights (fer_matmul_quant). */
  FER_MATMUL_EXACT = 1,
};
typedef int32_t fer_matmul_mode;

/** Where an engine runs its forward pass. Append-only. */
enum fer_device_code {
  /** This machine's CPUs (every kernel of c/kernels). */
  FER_DEVICE_CPU = 0,
  /** A CUDA GPU (fer_engine_config.device_index). */
  FER_DEVICE_CUDA = 1,
};
typedef int32_t fer_device;

/** How tensor-parallel ranks send the all-reduces' activations. Append-only. */
enum fer_tp_wire_code {
  /** f32 values. */
  FER_TP_WIRE_F32 = 0,
  /** Q8_0 blocks (an f16 scale and 32 int8 codes a block). */
  FER_TP_WIRE_Q8_0 = 1,
};
typedef int32_t fer_tp_wire;

/** How a sequence's one-token decode steps run. Append-only. */
enum fer_plan_policy_code {
  /** Every step builds its kernel list anew. */
  FER_PLAN_OFF = 0,
  /** The step is captured once and replayed; any KV growth drops it (the original engine). */
  FER_PLAN_UNCONDITIONAL = 1,
  /** ... a KV growth keeps it when every buffer it binds kept its address and strides. */
  FER_PLAN_ADDRESS_STABLE = 2,
};
typedef int32_t fer_plan_policy;

/**
 * Everything an engine is configured by. Start from fer_engine_config_init. At creation, when
 * `environment` is not NULL, the FERRITE_* variables in it override the fields (read there and
 * only there, never later): FERRITE_THREADS, FERRITE_MATMUL (i8|exact), FERRITE_KV_LAYOUT
 * (head-major|seq-major|token-major), FERRITE_KV_POLICY (bucketed|fixed), FERRITE_KV_DTYPE
 * (f32|f16|bf16), FERRITE_KV_MIN_BUCKET, FERRITE_PLAN (off|unconditional|address-stable),
 * FERRITE_WEIGHT_BUDGET, FERRITE_KV_BUDGET (bytes, with an optional K, M or G suffix),
 * FERRITE_MAX_SEQS, FERRITE_MAX_TOKENS, FERRITE_CHAT_TEMPLATE (a path), FERRITE_TEMPLATE_NOW
 * (YYYY-MM-DD). A recognised variable with a bad value is INVALID_ARG naming
 * it; other FERRITE_ names are left alone (tools use them). fer_engine_get_config reads back what
 * the engine runs with.
 */
typedef struct fer_engine_config {
  /** sizeof(fer_engine_config) as the caller was compiled. */
  uint32_t struct_size;
  /** Threads of the engine's pool; 0 = one per CPU. */
  uint32_t n_threads;
  /** The GGUF file; or NULL with model_image set. */
  const char *model_path;
  /** A GGUF image in memory (borrowed: it must outlive the engine), used when model_path is NULL. */
  const void *model_image;
  uint64_t model_image_bytes;
  fer_matmul_mode matmul;
  fer_kv_layout kv_layout;
  /** fer_kv_policy_code. */
  int32_t kv_policy;
  /** F32, F16, BF16 or Q8_0 (8-bit blocks of 32 with an f16 scale, llama.cpp's q8_0: 34 bytes
   *  per 32 elements, 0.53x of F16's; the model's head_dim must be a multiple of 32, else
   *  fer_engine_create is UNSUPPORTED). FERRITE_KV_DTYPE: f32, f16, bf16, q8_0. */
  fer_dtype kv_dtype;
  /** Smallest capacity of the bucketed policy (>= 1). */
  uint32_t kv_min_bucket;
  fer_plan_policy plan;
  /** 0: weights used in place from the mapped file; otherwise a weight store holding at most this
   *  many bytes (all of them: fully resident; fewer: streamed). Files only. */
  uint64_t weight_budget_bytes;
  /** The governor's budget for KV: sequences are admitted while their projected commits fit.
   *  With tensor or pipeline parallelism, each rank's: a sequence is charged what the rank
   *  holding the most KV (heads, layers) commits for it, so it fits on every rank. */
  uint64_t kv_budget_bytes;
  /** Sequences alive at once (also the largest batched step). */
  uint32_t max_seqs;
  /** Largest max_tokens a sequence may ask for; 0 = the model's trained context. */
  uint32_t max_tokens;
  /** NULL-terminated "NAME=value" strings to read FERRITE_* from (e.g. `environ`); NULL: none. */
  const char *const *environment;
  /** A Jinja file whose template replaces the model's tokenizer.chat_template (llama.cpp's
   *  --chat-template-file); NULL: the model's. Not a regular file, over 1 MiB, or a syntax error
   *  is INVALID_ARG at creation. FERRITE_CHAT_TEMPLATE: the path. */
  const char *chat_template_path;
  /** The time the chat template's strftime_now formats, in seconds since 1970 UTC (reproducible
   *  prompts); 0: the clock at each render. FERRITE_TEMPLATE_NOW: a date, YYYY-MM-DD (midnight UTC). */
  int64_t chat_template_now_unix;
  /** Tensor parallelism over MPI (Open MPI): the number of processes `mpirun -n N` started, each
   *  holding 1/N of every projection (its query heads and the KV heads they read, a block-aligned
   *  share of the FFN, a share of the vocabulary), with two all-reduces per layer; 0 or 1: one
   *  process. Every process creates its engine with the same config and file; rank 0 then serves
   *  (sequences, scheduler-free generation), the others call fer_engine_run_rank. Model files and
   *  mapped weights only; a mismatch of file or options across the ranks, or a rank that cannot
   *  open its share, fails creation on every rank naming that rank and its host.
   *  FERRITE_TENSOR_PARALLEL: the number. */
  uint32_t tensor_parallel;
  /** With tensor_parallel: how long a rank waits for another inside a step, in milliseconds (0:
   *  30 s). Past it, a rank that died or stopped fails the step on the others with
   *  FER_STATUS_DEVICE_ERROR naming it, and the engine is broken for good: every later call that
   *  runs the model fails at once with that message. FERRITE_TP_TIMEOUT_MS: the number. */
  uint32_t tensor_parallel_timeout_ms;
  /** Pipeline parallelism over MPI: the number of processes `mpirun -n N` started, each running a
   *  run of the model's layers (as even as the count allows) and holding only their weights and
   *  KV; rank 0 embeds and serves, the last applies the head and sends the logits back. The
   *  arithmetic is one process's: the same logits, bit for bit. 0 or 1: one process. With
   *  tensor_parallel too: stages of tensor_parallel ranks each, tensor_parallel x
   *  pipeline_parallel processes (rank r is share r % tensor_parallel of stage
   *  r / tensor_parallel). Faults and the rest as tensor_parallel (its timeout too).
   *  FERRITE_PIPELINE_PARALLEL: the number. */
  uint32_t pipeline_parallel;
  /** With tensor_parallel: how the all-reduces' activations travel (fer_tp_wire_code):
   *  FER_TP_WIRE_F32 (the default: the sums differ from one process's only in their order) or
   *  FER_TP_WIRE_Q8_0 (Q8_0 blocks of 32, 34 bytes each: 3.76x fewer bytes, each sum off by up to
   *  half a step of every block it is rounded in, p of them). Every rank must use the same.
   *  FERRITE_TP_WIRE: f32 or q8_0. */
  fer_tp_wire tensor_parallel_wire;
  /** Where the forward pass runs (fer_device_code): FER_DEVICE_CPU (the default) or
   *  FER_DEVICE_CUDA, on CUDA device device_index. Without a GPU, fer_engine_create answers
   *  UNSUPPORTED with the reason (this library built without CUDA; no CUDA device answers, with the
   *  driver's words) and INVALID_ARG for an index past the devices, before the model is opened;
   *  never a crash. The CUDA backend is being built (issue 34): until it runs the forward pass, a
   *  machine with a GPU gets UNSUPPORTED too, saying so. FERRITE_DEVICE: cpu, cuda or cuda:N. */
  fer_device device;
  uint32_t device_index;
} fer_engine_config;

/** Defaults: threads 0, I8, seq-major, fixed, f16 KV, min bucket 8, address-stable plans, mapped
 *  weights, KV budget 1 GiB, 16 sequences, max_tokens 0, no environment. */
fer_status fer_engine_config_init(fer_engine_config *config);

/**
 * Creates an engine: reads the environment into a copy of config (see fer_engine_config), checks
 * every field (INVALID_ARG naming the first bad one), opens the model and its tokenizer (CORRUPT or
 * UNSUPPORTED naming what is wrong; INVALID_ARG naming a model_path that is not a regular file,
 * C-ABI-008), and makes the pool and the governor.
 */
fer_status fer_engine_create(const fer_engine_config *config, fer_engine **out_engine);

/**
 * This process's rank in its tensor-parallel job and the job's size (fer_engine_config's
 * tensor_parallel): 0 and 1 for an engine of one process. Both outputs 0 on failure.
 */
fer_status fer_engine_parallel_info(const fer_engine *engine, uint32_t *out_rank, uint32_t *out_size);

/**
 * On a rank other than 0 of a tensor-parallel engine: makes rank 0's calls on this rank's share
 * of the model (every step rank 0 runs, its sequences' creation, rewinds and frees) until rank 0
 * frees its engine, then returns OK; free this engine then. MISUSE on rank 0 or for an engine of
 * one process. When a step cannot go on here (a rank stopped answering within the timeout,
 * tensor_parallel_timeout_ms, or this rank's own failure) it prints this rank, its host and the
 * reason and returns that status (DEVICE_ERROR for a rank that stopped); the engine is then of no
 * further use.
 */
fer_status fer_engine_run_rank(fer_engine *engine);

/** Frees the engine; BUSY (nothing freed) while sequences are alive. NULL is OK. */
fer_status fer_engine_free(fer_engine *engine);

/** The configuration the engine runs with (environment applied; model_path points to the
 *  engine's own copy; environment NULL). */
fer_status fer_engine_get_config(const fer_engine *engine, fer_engine_config *out_config);

/** What the model is. */
typedef struct fer_model_info {
  /** "llama", "qwen2" or "qwen3" (NUL-terminated). */
  char architecture[16];
  uint32_t n_layer;
  uint32_t n_embd;
  uint32_t n_head;
  uint32_t n_head_kv;
  uint32_t head_dim;
  uint32_t n_ff;
  uint32_t n_vocab;
  uint32_t n_ctx_train;
  /** -1 when the model names none. */
  int32_t bos_id;
  int32_t eos_id;
  /** The chat's end-of-turn id when the vocabulary has one of <|im_end|> (ChatML), <end_of_turn>
   *  (Gemma), <|eot_id|> (Llama 3), <|end|> (Phi), in that order; else -1. */
  int32_t eot_id;
  /** How the file says an embedding pools the tokens' states (its <arch>.pooling_type, a
   *  fer_pooling); FER_POOLING_NONE when it says nothing. */
  uint32_t pooling;
} fer_model_info;

/** A model file's pooling of token states into an embedding (GGUF's pooling_type values). */
enum fer_pooling {
  /** The file names none (generative models): the caller's choice; ferrite-serve takes the mean. */
  FER_POOLING_NONE = 0,
  FER_POOLING_MEAN = 1,
  /** The first token's state (BERT's CLS): FER_EMBED_POOL_FIRST. */
  FER_POOLING_CLS = 2,
  /** The last token's state: FER_EMBED_POOL_LAST. */
  FER_POOLING_LAST = 3,
};

fer_status fer_engine_model_info(const fer_engine *engine, fer_model_info *out_info);

/** The model's tokenizer (owned by the engine; valid while it lives). */
fer_status fer_engine_tokenizer(const fer_engine *engine, const fer_tokenizer **out_tokenizer);

/** One message of a conversation. */
typedef struct fer_chat_message {
  /** "system", "user" or "assistant" (any text is passed through). */
  const char *role;
  const char *content;
} fer_chat_message;

/** Flags of chat rendering. */
enum fer_chat_flag {
  /** End with the opening of the assistant's turn (the template's add_generation_prompt). */
  FER_CHAT_ADD_GENERATION_PROMPT = 1,
  /** Exactly what transformers renders: content part lists and system messages passed as they
   *  are (without it, text parts are joined and a template without a system role gets the
   *  system text in the next user turn, below). */
  FER_CHAT_VERBATIM = 2,
};

/**
 * How likely the model finds each token of ids[0..n) after the ones before it (a prompt's
 * logprobs, what OpenAI's completions give with echo and logprobs, and what evaluation harnesses
 * score with): out_logprobs[i] = ln p(ids[i] | ids[0..i)) under softmax of the model's logits (in
 * double), for i >= 1; out_logprobs[0] is NaN (nothing precedes it). With top_n > 0 (at most
 * FER_MAX_TOP_LOGPROBS), the top_n most likely tokens at each position i >= 1, descending with ties
 * by id, into out_top_tokens[i * top_n ..] and out_top_logprobs[i * top_n ..] (row 0: -1 and NaN);
 * both may be NULL when top_n is 0. The rows are what one-token steps give, bit for bit. The ids
 * run on a sequence of their own, admitted and freed within the call. INVALID_ARG for no ids, an id
 * outside the vocabulary or top_n too large; on failure the outputs are left as they were.
 */
fer_status fer_engine_prompt_logprobs(fer_engine *engine, const int32_t *ids, size_t n, uint32_t top_n,
                                      float *out_logprobs, int32_t *out_top_tokens, float *out_top_logprobs);

/** Flags of fer_engine_embed. */
enum fer_embed_flag {
  /** Scale the embedding to unit L2 norm. */
  FER_EMBED_NORMALIZE = 1,
  /** The last token's state instead of the mean over the tokens. */
  FER_EMBED_POOL_LAST = 2,
  /** The first token's state instead of the mean (CLS pooling); excludes POOL_LAST. */
  FER_EMBED_POOL_FIRST = 4,
};

/**
 * The embedding of ids[0..n): the model's final hidden state of each token (after its output norm,
 * before the output projection), averaged over the tokens (or the last one's with
 * FER_EMBED_POOL_LAST), in double, unit-length with FER_EMBED_NORMALIZE; n_embd floats into
 * out[0..cap) and n_embd to *out_n. The ids run on a sequence of their own, admitted and freed
 * within the call (nothing of other sequences changes). BUFFER_TOO_SMALL with *out_n = n_embd when
 * cap is short; INVALID_ARG for no ids, an id outside the vocabulary or unknown flags; *out_n 0 on
 * every failure.
 */
fer_status fer_engine_embed(fer_engine *engine, const int32_t *ids, size_t n, uint32_t flags, float *out, size_t cap,
                            size_t *out_n);

/**
 * A chat template: Jinja source (a GGUF's tokenizer.chat_template, or a .jinja file) compiled by
 * ferrite's own engine, rendered as Hugging Face transformers renders it (Jinja2 with trim_blocks
 * and lstrip_blocks, loop controls, transformers' tojson, raise_exception and strftime_now).
 * Immutable once made: one template may render from several threads at once.
 */
typedef struct fer_chat_template fer_chat_template;

/** How a chat template is made. */
typedef struct fer_chat_template_options {
  /** sizeof(fer_chat_template_options) as the caller was compiled. */
  uint32_t struct_size;
  /** The texts the template sees as bos_token and eos_token (NULL: ""). */
  const char *bos_token;
  const char *eos_token;
  /** The tool_use variant (tokenizer.chat_template.tool_use), rendered instead when a request has
   *  a non-empty tools list; NULL: none. */
  const char *tool_use_source;
  uint64_t tool_use_source_bytes;
  /** The time strftime_now formats, in seconds since 1970 UTC; 0: the clock at each render. */
  int64_t now_unix;
} fer_chat_template_options;

/** Defaults: no special tokens, no tool_use variant, the clock. */
fer_status fer_chat_template_options_init(fer_chat_template_options *options);

/** What a chat template takes (bits of fer_chat_template_info.caps), found by rendering probes
 *  when it is made. */
enum fer_chat_cap {
  /** It shows a system message's text. */
  FER_CHAT_CAP_SYSTEM = 1,
  /** It shows the request's tools list (the tool_use variant's, where the file has one). */
  FER_CHAT_CAP_TOOLS = 2,
  /** It shows an assistant message's tool_calls. */
  FER_CHAT_CAP_TOOL_CALLS = 4,
  /** It shows a tool message's content. */
  FER_CHAT_CAP_TOOL_RESPONSES = 8,
};

/** How a model calls tools, from its template (fer_chat_template_info.tool_format). */
enum fer_chat_tool_format {
  /** A JSON object, {"tool_call": {"name", "arguments"}} or {"response": text}: for templates
   *  that do not show tools (the tools and these instructions go into the system message). */
  FER_CHAT_TOOLS_GENERIC = 0,
  /** Hermes and Qwen: <tool_call>{"name": ..., "arguments": {...}}</tool_call> per call. */
  FER_CHAT_TOOLS_HERMES = 1,
  /** Llama 3.x: a JSON object {"name": ..., "parameters": {...}}. */
  FER_CHAT_TOOLS_LLAMA3 = 2,
  /** Mistral: [TOOL_CALLS] then a JSON list of {"name", "arguments"}. */
  FER_CHAT_TOOLS_MISTRAL = 3,
};

/** A chat template's capabilities and tool-call syntax. */
typedef struct fer_chat_template_info {
  /** sizeof(fer_chat_template_info) as the caller was compiled. */
  uint32_t struct_size;
  /** fer_chat_cap bits. */
  uint32_t caps;
  /** fer_chat_tool_format. */
  uint32_t tool_format;
} fer_chat_template_info;

/**
 * The template's capabilities and tool-call syntax into *out_info, whose struct_size the caller
 * sets (INVALID_ARG when smaller than this header's; the struct is zeroed on failure).
 */
fer_status fer_chat_template_get_info(const fer_chat_template *chat_template, fer_chat_template_info *out_info);

/**
 * Compiles source (source_bytes of UTF-8; need not be NUL-terminated). A syntax error is
 * INVALID_ARG with "chat template: line L, column C: ..." (Jinja2's message); options may be NULL
 * (the defaults). On failure *out_template is NULL.
 */
fer_status fer_chat_template_create(const char *source, uint64_t source_bytes, const fer_chat_template_options *options,
                                    fer_chat_template **out_template);

/** NULL is OK. */
fer_status fer_chat_template_free(fer_chat_template *chat_template);

/**
 * Renders a conversation. request_json (request_bytes) is a JSON object as an OpenAI chat request
 * carries it: {"messages": [...], "tools": [...], "documents": [...], "chat_template_kwargs":
 * {...}}, all but messages optional, anything else ignored. The template sees the messages
 * prepared as transformers prepares them (null members dropped; reasoning_content, thinking or
 * reasoning given as both thinking and reasoning_content), tools and documents (or none),
 * add_generation_prompt from flags, bos_token, eos_token, then chat_template_kwargs' members (an
 * enable_thinking flag, say). Unless FER_CHAT_VERBATIM, llama.cpp's adjustments for what a
 * template cannot take (its capabilities, fer_chat_template_get_info): content given as a list of
 * text parts is their texts joined with newlines (another part type is INVALID_ARG: text only); a
 * tool call's arguments given as a JSON string are the object it holds; where the template does
 * not show tool calls, an assistant's become its content as JSON ({"tool_calls": [...]}), where it
 * does not show tool results, a tool message becomes a user message ({"tool_response": {...}}),
 * and where it does not show the tools list, the tools and the generic form's instructions go
 * into the system message; and when it has no system role, each run of system messages goes
 * before the next user turn's content, newline-separated. *out_text is NUL-terminated, allocated by the library:
 * release it with fer_buffer_free; *out_len is its length. Failures (both outputs NULL and 0):
 * INVALID_ARG for a request that is not as described (the message names the member) or unknown
 * flags; TEMPLATE_ERROR when the template raises (Gemma's "Conversation roles must alternate
 * user/assistant/user/assistant/...") or fails on this conversation, with its message;
 * UNSUPPORTED for a construct the engine lacks; BUDGET_EXCEEDED past the render's limits (64 MiB
 * of text, 16M steps).
 */
fer_status fer_chat_template_apply(const fer_chat_template *chat_template, const char *request_json, uint64_t request_bytes,
                                   uint32_t flags, char **out_text, uint64_t *out_len);

/**
 * The engine's chat template: fer_engine_config.chat_template_path's when given, else the file's
 * tokenizer.chat_template (with its tool_use variant), with the vocabulary's BOS and EOS texts;
 * owned by the engine. A model file without one is UNSUPPORTED with a message that names the
 * override (a base model: --chat-template FILE in the CLI and ferrite-serve); *out_template NULL.
 */
fer_status fer_engine_chat_template(const fer_engine *engine, const fer_chat_template **out_template);

/**
 * The engine's chat template applied to a request: fer_chat_template_apply on the template of
 * fer_engine_chat_template, whose failures it returns; strftime_now reads the clock unless
 * FERRITE_TEMPLATE_NOW=YYYY-MM-DD is in the engine's environment. The text is the prompt to encode
 * with FER_ENCODE_ADD_SPECIAL: where that encoding adds BOS (or EOS) itself, a BOS text the
 * template wrote at the start (or an EOS text at the end) is dropped, so the prompt does not get
 * two (llama.cpp's rule).
 */
fer_status fer_engine_chat_apply(const fer_engine *engine, const char *request_json, uint64_t request_bytes, uint32_t flags,
                                 char **out_text, uint64_t *out_len);

/**
 * fer_engine_chat_apply for a list of plain messages (role and content strings), into the caller's
 * buffer: NUL-terminated text into out[0..cap) and its length to *out_len; BUFFER_TOO_SMALL with
 * *out_len = the length needed (nothing written).
 */
fer_status fer_engine_chat_render(const fer_engine *engine, const fer_chat_message *messages, size_t n_messages,
                                  uint32_t flags, char *out, size_t cap, size_t *out_len);

/**
 * Admits a new, empty sequence of up to max_tokens positions: its projected KV commit (the
 * granules its layout commits at max_tokens) is charged to the governor first. Refusal is
 * BUDGET_EXCEEDED naming the projected, charged and budget bytes; more than max_seqs sequences is
 * BUSY; max_tokens above the engine's max_tokens is INVALID_ARG. Nothing changes on failure.
 */
fer_status fer_engine_seq_create(fer_engine *engine, uint32_t max_tokens, fer_engine_seq **out_seq);

/** Frees a sequence and releases its admission charge. NULL is OK. */
fer_status fer_engine_seq_free(fer_engine_seq *seq);

/**
 * Runs n_ids tokens at the sequence's next positions (a prompt, in chunks) and writes the logits of
 * the last into logits[0..n_vocab) (logits may be NULL when not wanted). All or nothing: on
 * failure (BUFFER_TOO_SMALL past max_tokens, INVALID_ARG for an id outside the vocabulary,
 * CANCELLED, ...) the sequence is as before the call.
 */
fer_status fer_engine_prefill(fer_engine_seq *seq, const int32_t *ids, size_t n_ids, float *logits,
                              size_t logits_cap);

/**
 * One decode step: token ids[i] appended to sequence seqs[i] for i < n_seqs (distinct sequences
 * of this engine, n_seqs <= max_seqs), all in one batched pass; logits row i (n_vocab floats at
 * logits + i * n_vocab) is seqs[i]'s next-token logits, bit-identical to what a step of that
 * sequence alone gives. With n_seqs == 1 the step runs the sequence's decode plan. All or nothing.
 */
fer_status fer_engine_decode(fer_engine *engine, fer_engine_seq *const *seqs, const int32_t *ids, size_t n_seqs,
                             float *logits, size_t logits_cap);

/** Rewinds the sequence to its first n_tokens: the next token goes to position n_tokens. Rewinding
 *  to 0 resets it. INVALID_ARG beyond its length. */
fer_status fer_engine_seq_rewind(fer_engine_seq *seq, uint32_t n_tokens);

/**
 * Asks the sequence's running (or next) prefill or decode to stop: it returns CANCELLED at its
 * next chunk boundary with the sequence as before that call. Any thread, any time.
 */
fer_status fer_engine_seq_cancel(fer_engine_seq *seq);

/**
 * Gives the sequence a matcher of grammar from its next position on (NULL: none): every token fed
 * to it afterwards by fer_engine_prefill or fer_engine_decode must be allowed by the matcher, which
 * accepts it; a token it does not allow is INVALID_ARG naming the sequence, position and token,
 * with nothing changed (the call is all or nothing, a CANCELLED one included). Rewinding to before
 * the grammar's first position takes the matcher back to its start; otherwise the matcher is rewound
 * by the same tokens. The grammar's vocabulary must have the model's n_vocab (INVALID_ARG); a
 * sequence's earlier matcher is freed. Read the matcher (for its mask) with fer_engine_seq_matcher.
 */
fer_status fer_engine_seq_set_grammar(fer_engine_seq *seq, const fer_grammar *grammar);

/** The sequence's matcher, borrowed until the sequence is freed or given another, or NULL when none. */
fer_status fer_engine_seq_matcher(fer_engine_seq *seq, fer_matcher **out_matcher);

/** A sequence's state and counters. */
typedef struct fer_engine_seq_stats {
  uint32_t n_tokens;
  uint32_t max_tokens;
  /** The governor's charge for this sequence (its projected commit at max_tokens). */
  uint64_t admitted_bytes;
  /** KV bytes mapped now, capacity and growth (as fer_kv_seq_stats). */
  uint64_t kv_committed_bytes;
  uint64_t kv_capacity_tokens;
  uint64_t kv_growth_events;
  uint64_t kv_bytes_moved;
  /** Decode plan counters. */
  uint64_t plan_captures;
  uint64_t plan_replays;
  uint64_t plan_invalidations;
  uint64_t plan_growth_keeps;
  uint64_t plan_declines;
  /** Why the last plan was dropped or a step ran without one (NUL-terminated). */
  char plan_last_reason[160];
} fer_engine_seq_stats;

fer_status fer_engine_seq_get_stats(const fer_engine_seq *seq, fer_engine_seq_stats *out_stats);

/** Engine-wide counters. */
typedef struct fer_engine_stats {
  uint32_t live_seqs;
  /** The governor: budget, charged KV bytes and refusals. */
  uint64_t kv_budget_bytes;
  uint64_t kv_charged_bytes;
  uint64_t admission_refusals;
  /** Weight residency: 0 = mapped from the file, else the fer_weight_strategy_code of the store. */
  int32_t weight_strategy;
  int32_t reserved0;
  uint64_t weight_page_ins;
  uint64_t weight_evictions;
  uint64_t weight_loaded_granules;
} fer_engine_stats;

fer_status fer_engine_get_stats(const fer_engine *engine, fer_engine_stats *out_stats);

/* ---------------------------------------------------------------------------------------------
 * The scheduler: continuous batching with chunked prefill and an automatic prefix cache, over an
 * engine. Requests (a prompt, sampling settings, an optional grammar, stop ids and a token budget)
 * are submitted from any thread into a bounded queue; each fer_scheduler_step runs ONE batched
 * forward pass over every running request's next token plus chunks of the prompts being prefilled,
 * under a per-step token budget (decode rows first, then prompt chunks in admission order, so a
 * long prompt never stalls the others), samples, and queues per-request events (tokens, then one
 * FINISHED with its reason) that fer_scheduler_poll_events drains in order. Queued requests join
 * at step boundaries (continuous batching), admitted in arrival order by the engine's governor
 * (projected KV at prompt + max_new_tokens); one that does not fit waits at the head of the queue
 * (later ones wait behind it: none is starved) while cached prefixes are evicted and running
 * requests finish; one that can never fit finishes with an ERROR event naming the numbers.
 *
 * Prefix cache: when a request's prompt has run, and again when it ends, the KV of its whole blocks
 * (prefix_block_tokens tokens each: of the prompt, then of the prompt and the fed generated tokens)
 * is kept, keyed by the chain of block hashes (vLLM's
 * scheme). A new request whose prompt starts with cached blocks forks that KV (fer_kv_seq_fork's
 * read-only sharing: full windows map the same granules) and prefills only the rest; the tokens it
 * produces are the same as without the hit. A running request whose prompt shares blocks that an
 * earlier request is still computing waits for them to be cached instead of computing them again
 * (cache-aware scheduling). Cached KV is charged to the governor (FER_MEM_ROLE_CACHE)
 * and evicted least recently used when a request or a sequence of fer_engine_seq_create needs the
 * memory, or when prefix_cache_bytes would be passed.
 *
 * Scheduler requests run on KV of their own (one granule pool for all of them and the cache, the
 * engine's layout and dtype, the fixed policy; a sliding-window model's local layers keep every
 * position, since a cached prefix must stay whole) and never use decode plans; they share the engine's
 * model, pool and governor with sequences made by fer_engine_seq_create. Thread-safety:
 * fer_scheduler_submit, fer_scheduler_cancel and fer_scheduler_get_stats from any thread at any
 * time; fer_scheduler_step, fer_scheduler_poll_events and fer_scheduler_clear_cache from one thread
 * at a time (a second gets BUSY; step and clear_cache also take the engine's guard, BUSY while
 * another call is inside the engine). Claims: C-SCHED-001..
 */
typedef struct fer_scheduler fer_scheduler;

typedef struct fer_scheduler_options {
  /** sizeof(fer_scheduler_options) as the caller was compiled. */
  uint32_t struct_size;
  /** Requests running at once (prefilling or decoding); 0 = the engine's max_seqs (the most). */
  uint32_t max_running;
  /** Tokens one step runs (decode rows plus prompt chunks), >= max_running; default 512. */
  uint32_t step_tokens;
  /** Requests waiting for admission at most; a submit beyond is BUSY; default 256. */
  uint32_t max_queued;
  /** Tokens per cached block; 0 = no prefix cache; default 16. */
  uint32_t prefix_block_tokens;
  uint32_t reserved;
  /** Most bytes the prefix cache keeps committed; default 0 = as much as the governor allows. */
  uint64_t prefix_cache_bytes;
} fer_scheduler_options;

/** Defaults: max_running 0, step_tokens 512, max_queued 256, blocks of 16 tokens, cache bounded
 *  by the governor only. */
fer_status fer_scheduler_options_init(fer_scheduler_options *options);

/** Flags of fer_request_params. */
enum fer_request_flag {
  /** Do not stop at the model's end-of-sequence and end-of-turn tokens (stop_ids still stop). */
  FER_REQUEST_IGNORE_EOS = 1,
  /** Report each token's logprob and top_logprobs alternatives (without it both stay 0). */
  FER_REQUEST_LOGPROBS = 2,
};

/** The most top_logprobs a request may ask for. */
#define FER_MAX_TOP_LOGPROBS 20

/** A request. Start from fer_request_params_init. Everything is copied at submit. */
typedef struct fer_request_params {
  /** sizeof(fer_request_params) as the caller was compiled. */
  uint32_t struct_size;
  /** fer_request_flag bits. */
  uint32_t flags;
  /** The prompt's token ids (at least one). */
  const int32_t *prompt;
  size_t n_prompt;
  /** Tokens to generate at most (>= 1); prompt + max_new_tokens <= the engine's max_tokens. */
  uint32_t max_new_tokens;
  /** Alternatives reported with each token under FER_REQUEST_LOGPROBS (0 .. FER_MAX_TOP_LOGPROBS). */
  uint32_t top_logprobs;
  /** The sampler's settings (fer_sampling_params_init, then set); its eos_token_id is used by
   *  min_new_tokens only. The sampler's history is the prompt and the generated tokens. */
  fer_sampling_params sampling;
  /** A grammar the output must follow (NULL: none): the request's matcher is made at submit (the
   *  grammar then cannot be freed until the request finishes); the grammar's end ends the request
   *  with STOP. Its vocabulary must have the model's n_vocab. */
  const fer_grammar *grammar;
  /** Tokens that end the request with STOP (besides the model's end tokens unless IGNORE_EOS). */
  const int32_t *stop_ids;
  size_t n_stop_ids;
  /** Returned in every event of the request. */
  uint64_t user_data;
  /**
   * A lazy grammar (llama.cpp's grammar triggers): with a grammar and n_grammar_triggers > 0
   * (at most FER_MAX_GRAMMAR_TRIGGERS), the output is free until one of these tokens is generated;
   * that token stays in the output, and from the next token on the grammar holds (its end ends the
   * request with STOP). 0: the grammar holds from the first token. Triggers without a grammar, or
   * outside the vocabulary, are INVALID_ARG.
   */
  const int32_t *grammar_triggers;
  size_t n_grammar_triggers;
} fer_request_params;

/** The most grammar triggers a request may give. */
#define FER_MAX_GRAMMAR_TRIGGERS 64

/** Fills *params: no prompt, max_new_tokens 16, fer_sampling_params_init's sampling, no grammar. */
fer_status fer_request_params_init(fer_request_params *params);

/** Kinds of fer_scheduler_event. */
enum fer_event_kind {
  /** A generated token (not a stopping one): token, logprob, the top alternatives. */
  FER_EVENT_TOKEN = 1,
  /** The request ended (always its last event): finish_reason, counters, status and message. */
  FER_EVENT_FINISHED = 2,
};

/** Why a request ended. */
enum fer_finish_reason {
  /** An end token, a stop id, or the grammar's end (the stopping token is in stop_token). */
  FER_FINISH_STOP = 1,
  /** max_new_tokens generated, or the engine's max_tokens reached. */
  FER_FINISH_LENGTH = 2,
  /** fer_scheduler_cancel, or the scheduler freed with the request unfinished. */
  FER_FINISH_CANCELLED = 3,
  /** Refused after submit (it can never fit the budget, a sampler failure): status and message. */
  FER_FINISH_ERROR = 4,
};

typedef struct fer_scheduler_event {
  uint64_t request_id;
  uint64_t user_data;
  /** fer_event_kind. */
  int32_t kind;
  /** TOKEN: the token. */
  int32_t token;
  /** TOKEN under FER_REQUEST_LOGPROBS: its natural-log probability under the model's distribution
   *  (the softmax of the raw logits, before any processor); 0 otherwise. */
  float logprob;
  /** TOKEN: how many alternatives follow (the request's top_logprobs, or fewer finite logits). */
  uint32_t n_top;
  int32_t top_tokens[FER_MAX_TOP_LOGPROBS];
  float top_logprobs[FER_MAX_TOP_LOGPROBS];
  /** FINISHED: fer_finish_reason. */
  int32_t finish_reason;
  /** FINISHED with STOP: the token that stopped it (-1: none, e.g. the grammar's end came with
   *  the end token). */
  int32_t stop_token;
  /** FINISHED: prompt tokens, of them taken from the prefix cache, and tokens generated. */
  uint32_t n_prompt_tokens;
  uint32_t n_cached_tokens;
  uint32_t n_generated;
  /** FINISHED with ERROR: the status; OK otherwise. */
  fer_status status;
  /** FINISHED with ERROR: what went wrong (NUL-terminated). */
  char message[192];
} fer_scheduler_event;

/** Creates a scheduler over engine (one per engine; BUSY for a second). INVALID_ARG names a bad
 *  option. The engine cannot be freed while the scheduler lives. */
fer_status fer_scheduler_create(fer_engine *engine, const fer_scheduler_options *options,
                                fer_scheduler **out_scheduler);

/** Frees the scheduler: requests still queued or running are dropped (their events with them),
 *  the cache's KV is released. BUSY while another thread is inside it. NULL is OK. */
fer_status fer_scheduler_free(fer_scheduler *scheduler);

/**
 * Queues a request and writes its id (> 0) to *out_request_id (0 on failure). INVALID_ARG names a
 * bad field (an empty prompt, an id outside the vocabulary, prompt + max_new_tokens above the
 * engine's max_tokens, a bad sampling setting, a grammar of another vocabulary); BUDGET_EXCEEDED
 * when its projected KV exceeds the whole budget (the numbers in the message); BUSY when
 * max_queued requests wait. A refused request leaves nothing behind. Any thread.
 */
fer_status fer_scheduler_submit(fer_scheduler *scheduler, const fer_request_params *params,
                                uint64_t *out_request_id);

/**
 * Cancels a request: it ends with CANCELLED at the next step boundary (its tokens so far stay
 * reported). INVALID_ARG for an id never issued; OK (nothing to do) for one already finished. Any
 * thread, any time.
 */
fer_status fer_scheduler_cancel(fer_scheduler *scheduler, uint64_t request_id);

/** What one step did. */
typedef struct fer_scheduler_step_info {
  /** Rows of the forward pass: decode tokens and prompt tokens (0 and 0: no pass ran). */
  uint32_t decode_tokens;
  uint32_t prefill_tokens;
  /** Requests running and queued after the step. */
  uint32_t running;
  uint32_t queued;
  /** Events queued by the step. */
  uint32_t events;
  uint32_t reserved;
} fer_scheduler_step_info;

/**
 * One step: admits queued requests (cancelled ones end first), runs one batched forward pass over
 * the running requests (decode rows and prompt chunks within step_tokens), samples, and queues
 * events. With nothing to run it returns OK at once with zero rows. A failure of the pass itself
 * ends the requests in it with ERROR events (the status and message kept) and returns OK; the
 * scheduler stays usable. *out_info may be NULL.
 */
fer_status fer_scheduler_step(fer_scheduler *scheduler, fer_scheduler_step_info *out_info);

/** Moves up to cap queued events, oldest first, into events[0..); *out_n gets how many. */
fer_status fer_scheduler_poll_events(fer_scheduler *scheduler, fer_scheduler_event *events, size_t cap,
                                     size_t *out_n);

/** The scheduler's counters. */
typedef struct fer_scheduler_stats {
  /** Requests: submitted (accepted), refused at submit, finished by reason (index fer_finish_reason). */
  uint64_t submitted;
  uint64_t refused;
  uint64_t finished[5];
  uint32_t running;
  uint32_t queued;
  /** Steps with a forward pass; tokens they ran (prompt, decode) and tokens generated. */
  uint64_t steps;
  uint64_t prefill_tokens;
  uint64_t decode_tokens;
  uint64_t generated_tokens;
  /** Prefix cache: lookups of an admitted request that reused blocks / reused none, prompt tokens
   *  taken from the cache, entries and their blocks, the bytes of the windows they map (their
   *  charge: a window two entries share counts in both), entries evicted. */
  uint64_t cache_hits;
  uint64_t cache_misses;
  uint64_t cache_hit_tokens;
  uint64_t cache_entries;
  uint64_t cache_blocks;
  uint64_t cache_bytes;
  uint64_t cache_evictions;
  /** The scheduler's granule pool: physical bytes mapped now (running requests and the cache; a
   *  granule mapped by several sequences counts once), and the bytes of the windows each running
   *  request maps, summed (a window a request shares with the cache counts in both; 0 with
   *  nothing running). */
  uint64_t kv_physical_bytes;
  uint64_t kv_live_bytes;
  /** What the operating system reports as allocated for the pool (st_blocks x 512 of its memfd):
   *  the kernel's count beside kv_physical_bytes, the ledger's. */
  uint64_t kv_os_bytes;
} fer_scheduler_stats;

fer_status fer_scheduler_get_stats(const fer_scheduler *scheduler, fer_scheduler_stats *out_stats);

/** Drops every cached prefix (their KV released). One thread at a time, as fer_scheduler_step. */
fer_status fer_scheduler_clear_cache(fer_scheduler *scheduler);

/**
 * The seeded tiny model of an architecture ("llama", "qwen2", "qwen3") as a GGUF image: random F32
 * weights, a 261-id byte-level tokenizer; for tests without downloads. *out_image is malloc'd:
 * release it with fer_buffer_free.
 */
fer_status fer_tiny_model_image(const char *architecture, uint64_t seed, void **out_image, size_t *out_bytes);

/** Frees a buffer the library allocated for the caller. NULL is OK. */
void fer_buffer_free(void *buffer);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* FERRITE_H */
