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
use ferrite::{status, sys};
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
