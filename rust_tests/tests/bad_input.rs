//! Bad input through the raw ABI (ferrite-sys): every entry point answers NULL pointers and bad
//! descriptors with its status, never a crash (C-ABI-004); every failing call leaves a message
//! and the next successful call clears it (C-ABI-006); and a refused kernel call writes nothing
//! (C-ADD-003, C-GATHER-002).

mod common;

use common::*;
use ferrite::status::*;
use ferrite::sys::{self, fer_tensor};
use ferrite::{dtype, Status, ThreadPool};
use std::os::raw::c_void;
use std::ptr::{null, null_mut};

const SENTINEL: u32 = 0x7fa5_a5a5;

/// A contiguous descriptor over `data` (no checks: these tests build bad ones on purpose).
fn desc<T>(data: *mut T, dt: i32, shape: &[i64]) -> fer_tensor {
    let es = std::mem::size_of::<T>() as i64;
    let mut t = fer_tensor {
        data: data.cast::<c_void>(),
        dtype: dt,
        rank: shape.len() as i32,
        shape: [0; 8],
        strides: [0; 8],
    };
    let mut acc = es;
    for i in (0..shape.len()).rev() {
        t.shape[i] = shape[i];
        t.strides[i] = acc;
        acc *= shape[i].max(1);
    }
    t
}

/// Asserts `st == want`, that the call left a message, and returns the message.
fn refused(st: Status, want: Status, what: &str) -> String {
    assert_eq!(
        st,
        want,
        "{what}: got {} ({}), want {} ({}); message: {:?}",
        st,
        ferrite::status_str(st),
        want,
        ferrite::status_str(want),
        ferrite::last_error_message()
    );
    assert_message_set(what)
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kernel {
    Add,
    Gather,
    Mean,
}

const KERNELS: [Kernel; 3] = [Kernel::Add, Kernel::Gather, Kernel::Mean];

/// Valid inputs for one kernel call, with the output buffer filled with a sentinel.
struct Setup {
    kernel: Kernel,
    a: Vec<f32>,
    b: Vec<f32>,
    idx: Vec<i64>,
    out: Vec<u32>,
    tensors: Vec<fer_tensor>,
}

impl Setup {
    fn new(kernel: Kernel) -> Box<Setup> {
        let mut s = Box::new(Setup {
            kernel,
            a: (0..12).map(|i| i as f32 * 0.5).collect(),
            b: vec![1.0, 2.0, 3.0],
            // room for 6 elements of 4 bytes after the two indices: "out overlaps indices" points
            // out (24 bytes) at them, and a faulty library would write there rather than past it
            idx: vec![1, -1, 0],
            out: vec![SENTINEL; 6],
            tensors: vec![],
        });
        let out = s.out.as_mut_ptr();
        s.tensors = match kernel {
            Kernel::Add => vec![
                desc(s.a.as_mut_ptr(), dtype::F32, &[2, 3]),
                desc(s.b.as_mut_ptr(), dtype::F32, &[3]),
                desc(out, dtype::F32, &[2, 3]),
            ],
            Kernel::Gather => vec![
                desc(s.a.as_mut_ptr(), dtype::F32, &[4, 3]),
                desc(s.idx.as_mut_ptr(), dtype::I64, &[2]),
                desc(out, dtype::F32, &[2, 3]),
            ], // idx[2] unused
            Kernel::Mean => vec![
                desc(s.a.as_mut_ptr(), dtype::F32, &[2, 3]),
                desc(out, dtype::F32, &[2, 1]),
            ],
        };
        s
    }

    fn names(&self) -> &'static [&'static str] {
        match self.kernel {
            Kernel::Add => &["a", "b", "out"],
            Kernel::Gather => &["data", "indices", "out"],
            Kernel::Mean => &["x", "out"],
        }
    }

    /// Calls the kernel on `tensors`, with `null_at` replaced by NULL.
    fn call_with(&self, pool: *mut sys::fer_threadpool, null_at: Option<usize>) -> Status {
        let p = |i: usize| {
            if null_at == Some(i) {
                null()
            } else {
                &self.tensors[i] as *const fer_tensor
            }
        };
        // SAFETY: every non-NULL descriptor points into this Setup's buffers (or is refused by the
        // validation these tests exercise before any element is touched).
        unsafe {
            match self.kernel {
                Kernel::Add => sys::fer_add(pool, p(0), p(1), p(2)),
                Kernel::Gather => sys::fer_gather(pool, p(0), p(1), p(2)),
                Kernel::Mean => sys::fer_reduce_mean(pool, p(0), p(1)),
            }
        }
    }

    fn call(&self) -> Status {
        self.call_with(null_mut(), None)
    }

    fn out_untouched(&self) -> bool {
        self.out.iter().all(|&v| v == SENTINEL)
    }

    /// The refused call wrote nothing; then the valid call succeeds and clears the message.
    fn then_valid_call_clears(&mut self, what: &str) {
        assert!(self.out_untouched(), "{what}: a refused call wrote to out");
        let fresh = Setup::new(self.kernel);
        assert_eq!(
            fresh.call(),
            OK,
            "valid {:?} call failed: {}",
            self.kernel,
            ferrite::last_error_message()
        );
        assert_message_clear(&format!("{what}, then a successful call"));
    }
}

/// Applies `corrupt` to each tensor argument of each kernel in turn; expects `want` every time.
// EVIDENCE: C-ABI-006 (every refusal in this file checks the message is set, then that the next
// successful call clears it)
fn each_argument(what: &str, want: Status, corrupt: impl Fn(&mut fer_tensor)) {
    for k in KERNELS {
        for i in 0..Setup::new(k).tensors.len() {
            let mut s = Setup::new(k);
            corrupt(&mut s.tensors[i]);
            let ctx = format!("{:?} {} with {}", k, s.names()[i], what);
            refused(s.call(), want, &ctx);
            // fer_tensor_check validates exactly as the kernels do on entry
            // SAFETY: a descriptor is only read.
            refused(
                unsafe { sys::fer_tensor_check(&s.tensors[i]) },
                want,
                &format!("fer_tensor_check of {ctx}"),
            );
            s.then_valid_call_clears(&ctx);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// NULL pointers

#[test]
fn c_abi_004_null_tensor_arguments() {
    let mut pool = ThreadPool::new(2, ferrite::isa::AUTO).unwrap();
    for k in KERNELS {
        for i in 0..Setup::new(k).tensors.len() {
            for pool_ptr in [null_mut(), pool.as_ptr()] {
                let mut s = Setup::new(k);
                let ctx = format!("{:?} with {} = NULL (pool {:?})", k, s.names()[i], pool_ptr);
                refused(s.call_with(pool_ptr, Some(i)), NULL_ARG, &ctx);
                s.then_valid_call_clears(&ctx);
            }
        }
    }
}

#[test]
fn c_abi_004_null_data_in_a_nonempty_tensor() {
    each_argument("data = NULL", NULL_ARG, |t| t.data = null_mut());
    // ... but an empty tensor may have NULL data
    let t = desc::<f32>(null_mut(), dtype::F32, &[3, 0]);
    // SAFETY: descriptor only read.
    assert_eq!(
        unsafe { sys::fer_tensor_check(&t) },
        OK,
        "{}",
        ferrite::last_error_message()
    );
}

#[test]
fn c_abi_004_null_out_parameters() {
    let mut pool = ThreadPool::new(1, ferrite::isa::PORTABLE).unwrap();
    let mut buf = [0f32; 4];
    let shape = [4i64];
    let mut t = desc(buf.as_mut_ptr(), dtype::F32, &shape);
    // SAFETY: each call gets NULL for one pointer and valid pointers elsewhere.
    unsafe {
        refused(
            sys::fer_dtype_size(dtype::F32, null_mut()),
            NULL_ARG,
            "fer_dtype_size(out_size = NULL)",
        );
        refused(
            sys::fer_tensor_check(null()),
            NULL_ARG,
            "fer_tensor_check(NULL)",
        );
        refused(
            sys::fer_tensor_init_contiguous(
                null_mut(),
                buf.as_mut_ptr().cast(),
                dtype::F32,
                1,
                shape.as_ptr(),
            ),
            NULL_ARG,
            "fer_tensor_init_contiguous(out = NULL)",
        );
        refused(
            sys::fer_tensor_init_contiguous(&mut t, buf.as_mut_ptr().cast(), dtype::F32, 1, null()),
            NULL_ARG,
            "fer_tensor_init_contiguous(shape = NULL)",
        );
        assert_eq!(t.rank, 0, "out zeroed on failure");
        refused(
            sys::fer_tensor_init_contiguous(&mut t, null_mut(), dtype::F32, 1, shape.as_ptr()),
            NULL_ARG,
            "fer_tensor_init_contiguous(data = NULL, 4 elements)",
        );
        assert!(
            t.data.is_null() && t.rank == 0 && t.dtype == 0,
            "out zeroed on failure"
        );
        refused(
            sys::fer_threadpool_options_init(null_mut()),
            NULL_ARG,
            "fer_threadpool_options_init(NULL)",
        );
        refused(
            sys::fer_threadpool_create(null(), null_mut()),
            NULL_ARG,
            "fer_threadpool_create(out_pool = NULL)",
        );
        let mut n = 99u32;
        refused(
            sys::fer_threadpool_n_threads(null(), &mut n),
            NULL_ARG,
            "fer_threadpool_n_threads(pool = NULL)",
        );
        assert_eq!(n, 0, "out zeroed on failure");
        refused(
            sys::fer_threadpool_n_threads(pool.as_ptr(), null_mut()),
            NULL_ARG,
            "fer_threadpool_n_threads(out = NULL)",
        );
        let mut isa = 99;
        refused(
            sys::fer_threadpool_isa(null(), &mut isa),
            NULL_ARG,
            "fer_threadpool_isa(pool = NULL)",
        );
        refused(
            sys::fer_threadpool_isa(pool.as_ptr(), null_mut()),
            NULL_ARG,
            "fer_threadpool_isa(out = NULL)",
        );
        sys::fer_threadpool_free(null_mut()); // a no-op

        // fer_last_error_message is the reader: it answers NULL_ARG but must not replace the
        // message it exists to report.
        refused(
            sys::fer_dtype_size(dtype::F32, null_mut()),
            NULL_ARG,
            "set a message",
        );
        let before = ferrite::last_error_message();
        let mut len = 0usize;
        assert_eq!(
            sys::fer_last_error_message(null_mut(), 8, &mut len),
            NULL_ARG,
            "buf = NULL with cap > 0"
        );
        let mut small = [0u8; 8];
        assert_eq!(
            sys::fer_last_error_message(small.as_mut_ptr().cast(), 8, null_mut()),
            NULL_ARG,
            "out_len = NULL"
        );
        assert_eq!(
            ferrite::last_error_message(),
            before,
            "reading with bad arguments changed the message"
        );
        // cap 0 with a NULL buffer is allowed: it only reports the length
        let st = sys::fer_last_error_message(null_mut(), 0, &mut len);
        assert_eq!((st, len), (BUFFER_TOO_SMALL, before.len()));
    }
}

// EVIDENCE: C-ABI-004
// EVIDENCE: C-CUDA-001 (the CUDA entry points check their pointers too)
#[test]
fn c_abi_004_null_arguments_of_the_cuda_entries() {
    // SAFETY: NULL pointers are what is being tested; nothing is dereferenced by a correct library.
    let built = unsafe { sys::fer_cuda_is_built() };
    // Pointers are checked first, built with CUDA or not (the stub answers as the real entries
    // do, so callers see one precedence); UNSUPPORTED is the not-built answer to valid arguments.
    let _ = built;
    let want = NULL_ARG;
    let a = [0f32; 4];
    let mut out = [0f32; 4];
    unsafe {
        refused(
            sys::fer_cuda_device_count(null_mut()),
            want,
            "fer_cuda_device_count(NULL)",
        );
        refused(
            sys::fer_cuda_add_f32_rows(null(), a.as_ptr(), out.as_mut_ptr(), 2, 2),
            want,
            "fer_cuda_add_f32_rows(a = NULL)",
        );
        refused(
            sys::fer_cuda_add_f32_rows(a.as_ptr(), null(), out.as_mut_ptr(), 2, 2),
            want,
            "fer_cuda_add_f32_rows(b = NULL)",
        );
        refused(
            sys::fer_cuda_add_f32_rows(a.as_ptr(), a.as_ptr(), null_mut(), 2, 2),
            want,
            "fer_cuda_add_f32_rows(out = NULL)",
        );
    }
    assert!(out.iter().all(|&v| v == 0.0));
}

// ---------------------------------------------------------------------------------------------
// bad descriptors, on every tensor argument of every kernel and on fer_tensor_check

#[test]
fn c_abi_004_rank_outside_0_to_8() {
    each_argument("rank 9", INVALID_ARG, |t| t.rank = 9);
    each_argument("rank -1", INVALID_ARG, |t| t.rank = -1);
    each_argument("rank i32::MAX", INVALID_ARG, |t| t.rank = i32::MAX);
}

#[test]
fn c_abi_004_negative_extent() {
    each_argument("shape[0] = -1", INVALID_ARG, |t| t.shape[0] = -1);
    each_argument("shape[0] = i64::MIN", INVALID_ARG, |t| {
        t.shape[0] = i64::MIN
    });
}

#[test]
fn c_abi_004_element_count_overflow() {
    let set = |t: &mut fer_tensor, shape: &[i64]| {
        t.rank = shape.len() as i32;
        for (i, &d) in shape.iter().enumerate() {
            t.shape[i] = d;
            t.strides[i] = 8; // a multiple of every element size
        }
    };
    each_argument("shape [2^32, 2^32]", SIZE_OVERFLOW, |t| {
        set(t, &[1 << 32, 1 << 32])
    });
    each_argument("shape [2^62, 2]", SIZE_OVERFLOW, |t| set(t, &[1 << 62, 2]));
    each_argument("shape [2^21 x 3]", SIZE_OVERFLOW, |t| {
        set(t, &[1 << 21, 1 << 21, 1 << 21])
    });
}

#[test]
fn c_abi_004_byte_extent_overflow() {
    let set = |t: &mut fer_tensor, n: i64, stride: i64| {
        t.rank = 1;
        t.shape[0] = n;
        t.strides[0] = stride;
    };
    each_argument("shape [3] stride 2^62", SIZE_OVERFLOW, |t| {
        set(t, 3, 1 << 62)
    });
    each_argument("shape [3] stride -2^62", SIZE_OVERFLOW, |t| {
        set(t, 3, -(1 << 62))
    });
    each_argument("shape [2^60] stride 16", SIZE_OVERFLOW, |t| {
        set(t, 1 << 60, 16)
    });
    each_argument("shape [2, 2] strides [2^62, 2^62]", SIZE_OVERFLOW, |t| {
        set(t, 2, 1 << 62);
        t.rank = 2;
        t.shape[1] = 2;
        t.strides[1] = 1 << 62;
    });
}

#[test]
fn c_abi_004_misaligned_data_or_stride() {
    each_argument("data one byte past an element boundary", INVALID_ARG, |t| {
        t.data = unsafe { t.data.cast::<u8>().add(1) }.cast()
    });
    each_argument("a stride of element size + 1 bytes", INVALID_ARG, |t| {
        t.strides[0] += 1
    });
    each_argument("a stride of element size - 1 bytes", INVALID_ARG, |t| {
        t.strides[0] -= 1
    });
}

#[test]
fn c_abi_004_unknown_dtype() {
    for dt in [dtype::INVALID, 7, 15, 99, -1, i32::MAX, i32::MIN] {
        each_argument(&format!("dtype {dt}"), INVALID_ARG, |t| t.dtype = dt);
    }
}

#[test]
fn c_abi_004_reserved_block_dtypes_unsupported() {
    for dt in dtype::RESERVED_BLOCK {
        each_argument(&format!("block dtype {dt}"), UNSUPPORTED, |t| t.dtype = dt);
    }
    for dt in dtype::RESERVED_BLOCK {
        let mut size = 7usize;
        // SAFETY: valid out-pointer.
        refused(
            unsafe { sys::fer_dtype_size(dt, &mut size) },
            UNSUPPORTED,
            "fer_dtype_size of a block dtype",
        );
    }
}

#[test]
fn c_abi_004_dtype_size() {
    for (dt, want) in [
        (dtype::F32, 4),
        (dtype::F16, 2),
        (dtype::BF16, 2),
        (dtype::I32, 4),
        (dtype::I64, 8),
        (dtype::U8, 1),
    ] {
        assert_eq!(ferrite::dtype_size(dt).unwrap(), want);
        assert_message_clear("fer_dtype_size OK");
    }
    let mut size = 7usize;
    // SAFETY: valid out-pointer.
    refused(
        unsafe { sys::fer_dtype_size(99, &mut size) },
        INVALID_ARG,
        "fer_dtype_size(99)",
    );
    assert_eq!(size, 0, "out zeroed on failure");
}

#[test]
fn c_abi_004_tensor_init_contiguous() {
    let mut buf = [0u16; 24];
    let mut t = desc(buf.as_mut_ptr(), dtype::F16, &[1]);
    // SAFETY: valid pointers; shape has `rank` entries.
    unsafe {
        assert_eq!(
            sys::fer_tensor_init_contiguous(
                &mut t,
                buf.as_mut_ptr().cast(),
                dtype::F16,
                3,
                [2i64, 3, 4].as_ptr()
            ),
            OK
        );
        assert_eq!(
            (t.rank, t.dtype, &t.shape[..3], &t.strides[..3]),
            (3, dtype::F16, &[2i64, 3, 4][..], &[24i64, 8, 2][..])
        );
        assert_eq!(t.data, buf.as_mut_ptr().cast());
        for (rank, shape, dt, want) in [
            (9, [1i64; 9].as_slice(), dtype::F32, INVALID_ARG),
            (-1, [1i64].as_slice(), dtype::F32, INVALID_ARG),
            (1, [-2i64].as_slice(), dtype::F32, INVALID_ARG),
            (1, [4i64].as_slice(), 99, INVALID_ARG),
            (1, [4i64].as_slice(), dtype::Q4_0, UNSUPPORTED),
            (
                2,
                [1i64 << 32, 1 << 32].as_slice(),
                dtype::F32,
                SIZE_OVERFLOW,
            ),
            (1, [1i64 << 62].as_slice(), dtype::F32, SIZE_OVERFLOW),
        ] {
            t.rank = 5;
            let st = sys::fer_tensor_init_contiguous(
                &mut t,
                buf.as_mut_ptr().cast(),
                dt,
                rank,
                shape.as_ptr(),
            );
            refused(
                st,
                want,
                &format!("fer_tensor_init_contiguous(rank {rank}, shape {shape:?}, dtype {dt})"),
            );
            assert!(
                t.data.is_null() && t.rank == 0 && t.shape == [0; 8] && t.strides == [0; 8],
                "out zeroed on failure"
            );
        }
        // misaligned data: f32 at an odd address
        let st = sys::fer_tensor_init_contiguous(
            &mut t,
            buf.as_mut_ptr().cast::<u8>().add(1).cast(),
            dtype::F32,
            1,
            [2i64].as_ptr(),
        );
        refused(
            st,
            INVALID_ARG,
            "fer_tensor_init_contiguous(misaligned data)",
        );
    }
}

// ---------------------------------------------------------------------------------------------
// kernel-specific refusals

/// Runs `s` after `edit`, expects `want`, nothing written, and that a valid call clears the message.
fn refuse_case(kernel: Kernel, what: &str, want: Status, edit: impl FnOnce(&mut Setup)) {
    let mut s = Setup::new(kernel);
    edit(&mut s);
    let ctx = format!("{kernel:?}: {what}");
    refused(s.call(), want, &ctx);
    s.then_valid_call_clears(&ctx);
}

#[test]
fn c_abi_004_dtype_mismatch_between_tensors() {
    refuse_case(Kernel::Add, "b is f16", INVALID_ARG, |s| {
        s.tensors[1] = desc(s.b.as_mut_ptr().cast::<u16>(), dtype::F16, &[3])
    });
    refuse_case(Kernel::Add, "out is bf16", INVALID_ARG, |s| {
        s.tensors[2] = desc(s.out.as_mut_ptr().cast::<u16>(), dtype::BF16, &[2, 3])
    });
    refuse_case(Kernel::Add, "a is f16", INVALID_ARG, |s| {
        s.tensors[0] = desc(s.a.as_mut_ptr().cast::<u16>(), dtype::F16, &[2, 3])
    });
    refuse_case(Kernel::Gather, "out is i32, data f32", INVALID_ARG, |s| {
        s.tensors[2].dtype = dtype::I32
    });
    refuse_case(Kernel::Gather, "indices are f32", INVALID_ARG, |s| {
        s.tensors[1] = desc(s.b.as_mut_ptr(), dtype::F32, &[2])
    });
    refuse_case(Kernel::Gather, "indices are u8", INVALID_ARG, |s| {
        s.tensors[1] = desc(s.idx.as_mut_ptr().cast::<u8>(), dtype::U8, &[2])
    });
    refuse_case(Kernel::Mean, "out is f16", INVALID_ARG, |s| {
        s.tensors[1] = desc(s.out.as_mut_ptr().cast::<u16>(), dtype::F16, &[2, 1])
    });
}

#[test]
fn c_abi_004_arithmetic_kernels_refuse_integer_dtypes() {
    // A known dtype the kernel does not implement: UNSUPPORTED ("the feature, dtype or ... is not
    // available in this build").
    refuse_case(Kernel::Add, "all i32", UNSUPPORTED, |s| {
        s.tensors.iter_mut().for_each(|t| t.dtype = dtype::I32)
    });
    refuse_case(Kernel::Mean, "all i32", UNSUPPORTED, |s| {
        s.tensors.iter_mut().for_each(|t| t.dtype = dtype::I32)
    });
}

// EVIDENCE: C-ADD-003
#[test]
fn c_add_003_shape_mismatch_cases() {
    type Case = (&'static str, &'static [i64], &'static [i64], &'static [i64]);
    let cases: [Case; 7] = [
        ("b does not broadcast", &[2, 3], &[2], &[2, 3]),
        ("out wider than the broadcast", &[2, 3], &[3], &[2, 4]),
        ("out taller than the broadcast", &[1, 3], &[3], &[2, 3]),
        ("out has an extra leading axis", &[2, 3], &[3], &[1, 2, 3]),
        ("out lost an axis", &[2, 3], &[3], &[3]),
        ("a's rank above out's", &[1, 2, 3], &[3], &[2, 3]),
        ("0 against 2", &[0, 3], &[2, 3], &[0, 3]),
    ];
    for (what, a_shape, b_shape, out_shape) in cases {
        refuse_case(Kernel::Add, what, SHAPE_MISMATCH, |s| {
            s.a = vec![1.0; 12];
            s.b = vec![2.0; 12];
            s.out = vec![SENTINEL; 12];
            s.tensors = vec![
                desc(s.a.as_mut_ptr(), dtype::F32, a_shape),
                desc(s.b.as_mut_ptr(), dtype::F32, b_shape),
                desc(s.out.as_mut_ptr(), dtype::F32, out_shape),
            ];
        });
    }
}

// EVIDENCE: C-ABI-004 (gather and reduce_mean shape checks)
#[test]
fn c_abi_004_gather_and_mean_shape_mismatch() {
    refuse_case(
        Kernel::Gather,
        "out has the wrong row length",
        SHAPE_MISMATCH,
        |s| s.tensors[2] = desc(s.out.as_mut_ptr(), dtype::F32, &[3, 2]),
    );
    refuse_case(
        Kernel::Gather,
        "out misses the indices axis",
        SHAPE_MISMATCH,
        |s| s.tensors[2] = desc(s.out.as_mut_ptr(), dtype::F32, &[3]),
    );
    refuse_case(Kernel::Gather, "data of rank 0", SHAPE_MISMATCH, |s| {
        s.tensors[0] = desc(s.a.as_mut_ptr(), dtype::F32, &[])
    });
    refuse_case(Kernel::Mean, "out's last axis is 3", SHAPE_MISMATCH, |s| {
        s.tensors[1] = desc(s.out.as_mut_ptr(), dtype::F32, &[2, 3])
    });
    refuse_case(Kernel::Mean, "out without keepdims", SHAPE_MISMATCH, |s| {
        s.tensors[1] = desc(s.out.as_mut_ptr(), dtype::F32, &[2])
    });
    refuse_case(
        Kernel::Mean,
        "out's leading axis differs",
        SHAPE_MISMATCH,
        |s| s.tensors[1] = desc(s.out.as_mut_ptr(), dtype::F32, &[3, 1]),
    );
    refuse_case(Kernel::Mean, "x of rank 0", SHAPE_MISMATCH, |s| {
        s.tensors[0] = desc(s.a.as_mut_ptr(), dtype::F32, &[]);
        s.tensors[1] = desc(s.out.as_mut_ptr(), dtype::F32, &[]);
    });
}

// EVIDENCE: C-ABI-004 (outputs may not map two elements to one address)
#[test]
fn c_abi_004_output_mapping_two_elements_to_one_address() {
    for k in KERNELS {
        let out_i = if k == Kernel::Mean { 1 } else { 2 };
        refuse_case(k, "out with a zero stride", INVALID_ARG, |s| {
            let t = &mut s.tensors[out_i];
            t.strides[0] = 0;
        });
        refuse_case(
            k,
            "out whose axes interleave onto each other",
            INVALID_ARG,
            |s| {
                if k == Kernel::Mean {
                    // x [2, 3, 2] -> out [2, 3, 1]
                    s.tensors[0] = desc(s.a.as_mut_ptr(), dtype::F32, &[2, 3, 2]);
                    s.tensors[1] = desc(s.out.as_mut_ptr(), dtype::F32, &[2, 3, 1]);
                }
                // axis 0 steps one element, axis 1 too: (0,1) and (1,0) share an address
                let t = &mut s.tensors[out_i];
                t.strides[0] = 4;
                t.strides[1] = 4;
            },
        );
    }
}

// EVIDENCE: C-ABI-004 (overlap of outputs and inputs)
#[test]
fn c_abi_004_output_overlapping_an_input() {
    // add: out one element past a (overlapping, not identical) -> refused; exactly a -> allowed
    for shift in [1usize, 2] {
        let mut buf = vec![1.0f32; 8];
        let b = [2.0f32, 3.0, 4.0];
        let base = buf.as_mut_ptr();
        let a = desc(base, dtype::F32, &[2, 3]);
        let bt = desc(b.as_ptr() as *mut f32, dtype::F32, &[3]);
        let out = desc(unsafe { base.add(shift) }, dtype::F32, &[2, 3]);
        // SAFETY: all descriptors lie inside `buf` / `b`.
        refused(
            unsafe { sys::fer_add(null_mut(), &a, &bt, &out) },
            INVALID_ARG,
            "add: out overlaps a",
        );
        refused(
            unsafe { sys::fer_add(null_mut(), &bt, &a, &out) },
            INVALID_ARG,
            "add: out overlaps b",
        );
        assert!(buf.iter().all(|&v| v == 1.0), "refused add wrote");
        assert_eq!(
            unsafe { sys::fer_add(null_mut(), &a, &bt, &a) },
            OK,
            "add with out exactly a"
        );
        assert_message_clear("add in place");
        assert_eq!(&buf[..6], &[3.0, 4.0, 5.0, 3.0, 4.0, 5.0]);
    }
    // add: out with a's data but other strides is not "exactly a"
    let mut buf = vec![1.0f32; 6];
    let b = [2.0f32; 3];
    let a = desc(buf.as_mut_ptr(), dtype::F32, &[2, 3]);
    let mut out = a;
    out.shape[..2].copy_from_slice(&[3, 2]);
    out.strides[..2].copy_from_slice(&[4, 12]);
    let bt = desc(b.as_ptr() as *mut f32, dtype::F32, &[1]);
    let mut a32 = a;
    a32.shape[..2].copy_from_slice(&[3, 2]);
    a32.strides[..2].copy_from_slice(&[8, 4]);
    refused(
        unsafe { sys::fer_add(null_mut(), &a32, &bt, &out) },
        INVALID_ARG,
        "add: out transposes a in place",
    );

    // gather: out overlapping data, out overlapping indices
    refuse_case(Kernel::Gather, "out overlaps data", INVALID_ARG, |s| {
        let d = s.tensors[0].data.cast::<f32>();
        s.tensors[2].data = unsafe { d.add(6) }.cast();
    });
    refuse_case(Kernel::Gather, "out overlaps indices", INVALID_ARG, |s| {
        s.tensors[2].data = s.tensors[1].data
    });
    // reduce_mean: out inside x
    refuse_case(Kernel::Mean, "out overlaps x", INVALID_ARG, |s| {
        s.tensors[1].data = s.tensors[0].data
    });
}

// EVIDENCE: C-GATHER-002
#[test]
fn c_gather_002_out_of_range_index_cases() {
    for (bad, wide) in [
        (4i64, true),
        (-5, true),
        (i64::MAX, true),
        (i64::MIN, true),
        (4, false),
        (-5, false),
        (i32::MIN as i64, false),
    ] {
        refuse_case(
            Kernel::Gather,
            &format!(
                "index {bad} with 4 rows ({})",
                if wide { "i64" } else { "i32" }
            ),
            INVALID_ARG,
            |s| {
                s.idx = vec![0, bad];
                if wide {
                    s.tensors[1] = desc(s.idx.as_mut_ptr(), dtype::I64, &[2]);
                } else {
                    let p = s.idx.as_mut_ptr().cast::<i32>();
                    // SAFETY: idx has room for four i32.
                    unsafe {
                        p.write(0);
                        p.add(1).write(bad as i32);
                    }
                    s.tensors[1] = desc(p, dtype::I32, &[2]);
                }
            },
        );
    }
}

// ---------------------------------------------------------------------------------------------
// the message itself

// EVIDENCE: C-ABI-006
#[test]
fn c_abi_006_message_read_truncated_and_per_thread() {
    // SAFETY: valid pointers throughout.
    unsafe {
        refused(
            sys::fer_tensor_check(null()),
            NULL_ARG,
            "fer_tensor_check(NULL)",
        );
        let full = ferrite::last_error_message();
        assert!(full.len() > 4);
        // truncation: cap - 1 bytes, BUFFER_TOO_SMALL, full length reported
        let mut buf = [0xffu8; 5];
        let mut len = 0usize;
        assert_eq!(
            sys::fer_last_error_message(buf.as_mut_ptr().cast(), 5, &mut len),
            BUFFER_TOO_SMALL
        );
        assert_eq!(len, full.len());
        assert_eq!(&buf[..4], &full.as_bytes()[..4]);
        assert_eq!(buf[4], 0, "NUL-terminated");
        // reading does not clear
        assert_eq!(ferrite::last_error_message(), full);
        // exactly enough room
        let mut big = vec![0xffu8; full.len() + 1];
        assert_eq!(
            sys::fer_last_error_message(big.as_mut_ptr().cast(), big.len(), &mut len),
            OK
        );
        assert_eq!(
            (&big[..full.len()], big[full.len()], len),
            (full.as_bytes(), 0, full.len())
        );

        // per thread: another thread has its own (empty) message and its failures stay there
        let other = std::thread::spawn(|| {
            let before = ferrite::last_error_message();
            let mut s = 0usize;
            let st = sys::fer_dtype_size(99, &mut s);
            (before, st, ferrite::last_error_message())
        })
        .join()
        .unwrap();
        assert_eq!(other.0, "", "a new thread starts with no message");
        assert_eq!(other.1, INVALID_ARG);
        assert!(!other.2.is_empty());
        assert_eq!(
            ferrite::last_error_message(),
            full,
            "another thread's failure changed this thread's message"
        );

        // a successful call of any kind clears it
        let mut opts = std::mem::zeroed();
        assert_eq!(sys::fer_threadpool_options_init(&mut opts), OK);
        assert_message_clear("fer_threadpool_options_init");
        let st = sys::fer_dtype_size(99, &mut len);
        refused(st, INVALID_ARG, "fer_dtype_size(99)");
        let mut buf = [1f32; 2];
        let t = desc(buf.as_mut_ptr(), dtype::F32, &[2]);
        assert_eq!(sys::fer_tensor_check(&t), OK);
        assert_message_clear("fer_tensor_check OK");
    }
    // The safe layer hands the message over in its Error.
    let e = ferrite::dtype_size(99).unwrap_err();
    assert_eq!(e.code, INVALID_ARG);
    assert!(!e.message.is_empty() && e.message == ferrite::last_error_message());
    assert!(e.to_string().contains(&e.message));
}

// ---------------------------------------------------------------------------------------------
// issue 18 part 3: promises the header makes on input that is valid but extreme, or not a file

/// A contiguous f32 [h, n, d] descriptor over `buf`.
fn t3(buf: &mut [f32], h: i64, n: i64, d: i64) -> fer_tensor {
    assert!(buf.len() as i64 >= h * n * d);
    desc(buf.as_mut_ptr(), dtype::F32, &[h, n, d])
}

// EVIDENCE: C-ABI-009
#[test]
fn c_abi_009_attention_with_q_pos0_near_i64_max() {
    // one kv head, 3 keys; nq = 1 (decode split) and nq = 5 (the rows path): every query whose
    // position is at or past the keys sees all 3, as with q_pos0 = 2 (the last key's position)
    let (nk, d) = (3i64, 4i64);
    let mut kb: Vec<f32> = (0..nk * d).map(|i| (i as f32 * 0.37).sin()).collect();
    let mut vb: Vec<f32> = (0..nk * d).map(|i| (i as f32 * 0.11).cos()).collect();
    for nq in [1i64, 5] {
        let mut qb: Vec<f32> = (0..nq * d).map(|i| (i as f32 * 0.5).sin()).collect();
        let k = t3(&mut kb, 1, nk, d);
        let v = t3(&mut vb, 1, nk, d);
        let q = t3(&mut qb, 1, nq, d);
        let run = |q_pos0: i64| -> (Status, usize, Status, Vec<f32>, String) {
            let mut p = ferrite::attention_params();
            p.causal = 1;
            p.q_pos0 = q_pos0;
            let mut ob = vec![f32::NAN; (nq * d) as usize];
            let o = desc(ob.as_mut_ptr(), dtype::F32, &[1, nq, d]);
            let mut need = usize::MAX;
            // SAFETY: every descriptor covers its buffer; need is a valid out-pointer.
            let st_ws = unsafe { sys::fer_attention_workspace_bytes(null(), &q, &k, &v, &p, &o, &mut need) };
            let msg = ferrite::last_error_message();
            let st = unsafe { sys::fer_attention(null_mut(), &q, &k, &v, &p, &o, null_mut(), 0) };
            (st_ws, need, st, ob, msg)
        };
        let (_, need_all, st, want, _) = run(nk - 1);
        assert_eq!(st, OK, "nq {nq}, q_pos0 {}: {}", nk - 1, ferrite::last_error_message());
        for q_pos0 in [i64::MAX, i64::MAX - 1, i64::MAX - 4, i64::MAX / 2, nk + 7] {
            let (st_ws, need, st, got, msg) = run(q_pos0);
            let ctx = format!("nq {nq}, causal, q_pos0 {q_pos0}");
            assert_eq!((st_ws, need), (OK, need_all), "{ctx}: workspace bytes ({msg})");
            assert_eq!(st, OK, "{ctx}: {}", ferrite::last_error_message());
            assert_eq!(
                got.iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
                want.iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
                "{ctx}: a query past the keys sees all of them"
            );
        }
    }
}

// EVIDENCE: C-ABI-009 (a workspace larger than size_t is SIZE_OVERFLOW, *out_bytes 0)
#[test]
fn c_abi_009_attention_workspace_that_does_not_fit_size_t() {
    // zero strides broadcast K and V over 2^39 positions (no memory behind them); 2^30 query heads
    // of one kv head at 4 queries: 2^31 chunk states of 2^32 rows x (2^20 + 2) floats each
    let mut kb = [0f32; 4];
    let mut ob = [0f32; 4];
    let mut q = desc(kb.as_mut_ptr(), dtype::F32, &[1 << 30, 4, 1]);
    q.strides = [0; 8];
    let mut k = desc(kb.as_mut_ptr(), dtype::F32, &[1, 1 << 39, 1]);
    k.strides = [0; 8];
    let mut v = desc(kb.as_mut_ptr(), dtype::F32, &[1, 1 << 39, 1 << 20]);
    v.strides = [0; 8];
    let o = desc(ob.as_mut_ptr(), dtype::F32, &[1 << 30, 4, 1 << 20]);
    let mut p = ferrite::attention_params();
    p.causal = 0; // every query sees all 2^39 keys
    let mut need = usize::MAX;
    // SAFETY: only the plan runs (nothing behind out is touched when the plan fails).
    let st = unsafe { sys::fer_attention_workspace_bytes(null(), &q, &k, &v, &p, &o, &mut need) };
    refused(st, SIZE_OVERFLOW, "attention workspace past size_t");
    assert_eq!(need, 0, "*out_bytes is 0 on failure");
    // SAFETY: as above; the call must refuse before it allocates or writes.
    let st = unsafe { sys::fer_attention(null_mut(), &q, &k, &v, &p, &o, null_mut(), 0) };
    refused(st, SIZE_OVERFLOW, "attention with a workspace past size_t");
}

/// A temporary directory holding a FIFO without a writer, a subdirectory and a missing name.
struct NotFiles {
    dir: std::path::PathBuf,
}

impl NotFiles {
    fn new(tag: &str) -> NotFiles {
        let dir = std::env::temp_dir().join(format!("ferrite-notfiles-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("subdir")).unwrap();
        let fifo = dir.join("fifo");
        let st = std::process::Command::new("mkfifo").arg(&fifo).status().expect("mkfifo runs");
        assert!(st.success(), "mkfifo {}", fifo.display());
        NotFiles { dir }
    }
    /// (what, path): every one must be refused at once with INVALID_ARG.
    fn paths(&self) -> Vec<(&'static str, String)> {
        let p = |n: &str| self.dir.join(n).to_str().unwrap().to_string();
        vec![
            ("a FIFO without a writer", p("fifo")),
            ("a directory", p("subdir")),
            ("/dev/zero", "/dev/zero".to_string()),
            ("/dev/null", "/dev/null".to_string()),
            ("a path that does not exist", p("missing.json")),
        ]
    }
    /// Releases a loader blocked on the FIFO (a writer opens and closes it), so a failing test ends.
    fn unblock(&self) {
        use std::os::unix::fs::OpenOptionsExt;
        let _ = std::fs::OpenOptions::new()
            .write(true)
            .custom_flags(0o4000) // O_NONBLOCK: succeeds only while a reader waits
            .open(self.dir.join("fifo"));
    }
}

impl Drop for NotFiles {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Runs `call` on a thread; None when it is still running after `secs` seconds (a hang: the FIFO
/// is then given a writer, so the thread can end).
fn within<T: Send + 'static>(secs: u64, nf: &NotFiles, call: impl FnOnce() -> T + Send + 'static) -> Option<T> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(call());
    });
    match rx.recv_timeout(std::time::Duration::from_secs(secs)) {
        Ok(v) => Some(v),
        Err(_) => {
            nf.unblock();
            None
        }
    }
}

type PathLoader = fn(&std::ffi::CStr) -> (Status, bool, String);

fn load_json_file(p: &std::ffi::CStr) -> (Status, bool, String) {
    let mut out = 0x5a5a_usize as *mut sys::fer_tokenizer;
    // SAFETY: a NUL-terminated path and a valid out-pointer.
    let st = unsafe { sys::fer_tokenizer_from_json_file(p.as_ptr(), &mut out) };
    (st, out.is_null(), ferrite::last_error_message())
}

fn load_gguf_file(p: &std::ffi::CStr) -> (Status, bool, String) {
    let mut out = 0x5a5a_usize as *mut sys::fer_tokenizer;
    // SAFETY: as above.
    let st = unsafe { sys::fer_tokenizer_from_gguf_file(p.as_ptr(), &mut out) };
    (st, out.is_null(), ferrite::last_error_message())
}

fn load_engine(p: &std::ffi::CStr) -> (Status, bool, String) {
    // SAFETY: a config from fer_engine_config_init with model_path set; valid out-pointer.
    unsafe {
        let mut cfg: sys::fer_engine_config = std::mem::zeroed();
        assert_eq!(sys::fer_engine_config_init(&mut cfg), OK);
        cfg.model_path = p.as_ptr();
        let mut out = 0x5a5a_usize as *mut sys::fer_engine;
        let st = sys::fer_engine_create(&cfg, &mut out);
        (st, out.is_null(), ferrite::last_error_message())
    }
}

// EVIDENCE: C-ABI-008
#[test]
fn c_abi_008_loaders_refuse_what_is_not_a_regular_file_at_once() {
    let nf = NotFiles::new("loaders");
    let loaders: [(&str, PathLoader); 3] = [
        ("fer_tokenizer_from_json_file", load_json_file),
        ("fer_tokenizer_from_gguf_file", load_gguf_file),
        ("fer_engine_create(model_path)", load_engine),
    ];
    let mut failures = Vec::new();
    for (name, load) in loaders {
        for (what, path) in nf.paths() {
            let ctx = format!("{name} on {what} ({path})");
            let c = std::ffi::CString::new(path.clone()).unwrap();
            match within(30, &nf, move || load(&c)) {
                None => failures.push(format!("{ctx}: no answer within 30 s (blocks or reads without end)")),
                Some((st, out_null, msg)) => {
                    if st != INVALID_ARG || !out_null || !msg.contains(&path) {
                        failures.push(format!(
                            "{ctx}: status {} (want INVALID_ARG), out NULL {out_null}, message {msg:?} (must name the path)",
                            ferrite::status_str(st)
                        ));
                    }
                }
            }
        }
    }
    assert!(failures.is_empty(), "{} refusals broken:\n{}", failures.len(), failures.join("\n"));
}

// EVIDENCE: C-ABI-008 (a weight store refuses an fd that is not a regular file)
#[test]
fn c_abi_008_weight_store_refuses_a_fifo_fd() {
    use std::os::unix::fs::OpenOptionsExt;
    use std::os::unix::io::AsRawFd;
    let nf = NotFiles::new("store");
    let fifo = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(0o4000) // O_NONBLOCK: opening the reading end does not wait for a writer
        .open(nf.dir.join("fifo"))
        .unwrap();
    let vmm = ferrite::mem::Vmm::cpu(1 << 16, 8).unwrap();
    // SAFETY: valid pointers; the store reads nothing from a refused fd.
    unsafe {
        let mut o: sys::fer_weight_store_options = std::mem::zeroed();
        assert_eq!(sys::fer_weight_store_options_init(&mut o), OK);
        o.budget_bytes = 1 << 20;
        let mut out = 0x5a5a_usize as *mut sys::fer_weight_store;
        let st = sys::fer_weight_store_open(vmm.as_ptr(), fifo.as_raw_fd(), 0, 4096, &o, &mut out);
        refused(st, INVALID_ARG, "fer_weight_store_open on a FIFO");
        assert!(out.is_null());
    }
}

// EVIDENCE: C-ABI-008 (a regular file is read to its size and parsed as before)
#[test]
fn c_abi_008_json_file_is_read_whole() {
    let dir = std::env::temp_dir().join(format!("ferrite-json-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("tokenizer.json");
    let json = r#"{"added_tokens":[],"model":{"type":"WordLevel","vocab":{"a":0,"b":1,"[UNK]":2},"unk_token":"[UNK]"}}"#;
    std::fs::write(&path, json).unwrap();
    let c = std::ffi::CString::new(path.to_str().unwrap()).unwrap();
    let mut tok = null_mut();
    // SAFETY: NUL-terminated path, valid out-pointers; the tokenizer is freed below.
    unsafe {
        let st = sys::fer_tokenizer_from_json_file(c.as_ptr(), &mut tok);
        assert_eq!(st, OK, "{}", ferrite::last_error_message());
        let mut info: sys::fer_tokenizer_info = std::mem::zeroed();
        assert_eq!(sys::fer_tokenizer_get_info(tok, &mut info), OK);
        assert_eq!(info.vocab_size, 3);
        assert_eq!(sys::fer_tokenizer_free(tok), OK);
    }
    // an empty file is read (zero bytes) and refused by the parser, not by the reader
    std::fs::write(&path, "").unwrap();
    let (st, out_null, msg) = load_json_file(&c);
    assert!(out_null && st == BAD_FORMAT, "empty tokenizer.json: {} {msg}", ferrite::status_str(st));
    let _ = std::fs::remove_dir_all(&dir);
}

// EVIDENCE: C-ABI-004 (fer_moe: a rank outside 0 .. 8 is INVALID_ARG as for every tensor)
#[test]
fn c_abi_004_moe_x_of_a_rank_outside_0_to_8() {
    // E = 2 experts, H = I = 32, Q8_0 blocks of zeros (a valid scale of 0)
    let (e, h, i) = (2i64, 32i64, 32i64);
    let fc1b = vec![0u8; (e * i * 34) as usize];
    let fc2b = vec![0u8; (e * h * 34) as usize];
    let qm = |b: &[u8], rows: i64, cols: i64| sys::fer_qmatrix {
        data: b.as_ptr().cast(),
        bytes: b.len() as u64,
        dtype: dtype::Q8_0,
        reserved: 0,
        rows,
        cols,
        row_stride: cols / 32 * 34,
    };
    let (fc1, fc2) = (qm(&fc1b, e * i, h), qm(&fc2b, e * h, i));
    let mut xb = vec![0.5f32; h as usize];
    let mut lb = vec![0.25f32, -0.5];
    let mut ob = vec![f32::NAN; h as usize];
    let lg = desc(lb.as_mut_ptr(), dtype::F32, &[1, e]);
    let out = desc(ob.as_mut_ptr(), dtype::F32, &[1, h]);
    let p = ferrite::moe_params();
    for rank in [9, -1, i32::MIN, i32::MAX] {
        let mut x = desc(xb.as_mut_ptr(), dtype::F32, &[1, h]);
        x.rank = rank;
        // SAFETY: every descriptor covers its buffer.
        let st = unsafe { sys::fer_moe(null_mut(), &x, &lg, &fc1, &fc2, &p, &out) };
        refused(st, INVALID_ARG, &format!("fer_moe with x of rank {rank}"));
        assert!(ob.iter().all(|v| v.is_nan()), "a refused fer_moe wrote out");
    }
    // a valid rank that is not 2 stays SHAPE_MISMATCH
    let x = desc(xb.as_mut_ptr(), dtype::F32, &[h]);
    let st = unsafe { sys::fer_moe(null_mut(), &x, &lg, &fc1, &fc2, &p, &out) };
    refused(st, SHAPE_MISMATCH, "fer_moe with x of rank 1");
    let x = desc(xb.as_mut_ptr(), dtype::F32, &[1, h]);
    assert_eq!(unsafe { sys::fer_moe(null_mut(), &x, &lg, &fc1, &fc2, &p, &out) }, OK, "{}", ferrite::last_error_message());
}

// EVIDENCE: C-ABI-010
#[test]
fn c_abi_010_sampler_process_out_applied_may_be_null() {
    // SAFETY: valid pointers; the sampler is freed below.
    unsafe {
        let mut p: sys::fer_sampling_params = std::mem::zeroed();
        assert_eq!(sys::fer_sampling_params_init(&mut p), OK);
        p.top_k = 2;
        p.temperature = 0.5;
        let mut s = null_mut();
        assert_eq!(sys::fer_sampler_create(&p, &mut s), OK);
        let ctx: sys::fer_sampling_context = std::mem::zeroed();
        let base = [0.5f32, 2.0, -1.0, 1.5];
        let (mut with, mut without) = (base, base);
        let mut applied = u32::MAX;
        assert_eq!(sys::fer_sampler_process(s, with.as_mut_ptr(), 4, &ctx, &mut applied), OK);
        let st = sys::fer_sampler_process(s, without.as_mut_ptr(), 4, &ctx, null_mut());
        assert_eq!(st, OK, "out_applied = NULL is allowed: {}", ferrite::last_error_message());
        assert_message_clear("fer_sampler_process(out_applied = NULL)");
        assert_eq!(with.map(f32::to_bits), without.map(f32::to_bits), "the chain runs the same");
        assert_eq!(
            applied,
            (sys::FER_PROCESSOR_TEMPERATURE | sys::FER_PROCESSOR_TOP_K) as u32
        );
        // a refused call with out_applied = NULL still refuses (and leaves the logits alone)
        let mut bad = [f32::NAN, 1.0, 0.0, 0.0];
        let st = sys::fer_sampler_process(s, bad.as_mut_ptr(), 4, &ctx, null_mut());
        refused(st, INVALID_ARG, "NaN logit, out_applied = NULL");
        assert!(bad[0].is_nan() && bad[1] == 1.0);
        sys::fer_sampler_free(s);
    }
}
