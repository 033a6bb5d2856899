//! The sampling oracle: each processor of ferrite.h's chain written the obvious way, with full
//! sorts and f64 probabilities. The elementwise penalties use the same f32 operations as the C
//! code, so their results must match bit for bit; selections (top-k, top-p, min-p, typical, XTC)
//! are decided on those same f32 logits, so the surviving sets must match exactly.

use std::collections::{HashMap, HashSet};

/// The oracle's copy of `fer_sampling_params` (every field's neutral value = off).
#[derive(Clone, Debug)]
pub struct Params {
    pub seed: u64,
    pub temperature: f32,
    pub top_k: i32,
    pub top_p: f32,
    pub min_p: f32,
    pub typical_p: f32,
    pub repetition_penalty: f32,
    pub repetition_window: i32,
    pub frequency_penalty: f32,
    pub presence_penalty: f32,
    pub no_repeat_ngram_size: i32,
    pub min_new_tokens: i32,
    pub eos_token_id: i32,
    pub xtc_threshold: f32,
    pub xtc_probability: f32,
    pub bias: Vec<(i32, f32)>,
    pub dry_multiplier: f32,
    pub dry_base: f32,
    pub dry_allowed_length: i32,
    pub dry_penalty_last_n: i32,
    /// Breakers, head first.
    pub dry_breakers: Vec<Vec<i32>>,
    pub mirostat: i32,
    pub mirostat_tau: f32,
    pub mirostat_eta: f32,
    /// Mirostat's state for this step (the C sampler keeps it; start at 2 tau, then
    /// [`mirostat_update`] after each draw).
    pub mu: f64,
}

impl Default for Params {
    fn default() -> Self {
        Params {
            seed: 0,
            temperature: 1.0,
            top_k: 0,
            top_p: 1.0,
            min_p: 0.0,
            typical_p: 1.0,
            repetition_penalty: 1.0,
            repetition_window: 0,
            frequency_penalty: 0.0,
            presence_penalty: 0.0,
            no_repeat_ngram_size: 0,
            min_new_tokens: 0,
            eos_token_id: -1,
            xtc_threshold: 0.0,
            xtc_probability: 0.0,
            bias: Vec::new(),
            dry_multiplier: 0.0,
            dry_base: 1.75,
            dry_allowed_length: 2,
            dry_penalty_last_n: 0,
            dry_breakers: Vec::new(),
            mirostat: 0,
            mirostat_tau: 5.0,
            mirostat_eta: 0.1,
            mu: 10.0,
        }
    }
}

impl Params {
    /// The same configuration as the C struct (bias is passed separately to `Sampler::new`).
    pub fn to_c(&self) -> ferrite::sampling::Params {
        let mut p = ferrite::sampling::params_init();
        p.seed = self.seed;
        p.temperature = self.temperature;
        p.top_k = self.top_k;
        p.top_p = self.top_p;
        p.min_p = self.min_p;
        p.typical_p = self.typical_p;
        p.repetition_penalty = self.repetition_penalty;
        p.repetition_window = self.repetition_window;
        p.frequency_penalty = self.frequency_penalty;
        p.presence_penalty = self.presence_penalty;
        p.no_repeat_ngram_size = self.no_repeat_ngram_size;
        p.min_new_tokens = self.min_new_tokens;
        p.eos_token_id = self.eos_token_id;
        p.xtc_threshold = self.xtc_threshold;
        p.xtc_probability = self.xtc_probability;
        p.dry_multiplier = self.dry_multiplier;
        p.dry_base = self.dry_base;
        p.dry_allowed_length = self.dry_allowed_length;
        p.dry_penalty_last_n = self.dry_penalty_last_n;
        p.mirostat = self.mirostat;
        p.mirostat_tau = self.mirostat_tau;
        p.mirostat_eta = self.mirostat_eta;
        p
    }

    /// The breakers in the C form (`Sampler::with_breakers`).
    pub fn breakers(&self) -> ferrite::sampling::DryBreakers {
        let seqs: Vec<&[i32]> = self.dry_breakers.iter().map(|b| b.as_slice()).collect();
        ferrite::sampling::DryBreakers::from_sequences(&seqs)
    }
}

const NEG_INF: f32 = f32::NEG_INFINITY;

/// SplitMix64's finalizer, as ferrite's counter-based generator uses it.
fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d049bb133111eb);
    z ^ (z >> 31)
}

/// The uniform in [0, 1) for (seed, counter, stream), written from the header's description.
pub fn uniform(seed: u64, counter: u64, stream: u64) -> f64 {
    let z = mix64(seed.wrapping_add(0x9e3779b97f4a7c15u64.wrapping_mul(counter.wrapping_add(1))));
    let z = mix64(z ^ 0xd1b54a32d192ed03u64.wrapping_mul(stream.wrapping_add(1)));
    (z >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
}

fn finite_ids(l: &[f32]) -> Vec<usize> {
    (0..l.len()).filter(|&i| l[i] != NEG_INF).collect()
}

/// Softmax weights exp(l - max) in f64 over `ids`, and their sum (in id order).
fn weights(l: &[f32], ids: &[usize]) -> (Vec<f64>, f64) {
    let mx = ids.iter().map(|&i| l[i]).fold(NEG_INF, f32::max);
    let w: Vec<f64> = ids
        .iter()
        .map(|&i| if mx == f32::INFINITY { (l[i] == f32::INFINITY) as u8 as f64 } else { ((l[i] as f64) - (mx as f64)).exp() })
        .collect();
    let total = w.iter().sum();
    (w, total)
}

pub fn top_k(l: &mut [f32], k: usize) {
    let mut vals: Vec<f32> = l.iter().copied().filter(|&v| v != NEG_INF).collect();
    if k >= vals.len() {
        return;
    }
    vals.sort_by(|a, b| b.partial_cmp(a).unwrap());
    let thr = vals[k - 1];
    for v in l.iter_mut() {
        if *v < thr {
            *v = NEG_INF;
        }
    }
}

pub fn top_p(l: &mut [f32], p: f32) {
    let ids = finite_ids(l);
    if ids.len() <= 1 {
        return;
    }
    let (w, total) = weights(l, &ids);
    let mut order: Vec<usize> = (0..ids.len()).collect();
    order.sort_by(|&a, &b| l[ids[b]].partial_cmp(&l[ids[a]]).unwrap().then(ids[a].cmp(&ids[b])));
    let target = p as f64 * total;
    let mut cum = 0.0;
    let mut boundary = l[ids[*order.last().unwrap()]];
    for &j in &order {
        cum += w[j];
        if cum >= target {
            boundary = l[ids[j]];
            break;
        }
    }
    for &i in &ids {
        if l[i] < boundary {
            l[i] = NEG_INF;
        }
    }
}

pub fn min_p(l: &mut [f32], min_p: f32) {
    let ids = finite_ids(l);
    let mx = ids.iter().map(|&i| l[i]).fold(NEG_INF, f32::max);
    let thr = if mx == f32::INFINITY { f64::INFINITY } else { mx as f64 + (min_p as f64).ln() };
    for &i in &ids {
        if (l[i] as f64) < thr {
            l[i] = NEG_INF;
        }
    }
}

pub fn typical_p(l: &mut [f32], p: f32) {
    let ids = finite_ids(l);
    if ids.len() <= 1 {
        return;
    }
    let (w, total) = weights(l, &ids);
    let mut entropy = 0.0;
    for &wj in &w {
        let q = wj / total;
        if q > 0.0 {
            entropy -= q * q.ln();
        }
    }
    let score = |j: usize| {
        let q = w[j] / total;
        if q > 0.0 { (-q.ln() - entropy).abs() } else { f64::INFINITY }
    };
    let mut order: Vec<usize> = (0..ids.len()).collect();
    order.sort_by(|&a, &b| score(a).partial_cmp(&score(b)).unwrap().then(ids[a].cmp(&ids[b])));
    let mut keep = HashSet::new();
    let mut cum = 0.0;
    for &j in &order {
        keep.insert(ids[j]);
        cum += w[j] / total;
        if cum >= p as f64 {
            break;
        }
    }
    for &i in &ids {
        if !keep.contains(&i) {
            l[i] = NEG_INF;
        }
    }
}

pub fn xtc(l: &mut [f32], threshold: f32, probability: f32, u: f64) {
    if u >= probability as f64 {
        return;
    }
    let ids = finite_ids(l);
    let (w, total) = weights(l, &ids);
    let above: Vec<usize> = (0..ids.len()).filter(|&j| w[j] / total >= threshold as f64).collect();
    if above.len() < 2 {
        return;
    }
    // the least likely above the threshold survives; ties: the highest id
    let weakest = *above.iter().min_by(|&&a, &&b| w[a].partial_cmp(&w[b]).unwrap().then(ids[b].cmp(&ids[a]))).unwrap();
    for &j in &above {
        if j != weakest {
            l[ids[j]] = NEG_INF;
        }
    }
}

/// DRY, written from the header's description with a quadratic search for repeats.
pub fn dry(p: &Params, l: &mut [f32], history: &[usize]) {
    let len = history.len();
    let n = if p.dry_penalty_last_n > 0 && (p.dry_penalty_last_n as usize) < len { p.dry_penalty_last_n as usize } else { len };
    let w: Vec<i32> = history[len - n..].iter().map(|&t| t as i32).collect();
    let allowed = p.dry_allowed_length as usize;
    if n <= allowed {
        return;
    }
    // the newest breaker: its head i tokens from the end, its tail after it
    let mut limit = n;
    for i in 0..n {
        let longest = p
            .dry_breakers
            .iter()
            .filter(|b| b[0] == w[n - 1 - i])
            .map(|b| &b[1..])
            .filter(|tail| tail.len() <= i && (0..tail.len()).all(|t| tail[t] == w[n - 1 - (i - t - 1)]))
            .map(|tail| tail.len())
            .max();
        if let Some(l) = longest {
            limit = i - l;
            break;
        }
    }
    if limit < allowed {
        return;
    }
    let mut longest_repeat: HashMap<i32, usize> = HashMap::new();
    for j in 0..n - 1 {
        let mut m = 0;
        while m <= j && w[j - m] == w[n - 1 - m] {
            m += 1;
        }
        let m = m.min(limit);
        if m >= allowed {
            let e = longest_repeat.entry(w[j + 1]).or_default();
            *e = (*e).max(m);
        }
    }
    let max_exponent = if p.dry_base > 1.000001 { (88.7228391f32 / p.dry_base.ln()) as i64 } else { 0 };
    for (t, m) in longest_repeat {
        if p.dry_breakers.iter().any(|b| b.len() == 1 && b[0] == t) {
            continue;
        }
        let mut e = m as i64 - allowed as i64;
        if max_exponent > 0 && e > max_exponent {
            e = max_exponent;
        }
        let penalty = (p.dry_multiplier as f64 * (p.dry_base as f64).powf(e as f64)) as f32;
        l[t as usize] -= penalty;
    }
}

/// Mirostat's truncation at mu (version 1 or 2), from the header's description.
pub fn mirostat(l: &mut [f32], version: i32, mu: f64) {
    let ids = finite_ids(l);
    if ids.is_empty() {
        return;
    }
    let (w, total) = weights(l, &ids);
    let keep: Vec<bool> = if version == 2 {
        let mut keep: Vec<bool> = w.iter().map(|&x| -(x / total).log2() <= mu).collect();
        if !keep.iter().any(|&k| k) {
            let first_max = (0..w.len()).fold(0, |b, j| if w[j] > w[b] { j } else { b });
            keep[first_max] = true;
        }
        keep
    } else {
        let mut order: Vec<usize> = (0..ids.len()).collect();
        order.sort_by(|&a, &b| w[b].partial_cmp(&w[a]).unwrap().then(ids[a].cmp(&ids[b])));
        let n = ids.len();
        let mut k = 1.0f64;
        if n >= 2 {
            let (mut sum_tb, mut sum_tt) = (0.0f64, 0.0f64);
            for i in 0..(n - 1).min(99) {
                let t = ((i + 2) as f64 / (i + 1) as f64).ln();
                let b = (w[order[i]] / w[order[i + 1]]).ln();
                sum_tb += t * b;
                sum_tt += t * t;
            }
            let s_hat = sum_tb / sum_tt;
            let eps = s_hat - 1.0;
            k = (eps * 2f64.powf(mu) / (1.0 - (l.len() as f64).powf(-eps))).powf(1.0 / s_hat);
        }
        if !(k >= 1.0) {
            k = 1.0;
        }
        if k > n as f64 {
            k = n as f64;
        }
        let threshold = w[order[k as usize - 1]];
        w.iter().map(|&x| x >= threshold).collect()
    };
    for (j, &i) in ids.iter().enumerate() {
        if !keep[j] {
            l[i] = NEG_INF;
        }
    }
}

/// Mirostat's mu after a draw whose token had natural-log probability `logprob`.
pub fn mirostat_update(p: &Params, mu: f64, logprob: f64) -> f64 {
    let surprise = -logprob / 2f64.ln();
    mu - p.mirostat_eta as f64 * (surprise - p.mirostat_tau as f64)
}

/// Runs the chain in the header's order. Returns the processed logits, or `None` when every logit
/// ends masked (ferrite's FER_STATUS_NO_CANDIDATES). Logits must be free of NaN and +inf.
pub fn process(p: &Params, logits: &[f32], prompt: &[i32], generated: &[i32]) -> Option<Vec<f32>> {
    let mut l = logits.to_vec();
    let history: Vec<usize> = prompt.iter().chain(generated).map(|&t| t as usize).collect();
    for &(t, v) in &p.bias {
        let x = &mut l[t as usize];
        *x = if v == NEG_INF { NEG_INF } else { *x + v };
    }
    if p.repetition_penalty != 1.0 {
        let start = if p.repetition_window > 0 { history.len().saturating_sub(p.repetition_window as usize) } else { 0 };
        let distinct: HashSet<usize> = history[start..].iter().copied().collect();
        for t in distinct {
            let x = l[t];
            l[t] = if x > 0.0 { x / p.repetition_penalty } else { x * p.repetition_penalty };
        }
    }
    if p.frequency_penalty != 0.0 || p.presence_penalty != 0.0 {
        let mut counts: HashMap<usize, u32> = HashMap::new();
        for &t in generated {
            *counts.entry(t as usize).or_default() += 1;
        }
        for (t, n) in counts {
            l[t] -= p.frequency_penalty * n as f32 + p.presence_penalty;
        }
    }
    if p.no_repeat_ngram_size > 0 {
        let n = p.no_repeat_ngram_size as usize;
        let len = history.len();
        if len >= n - 1 {
            let prefix = &history[len - (n - 1)..];
            // every earlier n-gram whose first n-1 tokens equal the last n-1 bans its last token
            for start in 0..len {
                if start + n - 1 < len && &history[start..start + n - 1] == prefix {
                    l[history[start + n - 1]] = NEG_INF;
                }
            }
        }
    }
    if p.min_new_tokens > 0 && p.eos_token_id >= 0 && generated.len() < p.min_new_tokens as usize {
        l[p.eos_token_id as usize] = NEG_INF;
    }
    if p.dry_multiplier > 0.0 {
        dry(p, &mut l, &history);
    }
    if p.temperature == 0.0 {
        let mut best = 0;
        for i in 0..l.len() {
            if l[i] > l[best] {
                best = i;
            }
        }
        for (i, x) in l.iter_mut().enumerate() {
            if i != best {
                *x = NEG_INF;
            }
        }
    } else if p.temperature != 1.0 {
        for x in l.iter_mut() {
            *x /= p.temperature;
        }
    }
    if p.top_k > 0 {
        top_k(&mut l, p.top_k as usize);
    }
    if p.top_p < 1.0 {
        top_p(&mut l, p.top_p);
    }
    if p.min_p > 0.0 {
        min_p(&mut l, p.min_p);
    }
    if p.typical_p < 1.0 {
        typical_p(&mut l, p.typical_p);
    }
    if p.xtc_probability > 0.0 {
        xtc(&mut l, p.xtc_threshold, p.xtc_probability, uniform(p.seed, generated.len() as u64, 1));
    }
    if p.mirostat > 0 {
        mirostat(&mut l, p.mirostat, p.mu);
    }
    if l.iter().all(|&x| x == NEG_INF) {
        None
    } else {
        Some(l)
    }
}

/// The categorical draw over processed logits with uniform u: the first id in ascending order
/// whose running weight exceeds u x total; returns (token, ln p(token)).
pub fn draw(l: &[f32], u: f64) -> (i32, f64) {
    let ids = finite_ids(l);
    let (w, total) = weights(l, &ids);
    let target = u * total;
    let mut cum = 0.0;
    let mut pick = None;
    for j in 0..ids.len() {
        cum += w[j];
        if cum > target && w[j] > 0.0 {
            pick = Some(j);
            break;
        }
    }
    let j = pick.unwrap_or_else(|| (0..ids.len()).rev().find(|&j| w[j] > 0.0).unwrap());
    (ids[j] as i32, w[j].ln() - total.ln())
}

/// Probabilities of the processed distribution (0 for masked tokens).
pub fn probabilities(l: &[f32]) -> Vec<f64> {
    let ids = finite_ids(l);
    let (w, total) = weights(l, &ids);
    let mut p = vec![0.0; l.len()];
    for (j, &i) in ids.iter().enumerate() {
        p[i] = w[j] / total;
    }
    p
}
