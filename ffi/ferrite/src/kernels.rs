//! Kernel wrappers. A `None` pool runs on the calling thread at FER_ISA_AUTO.

use crate::error::{check, Result};
use crate::pool::{pool_ptr, ThreadPool};
use crate::sys;
use crate::tensor::{TensorMut, TensorRef};

/// out = a + b with numpy broadcasting (`fer_add`). On error nothing is written.
pub fn add(
    pool: Option<&mut ThreadPool>,
    a: &TensorRef<'_>,
    b: &TensorRef<'_>,
    out: &mut TensorMut<'_>,
) -> Result<()> {
    // SAFETY: the views borrow live slices and were checked to lie inside them; `out` is borrowed
    // mutably, so no other Rust reference reads its elements during the call.
    check(unsafe { sys::fer_add(pool_ptr(pool), a.raw(), b.raw(), out.raw()) })
}

/// acc = acc + b in place (`fer_add` with out exactly a, which the header allows).
pub fn add_assign(
    pool: Option<&mut ThreadPool>,
    acc: &mut TensorMut<'_>,
    b: &TensorRef<'_>,
) -> Result<()> {
    // SAFETY: as in `add`; a and out are the same descriptor, the one overlap fer_add permits.
    check(unsafe { sys::fer_add(pool_ptr(pool), acc.raw(), b.raw(), acc.raw()) })
}

/// out[i..., j...] = data[idx(indices[i...]), j...] (`fer_gather`).
pub fn gather(
    pool: Option<&mut ThreadPool>,
    data: &TensorRef<'_>,
    indices: &TensorRef<'_>,
    out: &mut TensorMut<'_>,
) -> Result<()> {
    // SAFETY: as in `add`.
    check(unsafe { sys::fer_gather(pool_ptr(pool), data.raw(), indices.raw(), out.raw()) })
}

/// Mean over the last axis, keepdims (`fer_reduce_mean`).
pub fn reduce_mean(
    pool: Option<&mut ThreadPool>,
    x: &TensorRef<'_>,
    out: &mut TensorMut<'_>,
) -> Result<()> {
    // SAFETY: as in `add`.
    check(unsafe { sys::fer_reduce_mean(pool_ptr(pool), x.raw(), out.raw()) })
}

/// How `b` of [`matmul`] is laid out (`fer_matmul_b_layout`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BLayout {
    /// b is [K, N]: out = a x b.
    KN,
    /// b is [N, K] (weights as stored): out = a x b^T.
    NK,
}

impl BLayout {
    pub fn raw(self) -> sys::fer_matmul_b_layout {
        match self {
            BLayout::KN => sys::FER_MATMUL_B_KN as sys::fer_matmul_b_layout,
            BLayout::NK => sys::FER_MATMUL_B_NK as sys::fer_matmul_b_layout,
        }
    }
}

/// Scratch bytes [`matmul`] needs for these arguments on this pool (`fer_matmul_workspace_bytes`).
pub fn matmul_workspace_bytes(
    pool: Option<&ThreadPool>,
    a: &TensorRef<'_>,
    b: &TensorRef<'_>,
    layout: BLayout,
    out: &TensorMut<'_>,
) -> Result<usize> {
    let mut bytes = 0usize;
    let pool_ptr = pool.map_or(std::ptr::null(), |p| p.as_const_ptr());
    // SAFETY: descriptors borrow live slices; the call only reads them and writes `bytes`.
    check(unsafe {
        sys::fer_matmul_workspace_bytes(pool_ptr, a.raw(), b.raw(), layout.raw(), out.raw(), &mut bytes)
    })?;
    Ok(bytes)
}

/// out = a x b (or a x b^T), scratch allocated by the call (`fer_matmul`).
pub fn matmul(
    pool: Option<&mut ThreadPool>,
    a: &TensorRef<'_>,
    b: &TensorRef<'_>,
    layout: BLayout,
    out: &mut TensorMut<'_>,
) -> Result<()> {
    // SAFETY: as in `add`; a NULL workspace lets the call allocate its own.
    check(unsafe {
        sys::fer_matmul(pool_ptr(pool), a.raw(), b.raw(), layout.raw(), out.raw(), std::ptr::null_mut(), 0)
    })
}

/// A 64-byte aligned scratch buffer for [`matmul_in`].
pub struct Workspace {
    buf: Vec<u8>,
    offset: usize,
    len: usize,
}

impl Workspace {
    pub fn new(len: usize) -> Workspace {
        // 63 bytes to reach alignment plus up to 63 of deliberate misalignment, then len.
        let buf = vec![0u8; len + 128];
        let offset = buf.as_ptr().align_offset(64);
        Workspace { buf, offset, len }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The aligned start; `misalign` bytes later for tests of the alignment check.
    pub fn ptr(&mut self, misalign: usize) -> *mut std::os::raw::c_void {
        assert!(misalign <= 63);
        // offset + misalign <= 126, so start + len stays inside the len + 128 bytes.
        let start = self.offset + misalign;
        self.buf[start..].as_mut_ptr() as *mut std::os::raw::c_void
    }
}

/// As [`matmul`], with caller-provided scratch of `ws.len()` bytes starting `misalign` bytes
/// past a 64-byte boundary.
pub fn matmul_in(
    pool: Option<&mut ThreadPool>,
    a: &TensorRef<'_>,
    b: &TensorRef<'_>,
    layout: BLayout,
    out: &mut TensorMut<'_>,
    ws: &mut Workspace,
    misalign: usize,
) -> Result<()> {
    let len = ws.len();
    let ptr = ws.ptr(misalign);
    // SAFETY: `ptr` has at least `len` writable bytes (see Workspace::new), borrowed mutably for
    // the call.
    check(unsafe { sys::fer_matmul(pool_ptr(pool), a.raw(), b.raw(), layout.raw(), out.raw(), ptr, len) })
}

/// RMSNorm over the last axis (`fer_rms_norm`); `weight` None scales by 1.
pub fn rms_norm(
    pool: Option<&mut ThreadPool>,
    x: &TensorRef<'_>,
    weight: Option<&TensorRef<'_>>,
    eps: f32,
    out: &mut TensorMut<'_>,
) -> Result<()> {
    let w = weight.map_or(std::ptr::null(), |w| w.raw() as *const sys::fer_tensor);
    // SAFETY: as in `add`; a NULL weight is allowed by the header.
    check(unsafe { sys::fer_rms_norm(pool_ptr(pool), x.raw(), w, eps, out.raw()) })
}

/// Which dimensions [`rope`] rotates together.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RopePairing {
    /// (i, i + rot/2)
    Neox,
    /// (2i, 2i + 1)
    Gptj,
}

/// Rotary position embedding over x [T, ..., D] (`fer_rope`).
pub fn rope(
    pool: Option<&mut ThreadPool>,
    x: &TensorRef<'_>,
    positions: &TensorRef<'_>,
    pairing: RopePairing,
    rot_dims: u32,
    theta: f32,
    out: &mut TensorMut<'_>,
) -> Result<()> {
    let p = match pairing {
        RopePairing::Neox => sys::FER_ROPE_NEOX,
        RopePairing::Gptj => sys::FER_ROPE_GPTJ,
    } as sys::fer_rope_pairing;
    // SAFETY: as in `add`.
    check(unsafe { sys::fer_rope(pool_ptr(pool), x.raw(), positions.raw(), p, rot_dims, theta, out.raw()) })
}

/// out = silu(x) (`fer_silu`).
pub fn silu(pool: Option<&mut ThreadPool>, x: &TensorRef<'_>, out: &mut TensorMut<'_>) -> Result<()> {
    // SAFETY: as in `add`.
    check(unsafe { sys::fer_silu(pool_ptr(pool), x.raw(), out.raw()) })
}

/// out = silu(gate) * up (`fer_swiglu`).
pub fn swiglu(
    pool: Option<&mut ThreadPool>,
    gate: &TensorRef<'_>,
    up: &TensorRef<'_>,
    out: &mut TensorMut<'_>,
) -> Result<()> {
    // SAFETY: as in `add`.
    check(unsafe { sys::fer_swiglu(pool_ptr(pool), gate.raw(), up.raw(), out.raw()) })
}

/// Softmax over the last axis (`fer_softmax`).
pub fn softmax(pool: Option<&mut ThreadPool>, x: &TensorRef<'_>, out: &mut TensorMut<'_>) -> Result<()> {
    // SAFETY: as in `add`.
    check(unsafe { sys::fer_softmax(pool_ptr(pool), x.raw(), out.raw()) })
}

/// Index of the maximum over the last axis (`fer_argmax`); out is I32 or I64.
pub fn argmax(pool: Option<&mut ThreadPool>, x: &TensorRef<'_>, out: &mut TensorMut<'_>) -> Result<()> {
    // SAFETY: as in `add`.
    check(unsafe { sys::fer_argmax(pool_ptr(pool), x.raw(), out.raw()) })
}

/// Rows of `table` [V, D] by id (`fer_embedding`).
pub fn embedding(
    pool: Option<&mut ThreadPool>,
    table: &TensorRef<'_>,
    ids: &TensorRef<'_>,
    out: &mut TensorMut<'_>,
) -> Result<()> {
    // SAFETY: as in `add`.
    check(unsafe { sys::fer_embedding(pool_ptr(pool), table.raw(), ids.raw(), out.raw()) })
}

/// A borrowed block-quantized matrix [rows, cols] (`fer_qmatrix`): rows of blocks, `row_stride`
/// bytes apart, inside `data`. Only the structure is checked here by C; see [`qmatrix_check`].
#[derive(Clone, Copy, Debug)]
pub struct QMatrix<'a> {
    raw: sys::fer_qmatrix,
    _borrow: std::marker::PhantomData<&'a [u8]>,
}

impl<'a> QMatrix<'a> {
    /// A view of `rows` x `cols` values of `dtype` starting at byte `offset` of `data`.
    pub fn new(data: &'a [u8], offset: usize, dtype: i32, rows: i64, cols: i64, row_stride: i64) -> QMatrix<'a> {
        let off = offset.min(data.len());
        QMatrix {
            raw: sys::fer_qmatrix {
                data: data[off..].as_ptr().cast(),
                bytes: (data.len() - off) as u64,
                dtype,
                reserved: 0,
                rows,
                cols,
                row_stride,
            },
            _borrow: std::marker::PhantomData,
        }
    }

    pub fn raw(&self) -> &sys::fer_qmatrix {
        &self.raw
    }
}

/// Structure and scale check a loader runs (`fer_qmatrix_check`).
pub fn qmatrix_check(w: &QMatrix<'_>) -> Result<()> {
    // SAFETY: the view borrows its buffer and `bytes` is its length past the offset.
    check(unsafe { sys::fer_qmatrix_check(w.raw()) })
}

/// out = dequantized w (`fer_dequantize`).
pub fn dequantize(pool: Option<&mut ThreadPool>, w: &QMatrix<'_>, out: &mut TensorMut<'_>) -> Result<()> {
    // SAFETY: as in `qmatrix_check`; `out` borrowed mutably.
    check(unsafe { sys::fer_dequantize(pool_ptr(pool), w.raw(), out.raw()) })
}

/// out = a x w^T over block-quantized w (`fer_matmul_quant`), scratch allocated by the call.
pub fn matmul_quant(
    pool: Option<&mut ThreadPool>,
    a: &TensorRef<'_>,
    w: &QMatrix<'_>,
    out: &mut TensorMut<'_>,
) -> Result<()> {
    // SAFETY: as in `matmul`.
    check(unsafe { sys::fer_matmul_quant(pool_ptr(pool), a.raw(), w.raw(), out.raw(), std::ptr::null_mut(), 0) })
}

/// Scratch bytes [`matmul_quant_i8`] needs for these arguments on this pool
/// (`fer_matmul_quant_i8_workspace_bytes`).
pub fn matmul_quant_i8_workspace_bytes(
    pool: Option<&ThreadPool>,
    a: &TensorRef<'_>,
    w: &QMatrix<'_>,
    out: &TensorMut<'_>,
) -> Result<usize> {
    let mut bytes = 0usize;
    let pool_ptr = pool.map_or(std::ptr::null(), |p| p.as_const_ptr());
    // SAFETY: as in `matmul_workspace_bytes`; w borrows its buffer.
    check(unsafe { sys::fer_matmul_quant_i8_workspace_bytes(pool_ptr, a.raw(), w.raw(), out.raw(), &mut bytes) })?;
    Ok(bytes)
}

/// out ~= a x w^T over block-quantized w with A rounded to 8 bits per block of 32
/// (`fer_matmul_quant_i8`), scratch allocated by the call.
pub fn matmul_quant_i8(
    pool: Option<&mut ThreadPool>,
    a: &TensorRef<'_>,
    w: &QMatrix<'_>,
    out: &mut TensorMut<'_>,
) -> Result<()> {
    // SAFETY: as in `matmul`.
    check(unsafe { sys::fer_matmul_quant_i8(pool_ptr(pool), a.raw(), w.raw(), out.raw(), std::ptr::null_mut(), 0) })
}

/// An owned `fer_dense_cache`, optionally charging a governor that must outlive it.
pub struct DenseCache<'g> {
    ptr: std::ptr::NonNull<sys::fer_dense_cache>,
    _gov: std::marker::PhantomData<&'g crate::mem::Governor>,
}

impl<'g> DenseCache<'g> {
    pub fn new(capacity: u64, governor: Option<&'g crate::mem::Governor>) -> Result<DenseCache<'g>> {
        let mut out = std::ptr::null_mut();
        let g = governor.map_or(std::ptr::null_mut(), |g| g.as_ptr());
        // SAFETY: valid out-pointer; the governor (if any) outlives the cache through 'g.
        check(unsafe { sys::fer_dense_cache_create(capacity, g, &mut out) })?;
        Ok(DenseCache { ptr: std::ptr::NonNull::new(out).expect("OK with NULL"), _gov: std::marker::PhantomData })
    }

    /// The dense expansion of `w` under `key`, copied out (the C pointer lives until eviction).
    pub fn get(&mut self, key: u64, w: &QMatrix<'_>, verify: bool) -> Result<Vec<f32>> {
        let mut p: *const f32 = std::ptr::null();
        let flags = if verify { sys::FER_DENSE_CACHE_VERIFY } else { 0 };
        // SAFETY: cache alive and borrowed mutably; w borrows its buffer.
        check(unsafe { sys::fer_dense_cache_get(self.ptr.as_ptr(), std::ptr::null_mut(), key, w.raw(), flags, &mut p) })?;
        let n = (w.raw().rows * w.raw().cols) as usize;
        // SAFETY: on OK the cache holds n floats at p until the next get or free.
        Ok(unsafe { std::slice::from_raw_parts(p, n) }.to_vec())
    }

    /// The raw handle, for `fer_moe_params.cache`.
    pub fn as_ptr(&mut self) -> *mut sys::fer_dense_cache {
        self.ptr.as_ptr()
    }

    pub fn stats(&self) -> Result<sys::fer_dense_cache_stats> {
        // SAFETY: plain-data struct filled by the call.
        let mut s: sys::fer_dense_cache_stats = unsafe { std::mem::zeroed() };
        // SAFETY: cache alive.
        check(unsafe { sys::fer_dense_cache_get_stats(self.ptr.as_ptr(), &mut s) })?;
        Ok(s)
    }
}

impl Drop for DenseCache<'_> {
    fn drop(&mut self) {
        // SAFETY: owned; frees entries and releases their charges.
        unsafe { sys::fer_dense_cache_free(self.ptr.as_ptr()) };
    }
}

/// Options of [`attention`] (`fer_attention_params`), from `fer_attention_params_init`.
pub fn attention_params() -> sys::fer_attention_params {
    // SAFETY: plain-data struct filled by the call.
    let mut p: sys::fer_attention_params = unsafe { std::mem::zeroed() };
    // SAFETY: valid out-pointer.
    check(unsafe { sys::fer_attention_params_init(&mut p) }).expect("params init");
    p
}

/// Scaled dot-product attention over strided K/V views (`fer_attention`), scratch allocated by
/// the call.
pub fn attention(
    pool: Option<&mut ThreadPool>,
    q: &TensorRef<'_>,
    k: &TensorRef<'_>,
    v: &TensorRef<'_>,
    params: &sys::fer_attention_params,
    out: &mut TensorMut<'_>,
) -> Result<()> {
    // SAFETY: as in `matmul`.
    check(unsafe {
        sys::fer_attention(pool_ptr(pool), q.raw(), k.raw(), v.raw(), params, out.raw(), std::ptr::null_mut(), 0)
    })
}

/// Options of [`moe`] (`fer_moe_params`), from `fer_moe_params_init`.
pub fn moe_params() -> sys::fer_moe_params {
    // SAFETY: plain-data struct filled by the call.
    let mut p: sys::fer_moe_params = unsafe { std::mem::zeroed() };
    // SAFETY: valid out-pointer.
    check(unsafe { sys::fer_moe_params_init(&mut p) }).expect("params init");
    p
}

/// Mixture of experts (`fer_moe`). With the cached-dense strategy `params.cache` must point to
/// a live cache (see [`DenseCache::as_ptr`]).
pub fn moe(
    pool: Option<&mut ThreadPool>,
    x: &TensorRef<'_>,
    logits: &TensorRef<'_>,
    fc1: &QMatrix<'_>,
    fc2: &QMatrix<'_>,
    params: &sys::fer_moe_params,
    out: &mut TensorMut<'_>,
) -> Result<()> {
    // SAFETY: as in `matmul_quant`; the cache pointer (if any) is the caller's live cache.
    check(unsafe { sys::fer_moe(pool_ptr(pool), x.raw(), logits.raw(), fc1.raw(), fc2.raw(), params, out.raw()) })
}

/// Rows of a block-quantized table [V, D] by id (`fer_embedding_quant`).
pub fn embedding_quant(
    pool: Option<&mut ThreadPool>,
    table: &QMatrix<'_>,
    ids: &TensorRef<'_>,
    out: &mut TensorMut<'_>,
) -> Result<()> {
    // SAFETY: as in `matmul_quant`.
    check(unsafe { sys::fer_embedding_quant(pool_ptr(pool), table.raw(), ids.raw(), out.raw()) })
}
