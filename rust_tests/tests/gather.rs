//! fer_gather against the oracle (C-GATHER-001) and its refusal of out-of-range indices with the
//! output untouched (C-GATHER-002).
//!
//! Tolerance: none. Gather copies elements, so the output must equal the oracle bit for bit,
//! NaN payloads included.

mod common;

use common::*;
use ferrite_spec::oracle;
use ferrite::{status, Element, TensorRef};
use half::{bf16, f16};
use proptest::prelude::*;
use rand::Rng;
use std::mem::size_of;

#[derive(Clone, Debug)]
struct GatherCase {
    data_shape: Vec<usize>,
    idx_shape: Vec<usize>,
    data: Layout,
    idx: Layout,
    out: Layout,
    idx_i32: bool,
    seed: u64,
    pool: PoolSpec,
}

impl GatherCase {
    fn out_shape(&self) -> Vec<usize> {
        let mut s = self.idx_shape.clone();
        s.extend_from_slice(&self.data_shape[1..]);
        s
    }
}

/// data: rank 1..=3 (rows 0..7 on axis 0), indices: rank 0..=2; strided layouts for all three,
/// zero strides for the inputs (a zero-stride index tensor repeats one index).
fn gather_case() -> impl Strategy<Value = GatherCase> {
    let data_shape = (
        prop_oneof![1 => Just(0usize), 2 => Just(1usize), 6 => 2usize..8],
        prop::collection::vec(small_dim(), 0..2),
        prop::option::weighted(0.7, inner_dim()),
    )
        .prop_map(|(rows, mid, last)| {
            let mut s = vec![rows];
            s.extend(mid);
            s.extend(last);
            s
        });
    let idx_shape = prop::collection::vec(small_dim(), 0..=2);
    (data_shape, idx_shape).prop_flat_map(|(data_shape, idx_shape)| {
        let mut out_shape = idx_shape.clone();
        out_shape.extend_from_slice(&data_shape[1..]);
        (
            layout_plan(data_shape.len(), true),
            layout_plan(idx_shape.len(), true),
            layout_plan(out_shape.len(), false),
            any::<bool>(),
            any::<u64>(),
            pool_spec(),
        )
            .prop_map(move |(pd, pi, po, idx_i32, seed, pool)| GatherCase {
                data: pd.build(&data_shape),
                idx: pi.build(&idx_shape),
                out: po.build(&out_shape),
                data_shape: data_shape.clone(),
                idx_shape: idx_shape.clone(),
                idx_i32,
                seed,
                pool,
            })
    })
}

/// Random elements of T from raw random bytes (every bit pattern, NaNs included).
fn random_elems<T: Element + Default>(seed: u64, n: usize) -> Vec<T> {
    let mut v = vec![T::default(); n];
    let bytes = n * size_of::<T>();
    let mut raw = vec![0u8; bytes];
    rng(seed).fill(&mut raw[..]);
    // SAFETY: Element types are valid for every bit pattern.
    unsafe { std::ptr::copy_nonoverlapping(raw.as_ptr(), v.as_mut_ptr().cast::<u8>(), bytes) };
    v
}

/// Index values in [-rows, rows) (both signs), as stored in the index buffer.
fn index_buffer(c: &GatherCase, bad: Option<(usize, i64)>) -> Vec<i64> {
    let rows = c.data_shape[0] as i64;
    let mut r = rng(c.seed ^ 0x1d);
    let mut v: Vec<i64> = (0..c.idx.buf_len)
        .map(|_| {
            if rows == 0 {
                0
            } else {
                r.gen_range(-rows..rows)
            }
        })
        .collect();
    if let Some((pos, val)) = bad {
        v[pos] = val;
    }
    v
}

/// Runs fer_gather on case `c` with element type T; returns the status and the output buffer.
fn run_gather<T: Element + Default>(
    c: &GatherCase,
    idx_vals: &[i64],
    data_buf: &[T],
) -> (Result<(), ferrite::Error>, Vec<u8>) {
    let mut pool = make_pool(c.pool);
    let mut out_buf: Vec<u8> = vec![0xa5; c.out.buf_len * size_of::<T>()];
    // Out as T elements over the byte buffer (keeps one sentinel byte pattern for any T).
    let mut out_elems: Vec<T> = vec![T::default(); c.out.buf_len];
    // SAFETY: Element types are valid for every bit pattern; sizes match.
    unsafe {
        std::ptr::copy_nonoverlapping(
            out_buf.as_ptr(),
            out_elems.as_mut_ptr().cast::<u8>(),
            out_buf.len(),
        )
    };
    let data = c.data.view(data_buf);
    let res = if c.idx_i32 {
        let idx32: Vec<i32> = idx_vals
            .iter()
            .map(|&i| i.clamp(i32::MIN as i64, i32::MAX as i64) as i32)
            .collect();
        let idx = c.idx.view(&idx32);
        let mut out = c.out.view_mut(&mut out_elems);
        ferrite::gather(pool.as_mut(), &data, &idx, &mut out)
    } else {
        let idx = c.idx.view(idx_vals);
        let mut out = c.out.view_mut(&mut out_elems);
        ferrite::gather(pool.as_mut(), &data, &idx, &mut out)
    };
    out_buf.copy_from_slice(as_bytes(&out_elems));
    (res, out_buf)
}

fn check_gather<T: Element + Default>(c: &GatherCase) -> Result<(), TestCaseError> {
    let es = size_of::<T>();
    let data_buf: Vec<T> = random_elems(c.seed, c.data.buf_len);
    let idx_buf = index_buffer(c, None);
    let (res, out_buf) = run_gather(c, &idx_buf, &data_buf);

    // Oracle on row-major copies of the logical inputs, element bytes as [u8; es] chunks.
    let data_bytes = as_bytes(&data_buf);
    let data_vals: Vec<&[u8]> = c
        .data
        .positions()
        .iter()
        .map(|&p| &data_bytes[p * es..(p + 1) * es])
        .collect();
    let idx_vals: Vec<i64> = c.idx.positions().iter().map(|&p| idx_buf[p]).collect();
    let (shape, want) = match oracle::gather(&c.data_shape, &data_vals, &c.idx_shape, &idx_vals) {
        Ok(r) => r,
        Err(why) => {
            // data has no rows but there are indices: every index is out of range
            prop_assert_eq!(
                res.as_ref().map_err(|e| e.code),
                Err(status::INVALID_ARG),
                "oracle: {}",
                why
            );
            prop_assert!(
                out_buf.iter().all(|&b| b == 0xa5),
                "the output buffer was written"
            );
            return Ok(());
        }
    };
    prop_assert!(res.is_ok(), "fer_gather failed: {:?}", res);
    prop_assert_eq!(&shape, &c.out_shape());
    let out_pos = c.out.positions();
    for (i, (&p, w)) in out_pos.iter().zip(&want).enumerate() {
        prop_assert_eq!(
            &out_buf[p * es..(p + 1) * es],
            *w,
            "element {} ({:?}) differs",
            i,
            oracle::unravel(i, &shape)
        );
    }
    let mut inside = vec![false; c.out.buf_len];
    out_pos.iter().for_each(|&p| inside[p] = true);
    for p in 0..c.out.buf_len {
        prop_assert!(
            inside[p] || out_buf[p * es..(p + 1) * es].iter().all(|&b| b == 0xa5),
            "buffer element {} outside the view was written",
            p
        );
    }
    Ok(())
}

proptest! {
    #![proptest_config(config(256, file!()))]

    #[test]
    fn c_gather_001_matches_oracle_f32(c in gather_case()) {
        check_gather::<f32>(&c)?;
    }

    #[test]
    fn c_gather_001_matches_oracle_f16(c in gather_case()) {
        check_gather::<f16>(&c)?;
    }

    #[test]
    fn c_gather_001_matches_oracle_bf16(c in gather_case()) {
        check_gather::<bf16>(&c)?;
    }

    /// "any element-addressable dtype; the copy is exact": the integer dtypes too.
    #[test]
    fn c_gather_001_matches_oracle_integer_dtypes(c in gather_case()) {
        check_gather::<i64>(&c)?;
        check_gather::<i32>(&c)?;
        check_gather::<u8>(&c)?;
    }
}

fn bad_index_case() -> impl Strategy<Value = (GatherCase, prop::sample::Index, u8)> {
    (gather_case(), any::<prop::sample::Index>(), 0u8..6)
        .prop_filter("indices present", |(c, _, _)| !c.idx.positions().is_empty())
}

proptest! {
    #![proptest_config(config(128, file!()))]

    #[test]
    fn c_gather_002_out_of_range_refused_output_untouched(c in bad_index_case()) {
        let (c, which, kind) = c;
        let rows = c.data_shape[0] as i64;
        let bad = match kind {
            0 => rows,
            1 => -rows - 1,
            2 => rows + 7,
            3 => -rows - 1000,
            4 => if c.idx_i32 { i32::MAX as i64 } else { i64::MAX },
            _ => if c.idx_i32 { i32::MIN as i64 } else { i64::MIN },
        };
        let pos = c.idx.positions()[which.index(c.idx.positions().len())];
        let idx_buf = index_buffer(&c, Some((pos, bad)));
        let data_buf: Vec<f32> = random_elems(c.seed, c.data.buf_len);
        let (res, out_buf) = run_gather(&c, &idx_buf, &data_buf);
        let err = res.expect_err("out-of-range index accepted");
        prop_assert_eq!(err.code, status::INVALID_ARG, "{}", err);
        prop_assert!(!err.message.is_empty());
        prop_assert!(out_buf.iter().all(|&b| b == 0xa5), "the output buffer was written");
    }
}

// EVIDENCE: C-GATHER-001
#[test]
fn c_gather_001_negative_indices_count_from_the_end() {
    let data: Vec<f32> = (0..12).map(|i| i as f32).collect();
    let idx: Vec<i64> = vec![-1, 0, -4, 3, -2];
    let mut out = vec![0f32; 15];
    {
        let d = TensorRef::new(&data, &[4, 3]).unwrap();
        let i = TensorRef::new(&idx, &[5]).unwrap();
        let mut o = ferrite::TensorMut::new(&mut out, &[5, 3]).unwrap();
        ferrite::gather(None, &d, &i, &mut o).unwrap();
    }
    assert_eq!(
        out,
        vec![9., 10., 11., 0., 1., 2., 0., 1., 2., 9., 10., 11., 6., 7., 8.]
    );
    // scalar index: out has data's shape without axis 0
    let idx = [-3i32];
    let mut out = vec![0f32; 3];
    {
        let d = TensorRef::new(&data, &[4, 3]).unwrap();
        let i = TensorRef::new(&idx, &[]).unwrap();
        let mut o = ferrite::TensorMut::new(&mut out, &[3]).unwrap();
        ferrite::gather(None, &d, &i, &mut o).unwrap();
    }
    assert_eq!(out, vec![3., 4., 5.]);
}
