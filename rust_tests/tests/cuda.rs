//! The CUDA entry points (C-CUDA-001): UNSUPPORTED when CUDA is not built in, NO_DEVICE (and a
//! visible SKIPPED) when it is but no GPU answers, and, with a GPU, fer_cuda_add_f32_rows equal to
//! fer_add bit for bit.

mod common;

use common::*;
use ferrite::status::*;
use ferrite::{sys, TensorMut, TensorRef};

// EVIDENCE: C-CUDA-001
#[test]
fn c_cuda_001_cuda_add_mirrors_cpu_add() {
    // SAFETY: no arguments.
    let built = unsafe { sys::fer_cuda_is_built() };
    let mut count = -1i32;
    // SAFETY: valid out-pointer.
    let st = unsafe { sys::fer_cuda_device_count(&mut count) };
    let (rows, width) = (64usize, 1000usize);
    let a: Vec<f32> = gen_values(1, rows * width, Values::Any);
    let b: Vec<f32> = gen_values(2, width, Values::Any);
    let mut gpu = vec![sentinel::<f32>(); rows * width];
    if !built {
        assert_eq!(st, UNSUPPORTED, "device_count without CUDA built in");
        assert_eq!(count, 0, "*out_count on failure");
        assert_message_set("device_count without CUDA");
        // SAFETY: valid buffers of the stated sizes.
        let st = unsafe {
            sys::fer_cuda_add_f32_rows(
                a.as_ptr(),
                b.as_ptr(),
                gpu.as_mut_ptr(),
                rows as i64,
                width as i64,
            )
        };
        assert_eq!(st, UNSUPPORTED);
        assert!(
            gpu.iter()
                .all(|v| v.to_bits() == sentinel::<f32>().to_bits()),
            "an UNSUPPORTED call wrote"
        );
        eprintln!("SKIPPED: CUDA not built in (fer_cuda_is_built() is false); checked the UNSUPPORTED answers only");
        return;
    }
    if st == NO_DEVICE {
        assert_eq!(count, 0, "*out_count on failure");
        eprintln!(
            "SKIPPED: no GPU (fer_cuda_device_count: NO_DEVICE: {})",
            ferrite::last_error_message()
        );
        return;
    }
    assert_eq!(
        st,
        OK,
        "fer_cuda_device_count: {}",
        ferrite::last_error_message()
    );
    assert!(count > 0, "OK with {count} devices");

    // SAFETY: valid buffers of the stated sizes.
    let st = unsafe {
        sys::fer_cuda_add_f32_rows(
            a.as_ptr(),
            b.as_ptr(),
            gpu.as_mut_ptr(),
            rows as i64,
            width as i64,
        )
    };
    assert_eq!(
        st,
        OK,
        "fer_cuda_add_f32_rows: {}",
        ferrite::last_error_message()
    );
    let mut cpu = vec![0f32; rows * width];
    ferrite::add(
        None,
        &TensorRef::new(&a, &[rows as i64, width as i64]).unwrap(),
        &TensorRef::new(&b, &[width as i64]).unwrap(),
        &mut TensorMut::new(&mut cpu, &[rows as i64, width as i64]).unwrap(),
    )
    .unwrap();
    for (i, (g, c)) in gpu.iter().zip(&cpu).enumerate() {
        // Bit for bit; NaN payloads are the one freedom (the GPU's canonical NaN differs from x86's).
        assert!(
            g.to_bits() == c.to_bits() || (g.is_nan() && c.is_nan()),
            "element {i}: GPU {:#x}, CPU {:#x}",
            g.to_bits(),
            c.to_bits()
        );
    }
    // Negative or overflowing sizes are INVALID_ARG.
    // SAFETY: the call must refuse before touching memory.
    unsafe {
        assert_eq!(
            sys::fer_cuda_add_f32_rows(a.as_ptr(), b.as_ptr(), gpu.as_mut_ptr(), -1, 4),
            INVALID_ARG
        );
        assert_eq!(
            sys::fer_cuda_add_f32_rows(a.as_ptr(), b.as_ptr(), gpu.as_mut_ptr(), 1 << 40, 1 << 40),
            INVALID_ARG
        );
    }
}
