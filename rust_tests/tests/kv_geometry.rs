//! The KV cache's bytes follow the layout's geometry, not the granule-rounded reservation: over
//! random geometries (layers, KV heads, head dim, dtype, mask bytes, granules from 4 KiB to 2 MiB,
//! max tokens that divide nothing) and all three layouts, a sequence commits exactly the windows its
//! live bytes touch (the OS agreeing), a fork shares exactly the windows its prefix fills and
//! nothing beyond, newly live tokens read zero and are writable, and no sequence ever reads bytes
//! another wrote outside a prefix they share.
//!
//! The oracle here is derived from the layout definitions in ffi/ferrite.h alone (it does not call
//! fer_kv_committed_granules): head-major binding = [kv_heads, stride, head_dim] (stride: capacity
//! for a bucketed head-major cache, max_tokens otherwise), seq-major binding = [max, kv_heads,
//! head_dim], token-major = one reservation [max, layers, 2, kv_heads, head_dim]; 2 x layers
//! bindings for head- and seq-major; the mask one reservation of mask_bytes_per_token per token;
//! every reservation starts on a granule boundary.

mod common;

use ferrite::mem::{self, KvCache, KvSeq, Vmm};
use ferrite::sys;
use proptest::prelude::*;
use std::collections::{BTreeMap, BTreeSet};

// ---------------------------------------------------------------------------------------------
// the oracle

#[derive(Clone, Copy, Debug)]
struct Geo {
    layout: i32,
    policy: i32,
    layers: u32,
    heads: u32,
    dim: u32,
    elem: u32,
    max: u64,
    mask: u32,
    granule: u64,
}

impl Geo {
    fn head_row(&self) -> u64 {
        self.dim as u64 * self.elem as u64
    }
    fn row(&self) -> u64 {
        self.heads as u64 * self.head_row()
    }
    fn relocates(&self) -> bool {
        self.layout == mem::HEAD_MAJOR && self.policy == mem::BUCKETED
    }
    /// K/V reservations: 2 x layers, or one for token-major.
    fn n_bindings(&self) -> u32 {
        if self.layout == mem::TOKEN_MAJOR { 1 } else { 2 * self.layers }
    }
    /// Reservations a sequence holds: the bindings, then the mask (when kept).
    fn n_buffers(&self) -> u32 {
        self.n_bindings() + (self.mask > 0) as u32
    }
    /// Byte ranges tokens [t0, t1) occupy in buffer `b` (b == n_bindings: the mask), the head-major
    /// stripes `stride` tokens long. Straight from the header's layout comments.
    fn ranges(&self, b: u32, stride: u64, t0: u64, t1: u64) -> Vec<(u64, u64)> {
        if t1 <= t0 {
            return vec![];
        }
        if b == self.n_bindings() {
            let m = self.mask as u64;
            return vec![(t0 * m, t1 * m)];
        }
        match self.layout {
            l if l == mem::HEAD_MAJOR => (0..self.heads as u64)
                .map(|h| (h * stride * self.head_row() + t0 * self.head_row(), h * stride * self.head_row() + t1 * self.head_row()))
                .collect(),
            l if l == mem::SEQ_MAJOR => vec![(t0 * self.row(), t1 * self.row())],
            _ => {
                let tok = self.row() * 2 * self.layers as u64;
                vec![(t0 * tok, t1 * tok)]
            }
        }
    }
    /// Windows touched by tokens [t0, t1) of buffer b.
    fn windows(&self, b: u32, stride: u64, t0: u64, t1: u64) -> BTreeSet<u64> {
        let g = self.granule;
        let mut w = BTreeSet::new();
        for (lo, hi) in self.ranges(b, stride, t0, t1) {
            if lo < hi {
                w.extend(lo / g..=(hi - 1) / g);
            }
        }
        w
    }
    /// The layout's rule: windows the live bytes of `live` tokens touch, over every reservation.
    fn rule(&self, stride: u64, live: u64) -> u64 {
        (0..self.n_buffers()).map(|b| self.windows(b, stride, 0, live).len() as u64).sum()
    }
    /// Fork of a `prefix`: per buffer, the windows the prefix fills entirely (shared) and the bytes
    /// of the prefix in the windows it touches only in part (copied).
    fn fork_rule(&self, stride: u64, prefix: u64) -> (u64, u64) {
        let g = self.granule;
        let (mut shared, mut copied) = (0, 0);
        for b in 0..self.n_buffers() {
            let rs = self.ranges(b, stride, 0, prefix);
            for k in self.windows(b, stride, 0, prefix) {
                let (w0, w1) = (k * g, k * g + g);
                let inside: u64 = rs.iter().map(|&(lo, hi)| hi.min(w1).saturating_sub(lo.max(w0))).sum();
                if inside == g { shared += 1 } else { copied += inside }
            }
        }
        (shared, copied)
    }
}

fn options(g: &Geo) -> mem::KvCacheOptions {
    let mut o = mem::kv_cache_options();
    o.policy = g.policy;
    o.geometry = mem::kv_geometry(g.layout, g.layers, g.heads, g.dim, g.elem, g.max);
    o.dtype = match g.elem {
        4 => sys::FER_DTYPE_F32 as i32,
        _ => sys::FER_DTYPE_F16 as i32,
    };
    o.mask_bytes_per_token = g.mask;
    o.min_bucket = 1.max(g.max / 7).min(8);
    o
}

/// The stride of a sequence's head-major stripes (its capacity when it relocates).
fn stride(g: &Geo, s: &KvSeq<'_>) -> u64 {
    if g.relocates() { s.stats().unwrap().capacity_tokens } else { g.max }
}

/// The bytes of head h of token t of binding (layer, kv), through the view.
fn token_bytes<'a>(s: &'a KvSeq<'_>, g: &Geo, layer: u32, kv: u32, h: u32, t: u64) -> &'a mut [u8] {
    let v = s.view(layer, kv).unwrap();
    assert!((t as i64) < v.shape[1] && (h as i64) < v.shape[0]);
    assert_eq!(v.strides[2], g.elem as i64, "a head's elements are contiguous");
    let off = h as i64 * v.strides[0] + t as i64 * v.strides[1];
    // SAFETY: h < heads and t < live: inside the view of live tokens, committed memory; the slice
    // dies before the next call that could move it (the callers use it at once).
    unsafe { std::slice::from_raw_parts_mut((v.data as *mut u8).offset(off as isize), g.head_row() as usize) }
}

/// The pattern of `seed` for (layer, kv, head, token): never all zero for seed > 0, and different
/// between seeds.
fn pattern(seed: u64, layer: u32, kv: u32, h: u32, t: u64, n: usize) -> Vec<u8> {
    let base = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ ((layer as u64) << 40) ^ ((kv as u64) << 32) ^ ((h as u64) << 24) ^ t;
    let base = base.wrapping_mul(0xBF58_476D_1CE4_E5B9);
    (0..n).map(|j| ((base >> 29) as u8).wrapping_add((j as u8).wrapping_mul(7)) | 1).collect()
}

/// Writes `seed`'s pattern into tokens [t0, t1) of every binding (seed 0 checks nothing: zeros).
fn write(s: &KvSeq<'_>, g: &Geo, t0: u64, t1: u64, seed: u64) {
    for l in 0..g.layers { for kv in 0..2 { for h in 0..g.heads { for t in t0..t1 {
        token_bytes(s, g, l, kv, h, t).copy_from_slice(&pattern(seed, l, kv, h, t, g.head_row() as usize));
    }}}}
}

/// Checks that token t of every binding holds `seed`'s pattern (0: zeros).
fn holds(s: &KvSeq<'_>, g: &Geo, t: u64, seed: u64) -> bool {
    let n = g.head_row() as usize;
    (0..g.layers).all(|l| (0..2).all(|kv| (0..g.heads).all(|h| {
        let got = token_bytes(s, g, l, kv, h, t);
        if seed == 0 { got.iter().all(|&x| x == 0) } else { got[..] == pattern(seed, l, kv, h, t, n)[..] }
    })))
}

fn vmm_granules(vmm: &Vmm) -> u64 {
    let s = vmm.stats().unwrap();
    assert_eq!(s.os_bytes, s.ledger_bytes, "the kernel's count of the memfd disagrees with the ledger");
    s.live_granules
}

// ---------------------------------------------------------------------------------------------
// the geometry of the issue (3 layers, 3 KV heads, head_dim 96, f32, 64 KiB granules, 1000 tokens)

const ISSUE: Geo = Geo {
    layout: 0, policy: 0, layers: 3, heads: 3, dim: 96, elem: 4, max: 1000, mask: 0, granule: 64 << 10,
};

/// At every length 0..=1000 the sequence commits the rule's granules (seq-major at 56 tokens: 6,
/// where the rounded size gave 12), and the OS agrees.
// EVIDENCE: C-KV-007
#[test]
fn c_kv_007_issue_geometry_commits_the_rule_at_every_length() {
    for (layout, policy) in [(mem::SEQ_MAJOR, mem::FIXED_MAX), (mem::TOKEN_MAJOR, mem::FIXED_MAX), (mem::HEAD_MAJOR, mem::FIXED_MAX), (mem::HEAD_MAJOR, mem::BUCKETED)] {
        let g = Geo { layout, policy, ..ISSUE };
        let vmm = Vmm::cpu(g.granule, 4096).unwrap();
        let cache = KvCache::new(&vmm, &options(&g)).unwrap();
        let mut s = cache.seq().unwrap();
        let mut wrong = Vec::new();
        for live in 1..=g.max {
            s.extend(live).unwrap();
            let got = s.stats().unwrap().committed_bytes / g.granule;
            let want = g.rule(stride(&g, &s), live);
            if got != want || vmm_granules(&vmm) != want {
                wrong.push((live, got, want));
            }
        }
        assert!(wrong.is_empty(), "layout {layout} policy {policy}: {} of {} lengths commit off the rule, first {:?}", wrong.len(), g.max, &wrong[..wrong.len().min(3)]);
    }
    assert_eq!(Geo { layout: mem::SEQ_MAJOR, ..ISSUE }.rule(1000, 56), 6);
}

/// A child forked at 56 tokens gets no window past the parent's prefix: its token 56 reads zero
/// (not the parent's token 56) and takes a write; the parent keeps its own.
// EVIDENCE: C-KV-008
#[test]
fn c_kv_008_issue_geometry_fork_shares_nothing_past_the_prefix() {
    for layout in [mem::SEQ_MAJOR, mem::TOKEN_MAJOR, mem::HEAD_MAJOR] {
        let g = Geo { layout, policy: mem::FIXED_MAX, ..ISSUE };
        let vmm = Vmm::cpu(g.granule, 4096).unwrap();
        let cache = KvCache::new(&vmm, &options(&g)).unwrap();
        let mut parent = cache.seq().unwrap();
        parent.extend(100).unwrap();
        write(&parent, &g, 0, 100, 1);
        let mut child = parent.fork(56).unwrap();
        let sh = child.sharing().unwrap();
        assert_eq!((sh.shared_windows, sh.fork_bytes_copied), g.fork_rule(g.max, 56), "layout {layout}");
        child.extend(57).unwrap();
        assert!(holds(&child, &g, 56, 0), "layout {layout}: the child reads the parent's token 56");
        write(&child, &g, 56, 57, 2);
        assert!((0..100).all(|t| holds(&parent, &g, t, 1)), "layout {layout}: the child's write reached the parent");
        assert!((0..56).all(|t| holds(&child, &g, t, 1)));
    }
}

/// Truncate then extend: every position past the kept tokens reads zero again.
// EVIDENCE: C-KV-006
#[test]
fn c_kv_006_issue_geometry_truncate_then_extend_reads_zero() {
    for layout in [mem::SEQ_MAJOR, mem::TOKEN_MAJOR, mem::HEAD_MAJOR] {
        let g = Geo { layout, policy: mem::FIXED_MAX, ..ISSUE };
        let vmm = Vmm::cpu(g.granule, 4096).unwrap();
        let cache = KvCache::new(&vmm, &options(&g)).unwrap();
        let mut s = cache.seq().unwrap();
        s.extend(600).unwrap();
        write(&s, &g, 0, 600, 3);
        s.truncate(56).unwrap();
        s.extend(600).unwrap();
        assert!((0..56).all(|t| holds(&s, &g, t, 3)), "layout {layout}: a kept token changed");
        let dirty: Vec<u64> = (56..600).filter(|&t| !holds(&s, &g, t, 0)).collect();
        assert!(dirty.is_empty(), "layout {layout}: {} dropped tokens read old bytes, first {:?}", dirty.len(), dirty.first());
    }
}

// ---------------------------------------------------------------------------------------------
// random geometries

/// Granules from 4 KiB to 2 MiB, mostly small (where windows meet token boundaries often), any
/// multiple of the page size.
fn granule() -> impl Strategy<Value = u64> {
    prop_oneof![
        4 => (1u64..=6).prop_map(|k| 4096 * k),
        3 => (7u64..=64).prop_map(|k| 4096 * k),
        1 => (65u64..=511).prop_map(|k| 4096 * k),
        1 => Just(2u64 << 20),
    ]
}

/// A geometry of `layout` and `policy`; max tokens and head dims drawn so that nothing divides.
fn geo(layout: i32, policy: i32, layers: u32, heads: u32, max: u64) -> impl Strategy<Value = Geo> {
    (1..=layers, 1..=heads, 1u32..=130, prop_oneof![Just(2u32), Just(4u32)], 1..=max, prop_oneof![2 => Just(0u32), 1 => 1u32..=9], granule())
        .prop_map(move |(layers, heads, dim, elem, max, mask, granule)| Geo { layout, policy, layers, heads, dim, elem, max, mask, granule })
}

fn any_geo(layers: u32, heads: u32, max: u64) -> impl Strategy<Value = Geo> {
    prop_oneof![
        geo(mem::HEAD_MAJOR, mem::BUCKETED, layers, heads, max),
        geo(mem::HEAD_MAJOR, mem::FIXED_MAX, layers, heads, max),
        geo(mem::SEQ_MAJOR, mem::BUCKETED, layers, heads, max),
        geo(mem::SEQ_MAJOR, mem::FIXED_MAX, layers, heads, max),
        geo(mem::TOKEN_MAJOR, mem::BUCKETED, layers, heads, max),
        geo(mem::TOKEN_MAJOR, mem::FIXED_MAX, layers, heads, max),
    ]
}

proptest! {
    #![proptest_config(common::config(32, file!()))]

    /// One token at a time from 0 to max: the committed granules equal the layout's rule at every
    /// length (at the current capacity for a relocating cache), the kernel's count of the memfd
    /// agrees, each newly live token reads zero in every binding and takes a write, and every
    /// token written keeps its bytes through every growth.
    // EVIDENCE: C-KV-007
    #[test]
    fn c_kv_007_commit_equals_the_rule_at_every_length(g in any_geo(3, 4, 700)) {
        let vmm = Vmm::cpu(g.granule, 2 * g.rule(g.max, g.max) + 8).unwrap();
        let cache = KvCache::new(&vmm, &options(&g)).unwrap();
        let mut s = cache.seq().unwrap();
        prop_assert_eq!(s.stats().unwrap().committed_bytes, 0);
        for live in 1..=g.max {
            s.extend(live).unwrap();
            let want = g.rule(stride(&g, &s), live);
            prop_assert_eq!(s.stats().unwrap().committed_bytes / g.granule, want, "committed at {} live", live);
            prop_assert_eq!(vmm_granules(&vmm), want, "the pool's granules at {} live", live);
            prop_assert!(holds(&s, &g, live - 1, 0), "new token {} is not zero", live - 1);
            write(&s, &g, live - 1, live, 5);
        }
        for t in 0..g.max {
            prop_assert!(holds(&s, &g, t, 5), "token {} lost its bytes", t);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// sequences that fork, grow, rewrite and truncate, against a model of bytes and granules

#[derive(Clone, Debug)]
enum Op {
    /// Extend sequence i by n tokens (clamped to max), writing the new ones.
    Extend(usize, u64),
    /// Fork sequence i at a fraction (/ 64) of its live tokens.
    Fork(usize, u64),
    /// Truncate sequence i to a fraction (/ 64) of its live tokens.
    Truncate(usize, u64),
    /// make_writable then write a fresh pattern over tokens [a, b) (fractions / 64 of live).
    Rewrite(usize, u64, u64),
    Free(usize),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0usize..4, 1u64..120).prop_map(|(i, n)| Op::Extend(i, n)),
        3 => (0usize..4, prop_oneof![0u64..=64, Just(64)]).prop_map(|(i, f)| Op::Fork(i, f)),
        2 => (0usize..4, 0u64..=64).prop_map(|(i, f)| Op::Truncate(i, f)),
        2 => (0usize..4, 0u64..=64, 0u64..=64).prop_map(|(i, a, b)| Op::Rewrite(i, a.min(b), a.max(b))),
        1 => (0usize..4).prop_map(Op::Free),
    ]
}

/// What the test knows of one sequence: each live token's pattern seed, the highest length it has
/// had (its windows stay mapped after a truncate), and per buffer and window the granule it maps
/// (a model id) and whether it maps it read-only from another sequence.
struct Model {
    seeds: Vec<u64>,
    high: u64,
    win: Vec<BTreeMap<u64, (u64, bool)>>,
    cow: u64,
}

proptest! {
    #![proptest_config(common::config(32, file!()))]

    /// Up to four sequences of one cache under random extend / fork / truncate / make_writable +
    /// write / free: every live token of every sequence holds exactly the bytes the model says
    /// (newly live tokens zero, then the sequence's own writes; a fork's prefix the parent's bytes
    /// as of the fork) — so no sequence ever reads bytes another wrote outside a prefix they
    /// share, and no write faults; a fork shares exactly the windows its prefix fills and copies
    /// the prefix bytes of the others; each sequence maps the rule's windows at its highest length
    /// (committed + shared); the pool's granules are the distinct granules of the model, the OS
    /// agreeing.
    // EVIDENCE: C-KV-008 C-KV-006
    #[test]
    fn c_kv_008_forks_share_exactly_the_prefix_and_never_cross(
        g in prop_oneof![
            geo(mem::HEAD_MAJOR, mem::FIXED_MAX, 2, 3, 300),
            geo(mem::SEQ_MAJOR, mem::BUCKETED, 2, 3, 300),
            geo(mem::SEQ_MAJOR, mem::FIXED_MAX, 2, 3, 300),
            geo(mem::TOKEN_MAJOR, mem::BUCKETED, 2, 3, 300),
            geo(mem::TOKEN_MAJOR, mem::FIXED_MAX, 2, 3, 300),
        ],
        ops in proptest::collection::vec(op(), 1..14),
    ) {
        let vmm = Vmm::cpu(g.granule, 6 * g.rule(g.max, g.max) + 8).unwrap();
        let cache = KvCache::new(&vmm, &options(&g)).unwrap();
        let nb = g.n_buffers();
        let mut seqs: Vec<(KvSeq<'_>, Model)> = Vec::new();
        let (mut next_id, mut next_seed) = (0u64, 1u64);
        for op in ops {
            if seqs.is_empty() {
                seqs.push((cache.seq().unwrap(), Model { seeds: vec![], high: 0, win: vec![BTreeMap::new(); nb as usize], cow: 0 }));
            }
            match op {
                Op::Extend(i, n) => {
                    let i = i % seqs.len();
                    let (s, m) = &mut seqs[i];
                    let (old, live) = (m.seeds.len() as u64, (m.seeds.len() as u64 + n).min(g.max));
                    s.extend(live).unwrap();
                    for b in 0..nb {
                        for k in g.windows(b, g.max, 0, live) {
                            m.win[b as usize].entry(k).or_insert_with(|| { next_id += 1; (next_id, false) });
                        }
                    }
                    m.high = m.high.max(live);
                    for t in old..live {
                        prop_assert!(holds(s, &g, t, 0), "newly live token {} is not zero", t);
                    }
                    write(s, &g, old, live, next_seed);
                    m.seeds.extend(std::iter::repeat(next_seed).take((live - old) as usize));
                    next_seed += 1;
                }
                Op::Fork(i, f) if seqs.len() < 4 => {
                    let i = i % seqs.len();
                    let p = seqs[i].1.seeds.len() as u64 * f / 64;
                    let child = seqs[i].0.fork(p).unwrap();
                    let sh = child.sharing().unwrap();
                    prop_assert_eq!((sh.shared_windows, sh.fork_bytes_copied), g.fork_rule(g.max, p), "fork at {}", p);
                    let mut win = vec![BTreeMap::new(); nb as usize];
                    let gr = g.granule;
                    for b in 0..nb {
                        let rs = g.ranges(b, g.max, 0, p);
                        for k in g.windows(b, g.max, 0, p) {
                            let inside: u64 = rs.iter().map(|&(lo, hi)| hi.min(k * gr + gr).saturating_sub(lo.max(k * gr))).sum();
                            let e = if inside == gr { (seqs[i].1.win[b as usize][&k].0, true) } else { next_id += 1; (next_id, false) };
                            win[b as usize].insert(k, e);
                        }
                    }
                    let seeds = seqs[i].1.seeds[..p as usize].to_vec();
                    seqs.push((child, Model { seeds, high: p, win, cow: 0 }));
                }
                Op::Truncate(i, f) => {
                    let i = i % seqs.len();
                    let live = seqs[i].1.seeds.len() as u64;
                    let t = live * f / 64;
                    seqs[i].0.truncate(t).unwrap();
                    copy_on_write(&g, &mut seqs, i, t, live, &mut next_id);
                    seqs[i].1.seeds.truncate(t as usize);
                }
                Op::Rewrite(i, a, b) => {
                    let i = i % seqs.len();
                    let live = seqs[i].1.seeds.len() as u64;
                    let (t0, t1) = (live * a / 64, live * b / 64);
                    seqs[i].0.make_writable(t0, t1 - t0).unwrap();
                    copy_on_write(&g, &mut seqs, i, t0, t1, &mut next_id);
                    write(&seqs[i].0, &g, t0, t1, next_seed);
                    for t in t0..t1 { seqs[i].1.seeds[t as usize] = next_seed; }
                    next_seed += 1;
                }
                Op::Free(i) if seqs.len() > 1 => { seqs.remove(i % seqs.len()); }
                _ => {}
            }
            // every sequence holds what the model says, and maps what it says
            let mut ids = BTreeSet::new();
            for (s, m) in &seqs {
                for (t, &seed) in m.seeds.iter().enumerate() {
                    prop_assert!(holds(s, &g, t as u64, seed), "token {} of a sequence does not hold its own bytes (seed {})", t, seed);
                }
                let (st, sh) = (s.stats().unwrap(), s.sharing().unwrap());
                prop_assert_eq!(st.live_tokens, m.seeds.len() as u64);
                let ro = m.win.iter().map(|w| w.values().filter(|e| e.1).count() as u64).sum::<u64>();
                prop_assert_eq!(sh.shared_windows, ro, "read-only windows");
                prop_assert_eq!(sh.cow_copies, m.cow, "copies on write");
                prop_assert_eq!(st.committed_bytes / g.granule + sh.shared_windows, g.rule(g.max, m.high), "windows mapped at a high of {}", m.high);
                for w in &m.win { ids.extend(w.values().map(|e| e.0)); }
            }
            prop_assert_eq!(vmm_granules(&vmm), ids.len() as u64, "the pool's granules vs the model's");
        }
    }
}

/// The model's side of fer_kv_seq_make_writable over tokens [t0, t1) of sequence i: every window
/// those tokens touch that is read-only or that another sequence maps gets a fresh granule.
fn copy_on_write(g: &Geo, seqs: &mut [(KvSeq<'_>, Model)], i: usize, t0: u64, t1: u64, next_id: &mut u64) {
    for b in 0..g.n_buffers() as usize {
        for k in g.windows(b as u32, g.max, t0, t1) {
            let (id, ro) = seqs[i].1.win[b][&k];
            let others = seqs.iter().enumerate().filter(|&(j, (_, m))| j != i && m.win[b].get(&k).map(|e| e.0) == Some(id)).count();
            if ro || others > 0 {
                *next_id += 1;
                seqs[i].1.win[b].insert(k, (*next_id, false));
                seqs[i].1.cow += 1;
            }
        }
    }
}

/// Head-major stripes that meet inside a window: a fork of every token of a full sequence fills
/// that window with two heads' bytes, and shares it (2 heads of 300 tokens x 16 bytes, 4 KiB
/// granules: windows 0 and 1 are full, window 2 is not: 2 shared per binding, 4 in all).
// EVIDENCE: C-KV-008
#[test]
fn c_kv_008_a_window_filled_by_two_head_stripes_is_shared() {
    let g = Geo { layout: mem::HEAD_MAJOR, policy: mem::FIXED_MAX, layers: 1, heads: 2, dim: 8, elem: 2, max: 300, mask: 0, granule: 4096 };
    let vmm = Vmm::cpu(g.granule, 64).unwrap();
    let cache = KvCache::new(&vmm, &options(&g)).unwrap();
    let mut parent = cache.seq().unwrap();
    parent.extend(300).unwrap();
    write(&parent, &g, 0, 300, 1);
    let child = parent.fork(300).unwrap();
    assert_eq!(g.fork_rule(300, 300), (4, 2 * (9600 - 8192)));
    let sh = child.sharing().unwrap();
    assert_eq!((sh.shared_windows, sh.fork_bytes_copied), g.fork_rule(300, 300));
    assert!((0..300).all(|t| holds(&child, &g, t, 1)));
    assert_eq!(vmm_granules(&vmm), 6 + 2, "the child adds only its copy of each binding's last window");
}
