//! The governor under random workloads (admit / grant-grow / share / free), against a plain model:
//! charged bytes never exceed the budget, a refused operation changes nothing, a shared granule is
//! charged once, and at teardown everything is released and the operating system agrees.

mod common;

use ferrite::mem::{self, role, Governor, Vmm};
use ferrite::status;
use proptest::prelude::*;

const G: u64 = 64 * 1024;

#[derive(Clone, Debug)]
enum Op {
    /// admit a sequence of `tokens` (seq-major, 1 layer, 2 heads, head_dim 64, f16)
    Admit(u64),
    /// free an admitted sequence
    Free(usize),
    /// a growth grant of `headroom` bytes, committing `used` of it, or cancelled
    Grow(u64, u64, bool),
    /// map a fresh granule at window w of range r
    MapNew(usize, u64),
    /// map granule i (if it exists) at window w of range r: sharing
    Share(usize, usize, u64),
    /// unmap window w of range r
    Unmap(usize, u64),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (1u64..2000).prop_map(Op::Admit),
        (0usize..4).prop_map(Op::Free),
        (0u64..400_000, 0u64..400_000, any::<bool>()).prop_map(|(h, u, c)| Op::Grow(h, u, c)),
        (0usize..2, 0u64..8).prop_map(|(r, w)| Op::MapNew(r, w)),
        (0usize..8, 0usize..2, 0u64..8).prop_map(|(i, r, w)| Op::Share(i, r, w)),
        (0usize..2, 0u64..8).prop_map(|(r, w)| Op::Unmap(r, w)),
    ]
}

proptest! {
    #![proptest_config(common::config(64, file!()))]

    // EVIDENCE: C-GOV-001
    #[test]
    fn c_gov_001_invariants_under_random_workloads(budget in 1u64..2_000_000, ops in proptest::collection::vec(op(), 1..50)) {
        let gov = Governor::new(budget).unwrap();
        let vmm = Vmm::cpu(G, 64).unwrap();
        vmm.set_governor(Some(&gov), role::KV).unwrap();
        let mut ranges = vec![vmm.reserve(8 * G).unwrap(), vmm.reserve(8 * G).unwrap()];
        let geom = mem::kv_geometry(mem::SEQ_MAJOR, 1, 2, 64, 2, 4096);
        let mut admitted: Vec<u64> = Vec::new();
        let mut grown: u64 = 0; // bytes charged through grants (role WORKSPACE)
        let mut granules: Vec<u64> = Vec::new();
        let mut maps: std::collections::HashMap<(usize, u64), u64> = Default::default();
        for op in ops {
            let before = gov.stats().unwrap();
            let refused = match op {
                Op::Admit(t) => match gov.admit_sequence(&geom, t, G) {
                    Ok(b) => { admitted.push(b); false }
                    Err(e) => { prop_assert_eq!(e.code, status::BUDGET_EXCEEDED); prop_assert!(e.message.contains("projected")); true }
                },
                Op::Free(i) => { if i < admitted.len() { gov.release(role::KV, admitted.remove(i)).unwrap(); } false }
                Op::Grow(h, u, commit) => match gov.grant(role::WORKSPACE, h) {
                    Ok(gr) => {
                        prop_assert_eq!(gov.stats().unwrap().reserved_bytes, h);
                        if commit && u <= h { gr.commit(u).map_err(|(e, _)| TestCaseError::fail(e.to_string()))?; grown += u; }
                        else if commit {
                            let (e, gr) = gr.commit(u).unwrap_err();
                            prop_assert_eq!(e.code, status::INVALID_ARG);
                            drop(gr); // cancels
                        }
                        false
                    }
                    Err(e) => { prop_assert_eq!(e.code, status::BUDGET_EXCEEDED); true }
                },
                Op::MapNew(r, w) => {
                    if maps.contains_key(&(r, w)) { false } else {
                        let g = vmm.granule_create().unwrap();
                        match ranges[r].map(w * G, g, mem::READ_WRITE) {
                            Ok(()) => { maps.insert((r, w), g); granules.push(g); false }
                            Err(e) => { prop_assert_eq!(e.code, status::BUDGET_EXCEEDED); vmm.granule_release(g).unwrap(); true }
                        }
                    }
                }
                Op::Share(i, r, w) => {
                    if i >= granules.len() || maps.contains_key(&(r, w)) { false } else {
                        // a granule already mapped costs nothing more: never refused
                        ranges[r].map(w * G, granules[i], mem::READ_ONLY).unwrap();
                        maps.insert((r, w), granules[i]);
                        false
                    }
                }
                Op::Unmap(r, w) => {
                    if let Some(g) = maps.remove(&(r, w)) {
                        ranges[r].unmap(w * G).unwrap();
                        if !maps.values().any(|&m| m == g) {
                            vmm.granule_release(g).unwrap();
                            granules.retain(|&x| x != g);
                        }
                    }
                    false
                }
            };
            let s = gov.stats().unwrap();
            prop_assert!(s.charged_bytes + s.reserved_bytes <= s.budget_bytes);
            prop_assert_eq!(s.reserved_bytes, 0); // grants are closed at the end of each op
            if refused {
                prop_assert_eq!(s.charged_bytes, before.charged_bytes);
                prop_assert_eq!(s.charged_by_role, before.charged_by_role);
                prop_assert_eq!(s.refusals, before.refusals + 1);
            }
            // the model: KV = admissions + distinct mapped granules; WORKSPACE = committed growth
            let distinct: std::collections::BTreeSet<u64> = maps.values().copied().collect();
            prop_assert_eq!(s.charged_by_role[role::KV as usize], admitted.iter().sum::<u64>() + distinct.len() as u64 * G);
            prop_assert_eq!(s.charged_by_role[role::WORKSPACE as usize], grown);
            let v = vmm.stats().unwrap();
            prop_assert_eq!(v.ledger_bytes, v.os_bytes);
        }
        // teardown: everything released, the governor and the OS agree on zero
        ranges.clear();
        for g in granules { vmm.granule_release(g).unwrap(); }
        for b in admitted { gov.release(role::KV, b).unwrap(); }
        if grown > 0 { gov.release(role::WORKSPACE, grown).unwrap(); }
        let s = gov.stats().unwrap();
        prop_assert_eq!(s.charged_bytes, 0);
        prop_assert_eq!(vmm.stats().unwrap().os_bytes, 0);
    }
}

// EVIDENCE: C-GOV-001 (bad input: zero budget, unknown role, over-release, BUSY free)
#[test]
fn c_gov_001_bad_input_changes_nothing() {
    assert_eq!(Governor::new(0).unwrap_err().code, status::INVALID_ARG);
    let gov = Governor::new(1000).unwrap();
    assert_eq!(gov.charge(99, 1).unwrap_err().code, status::INVALID_ARG);
    gov.charge(role::CACHE, 600).unwrap();
    let e = gov.charge(role::WEIGHTS, 401).unwrap_err();
    assert_eq!(e.code, status::BUDGET_EXCEEDED);
    assert!(e.message.contains("401") && e.message.contains("600") && e.message.contains("1000"), "{}", e.message);
    assert_eq!(gov.release(role::CACHE, 601).unwrap_err().code, status::INVALID_ARG);
    assert_eq!(gov.release(role::WEIGHTS, 1).unwrap_err().code, status::INVALID_ARG);
    let s = gov.stats().unwrap();
    assert_eq!((s.charged_bytes, s.charged_by_role[role::CACHE as usize]), (600, 600));
    // BUSY free through the raw ABI: nothing freed, the governor still answers
    // SAFETY: the pointer is alive; BUSY leaves it so.
    assert_eq!(unsafe { ferrite::sys::fer_governor_free(gov.as_ptr()) }, status::BUSY);
    gov.release(role::CACHE, 600).unwrap();
    // a sequence that does not fit is refused before any change, naming the numbers
    let big = mem::kv_geometry(mem::HEAD_MAJOR, 48, 8, 128, 2, 32768);
    let e = gov.admit_sequence(&big, 1, 2 << 20).unwrap_err();
    assert_eq!(e.code, status::BUDGET_EXCEEDED);
    assert!(e.message.contains("1610612736"), "{}", e.message); // 768 granules x 2 MiB
    assert_eq!(gov.stats().unwrap().charged_bytes, 0);
    // attaching while mapped is BUSY
    let vmm = Vmm::cpu(4096, 4).unwrap();
    let mut r = vmm.reserve(4096).unwrap();
    let g = vmm.granule_create().unwrap();
    r.map(0, g, mem::READ_WRITE).unwrap();
    assert_eq!(vmm.set_governor(Some(&gov), role::KV).unwrap_err().code, status::BUSY);
}

/// Workspace sized to use (issue 4, section 2): the scratch a kernel call is charged for is the
/// exact byte count its route reports, obtained through a grant; a route that needs none is
/// charged zero, and the call runs in exactly the charged bytes.
// EVIDENCE: C-GOV-002
#[test]
fn c_gov_002_workspace_is_charged_to_use_and_zero_for_a_route_without_scratch() {
    use ferrite::{BLayout, TensorMut, TensorRef, ThreadPool, Workspace};
    let gov = Governor::new(64 << 20).unwrap();
    let mut pool = ThreadPool::new(2, ferrite::isa::AUTO).unwrap();
    let (k, n) = (512usize, 384usize);
    let w = vec![0.5f32; n * k];
    let wt = TensorRef::new(&w, &[n as i64, k as i64]).unwrap();
    for m in [1usize, 7] {
        let a = vec![0.25f32; m * k];
        let at = TensorRef::new(&a, &[m as i64, k as i64]).unwrap();
        let mut out = vec![0f32; m * n];
        let mut ot = TensorMut::new(&mut out, &[m as i64, n as i64]).unwrap();
        let need = ferrite::matmul_workspace_bytes(Some(&pool), &at, &wt, BLayout::NK, &ot).unwrap() as u64;
        let grant = gov.grant(role::WORKSPACE, need).unwrap();
        let mut ws = Workspace::new(need as usize);
        ferrite::matmul_in(Some(&mut pool), &at, &wt, BLayout::NK, &mut ot, &mut ws, 0).unwrap();
        grant.commit(need).map_err(|(e, _)| e).unwrap();
        let charged = gov.stats().unwrap().charged_by_role[role::WORKSPACE as usize];
        if m == 1 {
            assert_eq!(charged, 0, "the M = 1 GEMV route needs no scratch and is charged none");
        } else {
            assert_eq!(charged, need, "the GEMM route is charged exactly what it uses");
            assert!(need > 0);
        }
        assert!(out.iter().all(|&v| v == 0.125 * k as f32), "the product is right");
        gov.release(role::WORKSPACE, charged).unwrap();
    }
    // attention's decode route reports its tiles exactly as well (nonzero: scores and rows)
    let q = vec![0.1f32; 4 * 64];
    let kv = vec![0.1f32; 2 * 10 * 64];
    let mut o = vec![0f32; 4 * 64];
    let mut need = 0usize;
    let p = ferrite::attention_params();
    let (qt, kt) = (TensorRef::new(&q, &[4, 1, 64]).unwrap(), TensorRef::new(&kv, &[2, 10, 64]).unwrap());
    let ot = TensorMut::new(&mut o, &[4, 1, 64]).unwrap();
    // SAFETY: descriptors over live buffers, valid out-pointer.
    let st = unsafe { ferrite::sys::fer_attention_workspace_bytes(std::ptr::null(), qt.raw(), kt.raw(), kt.raw(), &p, ot.raw(), &mut need) };
    assert_eq!(st, status::OK);
    // one worker on the decode (split) path: the chunk states of 2 kv heads x 1 chunk of 256 keys
    // (the group's 2 rows x (64 out + m + l) floats each), then the worker's own floats: 2 rows of
    // 64 scores, the group's 2 rescale factors and one head's 2 q rows of 64; each part 64-aligned
    let states = (2 * 1 * 2 * (64 + 2) * 4usize).div_ceil(64) * 64;
    let worker = ((2 * 64 + 2 + 2 * 64) * 4usize).div_ceil(64) * 64;
    assert_eq!(need, states + worker);
}
