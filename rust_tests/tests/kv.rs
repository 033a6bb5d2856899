//! The KV cache on real memory: the original's growth record (bytes moved per layout), commit that
//! follows the layout's geometry and the OS, data preserved across growth, views that kernels read.

mod common;

use ferrite::mem::{self, KvCache, Vmm};
use ferrite::{status, sys};
use proptest::prelude::*;

const G: u64 = 2 << 20;

use common::kv_f16_options as options;

/// original-system.md B: qwen2.5-0.5b geometry (24 layers, 2 KV heads, head_dim 64, f16) with an
/// 8-byte mask entry per token (12,296 bytes per token), one token at a time from a bucket of 8:
/// capacity 8 -> 16 -> 32 -> 64 (3 growth events); head-major growth moves 688,576 bytes,
/// seq-major moves 0 and never changes an address.
// EVIDENCE: C-KV-001
#[test]
fn c_kv_001_growth_moves_688576_bytes_head_major_and_0_seq_major() {
    let vmm = Vmm::cpu(G, 4096).unwrap();
    let mut got = Vec::new();
    for (layout, policy) in [(mem::HEAD_MAJOR, mem::BUCKETED), (mem::SEQ_MAJOR, mem::BUCKETED), (mem::HEAD_MAJOR, mem::FIXED_MAX), (mem::TOKEN_MAJOR, mem::BUCKETED)] {
        let cache = KvCache::new(&vmm, &options(layout, policy, 24, 2, 64, 32768, 8)).unwrap();
        let mut seq = cache.seq().unwrap();
        for t in 1..=64 {
            seq.extend(t).unwrap();
        }
        let s = seq.stats().unwrap();
        got.push((layout, policy, s.capacity_tokens, s.growth_events, s.bytes_moved, s.address_changes));
    }
    assert_eq!(got[0], (mem::HEAD_MAJOR, mem::BUCKETED, 64, 3, 688_576, 3));
    assert_eq!(got[1], (mem::SEQ_MAJOR, mem::BUCKETED, 64, 3, 0, 0));
    assert_eq!(got[2], (mem::HEAD_MAJOR, mem::FIXED_MAX, 32768, 0, 0, 0));
    assert_eq!(got[3], (mem::TOKEN_MAJOR, mem::BUCKETED, 64, 3, 0, 0));
    assert_eq!(56 * 12_296, 688_576); // the 8 + 16 + 32 tokens live at the three growths
}

proptest! {
    #![proptest_config(common::config(24, file!()))]

    /// Committed bytes follow the layout: after any sequence of extensions the sequence's committed
    /// bytes equal fer_kv_committed_granules for its current stride, and the kernel reports exactly
    /// those bytes for the pool's memfd; the logical contents written through the views survive
    /// every growth; and a kernel (reduce_mean) reading through the views of different layouts
    /// gives bit-identical results.
    // EVIDENCE: C-KV-002
    #[test]
    fn c_kv_002_commit_follows_layout_and_views_preserve_data(
        steps in proptest::collection::vec(1u64..40, 1..6), layers in 1u32..3, heads in 1u32..4, dim in prop_oneof![Just(8u32), Just(64u32)]) {
        const SMALL: u64 = 64 * 1024;
        let mut means: Vec<Vec<u16>> = Vec::new();
        for (layout, policy) in [(mem::HEAD_MAJOR, mem::BUCKETED), (mem::SEQ_MAJOR, mem::BUCKETED), (mem::TOKEN_MAJOR, mem::FIXED_MAX), (mem::HEAD_MAJOR, mem::FIXED_MAX)] {
            let vmm = Vmm::cpu(SMALL, 4096).unwrap();
            let cache = KvCache::new(&vmm, &options(layout, policy, layers, heads, dim, 512, 0)).unwrap();
            let mut seq = cache.seq().unwrap();
            let mut live = 0u64;
            for &n in &steps {
                let old = live;
                live = (live + n).min(512);
                seq.extend(live).unwrap();
                // write token t's values (a function of layer, kv, head, t, d) through the views
                for l in 0..layers { for kv in 0..2u32 {
                    let v = seq.view(l, kv).unwrap();
                    for h in 0..heads as i64 { for t in old as i64..live as i64 { for d in 0..dim as i64 {
                        let x = half::f16::from_f32(((l as i64 * 7 + kv as i64 * 3 + h * 5 + t * 11 + d) % 97) as f32 / 8.0);
                        // SAFETY: in bounds of the view (h < heads, t < live, d < dim).
                        unsafe { *((v.data as *mut u8).offset((h * v.strides[0] + t * v.strides[1] + d * v.strides[2]) as isize) as *mut u16) = x.to_bits() };
                    }}}
                }}
                let s = seq.stats().unwrap();
                let mut g = mem::kv_geometry(layout, layers, heads, dim, 2, if layout == mem::HEAD_MAJOR && policy == mem::BUCKETED { s.capacity_tokens } else { 512 });
                g.struct_size = std::mem::size_of::<mem::KvGeometry>() as u32;
                prop_assert_eq!(s.committed_bytes, mem::kv_committed_granules(&g, live, SMALL).unwrap() * SMALL);
                let vs = vmm.stats().unwrap();
                prop_assert_eq!(vs.os_bytes, s.committed_bytes);
            }
            // every value intact after all growths; reduce_mean through each view
            let mut out_all = Vec::new();
            for l in 0..layers { for kv in 0..2u32 {
                let v = seq.view(l, kv).unwrap();
                for h in 0..heads as i64 { for t in 0..live as i64 { for d in 0..dim as i64 {
                    let want = half::f16::from_f32(((l as i64 * 7 + kv as i64 * 3 + h * 5 + t * 11 + d) % 97) as f32 / 8.0).to_bits();
                    // SAFETY: in bounds.
                    let got = unsafe { *((v.data as *const u8).offset((h * v.strides[0] + t * v.strides[1] + d * v.strides[2]) as isize) as *const u16) };
                    prop_assert_eq!(got, want);
                }}}
                let mut out = vec![0u16; (heads as u64 * live) as usize];
                let mut ot: sys::fer_tensor = unsafe { std::mem::zeroed() };
                let shape = [heads as i64, live as i64, 1];
                // SAFETY: out lives through both calls; the view is valid until the next extend.
                unsafe {
                    prop_assert_eq!(sys::fer_tensor_init_contiguous(&mut ot, out.as_mut_ptr().cast(), sys::FER_DTYPE_F16 as i32, 3, shape.as_ptr()), 0);
                    prop_assert_eq!(sys::fer_reduce_mean(std::ptr::null_mut(), &v, &ot), 0);
                }
                out_all.extend(out);
            }}
            means.push(out_all);
        }
        prop_assert!(means.windows(2).all(|w| w[0] == w[1]), "kernels read different values through different layouts");
    }
}

// EVIDENCE: C-KV-003
#[test]
fn c_kv_003_bad_input_changes_nothing() {
    let vmm = Vmm::cpu(64 * 1024, 16).unwrap();
    let mut o = options(mem::SEQ_MAJOR, mem::BUCKETED, 2, 2, 64, 256, 0);
    o.dtype = sys::FER_DTYPE_F32 as i32; // 4 bytes vs elem_bytes 2
    assert_eq!(KvCache::new(&vmm, &o).unwrap_err().code, status::INVALID_ARG);
    o = options(mem::SEQ_MAJOR, mem::BUCKETED, 2, 2, 64, 256, 0);
    o.min_bucket = 0;
    assert_eq!(KvCache::new(&vmm, &o).unwrap_err().code, status::INVALID_ARG);
    o = options(9, mem::BUCKETED, 2, 2, 64, 256, 0);
    assert_eq!(KvCache::new(&vmm, &o).unwrap_err().code, status::INVALID_ARG);
    o = options(mem::SEQ_MAJOR, 7, 2, 2, 64, 256, 0);
    assert_eq!(KvCache::new(&vmm, &o).unwrap_err().code, status::INVALID_ARG);
    let cache = KvCache::new(&vmm, &options(mem::SEQ_MAJOR, mem::BUCKETED, 2, 2, 64, 256, 0)).unwrap();
    let mut seq = cache.seq().unwrap();
    seq.extend(10).unwrap();
    let before = seq.stats().unwrap();
    assert_eq!(seq.extend(9).unwrap_err().code, status::INVALID_ARG);
    assert_eq!(seq.extend(257).unwrap_err().code, status::INVALID_ARG);
    assert_eq!(seq.view(2, 0).unwrap_err().code, status::INVALID_ARG);
    assert_eq!(seq.view(0, 2).unwrap_err().code, status::INVALID_ARG);
    let after = seq.stats().unwrap();
    assert_eq!((before.live_tokens, before.committed_bytes), (after.live_tokens, after.committed_bytes));
    // the pool runs out of granules: the extension is refused and nothing changes
    let small = Vmm::cpu(4096, 3).unwrap();
    let c2 = KvCache::new(&small, &options(mem::SEQ_MAJOR, mem::BUCKETED, 2, 1, 8, 4096, 0)).unwrap();
    let mut s2 = c2.seq().unwrap();
    // 2 layers x K, V = 4 bindings x 1 window = 4 granules > 3: refused, all or nothing
    assert_eq!(s2.extend(1).unwrap_err().code, status::BUDGET_EXCEEDED);
    let st = s2.stats().unwrap();
    assert_eq!((st.live_tokens, st.committed_bytes), (0, 0));
    let vs = small.stats().unwrap();
    assert_eq!((vs.live_granules, vs.os_bytes, vs.mapped_windows), (0, 0, 0));
    // SAFETY: the cache is alive with a live sequence: BUSY, nothing freed.
    assert_eq!(unsafe { sys::fer_kv_cache_free(cache.as_ptr()) }, status::BUSY);
}

#[derive(Clone, Debug)]
enum PageOp {
    Create,
    Append(usize, u32),
    Fork(usize),
    Free(usize),
}

fn page_op() -> impl Strategy<Value = PageOp> {
    prop_oneof![
        1 => Just(PageOp::Create),
        4 => (0usize..6, 0u32..40).prop_map(|(s, n)| PageOp::Append(s, n)),
        1 => (0usize..6).prop_map(PageOp::Fork),
        1 => (0usize..6).prop_map(PageOp::Free),
    ]
}

proptest! {
    #![proptest_config(common::config(128, file!()))]

    /// The paged mode against a model: every table holds ceil(tokens / page_tokens) pages; a page is
    /// free exactly when no live table holds it; a fork shares its parent's table; the first append
    /// into a shared, partly filled last page copies exactly that page; a short free list refuses
    /// the append and changes nothing.
    // EVIDENCE: C-KV-004
    #[test]
    fn c_kv_004_paged_mode_matches_its_model(ops in proptest::collection::vec(page_op(), 1..60), t in 1u32..20) {
        let mut pool = mem::KvPages::new(24, t).unwrap();
        let mut live: Vec<u32> = Vec::new();
        let mut copied = 0u64;
        for op in ops {
            match op {
                PageOp::Create => live.push(pool.seq_create().unwrap()),
                PageOp::Append(i, n) if i < live.len() => {
                    let id = live[i];
                    let (table, tokens) = pool.table(id).unwrap();
                    let holders = |pg: u32| live.iter().filter(|&&o| pool.table(o).unwrap().0.contains(&pg)).count();
                    let cow = n > 0 && tokens % t as u64 != 0 && holders(*table.last().unwrap()) > 1;
                    let need = (tokens + n as u64).div_ceil(t as u64) - table.len() as u64 + cow as u64;
                    let before = pool.stats().unwrap();
                    match pool.append(id, n) {
                        Ok(()) => {
                            prop_assert!(need <= before.free_pages as u64);
                            let (after, at) = pool.table(id).unwrap();
                            prop_assert_eq!(at, tokens + n as u64);
                            prop_assert_eq!(&after[..table.len() - cow as usize], &table[..table.len() - cow as usize]);
                            if cow {
                                copied += 1;
                                prop_assert_ne!(after[table.len() - 1], table[table.len() - 1]);
                            }
                        }
                        Err(e) => {
                            prop_assert_eq!(e.code, status::BUDGET_EXCEEDED);
                            prop_assert!(need > before.free_pages as u64);
                            prop_assert_eq!(pool.table(id).unwrap(), (table, tokens));
                            prop_assert_eq!(pool.stats().unwrap().free_pages, before.free_pages);
                        }
                    }
                }
                PageOp::Fork(i) if i < live.len() => {
                    let child = pool.fork(live[i]).unwrap();
                    prop_assert_eq!(pool.table(child).unwrap(), pool.table(live[i]).unwrap());
                    live.push(child);
                }
                PageOp::Free(i) if i < live.len() => pool.seq_free(live.remove(i)).unwrap(),
                _ => {}
            }
            // invariants over all live tables
            let mut held = std::collections::BTreeSet::new();
            for &id in &live {
                let (table, tokens) = pool.table(id).unwrap();
                prop_assert_eq!(table.len() as u64, tokens.div_ceil(t as u64));
                held.extend(table);
            }
            let s = pool.stats().unwrap();
            prop_assert_eq!(s.free_pages as usize + held.len(), 24);
            prop_assert_eq!(s.live_sequences as usize, live.len());
            prop_assert_eq!(s.pages_copied, copied);
        }
    }
}

// EVIDENCE: C-KV-004 (bad input)
#[test]
fn c_kv_004_paged_bad_input() {
    assert_eq!(mem::KvPages::new(0, 16).unwrap_err().code, status::INVALID_ARG);
    assert_eq!(mem::KvPages::new(4, 0).unwrap_err().code, status::INVALID_ARG);
    let mut p = mem::KvPages::new(4, 16).unwrap();
    assert_eq!(p.append(0, 1).unwrap_err().code, status::INVALID_ARG);
    let s = p.seq_create().unwrap();
    assert_eq!(p.append(s, 65).unwrap_err().code, status::BUDGET_EXCEEDED);
    p.append(s, 64).unwrap();
    assert_eq!(p.seq_free(s + 1).unwrap_err().code, status::INVALID_ARG);
    // SAFETY: the pool is alive with a live sequence: BUSY, nothing freed.
    assert_eq!(unsafe { sys::fer_kv_pages_free(p.as_ptr()) }, status::BUSY);
    p.seq_free(s).unwrap();
    assert_eq!(p.seq_free(s).unwrap_err().code, status::INVALID_ARG);
}

/// Calls `f(element pointer, layer, kv, head, token, element)` for every f16 element of tokens
/// [t0, t1) of every binding of `seq`, through its views.
fn walk(seq: &mem::KvSeq<'_>, layers: u32, t0: u64, t1: u64, mut f: impl FnMut(*mut u16, i64, i64, i64, i64, i64)) {
    for layer in 0..layers {
        for kv in 0..2 {
            let v = seq.view(layer, kv).unwrap();
            for h in 0..v.shape[0] {
                for t in t0 as i64..t1 as i64 {
                    for e in 0..v.shape[2] {
                        let off = h * v.strides[0] + t * v.strides[1] + e * v.strides[2];
                        // SAFETY: the offset lies inside the view of live tokens (committed memory).
                        let p = unsafe { (v.data as *mut u8).offset(off as isize) as *mut u16 };
                        f(p, layer as i64, kv as i64, h, t, e);
                    }
                }
            }
        }
    }
}

/// Fills tokens [t0, t1) of every binding of `seq` through its views with a pattern of `seed`.
fn fill(seq: &mem::KvSeq<'_>, layers: u32, t0: u64, t1: u64, seed: u64) {
    walk(seq, layers, t0, t1, |p, layer, kv, h, t, e| {
        let x = half::f16::from_f32(((seed as i64 * 131 + layer * 31 + kv * 7 + h * 5 + t * 3 + e) % 97) as f32 / 97.0 - 0.5);
        // SAFETY: p points into the live, writable view (walk's contract).
        unsafe { std::ptr::write(p, x.to_bits()) };
    });
}

/// Attention of one decode query over layer 0 of `seq` (f32 out), through the views.
fn attend(seq: &mem::KvSeq<'_>, q: &[f32], heads: i64, dim: i64) -> Vec<f32> {
    let (k, v) = (seq.view(0, 0).unwrap(), seq.view(0, 1).unwrap());
    let mut out = vec![0f32; (heads * dim) as usize];
    let mut p = ferrite::attention_params();
    p.q_pos0 = k.shape[1] - 1;
    // SAFETY: the views describe live, committed KV memory of `seq`; q and out are live buffers.
    let (kt, vt) = unsafe { (ferrite::TensorRef::from_raw(k), ferrite::TensorRef::from_raw(v)) };
    ferrite::attention(None, &ferrite::TensorRef::new(q, &[heads, 1, dim]).unwrap(), &kt, &vt, &p,
                       &mut ferrite::TensorMut::new(&mut out, &[heads, 1, dim]).unwrap()).unwrap();
    out
}

/// original-system.md B: one layer, 8 KV heads, head_dim 128, f16, seq-major, a 1024-token prefix
/// and a 1024-token private tail per sequence: two independent sequences hold 8 granules
/// (16,777,216 bytes), two sharing the prefix 6 (12,582,912 bytes), and a third sharer adds only
/// its tail. The OS agrees; attention over the shared prefix equals attention over private
/// copies bit for bit; copy-on-write copies one granule per binding and leaves the parent alone;
/// the prefix lives until its last sharer leaves.
// EVIDENCE: C-KV-005
#[test]
fn c_kv_005_prefix_sharing_charges_the_prefix_once() {
    let opts = options(mem::SEQ_MAJOR, mem::FIXED_MAX, 1, 8, 128, 4096, 0);
    let q: Vec<f32> = (0..8 * 128).map(|i| ((i % 13) as f32 - 6.0) / 10.0).collect();
    let ledger = |vmm: &Vmm| {
        let s = vmm.stats().unwrap();
        assert_eq!(s.os_bytes, s.ledger_bytes, "the OS disagrees with the ledger");
        s.ledger_bytes
    };
    // independent: two sequences of prefix + tail
    let vmm = Vmm::cpu(G, 64).unwrap();
    let cache = KvCache::new(&vmm, &opts).unwrap();
    let (mut a, mut b) = (cache.seq().unwrap(), cache.seq().unwrap());
    a.extend(2048).unwrap();
    b.extend(2048).unwrap();
    fill(&a, 1, 0, 1024, 1);
    fill(&a, 1, 1024, 2048, 2);
    fill(&b, 1, 0, 1024, 1);
    fill(&b, 1, 1024, 2048, 3);
    assert_eq!(ledger(&vmm), 16_777_216);
    let private_b = attend(&b, &q, 8, 128);
    drop((a, b));

    // shared: the child maps the parent's prefix granules read-only
    let vmm = Vmm::cpu(G, 64).unwrap();
    let cache = KvCache::new(&vmm, &opts).unwrap();
    let mut parent = cache.seq().unwrap();
    parent.extend(1024).unwrap();
    fill(&parent, 1, 0, 1024, 1);
    let mut child = parent.fork(1024).unwrap();
    assert_eq!(ledger(&vmm), 4_194_304, "a fork adds no bytes for a granule-aligned prefix");
    parent.extend(2048).unwrap();
    fill(&parent, 1, 1024, 2048, 2);
    child.extend(2048).unwrap();
    fill(&child, 1, 1024, 2048, 3);
    assert_eq!(ledger(&vmm), 12_582_912);
    let sh = child.sharing().unwrap();
    assert_eq!((sh.shared_windows, sh.cow_copies, sh.fork_bytes_copied), (2, 0, 0));
    let shared_b = attend(&child, &q, 8, 128);
    assert!(shared_b.iter().zip(&private_b).all(|(x, y)| x.to_bits() == y.to_bits()), "attention over the shared prefix differs");
    let mut third = parent.fork(1024).unwrap();
    third.extend(2048).unwrap();
    assert_eq!(ledger(&vmm), 12_582_912 + 4_194_304, "a third sharer adds only its tail");

    // copy-on-write: one granule per binding, the parent untouched
    let before = attend(&parent, &q, 8, 128);
    child.make_writable(5, 1).unwrap();
    assert_eq!(child.sharing().unwrap().cow_copies, 2);
    assert_eq!(ledger(&vmm), 12_582_912 + 4_194_304 + 4_194_304);
    fill(&child, 1, 5, 6, 9); // now writable in the child only
    assert!(attend(&parent, &q, 8, 128).iter().zip(&before).all(|(x, y)| x.to_bits() == y.to_bits()), "a child's write reached the parent");
    assert!(attend(&third, &q, 8, 128).len() == 8 * 128);

    // the prefix lives until its last sharer leaves
    let third_out = attend(&third, &q, 8, 128);
    drop(parent);
    drop(child);
    assert!(attend(&third, &q, 8, 128).iter().zip(&third_out).all(|(x, y)| x.to_bits() == y.to_bits()), "the prefix died with the parent");
    assert_eq!(ledger(&vmm), 4_194_304 + 4_194_304, "the third keeps the prefix and its tail");
    drop(third);
    assert_eq!(ledger(&vmm), 0, "the last sharer released everything");

    // copy-on-write after every other sharer left: the old granule goes with the last mapping
    let mut parent = cache.seq().unwrap();
    parent.extend(1024).unwrap();
    fill(&parent, 1, 0, 1024, 1);
    let mut child = parent.fork(1024).unwrap();
    drop(parent);
    assert_eq!(ferrite::last_error_message(), "", "freeing a sharer is not an error");
    assert_eq!(ledger(&vmm), 4_194_304, "the child keeps the prefix alive");
    child.make_writable(0, 1).unwrap();
    assert_eq!(ledger(&vmm), 4_194_304, "the copy replaced the orphaned granule, it did not leak it");
    drop(child);
    assert_eq!(ledger(&vmm), 0);
}

// EVIDENCE: C-KV-005
#[test]
fn c_kv_005_fork_of_a_partial_window_copies_and_refuses_what_it_cannot_share() {
    let vmm = Vmm::cpu(64 << 10, 256).unwrap();
    // token-major, 2 layers, 2 heads, dim 64: 1 KiB per token per layer and K/V pair... the
    // 100-token prefix ends inside a window, which the child gets as a private copy
    let cache = KvCache::new(&vmm, &options(mem::TOKEN_MAJOR, mem::BUCKETED, 2, 2, 64, 1024, 8)).unwrap();
    let mut parent = cache.seq().unwrap();
    parent.extend(100).unwrap();
    fill(&parent, 2, 0, 100, 4);
    let child = parent.fork(100).unwrap();
    let sh = child.sharing().unwrap();
    let per_token = 2 * 2 * 2 * 64 * 2; // layers x (K, V) x heads x dim x 2 bytes = 1 KiB
    assert_eq!(sh.shared_windows, (100 * per_token / (64 << 10)) as u64 + 0, "full windows shared");
    assert!(sh.fork_bytes_copied > 0, "the partial window was copied");
    let q: Vec<f32> = (0..2 * 64).map(|i| (i % 7) as f32 / 7.0).collect();
    assert!(attend(&child, &q, 2, 64).iter().zip(attend(&parent, &q, 2, 64)).all(|(x, y)| x.to_bits() == y.to_bits()));
    assert_eq!(parent.fork(101).unwrap_err().code, status::INVALID_ARG, "prefix beyond the live tokens");
    drop((parent, child));
    let hm = KvCache::new(&vmm, &options(mem::HEAD_MAJOR, mem::BUCKETED, 1, 2, 64, 1024, 0)).unwrap();
    let mut s = hm.seq().unwrap();
    s.extend(16).unwrap();
    assert_eq!(s.fork(8).unwrap_err().code, status::UNSUPPORTED, "a relocating cache cannot share");
}

/// The f16 bits of every (layer, kv, head, token, element) of tokens [t0, t1).
fn values(seq: &mem::KvSeq<'_>, layers: u32, t0: u64, t1: u64) -> Vec<u16> {
    let mut out = Vec::new();
    // SAFETY: p points into the live view (walk's contract).
    walk(seq, layers, t0, t1, |p, _, _, _, _, _| out.push(unsafe { std::ptr::read(p) }));
    out
}

// EVIDENCE: C-KV-006
#[test]
fn c_kv_006_truncate_zeroes_the_dropped_tokens_keeps_the_rest_and_never_touches_a_sharer() {
    for (layout, policy) in [(mem::HEAD_MAJOR, mem::BUCKETED), (mem::SEQ_MAJOR, mem::BUCKETED), (mem::TOKEN_MAJOR, mem::FIXED_MAX)] {
        let vmm = Vmm::cpu(64 * 1024, 256).unwrap();
        let cache = KvCache::new(&vmm, &options(layout, policy, 2, 3, 64, 512, 4)).unwrap();
        let mut seq = cache.seq().unwrap();
        seq.extend(300).unwrap();
        fill(&seq, 2, 0, 300, 5);
        let kept = values(&seq, 2, 0, 100);
        let before = seq.stats().unwrap();
        seq.truncate(100).unwrap();
        assert_eq!(seq.stats().unwrap().live_tokens, 100);
        assert_eq!(seq.stats().unwrap().committed_bytes, before.committed_bytes, "truncate keeps the granules");
        seq.extend(300).unwrap();
        assert_eq!(seq.stats().unwrap().committed_bytes, before.committed_bytes, "extending again commits nothing");
        assert_eq!(values(&seq, 2, 0, 100), kept, "the kept tokens changed");
        assert!(values(&seq, 2, 100, 300).iter().all(|&x| x == 0), "a dropped token still reads non-zero");
        assert_eq!(seq.truncate(301).unwrap_err().code, status::INVALID_ARG);
        seq.truncate(0).unwrap();
        assert_eq!(seq.stats().unwrap().live_tokens, 0);
    }
    // a fork truncated into its shared prefix copies those windows first: the parent is untouched
    let vmm = Vmm::cpu(G, 64).unwrap();
    let cache = KvCache::new(&vmm, &options(mem::SEQ_MAJOR, mem::FIXED_MAX, 1, 8, 128, 4096, 0)).unwrap();
    let mut parent = cache.seq().unwrap();
    parent.extend(2048).unwrap();
    fill(&parent, 1, 0, 2048, 1);
    let parent_values = values(&parent, 1, 0, 2048);
    let mut child = parent.fork(2048).unwrap();
    child.truncate(500).unwrap();
    assert!(child.sharing().unwrap().cow_copies > 0);
    assert_eq!(values(&parent, 1, 0, 2048), parent_values, "truncating a fork changed its parent");
    assert_eq!(values(&child, 1, 0, 500), values(&parent, 1, 0, 500));
}
