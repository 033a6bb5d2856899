//! Memory: commit geometry (pure functions) and `Vmm`, an owned `fer_vmm` granule pool, with
//! `VmmRange` borrowing it so a range can never outlive its pool.

use crate::error::{check, Result};
use crate::sys;
use std::cell::RefCell;
use std::collections::BTreeSet;
use std::marker::PhantomData;
use std::ptr::{self, NonNull};

pub type ByteRange = sys::fer_byte_range;
pub type KvGeometry = sys::fer_kv_geometry;
pub type VmmStats = sys::fer_vmm_stats;

pub const HEAD_MAJOR: i32 = sys::FER_KV_LAYOUT_HEAD_MAJOR as i32;
pub const SEQ_MAJOR: i32 = sys::FER_KV_LAYOUT_SEQ_MAJOR as i32;
pub const TOKEN_MAJOR: i32 = sys::FER_KV_LAYOUT_TOKEN_MAJOR as i32;
pub const READ_WRITE: i32 = sys::FER_VMM_ACCESS_READ_WRITE as i32;
pub const READ_ONLY: i32 = sys::FER_VMM_ACCESS_READ_ONLY as i32;

/// `fer_granules_covering`: windows of `granule` bytes holding at least one byte of the ranges.
pub fn granules_covering(ranges: &[ByteRange], granule: u64) -> Result<u64> {
    let mut out = 0u64;
    // SAFETY: ranges valid for its length; out a valid out-pointer.
    check(unsafe { sys::fer_granules_covering(ranges.as_ptr(), ranges.len(), granule, &mut out) })?;
    Ok(out)
}

/// A geometry with struct_size set.
pub fn kv_geometry(layout: i32, layers: u32, heads: u32, head_dim: u32, elem_bytes: u32, capacity: u64) -> KvGeometry {
    KvGeometry {
        struct_size: std::mem::size_of::<KvGeometry>() as u32,
        layout,
        n_layers: layers,
        n_kv_heads: heads,
        head_dim,
        elem_bytes,
        capacity_tokens: capacity,
    }
}

/// `fer_kv_committed_granules`.
pub fn kv_committed_granules(g: &KvGeometry, live: u64, granule: u64) -> Result<u64> {
    let mut out = 0u64;
    // SAFETY: g points to a live struct; out a valid out-pointer.
    check(unsafe { sys::fer_kv_committed_granules(g, live, granule, &mut out) })?;
    Ok(out)
}

/// `fer_kv_live_ranges` for one binding; also returns the binding count.
pub fn kv_live_ranges(g: &KvGeometry, live: u64, binding: u32) -> Result<(Vec<ByteRange>, u32)> {
    let mut v = vec![ByteRange { offset: 0, length: 0 }; g.n_kv_heads.max(1) as usize];
    let (mut n, mut nb) = (0usize, 0u32);
    // SAFETY: v holds cap entries; out-pointers valid.
    check(unsafe { sys::fer_kv_live_ranges(g, live, binding, v.as_mut_ptr(), v.len(), &mut n, &mut nb) })?;
    v.truncate(n);
    Ok((v, nb))
}

/// An owned granule pool (`fer_vmm`). Methods take `&self` so ranges (which borrow the pool) and
/// granule calls can interleave; the type is not `Sync` (NonNull), so calls stay on one thread at
/// a time as the header requires.
#[derive(Debug)]
pub struct Vmm {
    ptr: NonNull<sys::fer_vmm>,
    live: RefCell<BTreeSet<u64>>,
}

// SAFETY: ferrite.h: "Thread-safety: one call at a time (callers serialise)". Nothing ties the pool
// to its creating thread, so it may move (Send); it is not Sync, so no two threads call at once.
unsafe impl Send for Vmm {}

impl Vmm {
    /// A CPU-backend pool with the given granule (0 = 2 MiB) and granule limit (0 = 4096).
    pub fn cpu(granule_bytes: u64, max_granules: u64) -> Result<Vmm> {
        Vmm::with_backend(sys::FER_VMM_BACKEND_CPU as i32, granule_bytes, max_granules)
    }

    /// A pool on `backend` (`fer_vmm_backend_code`); granule 0 = the backend's default.
    pub fn with_backend(backend: i32, granule_bytes: u64, max_granules: u64) -> Result<Vmm> {
        // SAFETY: plain-data struct initialised by the call.
        let mut o: sys::fer_vmm_options = unsafe { std::mem::zeroed() };
        // SAFETY: valid out-pointer.
        check(unsafe { sys::fer_vmm_options_init(&mut o) })?;
        o.backend = backend;
        o.granule_bytes = granule_bytes;
        o.max_granules = max_granules;
        let mut out = ptr::null_mut();
        // SAFETY: o lives through the call; out a valid out-pointer.
        check(unsafe { sys::fer_vmm_create(&o, &mut out) })?;
        Ok(Vmm { ptr: NonNull::new(out).expect("OK with NULL"), live: RefCell::new(BTreeSet::new()) })
    }

    pub fn stats(&self) -> Result<VmmStats> {
        // SAFETY: plain-data struct, filled by the call.
        let mut s: VmmStats = unsafe { std::mem::zeroed() };
        // SAFETY: pool alive; out valid.
        check(unsafe { sys::fer_vmm_get_stats(self.ptr.as_ptr(), &mut s) })?;
        Ok(s)
    }

    pub fn granule_create(&self) -> Result<u64> {
        let mut g = 0u64;
        // SAFETY: pool alive; out valid.
        check(unsafe { sys::fer_vmm_granule_create(self.ptr.as_ptr(), &mut g) })?;
        self.live.borrow_mut().insert(g);
        Ok(g)
    }

    pub fn granule_release(&self, g: u64) -> Result<()> {
        // SAFETY: pool alive.
        check(unsafe { sys::fer_vmm_granule_release(self.ptr.as_ptr(), g) })?;
        self.live.borrow_mut().remove(&g);
        Ok(())
    }

    /// Reserves a range; it borrows the pool, so the pool outlives it.
    pub fn reserve(&self, bytes: u64) -> Result<VmmRange<'_>> {
        let mut r = ptr::null_mut();
        // SAFETY: pool alive; out valid (one call at a time: Vmm is not Sync).
        check(unsafe { sys::fer_vmm_range_reserve(self.ptr.as_ptr(), bytes, &mut r) })?;
        Ok(VmmRange { ptr: NonNull::new(r).expect("OK with NULL"), pool: self })
    }

    pub fn set_frozen(&self, frozen: bool) -> Result<()> {
        // SAFETY: pool alive.
        check(unsafe { sys::fer_vmm_set_frozen(self.ptr.as_ptr(), frozen) })
    }

    pub fn as_ptr(&self) -> *mut sys::fer_vmm {
        self.ptr.as_ptr()
    }
}

impl Drop for Vmm {
    fn drop(&mut self) {
        // Release what the caller left alive (no range can be mapped: ranges borrow the pool and
        // are gone), then free: a pool with live granules would answer BUSY.
        for &g in self.live.borrow().iter() {
            // SAFETY: pool alive; g was created by this pool.
            unsafe { sys::fer_vmm_granule_release(self.ptr.as_ptr(), g) };
        }
        // SAFETY: owned; freed once.
        unsafe { sys::fer_vmm_free(self.ptr.as_ptr()) };
    }
}

/// A reserved address range of a `Vmm`.
#[derive(Debug)]
pub struct VmmRange<'p> {
    ptr: NonNull<sys::fer_vmm_range>,
    pool: &'p Vmm,
}

impl VmmRange<'_> {
    pub fn map(&mut self, offset: u64, granule: u64, access: i32) -> Result<()> {
        // SAFETY: range alive.
        check(unsafe { sys::fer_vmm_map(self.ptr.as_ptr(), offset, granule, access) })
    }

    pub fn unmap(&mut self, offset: u64) -> Result<()> {
        // SAFETY: range alive.
        check(unsafe { sys::fer_vmm_unmap(self.ptr.as_ptr(), offset) })
    }

    /// Copy-on-write of the window at `offset`: (new granule, bytes copied).
    pub fn copy_on_write(&mut self, offset: u64) -> Result<(u64, u64)> {
        let (mut g, mut n) = (0u64, 0u64);
        // SAFETY: range alive; out-pointers valid.
        check(unsafe { sys::fer_vmm_copy_on_write(self.ptr.as_ptr(), offset, &mut g, &mut n) })?;
        self.pool.live.borrow_mut().insert(g); // the pool releases it on drop like any other
        Ok((g, n))
    }

    /// Base pointer and size (host memory on the CPU backend; only mapped windows may be touched).
    pub fn base(&self) -> Result<(*mut u8, u64)> {
        let (mut p, mut n) = (ptr::null_mut(), 0u64);
        // SAFETY: range alive; out-pointers valid.
        check(unsafe { sys::fer_vmm_range_base(self.ptr.as_ptr(), &mut p, &mut n) })?;
        Ok((p.cast(), n))
    }
}

impl Drop for VmmRange<'_> {
    fn drop(&mut self) {
        // SAFETY: owned; freed once. (A frozen pool answers BUSY; tests thaw before dropping.)
        unsafe { sys::fer_vmm_range_free(self.ptr.as_ptr()) };
    }
}

pub type GovernorStats = sys::fer_governor_stats;

pub mod role {
    pub const WEIGHTS: i32 = crate::sys::FER_MEM_ROLE_WEIGHTS as i32;
    pub const KV: i32 = crate::sys::FER_MEM_ROLE_KV as i32;
    pub const WORKSPACE: i32 = crate::sys::FER_MEM_ROLE_WORKSPACE as i32;
    pub const ACTIVATIONS: i32 = crate::sys::FER_MEM_ROLE_ACTIVATIONS as i32;
    pub const CACHE: i32 = crate::sys::FER_MEM_ROLE_CACHE as i32;
    pub const COUNT: usize = crate::sys::FER_MEM_ROLE_COUNT as usize;
}

/// An owned `fer_governor`. Methods take `&self` (not Sync: one thread at a time).
#[derive(Debug)]
pub struct Governor {
    ptr: NonNull<sys::fer_governor>,
}

// SAFETY: ferrite.h: "Thread-safety: one call at a time." Movable between threads; not Sync.
unsafe impl Send for Governor {}

impl Governor {
    pub fn new(budget: u64) -> Result<Governor> {
        let mut out = ptr::null_mut();
        // SAFETY: valid out-pointer.
        check(unsafe { sys::fer_governor_create(budget, &mut out) })?;
        Ok(Governor { ptr: NonNull::new(out).expect("OK with NULL") })
    }

    pub fn stats(&self) -> Result<GovernorStats> {
        // SAFETY: plain-data struct filled by the call.
        let mut s: GovernorStats = unsafe { std::mem::zeroed() };
        // SAFETY: governor alive; out valid.
        check(unsafe { sys::fer_governor_get_stats(self.ptr.as_ptr(), &mut s) })?;
        Ok(s)
    }

    pub fn charge(&self, role: i32, bytes: u64) -> Result<()> {
        // SAFETY: governor alive.
        check(unsafe { sys::fer_governor_charge(self.ptr.as_ptr(), role, bytes) })
    }

    pub fn release(&self, role: i32, bytes: u64) -> Result<()> {
        // SAFETY: governor alive.
        check(unsafe { sys::fer_governor_release(self.ptr.as_ptr(), role, bytes) })
    }

    /// Opens a grant; it borrows the governor.
    pub fn grant(&self, role: i32, headroom: u64) -> Result<Grant<'_>> {
        let mut out = ptr::null_mut();
        // SAFETY: governor alive; out valid.
        check(unsafe { sys::fer_governor_grant_begin(self.ptr.as_ptr(), role, headroom, &mut out) })?;
        Ok(Grant { ptr: Some(NonNull::new(out).expect("OK with NULL")), _gov: PhantomData })
    }

    pub fn admit_sequence(&self, g: &KvGeometry, max_tokens: u64, granule: u64) -> Result<u64> {
        let mut bytes = 0u64;
        // SAFETY: governor and geometry alive; out valid.
        check(unsafe { sys::fer_governor_admit_sequence(self.ptr.as_ptr(), g, max_tokens, granule, &mut bytes) })?;
        Ok(bytes)
    }

    pub fn as_ptr(&self) -> *mut sys::fer_governor {
        self.ptr.as_ptr()
    }
}

impl Drop for Governor {
    fn drop(&mut self) {
        // SAFETY: owned; a governor with charges answers BUSY and leaks rather than dangling.
        unsafe { sys::fer_governor_free(self.ptr.as_ptr()) };
    }
}

/// An open growth grant; cancelled on drop unless committed.
#[derive(Debug)]
pub struct Grant<'g> {
    ptr: Option<NonNull<sys::fer_grant>>,
    _gov: PhantomData<&'g Governor>,
}

impl Grant<'_> {
    /// Charges `used` (<= headroom) and closes the grant; on error the grant stays open.
    pub fn commit(mut self, used: u64) -> std::result::Result<(), (crate::Error, Self)> {
        let p = self.ptr.expect("open grant");
        // SAFETY: the grant is open.
        match check(unsafe { sys::fer_grant_commit(p.as_ptr(), used) }) {
            Ok(()) => {
                self.ptr = None;
                Ok(())
            }
            Err(e) => Err((e, self)),
        }
    }
}

impl Drop for Grant<'_> {
    fn drop(&mut self) {
        if let Some(p) = self.ptr.take() {
            // SAFETY: the grant is open and owned.
            unsafe { sys::fer_grant_cancel(p.as_ptr()) };
        }
    }
}

impl Vmm {
    /// Puts this pool's granules under `gov` for `role` (`fer_vmm_set_governor`). The governor must
    /// outlive the pool's use of it: the caller keeps it alive (tests declare it first).
    pub fn set_governor(&self, gov: Option<&Governor>, role: i32) -> Result<()> {
        let g = gov.map_or(ptr::null_mut(), |g| g.as_ptr());
        // SAFETY: both alive; C keeps the pointer, which the caller keeps valid.
        check(unsafe { sys::fer_vmm_set_governor(self.as_ptr(), g, role) })
    }
}

pub type KvCacheOptions = sys::fer_kv_cache_options;
pub type KvSeqStats = sys::fer_kv_seq_stats;
pub const BUCKETED: i32 = sys::FER_KV_POLICY_BUCKETED as i32;
pub const FIXED_MAX: i32 = sys::FER_KV_POLICY_FIXED_MAX as i32;

/// Defaults of `fer_kv_cache_options_init`.
pub fn kv_cache_options() -> KvCacheOptions {
    // SAFETY: plain-data struct initialised by the call.
    let mut o: KvCacheOptions = unsafe { std::mem::zeroed() };
    // SAFETY: valid out-pointer.
    check(unsafe { sys::fer_kv_cache_options_init(&mut o) }).expect("init cannot fail");
    o
}

/// An owned `fer_kv_cache` on a borrowed `Vmm`.
#[derive(Debug)]
pub struct KvCache<'v> {
    ptr: NonNull<sys::fer_kv_cache>,
    _vmm: PhantomData<&'v Vmm>,
}

impl<'v> KvCache<'v> {
    pub fn new(vmm: &'v Vmm, opts: &KvCacheOptions) -> Result<KvCache<'v>> {
        let mut out = ptr::null_mut();
        // SAFETY: vmm alive for 'v; opts valid; out valid.
        check(unsafe { sys::fer_kv_cache_create(vmm.as_ptr(), opts, &mut out) })?;
        Ok(KvCache { ptr: NonNull::new(out).expect("OK with NULL"), _vmm: PhantomData })
    }

    /// A new sequence; it borrows the cache.
    pub fn seq(&self) -> Result<KvSeq<'_>> {
        let mut out = ptr::null_mut();
        // SAFETY: cache alive; out valid.
        check(unsafe { sys::fer_kv_seq_create(self.ptr.as_ptr(), &mut out) })?;
        Ok(KvSeq { ptr: NonNull::new(out).expect("OK with NULL"), _cache: PhantomData })
    }

    pub fn as_ptr(&self) -> *mut sys::fer_kv_cache {
        self.ptr.as_ptr()
    }
}

impl Drop for KvCache<'_> {
    fn drop(&mut self) {
        // SAFETY: owned; sequences borrow the cache, so none is alive here.
        unsafe { sys::fer_kv_cache_free(self.ptr.as_ptr()) };
    }
}

/// One sequence of a `KvCache`.
#[derive(Debug)]
pub struct KvSeq<'c> {
    ptr: NonNull<sys::fer_kv_seq>,
    _cache: PhantomData<&'c ()>,
}

impl<'c> KvSeq<'c> {
    pub fn extend(&mut self, live: u64) -> Result<()> {
        // SAFETY: seq alive.
        check(unsafe { sys::fer_kv_seq_extend(self.ptr.as_ptr(), live) })
    }

    pub fn stats(&self) -> Result<KvSeqStats> {
        // SAFETY: plain-data struct filled by the call.
        let mut s: KvSeqStats = unsafe { std::mem::zeroed() };
        // SAFETY: seq alive; out valid.
        check(unsafe { sys::fer_kv_seq_get_stats(self.ptr.as_ptr(), &mut s) })?;
        Ok(s)
    }

    /// A new sequence sharing this one's first `prefix` tokens (`fer_kv_seq_fork`); it borrows
    /// the same cache.
    pub fn fork(&self, prefix: u64) -> Result<KvSeq<'c>> {
        let mut out = ptr::null_mut();
        // SAFETY: seq alive; out valid.
        check(unsafe { sys::fer_kv_seq_fork(self.ptr.as_ptr(), prefix, &mut out) })?;
        Ok(KvSeq { ptr: NonNull::new(out).expect("OK with NULL"), _cache: PhantomData })
    }

    /// Rewinds to `live` tokens, zeroing the dropped positions (`fer_kv_seq_truncate`).
    pub fn truncate(&mut self, live: u64) -> Result<()> {
        // SAFETY: seq alive.
        check(unsafe { sys::fer_kv_seq_truncate(self.ptr.as_ptr(), live) })
    }

    /// Copy-on-write of the windows holding tokens [first, first + n) (`fer_kv_seq_make_writable`).
    pub fn make_writable(&mut self, first: u64, n: u64) -> Result<()> {
        // SAFETY: seq alive.
        check(unsafe { sys::fer_kv_seq_make_writable(self.ptr.as_ptr(), first, n) })
    }

    pub fn sharing(&self) -> Result<sys::fer_kv_seq_sharing> {
        // SAFETY: plain-data struct filled by the call.
        let mut s: sys::fer_kv_seq_sharing = unsafe { std::mem::zeroed() };
        // SAFETY: seq alive; out valid.
        check(unsafe { sys::fer_kv_seq_get_sharing(self.ptr.as_ptr(), &mut s) })?;
        Ok(s)
    }

    /// The raw strided view of K (kv 0) or V (kv 1) of a layer; valid until the next extend.
    pub fn view(&self, layer: u32, kv: u32) -> Result<sys::fer_tensor> {
        // SAFETY: plain-data struct filled by the call.
        let mut t: sys::fer_tensor = unsafe { std::mem::zeroed() };
        // SAFETY: seq alive; out valid.
        check(unsafe { sys::fer_kv_seq_view(self.ptr.as_ptr(), layer, kv, &mut t) })?;
        Ok(t)
    }
}

impl Drop for KvSeq<'_> {
    fn drop(&mut self) {
        // SAFETY: owned; freed once.
        unsafe { sys::fer_kv_seq_free(self.ptr.as_ptr()) };
    }
}

pub type KvPagesStats = sys::fer_kv_pages_stats;

/// An owned `fer_kv_pages` pool (the paged KV mode; metadata only).
#[derive(Debug)]
pub struct KvPages {
    ptr: NonNull<sys::fer_kv_pages>,
    live: BTreeSet<u32>,
}

impl KvPages {
    pub fn new(n_pages: u32, page_tokens: u32) -> Result<KvPages> {
        let mut out = ptr::null_mut();
        // SAFETY: valid out-pointer.
        check(unsafe { sys::fer_kv_pages_create(n_pages, page_tokens, &mut out) })?;
        Ok(KvPages { ptr: NonNull::new(out).expect("OK with NULL"), live: BTreeSet::new() })
    }
    pub fn seq_create(&mut self) -> Result<u32> {
        let mut id = 0;
        // SAFETY: pool alive; out valid.
        check(unsafe { sys::fer_kv_pages_seq_create(self.ptr.as_ptr(), &mut id) })?;
        self.live.insert(id);
        Ok(id)
    }
    pub fn append(&mut self, seq: u32, n: u32) -> Result<()> {
        // SAFETY: pool alive.
        check(unsafe { sys::fer_kv_pages_append(self.ptr.as_ptr(), seq, n) })
    }
    pub fn fork(&mut self, seq: u32) -> Result<u32> {
        let mut id = 0;
        // SAFETY: pool alive; out valid.
        check(unsafe { sys::fer_kv_pages_fork(self.ptr.as_ptr(), seq, &mut id) })?;
        self.live.insert(id);
        Ok(id)
    }
    pub fn seq_free(&mut self, seq: u32) -> Result<()> {
        // SAFETY: pool alive.
        check(unsafe { sys::fer_kv_pages_seq_free(self.ptr.as_ptr(), seq) })?;
        self.live.remove(&seq);
        Ok(())
    }
    /// (page table, tokens)
    pub fn table(&self, seq: u32) -> Result<(Vec<u32>, u64)> {
        let (mut n, mut tokens) = (0usize, 0u64);
        // SAFETY: a zero-capacity query for the size first.
        let st = unsafe { sys::fer_kv_pages_table(self.ptr.as_ptr(), seq, ptr::null_mut(), 0, &mut n, &mut tokens) };
        if st != crate::status::BUFFER_TOO_SMALL {
            check(st)?;
        }
        let mut v = vec![0u32; n];
        // SAFETY: v holds n entries.
        check(unsafe { sys::fer_kv_pages_table(self.ptr.as_ptr(), seq, v.as_mut_ptr(), n, &mut n, &mut tokens) })?;
        Ok((v, tokens))
    }
    pub fn stats(&self) -> Result<KvPagesStats> {
        // SAFETY: plain-data struct filled by the call.
        let mut s: KvPagesStats = unsafe { std::mem::zeroed() };
        // SAFETY: pool alive; out valid.
        check(unsafe { sys::fer_kv_pages_get_stats(self.ptr.as_ptr(), &mut s) })?;
        Ok(s)
    }
    pub fn as_ptr(&self) -> *mut sys::fer_kv_pages {
        self.ptr.as_ptr()
    }
}

impl Drop for KvPages {
    fn drop(&mut self) {
        // Free the sequences still alive, then the pool (which is BUSY while any is).
        for &id in &self.live {
            // SAFETY: pool alive; id is a live sequence of it.
            unsafe { sys::fer_kv_pages_seq_free(self.ptr.as_ptr(), id) };
        }
        // SAFETY: owned; freed once.
        unsafe { sys::fer_kv_pages_free(self.ptr.as_ptr()) };
    }
}

/// Weights under one stable address (`fer_weight_store`), over a [`Vmm`] that outlives it.
pub struct WeightStore<'v> {
    ptr: NonNull<sys::fer_weight_store>,
    _vmm: PhantomData<&'v Vmm>,
}

impl<'v> WeightStore<'v> {
    /// Opens `bytes` of `file` from `offset` with the given budget and eviction
    /// (`fer_weight_eviction_code`).
    pub fn open(vmm: &'v Vmm, file: &std::fs::File, offset: u64, bytes: u64, budget: u64, eviction: i32) -> Result<WeightStore<'v>> {
        use std::os::unix::io::AsRawFd;
        // SAFETY: plain-data struct filled by the call.
        let mut o: sys::fer_weight_store_options = unsafe { std::mem::zeroed() };
        // SAFETY: valid out-pointer.
        check(unsafe { sys::fer_weight_store_options_init(&mut o) })?;
        o.budget_bytes = budget;
        o.eviction = eviction;
        let mut out = ptr::null_mut();
        // SAFETY: vmm alive for 'v; the fd is valid during the call (the store maps the file).
        check(unsafe { sys::fer_weight_store_open(vmm.as_ptr(), file.as_raw_fd(), offset, bytes, &o, &mut out) })?;
        Ok(WeightStore { ptr: NonNull::new(out).expect("OK with NULL"), _vmm: PhantomData })
    }

    pub fn base(&self) -> usize {
        let mut p = ptr::null();
        // SAFETY: store alive; valid out-pointer.
        check(unsafe { sys::fer_weight_store_base(self.ptr.as_ptr(), &mut p) }).expect("base");
        p as usize
    }

    /// Makes [offset, offset + len) resident and copies it out.
    pub fn read(&mut self, offset: u64, len: usize) -> Result<(usize, Vec<u8>)> {
        let mut p = ptr::null();
        // SAFETY: store alive and borrowed mutably; on OK p has len readable bytes until the next acquire.
        check(unsafe { sys::fer_weight_store_acquire(self.ptr.as_ptr(), offset, len as u64, &mut p) })?;
        // SAFETY: as above.
        Ok((p as usize, unsafe { std::slice::from_raw_parts(p as *const u8, len) }.to_vec()))
    }

    pub fn stats(&self) -> Result<sys::fer_weight_store_stats> {
        // SAFETY: plain-data struct filled by the call.
        let mut s: sys::fer_weight_store_stats = unsafe { std::mem::zeroed() };
        // SAFETY: store alive.
        check(unsafe { sys::fer_weight_store_get_stats(self.ptr.as_ptr(), &mut s) })?;
        Ok(s)
    }
}

impl Drop for WeightStore<'_> {
    fn drop(&mut self) {
        // SAFETY: owned; releases its granules before the vmm (which outlives 'v) goes.
        unsafe { sys::fer_weight_store_free(self.ptr.as_ptr()) };
    }
}
