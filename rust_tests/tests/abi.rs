//! The ABI itself: generated declarations in sync with the header (C-ABI-001), struct layouts
//! (C-ABI-002), the ABI version (C-ABI-003), and the status texts (C-ABI-004).

use ferrite::status::{self, *};
use ferrite::sys::{self, fer_tensor, fer_threadpool_options};
use std::mem::{align_of, offset_of, size_of};
use std::path::Path;
use std::process::Command;

// EVIDENCE: C-ABI-001
#[test]
fn c_abi_001_bindings_regenerate_without_diff() {
    // Fails (does not skip) when bindgen is missing: the setup script installs it.
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let script = root.join("scripts/gen-bindings.sh");
    let out = Command::new("bash")
        .arg(&script)
        .arg("--check")
        .current_dir(&root)
        // The sanitizer run preloads ASan into the test binaries; bindgen and clang are not ours
        // to sanitize (and would report their own leaks), so their environment drops it.
        .env_remove("LD_PRELOAD")
        .env_remove("ASAN_OPTIONS")
        .env_remove("UBSAN_OPTIONS")
        .output()
        .unwrap_or_else(|e| panic!("could not run {}: {e}", script.display()));
    assert!(
        out.status.success(),
        "{} --check exited with {:?}\nstdout:\n{}\nstderr:\n{}",
        script.display(),
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

// EVIDENCE: C-ABI-001 (the generated constants carry the header's values; they are append-only)
#[test]
fn c_abi_001_constant_values() {
    let statuses = [
        (OK, 0),
        (NULL_ARG, 1),
        (INVALID_ARG, 2),
        (BUFFER_TOO_SMALL, 3),
        (BUSY, 4),
        (MISUSE, 5),
        (SHAPE_MISMATCH, 6),
        (SIZE_OVERFLOW, 7),
        (CANCELLED, 8),
        (OUT_OF_MEMORY, 100),
        (BUDGET_EXCEEDED, 101),
        (NO_DEVICE, 200),
        (DEVICE_ERROR, 201),
        (UNSUPPORTED, 202),
        (BAD_FORMAT, 300),
        (CORRUPT, 301),
        (INVALID_UTF8, 302),
    ];
    for (got, want) in statuses {
        assert_eq!(got, want);
    }
    use ferrite::dtype::*;
    assert_eq!(
        [INVALID, F32, F16, BF16, I32, I64, U8, MXFP4, Q4_0, Q4_1, Q8_0],
        [0, 1, 2, 3, 4, 5, 6, 16, 17, 18, 19]
    );
    assert_eq!(
        [
            ferrite::isa::AUTO,
            ferrite::isa::PORTABLE,
            ferrite::isa::AVX2
        ],
        [0, 1, 2]
    );
    use ferrite::cpu::*;
    assert_eq!(
        [SSE42, AVX, AVX2, FMA, F16C, AVX512F, AVX512BW, AVX512BF16, AVXVNNI],
        [1, 2, 4, 8, 16, 32, 64, 128, 256]
    );
    assert_eq!(ferrite::MAX_RANK, 8);
}

// EVIDENCE: C-ABI-002
#[test]
fn c_abi_002_fer_tensor_layout() {
    assert_eq!(size_of::<fer_tensor>(), 144);
    assert_eq!(align_of::<fer_tensor>(), 8);
    assert_eq!(offset_of!(fer_tensor, data), 0);
    assert_eq!(offset_of!(fer_tensor, dtype), 8);
    assert_eq!(offset_of!(fer_tensor, rank), 12);
    assert_eq!(offset_of!(fer_tensor, shape), 16);
    assert_eq!(offset_of!(fer_tensor, strides), 80);
    assert_eq!(size_of::<sys::fer_dtype>(), 4);
    assert_eq!(size_of::<sys::fer_status>(), 4);
    assert_eq!(size_of::<sys::fer_isa>(), 4);
}

// EVIDENCE: C-ABI-002
#[test]
fn c_abi_002_fer_threadpool_options_layout() {
    assert_eq!(size_of::<fer_threadpool_options>(), 16);
    assert_eq!(align_of::<fer_threadpool_options>(), 4);
    assert_eq!(offset_of!(fer_threadpool_options, struct_size), 0);
    assert_eq!(offset_of!(fer_threadpool_options, n_threads), 4);
    assert_eq!(offset_of!(fer_threadpool_options, isa), 8);
    assert_eq!(offset_of!(fer_threadpool_options, reserved), 12);
}

// EVIDENCE: C-ABI-002 (both sides agree: the C library fills the Rust structs field by field)
#[test]
fn c_abi_002_c_side_writes_the_fields_rust_reads() {
    let mut o = fer_threadpool_options {
        struct_size: 0,
        n_threads: 9,
        isa: 9,
        reserved: 9,
    };
    // SAFETY: valid pointer.
    assert_eq!(unsafe { sys::fer_threadpool_options_init(&mut o) }, OK);
    assert_eq!(
        o.struct_size as usize,
        size_of::<fer_threadpool_options>(),
        "C's sizeof(fer_threadpool_options)"
    );
    assert_eq!((o.n_threads, o.isa, o.reserved), (0, 0, 0));

    let mut buf = [0u16; 2 * 3 * 5 * 7];
    let shape = [2i64, 3, 5, 7, 1, 1, 1, 1];
    let mut t = fer_tensor {
        data: std::ptr::null_mut(),
        dtype: 0,
        rank: 0,
        shape: [-9; 8],
        strides: [-9; 8],
    };
    // SAFETY: valid pointers; shape has 8 entries.
    let st = unsafe {
        sys::fer_tensor_init_contiguous(
            &mut t,
            buf.as_mut_ptr().cast(),
            ferrite::dtype::BF16,
            8,
            shape.as_ptr(),
        )
    };
    assert_eq!(st, OK, "{}", ferrite::last_error_message());
    assert_eq!(t.data, buf.as_mut_ptr().cast());
    assert_eq!((t.dtype, t.rank), (ferrite::dtype::BF16, 8));
    assert_eq!(t.shape, shape);
    assert_eq!(t.strides, [210, 70, 14, 2, 2, 2, 2, 2]);
}

// EVIDENCE: C-ABI-003
#[test]
fn c_abi_003_abi_version_matches_declarations() {
    assert_eq!(ferrite::abi_version(), sys::FER_ABI_VERSION);
    assert_eq!(ferrite::abi_version(), ferrite::ABI_VERSION);
    assert_eq!(ferrite::ABI_VERSION, 1);
}

// EVIDENCE: C-ABI-003 (the library identifies itself)
#[test]
fn c_abi_003_version_and_build_info() {
    let v = ferrite::version_string();
    let parts: Vec<&str> = v.split('.').collect();
    assert!(
        parts.len() == 3 && parts.iter().all(|p| p.parse::<u32>().is_ok()),
        "version {v:?} is not MAJOR.MINOR.PATCH"
    );
    let info = ferrite::build_info();
    assert!(
        !info.is_empty() && !info.contains('\n'),
        "build info {info:?} is not one line"
    );
    assert!(
        info.contains(v),
        "build info {info:?} does not name version {v}"
    );
}

// EVIDENCE: C-ABI-004 (every status has its own text; unknown codes say so)
#[test]
fn c_abi_004_status_str() {
    let texts: Vec<&str> = status::ALL
        .iter()
        .map(|&s| ferrite::status_str(s))
        .collect();
    for (s, t) in status::ALL.iter().zip(&texts) {
        assert!(!t.is_empty() && *t != "unknown status", "status {s}: {t:?}");
    }
    let mut sorted = texts.clone();
    sorted.sort();
    sorted.dedup();
    assert_eq!(
        sorted.len(),
        texts.len(),
        "status texts are not distinct: {texts:?}"
    );
    for unknown in [-1, 9, 99, 102, 199, 203, 305, 1000, i32::MIN, i32::MAX] {
        assert_eq!(
            ferrite::status_str(unknown),
            "unknown status",
            "code {unknown}"
        );
    }
}
