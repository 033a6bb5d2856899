//! Memory against simple oracles: the granule windows of byte ranges (a set of window indices), the
//! committed granules of each KV layout (recomputed from first principles), and a CPU fer_vmm driven
//! by random operations whose ledger must equal the kernel's accounting after every step.

mod common;

use ferrite::mem::{self, role, ByteRange, Governor, Vmm};
use ferrite::status;
use proptest::prelude::*;
use std::collections::{BTreeSet, HashMap};

fn oracle_windows(ranges: &[ByteRange], g: u64) -> u64 {
    let mut set = BTreeSet::new();
    for r in ranges {
        if r.length > 0 {
            for w in r.offset / g..=(r.offset + r.length - 1) / g {
                set.insert(w);
            }
        }
    }
    set.len() as u64
}

/// The committed granules of one sequence, straight from the layouts' definitions in ferrite.h.
fn oracle_kv(layout: i32, layers: u64, heads: u64, dim: u64, elem: u64, cap: u64, live: u64, g: u64) -> u64 {
    let row = heads * dim * elem;
    let binding: Vec<ByteRange> = match layout {
        mem::HEAD_MAJOR => (0..heads).map(|h| ByteRange { offset: h * cap * dim * elem, length: live * dim * elem }).collect(),
        mem::SEQ_MAJOR => vec![ByteRange { offset: 0, length: live * row }],
        _ => vec![ByteRange { offset: 0, length: live * row * 2 * layers }],
    };
    let bindings = if layout == mem::TOKEN_MAJOR { 1 } else { 2 * layers };
    oracle_windows(&binding, g) * bindings
}

proptest! {
    #![proptest_config(common::config(256, file!()))]

    // EVIDENCE: C-MEM-001
    #[test]
    fn c_mem_001_granules_covering_is_the_window_union(
        ranges in proptest::collection::vec((0u64..40_000, 0u64..20_000), 0..12), g in 1u64..5000) {
        let r: Vec<ByteRange> = ranges.iter().map(|&(offset, length)| ByteRange { offset, length }).collect();
        prop_assert_eq!(mem::granules_covering(&r, g).unwrap(), oracle_windows(&r, g));
    }

    // EVIDENCE: C-MEM-002
    #[test]
    fn c_mem_002_kv_committed_granules_match_the_layout_definitions(
        layout in 1i32..4, layers in 1u32..6, heads in 1u32..9, dim in 1u32..160, elem in 1u32..5,
        cap in 1u64..3000, live_frac in 0.0f64..=1.0, g in prop_oneof![Just(4096u64), Just(65536u64), 1u64..100_000]) {
        let live = (cap as f64 * live_frac) as u64;
        let geom = mem::kv_geometry(layout, layers, heads, dim, elem, cap);
        let got = mem::kv_committed_granules(&geom, live, g).unwrap();
        prop_assert_eq!(got, oracle_kv(layout, layers as u64, heads as u64, dim as u64, elem as u64, cap, live, g));
    }
}

#[derive(Clone, Debug)]
enum Op {
    Create,
    Release(usize),
    Map(usize, u64, usize, bool),
    Unmap(usize, u64),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        2 => Just(Op::Create),
        1 => (0usize..8).prop_map(Op::Release),
        4 => (0usize..2, 0u64..6, 0usize..8, any::<bool>()).prop_map(|(r, w, g, ro)| Op::Map(r, w, g, ro)),
        2 => (0usize..2, 0u64..6).prop_map(|(r, w)| Op::Unmap(r, w)),
    ]
}

proptest! {
    #![proptest_config(common::config(48, file!()))]

    /// Random create / release / map / unmap on two ranges: every call's status is the one the
    /// model predicts, a refused call changes nothing, the ledger equals the kernel's count of the
    /// memfd's bytes after every step, and data written through one mapping of a granule is read
    /// back through every other.
    // EVIDENCE: C-MEM-003
    #[test]
    fn c_mem_003_vmm_ledger_equals_the_os_under_random_operations(ops in proptest::collection::vec(op(), 1..60)) {
        const G: u64 = 64 * 1024;
        let vmm = Vmm::cpu(G, 6).unwrap();
        let mut ranges = vec![vmm.reserve(6 * G).unwrap(), vmm.reserve(6 * G).unwrap()];
        let mut created: Vec<u64> = Vec::new(); // granule ids alive, in creation order
        let mut maps: HashMap<(usize, u64), (u64, bool)> = HashMap::new(); // (range, window) -> (granule, read-only)
        for op in ops {
            match op {
                Op::Create => {
                    let r = vmm.granule_create();
                    if created.len() == 6 {
                        prop_assert_eq!(r.unwrap_err().code, status::BUDGET_EXCEEDED);
                    } else {
                        created.push(r.unwrap());
                    }
                }
                Op::Release(i) if i < created.len() => {
                    let g = created[i];
                    let mapped = maps.values().any(|&(m, _)| m == g);
                    let r = vmm.granule_release(g);
                    if mapped {
                        prop_assert_eq!(r.unwrap_err().code, status::BUSY);
                    } else {
                        r.unwrap();
                        created.remove(i);
                    }
                }
                Op::Release(_) => {}
                Op::Map(ri, w, gi, ro) if gi < created.len() => {
                    let g = created[gi];
                    let access = if ro { mem::READ_ONLY } else { mem::READ_WRITE };
                    let r = ranges[ri].map(w * G, g, access);
                    if maps.contains_key(&(ri, w)) {
                        prop_assert_eq!(r.unwrap_err().code, status::INVALID_ARG);
                    } else {
                        r.unwrap();
                        maps.insert((ri, w), (g, ro));
                    }
                }
                Op::Map(..) => {}
                Op::Unmap(ri, w) => {
                    let r = ranges[ri].unmap(w * G);
                    if maps.remove(&(ri, w)).is_some() { r.unwrap(); } else {
                        prop_assert_eq!(r.unwrap_err().code, status::INVALID_ARG);
                    }
                }
            }
            let s = vmm.stats().unwrap();
            prop_assert_eq!(s.ledger_bytes, s.os_bytes);
            prop_assert_eq!(s.live_granules, created.len() as u64);
            prop_assert_eq!(s.mapped_windows, maps.len() as u64);
        }
        // a tag written through a read-write mapping of a granule is read back through every mapping
        for (tag, &g) in created.iter().enumerate() {
            let at: Vec<((usize, u64), bool)> = maps.iter().filter(|(_, &(m, _))| m == g).map(|(&k, &(_, ro))| (k, ro)).collect();
            let Some(&((rw_r, rw_w), _)) = at.iter().find(|(_, ro)| !ro) else { continue };
            let (base, _) = ranges[rw_r].base().unwrap();
            // SAFETY: window rw_w of range rw_r is mapped read-write.
            unsafe { *base.add((rw_w * G) as usize + 7) = tag as u8 + 1 };
            for &((ri, w), _) in &at {
                let (b2, _) = ranges[ri].base().unwrap();
                // SAFETY: a mapped window; a read.
                prop_assert_eq!(unsafe { *b2.add((w * G) as usize + 7) }, tag as u8 + 1);
            }
        }
        ranges.clear();
        let s = vmm.stats().unwrap();
        prop_assert_eq!(s.mapped_windows, 0);
    }
}

/// The original's floors (original-system.md B.3), from the ABI: qwen14b 768 / 96 / 1 granules,
/// 8 vs 1 per binding; qwen2.5-0.5b 192 vs 96 MiB.
// EVIDENCE: C-MEM-002
#[test]
fn c_mem_002_original_floor_table() {
    const G: u64 = 2 << 20;
    let q14 = |l| mem::kv_committed_granules(&mem::kv_geometry(l, 48, 8, 128, 2, 32768), 1, G).unwrap();
    assert_eq!((q14(mem::HEAD_MAJOR), q14(mem::SEQ_MAJOR), q14(mem::TOKEN_MAJOR)), (768, 96, 1));
    let one = |l| mem::kv_committed_granules(&mem::kv_geometry(l, 1, 8, 128, 2, 32768), 1, G).unwrap() / 2;
    assert_eq!((one(mem::HEAD_MAJOR), one(mem::SEQ_MAJOR)), (8, 1));
    let q05 = |l| mem::kv_committed_granules(&mem::kv_geometry(l, 24, 2, 64, 2, 32768), 1, G).unwrap() * G;
    assert_eq!((q05(mem::HEAD_MAJOR), q05(mem::SEQ_MAJOR)), (192 << 20, 96 << 20));
}

/// The CUDA backend runs the same sequence where a GPU answers; elsewhere it must say NO_DEVICE
/// (no driver or no GPU) or UNSUPPORTED (built without cuda.h), visibly SKIPPED.
// EVIDENCE: C-MEM-005
#[test]
fn c_mem_005_cuda_backend_same_sequence_or_skipped() {
    let vmm = match Vmm::with_backend(ferrite::sys::FER_VMM_BACKEND_CUDA as i32, 0, 8) {
        Ok(v) => v,
        Err(e) => {
            assert!(e.code == status::NO_DEVICE || e.code == status::UNSUPPORTED, "{e}");
            assert!(!e.message.is_empty());
            eprintln!("SKIPPED: CUDA fer_vmm: {}", e.message);
            return;
        }
    };
    let s = vmm.stats().unwrap();
    eprintln!("CUDA fer_vmm granule (queried minimum): {} bytes", s.granule_bytes);
    let g = s.granule_bytes;
    let a = vmm.granule_create().unwrap();
    let mut r1 = vmm.reserve(4 * g).unwrap();
    let mut r2 = vmm.reserve(g).unwrap();
    r1.map(2 * g, a, mem::READ_WRITE).unwrap();
    r2.map(0, a, mem::READ_ONLY).unwrap();
    assert_eq!(r1.map(2 * g, a, mem::READ_WRITE).unwrap_err().code, status::INVALID_ARG);
    assert_eq!(vmm.granule_release(a).unwrap_err().code, status::BUSY);
    assert_eq!(vmm.stats().unwrap().ledger_bytes, g);
    r1.unmap(2 * g).unwrap();
    r2.unmap(0).unwrap();
    vmm.granule_release(a).unwrap();
    assert_eq!(vmm.stats().unwrap().ledger_bytes, 0);
}

/// Prefix sharing as the original recorded it (1 layer, 8 KV heads, head_dim 128, f16, seq-major,
/// 1,024-token prefix + 1,024-token tail per sequence): 12,582,912 bytes for two sharers against
/// 16,777,216 independent, a third sharer adds only its tail, governor and OS agree; then
/// copy-on-write copies exactly one granule and leaves the other sharers' bytes untouched.
// EVIDENCE: C-MEM-006, C-MEM-007
#[test]
fn c_mem_006_prefix_sharing_and_copy_on_write() {
    const G: u64 = 2 << 20;
    let gov = Governor::new(1 << 30).unwrap();
    let vmm = Vmm::cpu(G, 64).unwrap();
    vmm.set_governor(Some(&gov), role::KV).unwrap();
    let tokens_bytes = 1024 * 8 * 128 * 2; // one binding's prefix: exactly one granule
    assert_eq!(tokens_bytes, G);
    let prefix = [vmm.granule_create().unwrap(), vmm.granule_create().unwrap()];
    // fill the shared prefix once, through a writable mapping
    {
        let mut w = vmm.reserve(G).unwrap();
        w.map(0, prefix[0], mem::READ_WRITE).unwrap();
        let (p, _) = w.base().unwrap();
        // SAFETY: window 0 is mapped read-write.
        unsafe { p.add(100).write(7) };
    }
    let mut seqs = Vec::new();
    let mut bytes = Vec::new();
    for _ in 0..3 {
        let mut bindings = Vec::new();
        for b in 0..2 {
            let mut r = vmm.reserve(2 * G).unwrap();
            r.map(0, prefix[b], mem::READ_ONLY).unwrap();
            let t = vmm.granule_create().unwrap();
            r.map(G, t, mem::READ_WRITE).unwrap();
            bindings.push(r);
        }
        seqs.push(bindings);
        let s = vmm.stats().unwrap();
        assert_eq!(s.os_bytes, s.ledger_bytes);
        assert_eq!(gov.stats().unwrap().charged_bytes, s.os_bytes);
        bytes.push(s.os_bytes);
    }
    assert_eq!(bytes[1], 12_582_912, "two sharers: 6 granules");
    assert_eq!(2 * 2 * 2 * G, 16_777_216, "two independent sequences would be 8 granules");
    assert_eq!(bytes[2] - bytes[1], 2 * G, "a third sharer adds only its two tail granules");
    // copy-on-write in sequence 1, binding 0
    let (fresh, copied) = seqs[1][0].copy_on_write(0).unwrap();
    assert_ne!(fresh, prefix[0]);
    assert_eq!(copied, G);
    let (p1, _) = seqs[1][0].base().unwrap();
    let (p0, _) = seqs[0][0].base().unwrap();
    // SAFETY: both windows are mapped; p1's read-write after the copy.
    unsafe {
        assert_eq!(p1.add(100).read(), 7, "the copy holds the prefix bytes");
        p1.add(100).write(9);
        assert_eq!(p0.add(100).read(), 7, "the other sharers are untouched");
    }
    assert_eq!(vmm.stats().unwrap().os_bytes, bytes[2] + G, "exactly one granule copied");
    assert_eq!(seqs[1][0].copy_on_write(G + 4096).unwrap_err().code, status::INVALID_ARG);
}
