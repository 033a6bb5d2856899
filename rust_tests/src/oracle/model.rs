//! The f64 forward pass of a Llama-family model (architectures llama, qwen2, qwen3) over a GGUF
//! image read by [`crate::oracle::gguf`]: every weight dequantized exactly, every sum in f64.
//!
//! Per layer: h = rmsnorm(x) * attn_norm; q, k, v = W h (+ the attn_{q,k,v}.bias tensors where
//! the file has them: qwen2); qwen3 RMS-normalises each head of q and of k with
//! attn_q_norm / attn_k_norm (`[head_dim]`); RoPE on q and k with theta = `<arch>.rope.freq_base`
//! (10000 when absent) over `<arch>.rope.dimension_count` dims (head_dim when absent), pair i at
//! position p rotated by p * theta^(-2i/rot): llama pairs (2i, 2i+1), qwen2/qwen3 pair
//! (i, i + rot/2); causal attention, query head h reading kv head h / (n_head / n_head_kv), scale
//! 1/sqrt(head_dim); x += W_o att; h = rmsnorm(x) * ffn_norm; x += W_down(silu(W_gate h) * W_up h).
//! Then rmsnorm with output_norm and logits = W_out h, W_out = output.weight or, when absent,
//! token_embd.weight. Weights are GGUF `[in, out]`: `out` rows of `in` values.
//!
//! The whole sequence is run layer by layer (teacher forcing), so each weight is decoded once per
//! call; only the logits of the positions asked for are computed.

use crate::oracle::gguf::Gguf;
use crate::oracle::transformer::{rms_norm, rope, silu, softmax};

/// Hyper-parameters read from the `<arch>.*` keys.
#[derive(Clone, Debug, PartialEq)]
pub struct Hparams {
    pub arch: String,
    pub n_layer: usize,
    pub n_embd: usize,
    pub n_head: usize,
    pub n_head_kv: usize,
    pub head_dim: usize,
    pub n_ff: usize,
    pub n_vocab: usize,
    pub eps: f64,
    pub rope_theta: f64,
    pub rope_dims: usize,
    /// llama: pairs (2i, 2i+1) (GPT-J); qwen2/qwen3: (i, i + rot/2) (NeoX).
    pub rope_gptj: bool,
}

impl Hparams {
    pub fn read(g: &Gguf) -> Result<Hparams, String> {
        let arch = g.get_str("general.architecture")?.to_string();
        let rope_gptj = match arch.as_str() {
            "llama" => true,
            "qwen2" | "qwen3" => false,
            a => return Err(format!("architecture {} is not llama, qwen2 or qwen3", a)),
        };
        let k = |s: &str| format!("{}.{}", arch, s);
        let u = |s: &str| g.get_u64(&k(s)).map(|v| v as usize);
        let n_embd = u("embedding_length")?;
        let n_head = u("attention.head_count")?;
        let n_head_kv = match g.get(&k("attention.head_count_kv")) {
            Some(_) => u("attention.head_count_kv")?,
            None => n_head,
        };
        if n_head == 0 || n_head_kv == 0 || n_head % n_head_kv != 0 {
            return Err(format!("{} heads over {} kv heads", n_head, n_head_kv));
        }
        let head_dim = match g.get(&k("attention.key_length")) {
            Some(_) => u("attention.key_length")?,
            None => n_embd / n_head,
        };
        let rope_dims = match g.get(&k("rope.dimension_count")) {
            Some(_) => u("rope.dimension_count")?,
            None => head_dim,
        };
        if rope_dims > head_dim || rope_dims % 2 != 0 {
            return Err(format!("rope over {} of {} dims", rope_dims, head_dim));
        }
        let rope_theta = match g.get(&k("rope.freq_base")) {
            Some(_) => g.get_f64(&k("rope.freq_base"))?,
            None => 10000.0,
        };
        let embd = g.tensor("token_embd.weight").ok_or("token_embd.weight is absent")?;
        Ok(Hparams {
            n_layer: u("block_count")?,
            n_embd,
            n_head,
            n_head_kv,
            head_dim,
            n_ff: u("feed_forward_length")?,
            n_vocab: embd.rows().1,
            eps: g.get_f64(&k("attention.layer_norm_rms_epsilon"))?,
            rope_theta,
            rope_dims,
            rope_gptj,
            arch,
        })
    }
}

/// A weight matrix decoded to f64: `rows` rows of `cols` values (out rows of in values).
struct Matrix {
    cols: usize,
    rows: usize,
    w: Vec<f64>,
}

impl Matrix {
    fn load(g: &Gguf, name: &str, cols: usize, rows: usize) -> Result<Matrix, String> {
        let t = g.tensor(name).ok_or_else(|| format!("tensor {} is absent", name))?;
        if t.rows() != (cols, rows) {
            return Err(format!("{}: dims {:?}, expected [{}, {}]", name, t.dims, cols, rows));
        }
        Ok(Matrix { cols, rows, w: g.tensor_f64(name)? })
    }

    /// W x for one input vector.
    fn apply(&self, x: &[f64]) -> Vec<f64> {
        assert_eq!(x.len(), self.cols);
        (0..self.rows).map(|r| dot(&self.w[r * self.cols..(r + 1) * self.cols], x)).collect()
    }
}

/// The f64 dot product, four terms per iteration: the tests run unoptimised, where a plain
/// iterator chain costs several times more per term (SmolLM2's oracle does ~1e9 of them).
fn dot(a: &[f64], b: &[f64]) -> f64 {
    assert_eq!(a.len(), b.len());
    let (mut s0, mut s1, mut s2, mut s3) = (0.0, 0.0, 0.0, 0.0);
    let (ca, cb) = (a.chunks_exact(4), b.chunks_exact(4));
    let tail: f64 = ca.remainder().iter().zip(cb.remainder()).map(|(x, y)| x * y).sum();
    for (x, y) in ca.zip(cb) {
        s0 += x[0] * y[0];
        s1 += x[1] * y[1];
        s2 += x[2] * y[2];
        s3 += x[3] * y[3];
    }
    (s0 + s1) + (s2 + s3) + tail
}

fn vector(g: &Gguf, name: &str, len: usize) -> Result<Vec<f64>, String> {
    let t = g.tensor(name).ok_or_else(|| format!("tensor {} is absent", name))?;
    if t.n_elements() != len as u64 {
        return Err(format!("{}: dims {:?}, expected [{}]", name, t.dims, len));
    }
    g.tensor_f64(name)
}

fn optional_vector(g: &Gguf, name: &str, len: usize) -> Result<Option<Vec<f64>>, String> {
    match g.tensor(name) {
        Some(_) => vector(g, name, len).map(Some),
        None => Ok(None),
    }
}

fn add_bias(v: &mut [f64], b: &Option<Vec<f64>>) {
    if let Some(b) = b {
        for (x, y) in v.iter_mut().zip(b) {
            *x += y;
        }
    }
}

/// The oracle model over a parsed image.
pub struct Model<'g, 'a> {
    g: &'g Gguf<'a>,
    pub hp: Hparams,
}

impl<'g, 'a> Model<'g, 'a> {
    pub fn new(g: &'g Gguf<'a>) -> Result<Model<'g, 'a>, String> {
        Ok(Model { hp: Hparams::read(g)?, g })
    }

    /// Runs `ids` at positions 0.. and returns the next-token logits of positions `from..ids.len()`.
    pub fn logits(&self, ids: &[i32], from: usize) -> Result<Vec<Vec<f64>>, String> {
        let hs = self.hidden(ids, from)?;
        let (g, hp, e) = (self.g, &self.hp, self.hp.n_embd);
        let embd = g.tensor("token_embd.weight").ok_or("token_embd.weight is absent")?;
        let out = match g.tensor("output.weight") {
            Some(t) => t,
            None => embd,
        };
        if out.rows() != (e, hp.n_vocab) {
            return Err(format!("{}: dims {:?}, expected [{}, {}]", out.name, out.dims, e, hp.n_vocab));
        }
        // Row by row: the output matrix is the largest (SmolLM2: 49152 x 576), decoded once.
        let mut logits = vec![vec![0.0; hp.n_vocab]; hs.len()];
        let mut row = vec![0.0; e];
        for r in 0..hp.n_vocab {
            g.row_into(out, r, &mut row)?;
            for (lt, h) in logits.iter_mut().zip(&hs) {
                lt[r] = dot(&row, h);
            }
        }
        Ok(logits)
    }

    /// Runs `ids` at positions 0.. and returns the final states after the output norm of positions
    /// `from..ids.len()` (what the logits project, and what an embedding pools).
    pub fn hidden(&self, ids: &[i32], from: usize) -> Result<Vec<Vec<f64>>, String> {
        let (g, hp) = (self.g, &self.hp);
        let (n, e, hd) = (ids.len(), hp.n_embd, hp.head_dim);
        let (nq, nkv) = (hp.n_head * hd, hp.n_head_kv * hd);
        let group = hp.n_head / hp.n_head_kv;
        let scale = 1.0 / (hd as f64).sqrt();

        let embd = g.tensor("token_embd.weight").ok_or("token_embd.weight is absent")?;
        let mut x = Vec::with_capacity(n);
        for &id in ids {
            if id < 0 || id as usize >= hp.n_vocab {
                return Err(format!("id {} outside the vocabulary of {}", id, hp.n_vocab));
            }
            let mut row = vec![0.0; e];
            g.row_into(embd, id as usize, &mut row)?;
            x.push(row);
        }

        for l in 0..hp.n_layer {
            let name = |s: &str| format!("blk.{}.{}", l, s);
            let attn_norm = vector(g, &name("attn_norm.weight"), e)?;
            let wq = Matrix::load(g, &name("attn_q.weight"), e, nq)?;
            let wk = Matrix::load(g, &name("attn_k.weight"), e, nkv)?;
            let wv = Matrix::load(g, &name("attn_v.weight"), e, nkv)?;
            let bq = optional_vector(g, &name("attn_q.bias"), nq)?;
            let bk = optional_vector(g, &name("attn_k.bias"), nkv)?;
            let bv = optional_vector(g, &name("attn_v.bias"), nkv)?;
            let (q_norm, k_norm) = if hp.arch == "qwen3" {
                (Some(vector(g, &name("attn_q_norm.weight"), hd)?), Some(vector(g, &name("attn_k_norm.weight"), hd)?))
            } else {
                (None, None)
            };

            // q[t], k[t], v[t]: heads laid out [head][dim].
            let (mut qs, mut ks, mut vs) = (Vec::with_capacity(n), Vec::with_capacity(n), Vec::with_capacity(n));
            for (t, xt) in x.iter().enumerate() {
                let h = rms_norm(xt, Some(&attn_norm), hp.eps);
                let mut q = wq.apply(&h);
                let mut k = wk.apply(&h);
                let mut v = wv.apply(&h);
                add_bias(&mut q, &bq);
                add_bias(&mut k, &bk);
                add_bias(&mut v, &bv);
                let heads = |v: &mut Vec<f64>, norm: &Option<Vec<f64>>| {
                    for head in v.chunks_exact_mut(hd) {
                        let normed = match norm {
                            Some(w) => rms_norm(head, Some(w), hp.eps),
                            None => head.to_vec(),
                        };
                        let mut r = rope(&normed[..hp.rope_dims], t as f64, hp.rope_dims, hp.rope_theta, hp.rope_gptj);
                        r.extend_from_slice(&normed[hp.rope_dims..]);
                        head.copy_from_slice(&r);
                    }
                };
                heads(&mut q, &q_norm);
                heads(&mut k, &k_norm);
                qs.push(q);
                ks.push(k);
                vs.push(v);
            }
            drop((wq, wk, wv));

            let wo = Matrix::load(g, &name("attn_output.weight"), nq, e)?;
            for t in 0..n {
                let mut att = vec![0.0; nq];
                for head in 0..hp.n_head {
                    let kvh = head / group;
                    let q = &qs[t][head * hd..(head + 1) * hd];
                    let scores: Vec<f64> = (0..=t).map(|s| dot(q, &ks[s][kvh * hd..(kvh + 1) * hd]) * scale).collect();
                    let p = softmax(&scores);
                    let out = &mut att[head * hd..(head + 1) * hd];
                    for (s, ps) in p.iter().enumerate() {
                        for (o, vv) in out.iter_mut().zip(&vs[s][kvh * hd..(kvh + 1) * hd]) {
                            *o += ps * vv;
                        }
                    }
                }
                for (xi, oi) in x[t].iter_mut().zip(wo.apply(&att)) {
                    *xi += oi;
                }
            }
            drop(wo);

            let ffn_norm = vector(g, &name("ffn_norm.weight"), e)?;
            let wg = Matrix::load(g, &name("ffn_gate.weight"), e, hp.n_ff)?;
            let wu = Matrix::load(g, &name("ffn_up.weight"), e, hp.n_ff)?;
            let wd = Matrix::load(g, &name("ffn_down.weight"), hp.n_ff, e)?;
            for xt in x.iter_mut() {
                let h = rms_norm(xt, Some(&ffn_norm), hp.eps);
                let a: Vec<f64> = wg.apply(&h).iter().zip(wu.apply(&h)).map(|(gt, up)| silu(*gt) * up).collect();
                for (xi, di) in xt.iter_mut().zip(wd.apply(&a)) {
                    *xi += di;
                }
            }
        }

        let out_norm = vector(g, "output_norm.weight", e)?;
        Ok(x[from.min(n)..].iter().map(|xt| rms_norm(xt, Some(&out_norm), hp.eps)).collect())
    }
}
