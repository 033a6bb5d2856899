//! The KV cache's promises on bad input and refusals, entry point by entry point: a NULL handle or
//! out-pointer is NULL_ARG with the out-parameters zeroed (NULL / UINT32_MAX ids), every failure
//! leaves a message, and a refused call (a pool out of granules, a governor's budget, a frozen
//! pool, arguments out of range or overflowing) changes nothing: not the sequence's stats, its
//! address, its values, nor the pool's or the governor's counts.

mod common;

use ferrite::mem::{self, role, Governor, KvCache, KvSeq, Vmm};
use ferrite::{last_error_message, status, sys};
use std::ptr;

use common::kv_f16_options as options;

/// Everything a refused call must leave as it was.
#[derive(Debug, PartialEq)]
struct Snapshot {
    live: u64,
    cap: u64,
    growth: u64,
    moved: u64,
    address_changes: u64,
    committed: u64,
    shared: u64,
    cow: u64,
    k0: usize,
    /// FNV-1a of every live byte (a short Debug when a test fails).
    values: u64,
    pool_granules: u64,
    pool_os: u64,
    pool_windows: u64,
}

fn snapshot(s: &KvSeq<'_>, vmm: &Vmm, layers: u32) -> Snapshot {
    let (st, sh, vs) = (s.stats().unwrap(), s.sharing().unwrap(), vmm.stats().unwrap());
    let mut values = Vec::new();
    for l in 0..layers {
        for kv in 0..2 {
            let v = s.view(l, kv).unwrap();
            for h in 0..v.shape[0] {
                for t in 0..v.shape[1] {
                    let off = h * v.strides[0] + t * v.strides[1];
                    // SAFETY: inside the view of live tokens; the head's elements are contiguous.
                    values.extend_from_slice(unsafe { std::slice::from_raw_parts((v.data as *const u8).offset(off as isize), (v.shape[2] * v.strides[2]) as usize) });
                }
            }
        }
    }
    Snapshot {
        live: st.live_tokens, cap: st.capacity_tokens, growth: st.growth_events, moved: st.bytes_moved,
        address_changes: st.address_changes, committed: st.committed_bytes, shared: sh.shared_windows, cow: sh.cow_copies,
        k0: s.view(0, 0).unwrap().data as usize,
        values: values.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| (h ^ b as u64).wrapping_mul(0x100_0000_01b3)),
        pool_granules: vs.live_granules, pool_os: vs.os_bytes, pool_windows: vs.mapped_windows,
    }
}

/// Writes a non-zero pattern over every live byte of every binding.
fn fill(s: &KvSeq<'_>, layers: u32, seed: u8) {
    for l in 0..layers {
        for kv in 0..2 {
            let v = s.view(l, kv).unwrap();
            for h in 0..v.shape[0] {
                for t in 0..v.shape[1] {
                    let off = h * v.strides[0] + t * v.strides[1];
                    let n = (v.shape[2] * v.strides[2]) as usize;
                    // SAFETY: inside the view of live tokens, writable (the sequence's own windows).
                    let row = unsafe { std::slice::from_raw_parts_mut((v.data as *mut u8).offset(off as isize), n) };
                    for (j, b) in row.iter_mut().enumerate() {
                        *b = seed.wrapping_add((l * 31 + kv * 7) as u8).wrapping_add((h * 5 + t * 3) as u8).wrapping_add(j as u8) | 1;
                    }
                }
            }
        }
    }
}

/// A pool out of granules refuses the extension with BUDGET_EXCEEDED and a message, in every
/// layout; the sequence, its address and its values, and the pool stay as they were. Head-major
/// bucketed (1 layer, 1 head, 512-byte head rows, 4 KiB granules): at 8 tokens the two bindings
/// hold 2 granules; 9 tokens relocate to a capacity of 16 and need 4 there while the old 2 are
/// still held, so a pool of 4 refuses, and the relocation is not kept.
// EVIDENCE: C-KV-003
#[test]
fn c_kv_003_a_pool_out_of_granules_refuses_with_a_message_and_changes_nothing() {
    for (layout, policy) in [(mem::HEAD_MAJOR, mem::BUCKETED), (mem::HEAD_MAJOR, mem::FIXED_MAX), (mem::SEQ_MAJOR, mem::BUCKETED), (mem::TOKEN_MAJOR, mem::FIXED_MAX)] {
        let vmm = Vmm::cpu(4096, 4).unwrap();
        let cache = KvCache::new(&vmm, &options(layout, policy, 1, 1, 256, 64, 0)).unwrap();
        let mut s = cache.seq().unwrap();
        s.extend(8).unwrap();
        fill(&s, 1, 3);
        let before = snapshot(&s, &vmm, 1);
        let want = if layout == mem::TOKEN_MAJOR { 64 } else { 40 }; // beyond 4 granules in each
        let e = s.extend(want).unwrap_err();
        assert_eq!(e.code, status::BUDGET_EXCEEDED, "layout {layout} policy {policy}");
        assert!(!e.message.is_empty(), "layout {layout} policy {policy}: a refused extend left no message");
        assert_eq!(snapshot(&s, &vmm, 1), before, "layout {layout} policy {policy}: the refused extend changed something");
        if layout == mem::HEAD_MAJOR && policy == mem::BUCKETED {
            let e = s.extend(9).unwrap_err();
            assert_eq!(e.code, status::BUDGET_EXCEEDED);
            assert!(!e.message.is_empty());
            assert_eq!(snapshot(&s, &vmm, 1), before, "the refused relocation kept its new address");
        }
    }
}

/// A governor's budget refuses the extension with BUDGET_EXCEEDED and a message; the sequence,
/// the pool and the governor's charge stay as they were, in every layout.
// EVIDENCE: C-KV-003
#[test]
fn c_kv_003_a_governor_refuses_with_a_message_and_changes_nothing() {
    for (layout, policy) in [(mem::HEAD_MAJOR, mem::BUCKETED), (mem::HEAD_MAJOR, mem::FIXED_MAX), (mem::SEQ_MAJOR, mem::FIXED_MAX), (mem::TOKEN_MAJOR, mem::BUCKETED)] {
        let gov = Governor::new(4 * 4096).unwrap();
        let vmm = Vmm::cpu(4096, 64).unwrap();
        vmm.set_governor(Some(&gov), role::KV).unwrap();
        {
            let cache = KvCache::new(&vmm, &options(layout, policy, 1, 1, 256, 64, 0)).unwrap();
            let mut s = cache.seq().unwrap();
            s.extend(8).unwrap();
            fill(&s, 1, 9);
            let before = (snapshot(&s, &vmm, 1), gov.stats().unwrap().charged_bytes);
            let e = s.extend(40).unwrap_err();
            assert_eq!(e.code, status::BUDGET_EXCEEDED, "layout {layout} policy {policy}");
            assert!(!e.message.is_empty(), "layout {layout} policy {policy}: a refused extend left no message");
            assert_eq!((snapshot(&s, &vmm, 1), gov.stats().unwrap().charged_bytes), before, "layout {layout} policy {policy}");
        }
        assert_eq!(gov.stats().unwrap().charged_bytes, 0);
        vmm.set_governor(None, role::KV).unwrap();
    }
}

/// A fork the pool cannot give its private windows, and a copy-on-write (make_writable, truncate;
/// in the child or in the parent whose windows it shares) it cannot give every granule, are
/// refused with a message; out_child is NULL and nothing changes: the windows copied before the
/// refusal are put back.
// EVIDENCE: C-KV-005
#[test]
fn c_kv_005_refused_fork_and_copy_keep_their_message_and_change_nothing() {
    // seq-major, 1 layer, 1 head, 512-byte rows: 12 tokens fill window 0 and half of window 1 of
    // each binding (4 granules); a fork shares window 0 and needs 2 granules for the halves
    let vmm = Vmm::cpu(4096, 5).unwrap();
    let cache = KvCache::new(&vmm, &options(mem::SEQ_MAJOR, mem::FIXED_MAX, 1, 1, 256, 64, 0)).unwrap();
    let mut parent = cache.seq().unwrap();
    parent.extend(12).unwrap();
    fill(&parent, 1, 5);
    let before = snapshot(&parent, &vmm, 1);
    let e = parent.fork(12).unwrap_err();
    assert_eq!(e.code, status::BUDGET_EXCEEDED);
    assert!(!e.message.is_empty(), "a refused fork left no message");
    // a raw, empty sequence to see *out_child of a refused fork (a prefix beyond its 0 tokens)
    let mut empty: *mut sys::fer_kv_seq = ptr::null_mut();
    // SAFETY: cache alive; out valid.
    assert_eq!(unsafe { sys::fer_kv_seq_create(cache.as_ptr(), &mut empty) }, status::OK);
    let mut child: *mut sys::fer_kv_seq = 8 as *mut _;
    // SAFETY: empty alive; out valid.
    assert_eq!(unsafe { sys::fer_kv_seq_fork(empty, 1, &mut child) }, status::INVALID_ARG);
    assert!(child.is_null(), "a refused fork left *out_child as the caller's bytes");
    assert!(!last_error_message().is_empty());
    // SAFETY: alive, freed once.
    assert_eq!(unsafe { sys::fer_kv_seq_free(empty) }, status::OK);
    assert_eq!(snapshot(&parent, &vmm, 1), before, "a refused fork changed the parent or the pool");
    // a fork of 8 tokens (window 0 shared, nothing to copy) fits; its copy-on-write does not
    let mut c = parent.fork(8).unwrap();
    assert_eq!(c.sharing().unwrap().shared_windows, 2);
    let child_before = snapshot(&c, &vmm, 1);
    // one granule free: K's window is copied, V's is refused, and K's copy is put back (the child,
    // and the parent whose windows it shares, exactly as before)
    let parent_before = snapshot(&parent, &vmm, 1);
    for e in [c.make_writable(0, 8).unwrap_err(), c.truncate(3).unwrap_err(), parent.make_writable(0, 1).unwrap_err(), parent.truncate(2).unwrap_err()] {
        assert_eq!(e.code, status::BUDGET_EXCEEDED);
        assert!(!e.message.is_empty(), "a refused copy-on-write left no message");
        assert_eq!(snapshot(&c, &vmm, 1), child_before, "a refused copy-on-write changed the child");
        assert_eq!(snapshot(&parent, &vmm, 1), parent_before, "a refused copy-on-write changed the parent");
    }
    // none free: refused at the first window
    let _hog = [vmm.granule_create().unwrap()];
    let child_before = snapshot(&c, &vmm, 1);
    let e = c.make_writable(0, 1).unwrap_err();
    assert_eq!(e.code, status::BUDGET_EXCEEDED);
    assert!(!e.message.is_empty(), "a refused make_writable left no message");
    assert_eq!(snapshot(&c, &vmm, 1), child_before);
    let e = c.truncate(0).unwrap_err();
    assert_eq!(e.code, status::BUDGET_EXCEEDED, "a truncate into a shared window needs its copy first");
    assert!(!e.message.is_empty());
    assert_eq!(snapshot(&c, &vmm, 1), child_before, "a refused truncate changed something");
    vmm.granule_release(_hog[0]).unwrap();
}

/// A sequence whose reservations the pool refuses (the mask's: 2^20 bytes x 2^27 tokens is
/// beyond any address space, after the K and V reservations succeeded) is refused with the
/// pool's message, not the empty one its clean-up left.
// EVIDENCE: C-KV-003
#[test]
fn c_kv_003_a_refused_sequence_keeps_its_message() {
    let vmm = Vmm::cpu(2 << 20, 16).unwrap();
    let cache = KvCache::new(&vmm, &options(mem::SEQ_MAJOR, mem::FIXED_MAX, 1, 1, 1, 1 << 27, 1 << 20)).unwrap();
    let e = cache.seq().unwrap_err();
    assert_eq!(e.code, status::SIZE_OVERFLOW);
    assert!(!e.message.is_empty(), "a refused fer_kv_seq_create left no message");
    let vs = vmm.stats().unwrap();
    assert_eq!((vs.live_granules, vs.mapped_windows), (0, 0));
    cache.seq().unwrap_err(); // and it stays refusable: nothing leaked a range
}

/// A sequence of `cache` through the raw ABI, extended to `tokens` (the caller frees it: these
/// tests free it while the pool is frozen, which the safe wrapper's Drop cannot report).
fn raw_seq(cache: &KvCache, tokens: u64) -> *mut sys::fer_kv_seq {
    let mut raw: *mut sys::fer_kv_seq = ptr::null_mut();
    // SAFETY: cache alive; out valid.
    assert_eq!(unsafe { sys::fer_kv_seq_create(cache.as_ptr(), &mut raw) }, status::OK);
    // SAFETY: raw alive.
    assert_eq!(unsafe { sys::fer_kv_seq_extend(raw, tokens) }, status::OK);
    raw
}

/// A frozen pool refuses fer_kv_seq_free with BUSY and a message, and frees nothing: the sequence
/// stays whole (values, stats) and frees once the pool thaws.
// EVIDENCE: C-KV-003
#[test]
fn c_kv_003_freeing_on_a_frozen_pool_is_busy_and_frees_nothing() {
    let vmm = Vmm::cpu(4096, 64).unwrap();
    let cache = KvCache::new(&vmm, &options(mem::SEQ_MAJOR, mem::BUCKETED, 2, 1, 64, 64, 4)).unwrap();
    let raw = raw_seq(&cache, 20);
    let before = vmm.stats().unwrap();
    vmm.set_frozen(true).unwrap();
    // SAFETY: raw alive; the call refuses.
    assert_eq!(unsafe { sys::fer_kv_seq_free(raw) }, status::BUSY);
    assert!(!last_error_message().is_empty());
    let mut st: sys::fer_kv_seq_stats = unsafe { std::mem::zeroed() };
    // SAFETY: raw still alive (nothing was freed).
    assert_eq!(unsafe { sys::fer_kv_seq_get_stats(raw, &mut st) }, status::OK);
    assert_eq!(st.live_tokens, 20);
    let after = vmm.stats().unwrap();
    assert_eq!((after.live_granules, after.mapped_windows), (before.live_granules, before.mapped_windows));
    // SAFETY: the cache has a live sequence: BUSY.
    assert_eq!(unsafe { sys::fer_kv_cache_free(cache.as_ptr()) }, status::BUSY);
    vmm.set_frozen(false).unwrap();
    // SAFETY: raw alive; freed once.
    assert_eq!(unsafe { sys::fer_kv_seq_free(raw) }, status::OK);
    let vs = vmm.stats().unwrap();
    assert_eq!((vs.live_granules, vs.mapped_windows, vs.os_bytes), (0, 0, 0));
}

/// A fork on a frozen pool is BUSY with a message before anything is built: no child, no range
/// left behind (a half-built child could not be freed while the pool is frozen), and the cache
/// frees once the parent does.
// EVIDENCE: C-KV-003
#[test]
fn c_kv_003_a_fork_on_a_frozen_pool_is_busy_and_builds_nothing() {
    let vmm = Vmm::cpu(4096, 64).unwrap();
    let cache = KvCache::new(&vmm, &options(mem::SEQ_MAJOR, mem::FIXED_MAX, 2, 1, 64, 64, 4)).unwrap();
    let parent = raw_seq(&cache, 40);
    let before = vmm.stats().unwrap();
    vmm.set_frozen(true).unwrap();
    let mut child: *mut sys::fer_kv_seq = 8 as *mut sys::fer_kv_seq;
    // SAFETY: parent alive; the call refuses.
    assert_eq!(unsafe { sys::fer_kv_seq_fork(parent, 40, &mut child) }, status::BUSY);
    assert!(child.is_null(), "a refused fork left *out_child set");
    assert!(!last_error_message().is_empty());
    let after = vmm.stats().unwrap();
    assert_eq!((after.live_granules, after.mapped_windows), (before.live_granules, before.mapped_windows));
    vmm.set_frozen(false).unwrap();
    // SAFETY: parent alive; freed once.
    assert_eq!(unsafe { sys::fer_kv_seq_free(parent) }, status::OK);
    let vs = vmm.stats().unwrap();
    assert_eq!((vs.live_granules, vs.mapped_windows), (0, 0));
    // no half-built child is left holding the cache (or its ranges): the cache frees
    // SAFETY: the cache has no sequence left; it is freed here once and not dropped again.
    assert_eq!(unsafe { sys::fer_kv_cache_free(cache.as_ptr()) }, status::OK, "{}", last_error_message());
    std::mem::forget(cache);
}

/// Arguments out of range or overflowing 64 bits are refused with INVALID_ARG or SIZE_OVERFLOW
/// and a message, and change nothing.
// EVIDENCE: C-KV-003 C-KV-010
#[test]
fn c_kv_003_overflowing_arguments_are_refused_and_change_nothing() {
    let vmm = Vmm::cpu(4096, 64).unwrap();
    // geometry whose sizes overflow 64 bits; a mask whose bytes overflow
    let mut o = options(mem::SEQ_MAJOR, mem::BUCKETED, 2, 1 << 20, 1 << 20, u64::MAX / 2, 0);
    let mut out: *mut sys::fer_kv_cache = 8 as *mut _;
    // SAFETY: all pointers valid.
    assert_eq!(unsafe { sys::fer_kv_cache_create(vmm.as_ptr(), &o, &mut out) }, status::SIZE_OVERFLOW);
    assert!(out.is_null() && !last_error_message().is_empty());
    o = options(mem::SEQ_MAJOR, mem::FIXED_MAX, 1, 1, 8, u64::MAX / 64, 128); // K/V fit 64 bits, the mask not
    out = 8 as *mut _;
    // SAFETY: all pointers valid.
    assert_eq!(unsafe { sys::fer_kv_cache_create(vmm.as_ptr(), &o, &mut out) }, status::SIZE_OVERFLOW);
    assert!(out.is_null() && !last_error_message().is_empty());
    o = options(mem::SEQ_MAJOR, mem::BUCKETED, 1, 1, 8, 64, 0);
    o.min_bucket = 65;
    assert_eq!(KvCache::new(&vmm, &o).unwrap_err().code, status::INVALID_ARG);
    o = options(mem::SEQ_MAJOR, mem::BUCKETED, 1, 1, 8, 64, 0);
    o.struct_size -= 1;
    assert_eq!(KvCache::new(&vmm, &o).unwrap_err().code, status::INVALID_ARG);

    let cache = KvCache::new(&vmm, &options(mem::SEQ_MAJOR, mem::FIXED_MAX, 1, 2, 64, 256, 2)).unwrap();
    let mut s = cache.seq().unwrap();
    s.extend(30).unwrap();
    fill(&s, 1, 7);
    let before = snapshot(&s, &vmm, 1);
    for e in [
        s.make_writable(1, u64::MAX).unwrap_err(),
        s.make_writable(u64::MAX, 1).unwrap_err(),
        s.make_writable(31, 0).unwrap_err(),
        s.truncate(31).unwrap_err(),
        s.truncate(u64::MAX).unwrap_err(),
        s.extend(29).unwrap_err(),
        s.extend(u64::MAX).unwrap_err(),
        s.fork(31).unwrap_err(),
        s.fork(u64::MAX).unwrap_err(),
        s.view(1, 0).unwrap_err(),
        s.view(u32::MAX, 0).unwrap_err(),
        s.view(0, 2).unwrap_err(),
    ] {
        assert_eq!(e.code, status::INVALID_ARG, "{e:?}");
        assert!(!e.message.is_empty(), "{e:?}");
    }
    assert_eq!(snapshot(&s, &vmm, 1), before);
    // the paged mode: counts that overflow a page table's 32 bits
    let mut p = mem::KvPages::new(2, u32::MAX).unwrap();
    let id = p.seq_create().unwrap();
    p.append(id, u32::MAX).unwrap();
    p.append(id, u32::MAX).unwrap();
    let stats = p.stats().unwrap();
    assert_eq!(p.append(id, u32::MAX).unwrap_err().code, status::BUDGET_EXCEEDED);
    assert_eq!(p.stats().unwrap().free_pages, stats.free_pages);
    assert_eq!(p.table(id).unwrap(), (vec![0, 1], 2 * u32::MAX as u64));
    p.seq_free(id).unwrap();
}

/// Every fer_kv_* entry point given a NULL handle (or a NULL out-pointer) answers NULL_ARG with a
/// message, and zeroes what out-parameters it has: NULL handles, UINT32_MAX ids, zeroed structs.
// EVIDENCE: C-KV-009
#[test]
fn c_kv_009_null_handles_zero_the_out_parameters_and_leave_a_message() {
    let null_arg = |st: i32, what: &str| {
        assert_eq!(st, status::NULL_ARG, "{what}");
        assert!(!last_error_message().is_empty(), "{what}: no message");
    };
    let vmm = Vmm::cpu(4096, 16).unwrap();
    let o = options(mem::SEQ_MAJOR, mem::BUCKETED, 1, 1, 8, 64, 0);
    // SAFETY (every call below): the pointers are either NULL, as the test means, or valid.
    unsafe {
        null_arg(sys::fer_kv_cache_options_init(ptr::null_mut()), "options_init(NULL)");
        let mut cache: *mut sys::fer_kv_cache = 8 as *mut _;
        null_arg(sys::fer_kv_cache_create(ptr::null_mut(), &o, &mut cache), "cache_create(vmm NULL)");
        assert!(cache.is_null());
        cache = 8 as *mut _;
        null_arg(sys::fer_kv_cache_create(vmm.as_ptr(), ptr::null(), &mut cache), "cache_create(opts NULL)");
        assert!(cache.is_null());
        null_arg(sys::fer_kv_cache_create(vmm.as_ptr(), &o, ptr::null_mut()), "cache_create(out NULL)");
        assert_eq!(sys::fer_kv_cache_free(ptr::null_mut()), status::OK);
        let mut seq: *mut sys::fer_kv_seq = 8 as *mut _;
        null_arg(sys::fer_kv_seq_create(ptr::null_mut(), &mut seq), "seq_create(NULL)");
        assert!(seq.is_null());
        assert_eq!(sys::fer_kv_seq_free(ptr::null_mut()), status::OK);
        null_arg(sys::fer_kv_seq_extend(ptr::null_mut(), 1), "extend(NULL)");
        let mut st: sys::fer_kv_seq_stats = std::mem::transmute([0xABu8; std::mem::size_of::<sys::fer_kv_seq_stats>()]);
        null_arg(sys::fer_kv_seq_get_stats(ptr::null(), &mut st), "get_stats(NULL)");
        assert_eq!((st.live_tokens, st.capacity_tokens, st.committed_bytes, st.growth_events, st.bytes_moved, st.address_changes), (0, 0, 0, 0, 0, 0));
        let mut t: sys::fer_tensor = std::mem::transmute([0xABu8; std::mem::size_of::<sys::fer_tensor>()]);
        null_arg(sys::fer_kv_seq_view(ptr::null(), 0, 0, &mut t), "view(NULL)");
        let bytes: [u8; std::mem::size_of::<sys::fer_tensor>()] = std::mem::transmute(t);
        assert!(bytes.iter().all(|&b| b == 0), "view(NULL) left the caller's bytes");
        null_arg(sys::fer_kv_seq_truncate(ptr::null_mut(), 0), "truncate(NULL)");
        seq = 8 as *mut _;
        null_arg(sys::fer_kv_seq_fork(ptr::null(), 0, &mut seq), "fork(NULL)");
        assert!(seq.is_null());
        null_arg(sys::fer_kv_seq_make_writable(ptr::null_mut(), 0, 0), "make_writable(NULL)");
        let mut sh = sys::fer_kv_seq_sharing { shared_windows: 7, cow_copies: 7, fork_bytes_copied: 7 };
        null_arg(sys::fer_kv_seq_get_sharing(ptr::null(), &mut sh), "get_sharing(NULL)");
        assert_eq!((sh.shared_windows, sh.cow_copies, sh.fork_bytes_copied), (0, 0, 0), "get_sharing left the caller's bytes");

        // a live cache and sequence, NULL out-pointers
        let cache = KvCache::new(&vmm, &o).unwrap();
        null_arg(sys::fer_kv_seq_create(cache.as_ptr(), ptr::null_mut()), "seq_create(out NULL)");
        let mut raw: *mut sys::fer_kv_seq = ptr::null_mut();
        assert_eq!(sys::fer_kv_seq_create(cache.as_ptr(), &mut raw), status::OK);
        null_arg(sys::fer_kv_seq_get_stats(raw, ptr::null_mut()), "get_stats(out NULL)");
        null_arg(sys::fer_kv_seq_view(raw, 0, 0, ptr::null_mut()), "view(out NULL)");
        null_arg(sys::fer_kv_seq_fork(raw, 0, ptr::null_mut()), "fork(out NULL)");
        null_arg(sys::fer_kv_seq_get_sharing(raw, ptr::null_mut()), "get_sharing(out NULL)");
        let vs = vmm.stats().unwrap();
        assert_eq!(vs.live_granules, 0, "a refused fork made a sequence");
        assert_eq!(sys::fer_kv_seq_free(raw), status::OK);

        // the paged mode
        let mut pages: *mut sys::fer_kv_pages = 8 as *mut _;
        assert_eq!(sys::fer_kv_pages_create(0, 1, &mut pages), status::INVALID_ARG);
        assert!(pages.is_null());
        null_arg(sys::fer_kv_pages_create(1, 1, ptr::null_mut()), "pages_create(out NULL)");
        assert_eq!(sys::fer_kv_pages_free(ptr::null_mut()), status::OK);
        let mut id = 5u32;
        null_arg(sys::fer_kv_pages_seq_create(ptr::null_mut(), &mut id), "pages_seq_create(NULL)");
        assert_eq!(id, u32::MAX);
        null_arg(sys::fer_kv_pages_append(ptr::null_mut(), 0, 1), "pages_append(NULL)");
        id = 5;
        null_arg(sys::fer_kv_pages_fork(ptr::null_mut(), 0, &mut id), "pages_fork(NULL)");
        assert_eq!(id, u32::MAX);
        null_arg(sys::fer_kv_pages_seq_free(ptr::null_mut(), 0), "pages_seq_free(NULL)");
        let (mut n, mut tokens) = (9usize, 9u64);
        null_arg(sys::fer_kv_pages_table(ptr::null(), 0, ptr::null_mut(), 0, &mut n, &mut tokens), "pages_table(NULL)");
        assert_eq!((n, tokens), (0, 0));
        null_arg(sys::fer_kv_pages_table(ptr::null(), 0, ptr::null_mut(), 0, ptr::null_mut(), ptr::null_mut()), "pages_table(out NULL)");
        let mut ps: sys::fer_kv_pages_stats = std::mem::transmute([0xABu8; std::mem::size_of::<sys::fer_kv_pages_stats>()]);
        null_arg(sys::fer_kv_pages_get_stats(ptr::null(), &mut ps), "pages_get_stats(NULL)");
        assert_eq!((ps.n_pages, ps.free_pages, ps.live_sequences, ps.pages_copied), (0, 0, 0, 0));
    }
}

/// A parent truncated into the prefix a child shares copies those windows first: the child keeps
/// the prefix, bit for bit, and the parent's new tokens there never reach it.
// EVIDENCE: C-KV-006
#[test]
fn c_kv_006_truncating_the_parent_into_a_shared_prefix_leaves_the_child_alone() {
    for layout in [mem::SEQ_MAJOR, mem::TOKEN_MAJOR, mem::HEAD_MAJOR] {
        let vmm = Vmm::cpu(4096, 256).unwrap();
        let cache = KvCache::new(&vmm, &options(layout, mem::FIXED_MAX, 1, 2, 128, 64, 0)).unwrap();
        let mut parent = cache.seq().unwrap();
        parent.extend(48).unwrap();
        fill(&parent, 1, 11);
        let child = parent.fork(48).unwrap();
        assert!(child.sharing().unwrap().shared_windows > 0);
        let child_before = snapshot(&child, &vmm, 1).values;
        parent.truncate(3).unwrap();
        assert!(parent.sharing().unwrap().cow_copies > 0, "layout {layout}: the parent wrote into a shared window in place");
        parent.extend(48).unwrap();
        fill(&parent, 1, 77);
        assert_eq!(snapshot(&child, &vmm, 1).values, child_before, "layout {layout}: the parent's truncate or writes reached the child");
    }
}
