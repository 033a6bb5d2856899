//! Sampling against the oracle (rust_tests/src/oracle/sampling.rs): every processor, the chain, the
//! seeded draw, the statistics of the draw, and bad input.
//!
//! Comparison rule: processed logits must be bit-identical to the oracle's (the elementwise
//! processors use the same f32 operations; the selections decide on the same f32 values), and the
//! surviving set therefore exactly equal. The one theoretical exception: top-p sums mass in a
//! different order (radix bins vs a sorted walk), so a boundary whose cumulative mass lies within
//! about 1e-16 of top_p x total could differ; random inputs do not land there.

mod common;

use ferrite_spec::oracle::sampling::{self as oracle, Params};
use ferrite::sampling::{self, flag, processor, Context, Sampler};
use ferrite::status;
use proptest::prelude::*;

#[derive(Clone, Debug)]
struct Case {
    logits: Vec<f32>,
    prompt: Vec<i32>,
    generated: Vec<i32>,
}

/// Logits with heavy ties (few distinct values), or spread values; some masked (-inf).
fn case(max_vocab: usize) -> impl Strategy<Value = Case> {
    (1..max_vocab, any::<bool>(), 0usize..40, 0usize..40).prop_flat_map(|(vocab, ties, np, ng)| {
        let value = if ties {
            prop_oneof![8 => (-4i32..5).prop_map(|v| v as f32 * 0.5), 1 => Just(f32::NEG_INFINITY)].boxed()
        } else {
            prop_oneof![12 => -20.0f32..20.0, 1 => Just(f32::NEG_INFINITY)].boxed()
        };
        (
            proptest::collection::vec(value, vocab),
            proptest::collection::vec(0..vocab as i32, np),
            proptest::collection::vec(0..vocab as i32, ng),
        )
            .prop_map(|(logits, prompt, generated)| Case { logits, prompt, generated })
    })
}

/// Logits for the fast front's edges: a vocabulary within 3 of a multiple of 128 (or tiny),
/// values from ties around zero (both signs), spread, or near f32::MAX, with -inf and subnormals.
fn edge_case() -> impl Strategy<Value = Case> {
    let vocab = prop_oneof![1usize..8, (1usize..24, -3i64..4).prop_map(|(m, d)| (m as i64 * 128 + d).max(1) as usize)];
    (vocab, 0u8..3, 0usize..40, 0usize..40).prop_flat_map(|(vocab, shape, np, ng)| {
        let base = match shape {
            0 => prop_oneof![(-3i32..4).prop_map(|v| v as f32 * 0.5), Just(-0.0f32), Just(0.0f32)].boxed(),
            1 => (-20.0f32..20.0).boxed(),
            _ => (-1.7e38f32..1.7e38).prop_map(|v| v * 2.0).boxed(),
        };
        let value = prop_oneof![
            10 => base,
            1 => Just(f32::NEG_INFINITY),
            1 => prop_oneof![Just(1e-45f32), Just(-1e-45f32), Just(-0.0f32), Just(f32::MAX), Just(f32::MIN)],
        ];
        (
            proptest::collection::vec(value, vocab),
            proptest::collection::vec(0..vocab as i32, np),
            proptest::collection::vec(0..vocab as i32, ng),
        )
            .prop_map(|(logits, prompt, generated)| Case { logits, prompt, generated })
    })
}

fn same_bits(a: &[f32], b: &[f32]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits())
}

/// Runs the C chain; Ok(processed logits) or Err(status).
fn run_c(p: &Params, c: &Case, flags: u32) -> Result<(Vec<f32>, u32), i32> {
    let mut cp = p.to_c();
    cp.flags = flags;
    let mut s = Sampler::new(&cp, &p.bias).expect("valid params");
    let mut l = c.logits.clone();
    let ctx = Context { prompt: &c.prompt, generated: &c.generated };
    s.process(&mut l, &ctx).map(|a| (l, a)).map_err(|e| e.code)
}

/// C and oracle agree: the same processed logits, or both find every logit masked.
fn agree(p: &Params, c: &Case, flags: u32) -> Result<u32, TestCaseError> {
    let want = oracle::process(p, &c.logits, &c.prompt, &c.generated);
    match (run_c(p, c, flags), want) {
        (Ok((got, applied)), Some(want)) => {
            prop_assert!(same_bits(&got, &want), "processed logits differ\n  C:      {:?}\n  oracle: {:?}", got, want);
            Ok(applied)
        }
        (Err(code), None) => {
            prop_assert_eq!(code, status::NO_CANDIDATES);
            Ok(0)
        }
        (got, want) => Err(TestCaseError::fail(format!("C {:?} vs oracle {:?}", got.map(|g| g.0), want))),
    }
}

proptest! {
    #![proptest_config(common::config(200, file!()))]

    // EVIDENCE: C-SAMP-001
    #[test]
    fn c_samp_001_top_k_keeps_exactly_the_tokens_at_or_above_the_kth(c in case(3000), k in 1i32..400) {
        let p = Params { top_k: k, ..Params::default() };
        let applied = agree(&p, &c, 0)?;
        prop_assert!(applied == processor::TOP_K || applied == 0);
    }

    // EVIDENCE: C-SAMP-002
    #[test]
    fn c_samp_002_top_p_keeps_the_smallest_prefix_reaching_p(c in case(3000), top_p in 0.01f32..0.999) {
        agree(&Params { top_p, ..Params::default() }, &c, 0)?;
    }

    // EVIDENCE: C-SAMP-003
    #[test]
    fn c_samp_003_min_p_matches_oracle(c in case(600), min_p in 0.0001f32..1.0) {
        agree(&Params { min_p, ..Params::default() }, &c, 0)?;
    }

    // EVIDENCE: C-SAMP-004
    #[test]
    fn c_samp_004_penalties_match_oracle(c in case(600), rep in 0.5f32..2.0, window in 0i32..30,
                                         freq in -1.0f32..1.0, pres in -1.0f32..1.0) {
        agree(&Params { repetition_penalty: rep, repetition_window: window, ..Params::default() }, &c, 0)?;
        agree(&Params { frequency_penalty: freq, ..Params::default() }, &c, 0)?;
        agree(&Params { presence_penalty: pres, ..Params::default() }, &c, 0)?;
    }

    // EVIDENCE: C-SAMP-006
    #[test]
    fn c_samp_006_bias_ngram_min_new_typical_xtc_match_oracle(
        c in case(600), bias_seed in any::<u64>(), n in 1i32..4, typical in 0.05f32..0.99,
        xtc_t in 0.0f32..0.5, seed in any::<u64>()) {
        let v = c.logits.len() as u64;
        let bias: Vec<(i32, f32)> = (0..3).map(|i| {
            let t = ((bias_seed >> (i * 16)) % v) as i32;
            (t, if i == 2 { f32::NEG_INFINITY } else { (i as f32) - 0.75 })
        }).collect();
        agree(&Params { bias, ..Params::default() }, &c, 0)?;
        agree(&Params { no_repeat_ngram_size: n, ..Params::default() }, &c, 0)?;
        agree(&Params { min_new_tokens: 50, eos_token_id: (bias_seed % v) as i32, ..Params::default() }, &c, 0)?;
        agree(&Params { typical_p: typical, ..Params::default() }, &c, 0)?;
        agree(&Params { xtc_threshold: xtc_t, xtc_probability: 0.7, seed, ..Params::default() }, &c, 0)?;
    }

    // EVIDENCE: C-SAMP-005
    /// The chain equals the composition of its parts: the oracle's chain (each part in the header's
    /// order) and ferrite's parts run one sampler at a time both equal ferrite's whole chain.
    #[test]
    fn c_samp_005_chain_equals_composition_of_its_parts(
        c in case(2000), k in 0i32..100, top_p in 0.05f32..1.0, min_p in 0.0f32..0.5,
        temp in 0.1f32..2.0, rep in 0.8f32..1.5, freq in 0.0f32..0.5, pres in 0.0f32..0.5) {
        let p = Params { top_k: k, top_p, min_p, temperature: temp, repetition_penalty: rep,
                         frequency_penalty: freq, presence_penalty: pres, ..Params::default() };
        agree(&p, &c, 0)?;
        let parts = [
            Params { repetition_penalty: rep, ..Params::default() },
            Params { frequency_penalty: freq, presence_penalty: pres, ..Params::default() },
            Params { temperature: temp, ..Params::default() },
            Params { top_k: k, ..Params::default() },
            Params { top_p, ..Params::default() },
            Params { min_p, ..Params::default() },
        ];
        let whole = run_c(&p, &c, 0);
        let mut step = c.clone();
        let mut composed = Ok(());
        for part in &parts {
            match run_c(part, &step, 0) {
                Ok((l, _)) => step.logits = l,
                Err(code) => { composed = Err(code); break; }
            }
        }
        match (whole, composed) {
            (Ok((w, _)), Ok(())) => prop_assert!(same_bits(&w, &step.logits)),
            (Err(a), Err(b)) => prop_assert_eq!(a, b),
            (w, s) => prop_assert!(false, "whole {:?} vs parts {:?}", w.map(|x| x.1), s),
        }
    }

    // EVIDENCE: C-SAMP-013
    /// The fast front (pass 1 over chunk maxima, pass 2 masking, selection before the temperature
    /// division) against the oracle on what could trip it: vocabularies just around multiples of
    /// the 128-logit chunk, +0 and -0 tied at thresholds, subnormals, magnitudes near f32::MAX that
    /// a small temperature overflows to +-inf and a huge one rounds together, and the whole chain.
    #[test]
    fn c_samp_013_fast_front_matches_oracle_on_edges(
        c in edge_case(), k in 0i32..300, top_p in 0.05f32..1.0, min_p in 0.0f32..0.5,
        temp in prop_oneof![Just(1.0f32), Just(0.0f32), Just(1e-3f32), Just(1e6f32), 0.05f32..3.0],
        rep in 0.5f32..2.0, freq in -1.0f32..1.0, pres in -1.0f32..1.0) {
        let p = Params { top_k: k, top_p, min_p, temperature: temp, repetition_penalty: rep,
                         frequency_penalty: freq, presence_penalty: pres, ..Params::default() };
        agree(&p, &c, 0)?;
        agree(&Params { top_k: k.max(1), temperature: temp, ..Params::default() }, &c, 0)?;
    }

    // EVIDENCE: C-SAMP-012
    #[test]
    fn c_samp_012_fused_top_k_top_p_equals_the_two_processors(c in case(3000), k in 1i32..300, top_p in 0.05f32..0.99) {
        let p = Params { top_k: k, top_p, ..Params::default() };
        let fused = run_c(&p, &c, flag::FUSE_TOP_K_TOP_P);
        let apart = run_c(&p, &c, 0);
        match (fused, apart) {
            (Ok((f, af)), Ok((a, aa))) => {
                prop_assert!(same_bits(&f, &a));
                prop_assert_eq!(af, processor::TOP_K_TOP_P_FUSED);
                prop_assert_eq!(aa, processor::TOP_K | processor::TOP_P);
            }
            (Err(x), Err(y)) => prop_assert_eq!(x, y),
            (x, y) => prop_assert!(false, "{:?} vs {:?}", x.map(|v| v.1), y.map(|v| v.1)),
        }
    }

    // EVIDENCE: C-SAMP-008
    /// The draw with a given uniform equals the oracle's walk, token and log-probability.
    #[test]
    fn c_samp_008_draw_matches_oracle(c in case(2000), k in 0i32..60, u in 0.0f64..1.0) {
        let p = Params { top_k: k, ..Params::default() };
        let Some(processed) = oracle::process(&p, &c.logits, &c.prompt, &c.generated) else { return Ok(()) };
        let (want_tok, want_lp) = oracle::draw(&processed, u);
        let mut s = Sampler::new(&p.to_c(), &[]).unwrap();
        let mut l = c.logits.clone();
        let (tok, lp) = s.sample_uniform(&mut l, &Context { prompt: &c.prompt, generated: &c.generated }, u).unwrap();
        prop_assert_eq!(tok, want_tok);
        prop_assert!((lp as f64 - want_lp).abs() <= 1e-5 * (1.0 + want_lp.abs()), "logprob {} vs {}", lp, want_lp);
    }

    // EVIDENCE: C-SAMP-011
    #[test]
    fn c_samp_011_top_logprobs_match_log_softmax(c in case(1500), n in 0usize..40) {
        let finite: Vec<usize> = (0..c.logits.len()).filter(|&i| c.logits[i] != f32::NEG_INFINITY).collect();
        let got = sampling::top_logprobs(&c.logits, n);
        if finite.is_empty() {
            prop_assert_eq!(got.unwrap_err().code, status::NO_CANDIDATES);
            return Ok(());
        }
        let got = got.unwrap();
        let probs = oracle::probabilities(&c.logits);
        let mut order = finite.clone();
        order.sort_by(|&a, &b| c.logits[b].partial_cmp(&c.logits[a]).unwrap().then(a.cmp(&b)));
        prop_assert_eq!(got.len(), n.min(finite.len()));
        for (j, &(tok, lp)) in got.iter().enumerate() {
            prop_assert_eq!(tok as usize, order[j]);
            let want = probs[order[j]].ln();
            prop_assert!((lp as f64 - want).abs() <= 1e-5 * (1.0 + want.abs()), "{} vs {}", lp, want);
        }
    }
}

// EVIDENCE: C-SAMP-007
#[test]
fn c_samp_007_greedy_takes_the_first_maximum() {
    let l = [1.0f32, 7.0, 2.0, 7.0, -1.0];
    assert_eq!(sampling::greedy(&l).unwrap(), 1);
    // large vocabularies: every position of a unique maximum, and ties resolved to the lowest id
    let mut big: Vec<f32> = (0..151_936).map(|i| ((i * 17 % 997) as f32 - 498.0) / 73.0).collect();
    for &pos in &[0usize, 1, 31, 32, 1000, 151_935] {
        let saved = big[pos];
        big[pos] = 100.0;
        assert_eq!(sampling::greedy(&big).unwrap(), pos as i32);
        big[pos] = saved;
    }
    let first_max = (0..big.len()).fold(0, |b, i| if big[i] > big[b] { i } else { b });
    assert_eq!(sampling::greedy(&big).unwrap(), first_max as i32);
    // temperature 0 in the chain is the same greedy choice, whatever the uniform
    let mut p = sampling::params_init();
    p.temperature = 0.0;
    let mut s = Sampler::new(&p, &[]).unwrap();
    for u in [0.0, 0.5, 0.999] {
        let mut x = l.to_vec();
        assert_eq!(s.sample_uniform(&mut x, &Context::default(), u).unwrap().0, 1);
    }
    assert_eq!(sampling::greedy(&[f32::NAN, 1.0]).unwrap_err().code, status::INVALID_ARG);
    assert_eq!(sampling::greedy(&[f32::NEG_INFINITY; 3]).unwrap_err().code, status::NO_CANDIDATES);
    assert_eq!(sampling::greedy(&[]).unwrap_err().code, status::INVALID_ARG);
}

// EVIDENCE: C-SAMP-008
/// The same seed gives the same tokens: the generator is the header's SplitMix64 construction
/// (recomputed here independently), sample() uses it at counter = n_generated, and samplers on
/// several threads at once produce the same sequence.
#[test]
fn c_samp_008_seeded_sampling_is_reproducible() {
    for (seed, counter) in [(0u64, 0u64), (42, 7), (u64::MAX, u64::MAX - 1), (0x1234_5678, 1 << 40)] {
        assert_eq!(sampling::uniform(seed, counter).to_bits(), oracle::uniform(seed, counter, 0).to_bits());
    }
    let logits: Vec<f32> = (0..32_000).map(|i| ((i * 17 % 997) as f32 - 498.0) / 73.0).collect();
    let run = || {
        let mut p = sampling::params_init();
        p.seed = 7;
        p.top_k = 50;
        p.temperature = 0.8;
        let mut s = Sampler::new(&p, &[]).unwrap();
        let mut generated = Vec::new();
        for _ in 0..32 {
            let mut l = logits.clone();
            let (t, _) = s.sample(&mut l, &Context { prompt: &[], generated: &generated }).unwrap();
            generated.push(t);
        }
        generated
    };
    let reference = run();
    std::thread::scope(|scope| {
        let threads: Vec<_> = (0..4).map(|_| scope.spawn(run)).collect();
        for t in threads {
            assert_eq!(t.join().unwrap(), reference);
        }
    });
    // and the draws are the oracle's draws at the oracle's uniforms
    let p = Params { seed: 7, top_k: 50, temperature: 0.8, ..Params::default() };
    for (i, &tok) in reference.iter().enumerate() {
        let processed = oracle::process(&p, &logits, &[], &reference[..i]).unwrap();
        assert_eq!(oracle::draw(&processed, oracle::uniform(7, i as u64, 0)).0, tok);
    }
    assert!(reference.iter().collect::<std::collections::HashSet<_>>().len() > 1, "the draws vary");
}

// EVIDENCE: C-SAMP-009
/// Chi-square goodness of fit, fixed seed: 40,000 draws over the processed distribution (8 tokens
/// survive top-k of 10 at temperature 0.7). Critical value for 7 degrees of freedom at
/// significance 0.001: 24.32. A deterministic test: the seed fixes the statistic.
#[test]
fn c_samp_009_draw_frequencies_follow_the_processed_distribution() {
    let logits: Vec<f32> = vec![0.1, 1.3, -0.4, 0.9, 2.0, 0.0, 1.1, -2.0, 0.5, 1.7];
    let p = Params { top_k: 8, temperature: 0.7, ..Params::default() };
    let processed = oracle::process(&p, &logits, &[], &[]).unwrap();
    let probs = oracle::probabilities(&processed);
    let mut s = Sampler::new(&p.to_c(), &[]).unwrap();
    let n = 40_000usize;
    let mut counts = vec![0usize; logits.len()];
    for i in 0..n {
        let mut l = logits.clone();
        let u = sampling::uniform(2024, i as u64);
        counts[s.sample_uniform(&mut l, &Context::default(), u).unwrap().0 as usize] += 1;
    }
    let mut chi2 = 0.0;
    let mut support = 0;
    for (c, &q) in counts.iter().zip(&probs) {
        if q == 0.0 {
            assert_eq!(*c, 0, "a masked token was drawn");
            continue;
        }
        support += 1;
        let e = q * n as f64;
        chi2 += (*c as f64 - e).powi(2) / e;
    }
    assert_eq!(support, 8);
    assert!(chi2 < 24.32, "chi-square {chi2:.2} >= 24.32 (df 7, alpha 0.001): counts {counts:?} vs {probs:?}");
    // and it can fail: the same counts against a flattened distribution are rejected
    let flat = 1.0 / 8.0;
    let chi2_flat: f64 = counts.iter().zip(&probs).filter(|(_, &q)| q > 0.0)
        .map(|(c, _)| (*c as f64 - flat * n as f64).powi(2) / (flat * n as f64)).sum();
    assert!(chi2_flat > 24.32);
}

// EVIDENCE: C-SAMP-010
#[test]
fn c_samp_010_bad_input_gets_a_status() {
    let ctx = Context::default();
    let p = sampling::params_init();
    let mut s = Sampler::new(&p, &[]).unwrap();
    // NaN and +inf refused unless allowed; then NaN is masked and +inf tokens are the candidates
    for bad in [f32::NAN, f32::INFINITY] {
        let mut l = vec![0.0, bad, 1.0];
        let e = s.process(&mut l, &ctx).unwrap_err();
        assert_eq!(e.code, status::INVALID_ARG);
        assert!(!e.message.is_empty());
    }
    let mut pa = p;
    pa.flags = flag::ALLOW_NONFINITE;
    let mut sa = Sampler::new(&pa, &[]).unwrap();
    let mut l = vec![0.0, f32::NAN, 1.0];
    sa.process(&mut l, &ctx).unwrap();
    assert_eq!(l[1], f32::NEG_INFINITY);
    for u in [0.0, 0.3, 0.6, 0.99] {
        let mut l = vec![0.0, f32::INFINITY, 1.0, f32::INFINITY];
        let (t, lp) = sa.sample_uniform(&mut l, &ctx, u).unwrap();
        assert!(t == 1 || t == 3);
        assert!((lp - 0.5f32.ln()).abs() < 1e-6);
    }
    // every logit masked: a status, and a following successful call works
    let mut l = vec![f32::NEG_INFINITY; 4];
    assert_eq!(s.sample(&mut l, &ctx).unwrap_err().code, status::NO_CANDIDATES);
    let mut pk = p;
    pk.min_new_tokens = 5;
    pk.eos_token_id = 0;
    let mut sk = Sampler::new(&pk, &[]).unwrap();
    let mut l = vec![0.0, f32::NEG_INFINITY];
    assert_eq!(sk.process(&mut l, &ctx).unwrap_err().code, status::NO_CANDIDATES);
    let mut l = vec![0.0, 1.0];
    s.process(&mut l, &ctx).unwrap();
    // tokens outside the vocabulary, in the history or the bias
    let mut l = vec![0.0; 4];
    assert_eq!(s.process(&mut l, &Context { prompt: &[4], generated: &[] }).unwrap_err().code, status::INVALID_ARG);
    assert_eq!(s.process(&mut l, &Context { prompt: &[], generated: &[-1] }).unwrap_err().code, status::INVALID_ARG);
    let mut sb = Sampler::new(&p, &[(9, 1.0)]).unwrap();
    assert_eq!(sb.process(&mut l, &ctx).unwrap_err().code, status::INVALID_ARG);
    assert_eq!(s.process(&mut [], &ctx).unwrap_err().code, status::INVALID_ARG);
    assert_eq!(s.sample_uniform(&mut l, &ctx, 1.0).unwrap_err().code, status::INVALID_ARG);
    assert_eq!(s.sample_uniform(&mut l, &ctx, -0.1).unwrap_err().code, status::INVALID_ARG);
    assert_eq!(s.sample_uniform(&mut l, &ctx, f64::NAN).unwrap_err().code, status::INVALID_ARG);
    // parameters out of range, each named by the message
    let bad_params: Vec<(&str, Box<dyn Fn(&mut sampling::Params)>)> = vec![
        ("temperature", Box::new(|p| p.temperature = -1.0)),
        ("temperature", Box::new(|p| p.temperature = f32::NAN)),
        ("top_k", Box::new(|p| p.top_k = -3)),
        ("top_p", Box::new(|p| p.top_p = 0.0)),
        ("top_p", Box::new(|p| p.top_p = 1.5)),
        ("min_p", Box::new(|p| p.min_p = 2.0)),
        ("typical_p", Box::new(|p| p.typical_p = 0.0)),
        ("repetition_penalty", Box::new(|p| p.repetition_penalty = 0.0)),
        ("repetition_window", Box::new(|p| p.repetition_window = -1)),
        ("min_new_tokens", Box::new(|p| p.min_new_tokens = 3)),
        ("xtc", Box::new(|p| p.xtc_probability = 1.5)),
        ("flags", Box::new(|p| p.flags = 0x100)),
        ("struct_size", Box::new(|p| p.struct_size = 8)),
    ];
    for (name, set) in bad_params {
        let mut q = p;
        set(&mut q);
        let e = Sampler::new(&q, &[]).unwrap_err();
        assert_eq!(e.code, status::INVALID_ARG, "{name}");
        assert!(e.message.contains(name), "{name}: {}", e.message);
    }
    let e = Sampler::new(&p, &[(0, f32::NAN)]).unwrap_err();
    assert_eq!(e.code, status::INVALID_ARG);
    // NULL pointers through the raw ABI
    use ferrite::sys;
    let mut out: *mut sys::fer_sampler = std::ptr::null_mut();
    // SAFETY: deliberately NULL arguments; the ABI must answer NULL_ARG without touching them.
    unsafe {
        assert_eq!(sys::fer_sampler_create(std::ptr::null(), &mut out), status::NULL_ARG);
        assert!(out.is_null());
        assert_eq!(sys::fer_sampler_create(&p, std::ptr::null_mut()), status::NULL_ARG);
        let mut applied = 7u32;
        let c = sys::fer_sampling_context { prompt_tokens: std::ptr::null(), n_prompt: 0, generated_tokens: std::ptr::null(), n_generated: 0 };
        let mut l = [0.0f32; 2];
        assert_eq!(sys::fer_sampler_process(std::ptr::null_mut(), l.as_mut_ptr(), 2, &c, &mut applied), status::NULL_ARG);
        assert_eq!(applied, 0);
        assert_eq!(sys::fer_sampler_process(s.as_ptr(), std::ptr::null_mut(), 2, &c, &mut applied), status::NULL_ARG);
        assert_eq!(sys::fer_sampler_process(s.as_ptr(), l.as_mut_ptr(), 2, std::ptr::null(), &mut applied), status::NULL_ARG);
        let bad_ctx = sys::fer_sampling_context { prompt_tokens: std::ptr::null(), n_prompt: 3, generated_tokens: std::ptr::null(), n_generated: 0 };
        assert_eq!(sys::fer_sampler_process(s.as_ptr(), l.as_mut_ptr(), 2, &bad_ctx, &mut applied), status::NULL_ARG);
        assert_eq!(sys::fer_sampler_sample(s.as_ptr(), l.as_mut_ptr(), 2, &c, std::ptr::null_mut(), std::ptr::null_mut()), status::NULL_ARG);
        assert_eq!(sys::fer_sample_greedy(std::ptr::null(), 2, std::ptr::null_mut()), status::NULL_ARG);
        let mut n = 9usize;
        assert_eq!(sys::fer_logits_top_logprobs(l.as_ptr(), 2, 1, std::ptr::null_mut(), std::ptr::null_mut(), &mut n), status::NULL_ARG);
        assert_eq!(n, 0);
        assert_eq!(sys::fer_sampling_uniform(1, 2, std::ptr::null_mut()), status::NULL_ARG);
        sys::fer_sampler_free(std::ptr::null_mut());
    }
}

// EVIDENCE: C-SAMP-001
/// The edges the header pins down: k at or above the number of finite logits keeps them all (and
/// still reports top-k as run); top_p = 1 and typical_p = 1 are off; min_p = 1 keeps the maxima.
#[test]
fn c_samp_001_edges_k_at_or_above_vocab_and_p_one() {
    let logits = vec![0.5f32, f32::NEG_INFINITY, 2.0, 2.0, -1.0];
    let ctx = Context::default();
    for k in [4, 5, 100] {
        let mut p = sampling::params_init();
        p.top_k = k;
        let mut s = Sampler::new(&p, &[]).unwrap();
        let mut l = logits.clone();
        assert_eq!(s.process(&mut l, &ctx).unwrap(), processor::TOP_K);
        assert!(same_bits(&l, &logits), "k = {k} changed {l:?}");
    }
    let mut p = sampling::params_init();
    p.top_p = 1.0;
    p.typical_p = 1.0;
    let mut s = Sampler::new(&p, &[]).unwrap();
    let mut l = logits.clone();
    assert_eq!(s.process(&mut l, &ctx).unwrap(), 0, "top_p = 1 and typical_p = 1 run nothing");
    assert!(same_bits(&l, &logits));
    let mut p = sampling::params_init();
    p.min_p = 1.0;
    let mut s = Sampler::new(&p, &[]).unwrap();
    let mut l = logits.clone();
    assert_eq!(s.process(&mut l, &ctx).unwrap(), processor::MIN_P);
    assert_eq!(l, vec![f32::NEG_INFINITY, f32::NEG_INFINITY, 2.0, 2.0, f32::NEG_INFINITY]);
}

/// A history over a few tokens (so it repeats), with breakers over the same tokens.
#[derive(Clone, Debug)]
struct DryCase {
    logits: Vec<f32>,
    prompt: Vec<i32>,
    generated: Vec<i32>,
    breakers: Vec<Vec<i32>>,
}

fn dry_case() -> impl Strategy<Value = DryCase> {
    (2usize..300, 2i32..7, 0usize..50, 0usize..50, 0usize..4).prop_flat_map(|(vocab, alphabet, np, ng, nb)| {
        let a = alphabet.min(vocab as i32);
        (
            proptest::collection::vec(prop_oneof![12 => -8.0f32..8.0, 1 => Just(f32::NEG_INFINITY)], vocab),
            proptest::collection::vec(0..a, np),
            proptest::collection::vec(0..a, ng),
            proptest::collection::vec(proptest::collection::vec(0..a, 1..4), nb),
        )
            .prop_map(|(logits, prompt, generated, breakers)| DryCase { logits, prompt, generated, breakers })
    })
}

proptest! {
    #![proptest_config(common::config(300, file!()))]

    // EVIDENCE: C-SAMP-014
    /// DRY over repetitive histories with breakers of one to three tokens: the processed logits
    /// equal the oracle's (a quadratic search for repeats) bit for bit, with and without the
    /// penalties before it and a window.
    #[test]
    fn c_samp_014_dry_matches_oracle(c in dry_case(), mult in 0.05f32..3.0, base_one in any::<bool>(), base in 1.0f32..3.0,
                                     allowed in 0i32..5, last_n in prop_oneof![Just(0i32), 1i32..40], rep in prop_oneof![Just(1.0f32), 0.5f32..2.0],
                                     temperature in prop_oneof![Just(1.0f32), Just(0.0f32), 0.3f32..2.0]) {
        let p = Params {
            dry_multiplier: mult,
            dry_base: if base_one { 1.0 } else { base },
            dry_allowed_length: allowed,
            dry_penalty_last_n: last_n,
            dry_breakers: c.breakers.clone(),
            repetition_penalty: rep,
            temperature,
            ..Params::default()
        };
        let want = oracle::process(&p, &c.logits, &c.prompt, &c.generated);
        let mut s = Sampler::with_breakers(&p.to_c(), &[], &p.breakers()).expect("valid params");
        let mut l = c.logits.clone();
        let got = s.process(&mut l, &Context { prompt: &c.prompt, generated: &c.generated });
        match (got, want) {
            (Ok(applied), Some(want)) => {
                prop_assert!(applied & processor::DRY != 0);
                prop_assert!(same_bits(&l, &want), "DRY differs\n  C:      {:?}\n  oracle: {:?}", l, want);
            }
            (Err(e), None) => prop_assert_eq!(e.code, status::NO_CANDIDATES),
            (got, want) => prop_assert!(false, "C {:?} vs oracle {:?}", got, want.is_some()),
        }
    }

    // EVIDENCE: C-SAMP-016
    /// Mirostat v1 and v2 over a dozen steps: each step's token and log-probability equal the
    /// oracle's, with the oracle carrying mu from step to step as the header says the sampler does.
    #[test]
    fn c_samp_016_mirostat_steps_match_oracle(c in case(2000), version in 1i32..3, tau in 0.3f32..8.0, eta in 0.01f32..1.0,
                                              seed in any::<u64>(), temperature in prop_oneof![Just(1.0f32), 0.3f32..2.0]) {
        let mut p = Params { mirostat: version, mirostat_tau: tau, mirostat_eta: eta, seed, temperature, ..Params::default() };
        p.mu = 2.0 * tau as f64;
        let mut s = Sampler::new(&p.to_c(), &[]).expect("valid params");
        let mut generated = c.generated.clone();
        for _ in 0..12 {
            let want = oracle::process(&p, &c.logits, &c.prompt, &generated);
            let mut l = c.logits.clone();
            let got = s.sample(&mut l, &Context { prompt: &c.prompt, generated: &generated });
            let Some(processed) = want else {
                prop_assert_eq!(got.unwrap_err().code, status::NO_CANDIDATES);
                return Ok(());
            };
            prop_assert!(same_bits(&l, &processed), "mirostat v{} kept a different set", version);
            let (want_tok, want_lp) = oracle::draw(&processed, oracle::uniform(seed, generated.len() as u64, 0));
            let (tok, lp) = got.unwrap();
            prop_assert_eq!(tok, want_tok);
            prop_assert!((lp as f64 - want_lp).abs() <= 1e-5 * (1.0 + want_lp.abs()));
            p.mu = oracle::mirostat_update(&p, p.mu, want_lp);
            generated.push(tok);
        }
    }
}

// EVIDENCE: C-SAMP-014
/// llama.cpp's own DRY cases (tests/test-sampling.cpp, test_dry): probabilities in, the history
/// accepted, breakers as token sequences, the probabilities after DRY and a softmax out.
#[test]
fn c_samp_014_dry_reproduces_llama_cpp_cases() {
    type DryTest = (Vec<f32>, Vec<i32>, Vec<f32>, f32, f32, i32, i32, Vec<Vec<i32>>);
    let cases: Vec<DryTest> = vec![
        (vec![0.25; 4], vec![0, 1], vec![0.25; 4], 1.0, 1.1, 2, 4, vec![]),
        (vec![0.25; 4], vec![0, 1, 2, 0, 1], vec![0.296923, 0.296923, 0.109232, 0.296923], 1.0, 1.1, 2, 5, vec![]),
        (vec![0.2; 5], vec![0, 1, 3, 4, 0, 1], vec![0.2; 5], 1.0, 1.1, 2, 6, vec![vec![3]]),
        (vec![0.2; 5], vec![0, 1, 2, 0, 1], vec![0.241818, 0.241818, 0.032727, 0.241818, 0.241818], 2.0, 1.1, 2, 5, vec![]),
        (vec![0.2; 5], vec![0, 1, 2, 3, 4, 0, 1], vec![0.2; 5], 1.0, 1.1, 4, 7, vec![]),
    ];
    for (i, (probs, history, expected, mult, base, allowed, last_n, breakers)) in cases.into_iter().enumerate() {
        let mut p = sampling::params_init();
        p.dry_multiplier = mult;
        p.dry_base = base;
        p.dry_allowed_length = allowed;
        p.dry_penalty_last_n = last_n;
        let seqs: Vec<&[i32]> = breakers.iter().map(|b| b.as_slice()).collect();
        let mut s = Sampler::with_breakers(&p, &[], &sampling::DryBreakers::from_sequences(&seqs)).unwrap();
        let mut l: Vec<f32> = probs.iter().map(|p| p.ln()).collect();
        s.process(&mut l, &Context { prompt: &history, generated: &[] }).unwrap();
        let got = oracle::probabilities(&l);
        for (t, (&g, &e)) in got.iter().zip(&expected).enumerate() {
            assert!((g - e as f64).abs() < 1e-5, "case {i} token {t}: {g} vs llama.cpp's {e}");
        }
    }
}

// EVIDENCE: C-SAMP-010
/// DRY's and mirostat's parameters out of range, each refused and named.
#[test]
fn c_samp_010_dry_and_mirostat_bad_params_are_named() {
    let p = sampling::params_init();
    assert_eq!((p.dry_base, p.dry_allowed_length, p.mirostat_tau, p.mirostat_eta), (1.75, 2, 5.0, 0.1));
    let bad: Vec<(&str, Box<dyn Fn(&mut sampling::Params)>)> = vec![
        ("dry_multiplier", Box::new(|p| p.dry_multiplier = -1.0)),
        ("dry_multiplier", Box::new(|p| p.dry_multiplier = f32::NAN)),
        ("dry_base", Box::new(|p| (p.dry_multiplier, p.dry_base) = (0.8, 0.5))),
        ("dry_allowed_length", Box::new(|p| p.dry_allowed_length = -1)),
        ("dry_penalty_last_n", Box::new(|p| p.dry_penalty_last_n = -1)),
        ("mirostat", Box::new(|p| p.mirostat = 3)),
        ("mirostat_tau", Box::new(|p| (p.mirostat, p.mirostat_tau) = (2, 0.0))),
        ("mirostat_eta", Box::new(|p| (p.mirostat, p.mirostat_eta) = (1, f32::INFINITY))),
        ("mirostat replaces", Box::new(|p| (p.mirostat, p.top_k) = (2, 40))),
        ("mirostat replaces", Box::new(|p| (p.mirostat, p.top_p) = (1, 0.9))),
    ];
    for (name, set) in bad {
        let mut q = p;
        set(&mut q);
        let e = Sampler::new(&q, &[]).unwrap_err();
        assert_eq!(e.code, status::INVALID_ARG, "{name}");
        assert!(e.message.contains(name), "{name}: {}", e.message);
    }
    let bad_breakers: Vec<(&str, sampling::DryBreakers)> = vec![
        ("dry_breaker_lengths[0] = 0", sampling::DryBreakers { lengths: vec![0], tokens: vec![7] }),
        ("dry_breaker_lengths[1] = 65", sampling::DryBreakers { lengths: vec![1, 65], tokens: vec![0; 66] }),
        ("sum to 3", sampling::DryBreakers { lengths: vec![1, 2], tokens: vec![0; 4] }),
        ("dry_breaker_tokens[1] = -2", sampling::DryBreakers { lengths: vec![2], tokens: vec![0, -2] }),
    ];
    for (needle, b) in bad_breakers {
        let e = Sampler::with_breakers(&p, &[], &b).unwrap_err();
        assert_eq!(e.code, status::INVALID_ARG, "{needle}");
        assert!(e.message.contains(needle), "{needle}: {}", e.message);
    }
    let mut q = p;
    q.n_dry_breakers = 1;
    q.n_dry_breaker_tokens = 1;
    let mut out: *mut ferrite::sys::fer_sampler = std::ptr::null_mut();
    // SAFETY: a count with NULL breaker arrays; the ABI must refuse it without reading them.
    assert_eq!(unsafe { ferrite::sys::fer_sampler_create(&q, &mut out) }, status::NULL_ARG);
    assert!(out.is_null());
}
