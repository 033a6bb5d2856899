//! A deterministic backend for the server's own tests (and `ferrite-serve --fake`).
//!
//! Its vocabulary is bytes: token ids 0..=255 are the bytes themselves and `FAKE_EOS` ends a
//! sequence, so tokenizing is exact and every output is predictable. It "generates" the prompt
//! back: for a chat prompt, the last user message; otherwise the whole prompt. With a JSON grammar
//! it answers `{}`. Byte tokens split multi-byte characters, which exercises the streaming
//! detokenizer's empty pieces. Knobs make it slow (a delay per step) or full (few slots, a short
//! queue), and `FakeStats` counts what happened so tests can see cancellations.

use crate::backend::*;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

pub const FAKE_EOS: i32 = 256;
const USER_MARK: &[u8] = b"<|user|>\n";
const END_MARK: &[u8] = b"\n<|";

#[derive(Clone, Debug)]
pub struct FakeConfig {
    pub model_id: String,
    pub n_ctx: u32,
    /// Sequences generating at once.
    pub max_running: usize,
    /// Sequences waiting for a slot before `submit` answers QueueFull.
    pub max_queued: usize,
    /// Time one `step` takes (sleeps on the engine thread, like real compute).
    pub step_delay: Duration,
    pub prefix_cache: bool,
}

impl Default for FakeConfig {
    fn default() -> Self {
        FakeConfig {
            model_id: "ferrite-fake".to_string(),
            n_ctx: 4096,
            max_running: 4,
            max_queued: 64,
            step_delay: Duration::ZERO,
            prefix_cache: true,
        }
    }
}

/// Counters a test can hold on to while the backend lives on the engine thread.
#[derive(Debug, Default)]
pub struct FakeStats {
    pub submitted: AtomicU64,
    /// Live sequences that `cancel` ended.
    pub cancelled: AtomicU64,
    pub finished: AtomicU64,
    pub steps: AtomicU64,
}

impl FakeStats {
    pub fn get(&self, c: &AtomicU64) -> u64 {
        c.load(Ordering::SeqCst)
    }
}

struct Seq {
    id: u64,
    req: GenRequest,
    script: Vec<u8>,
    pos: usize,
    generated: u32,
    n_cached: u32,
    detok: Vec<u8>,
}

pub struct FakeBackend {
    cfg: FakeConfig,
    stats: Arc<FakeStats>,
    next_id: u64,
    running: Vec<Seq>,
    queued: VecDeque<Seq>,
    events: Vec<Event>,
    recent_prompts: VecDeque<Vec<i32>>,
    m: BackendMetrics,
}

impl FakeBackend {
    pub fn new(cfg: FakeConfig, stats: Arc<FakeStats>) -> Self {
        FakeBackend {
            cfg,
            stats,
            next_id: 1,
            running: Vec::new(),
            queued: VecDeque::new(),
            events: Vec::new(),
            recent_prompts: VecDeque::new(),
            m: BackendMetrics::default(),
        }
    }

    /// What the fake answers for a prompt: the last user message of a chat prompt, else the
    /// prompt itself; `{}` under a JSON grammar; under a required tool call's grammar, a call in
    /// the generic form of the first function the schema names, without arguments; under an auto
    /// choice's generic grammar (a call or a response), the echo as {"response": ...}.
    fn script_for(req: &GenRequest) -> Vec<u8> {
        if let Some(GrammarSpec::ToolCalls(schema)) = &req.params.grammar {
            let v: serde_json::Value = serde_json::from_str(schema).unwrap_or_default();
            let auto = v["anyOf"].as_array().is_some_and(|a| a.iter().any(|x| x["properties"].get("response").is_some()));
            if auto {
                let echo = Self::echo(req);
                return serde_json::json!({ "response": String::from_utf8_lossy(&echo) }).to_string().into_bytes();
            }
            let first = |v: &serde_json::Value| -> String {
                let text = v.to_string();
                let at = text.find("{\"const\":\"").map_or(text.len(), |i| i + 10);
                text[at..].split('"').next().unwrap_or("").to_string()
            };
            let name = first(&v);
            let call = serde_json::json!({"name": name, "arguments": {}});
            let body = if v["properties"].get("tool_calls").is_some() {
                serde_json::json!({ "tool_calls": [call] })
            } else {
                serde_json::json!({ "tool_call": call })
            };
            return body.to_string().into_bytes();
        }
        if matches!(req.params.grammar, Some(GrammarSpec::JsonObject | GrammarSpec::JsonSchema(_))) {
            return b"{}".to_vec();
        }
        Self::echo(req)
    }

    /// The last user message of a chat prompt, else the prompt itself.
    fn echo(req: &GenRequest) -> Vec<u8> {
        let bytes: Vec<u8> = req.prompt.iter().map(|&t| t as u8).collect();
        match rfind(&bytes, USER_MARK) {
            Some(at) => {
                let rest = &bytes[at + USER_MARK.len()..];
                let end = find(rest, END_MARK).unwrap_or(rest.len());
                rest[..end].to_vec()
            }
            None => bytes,
        }
    }

    fn finish(&mut self, s: Seq, finish: Finish) {
        let tail = String::from_utf8_lossy(&s.detok).into_owned().into_bytes();
        self.stats.finished.fetch_add(1, Ordering::SeqCst);
        self.events.push(Event::Finished {
            id: s.id,
            finish,
            tail,
            n_prompt: s.req.prompt.len() as u32,
            n_cached: s.n_cached,
            n_generated: s.generated,
        });
    }

    /// One token for `s`: Some(finish) when the sequence ends instead.
    fn advance(s: &mut Seq) -> (Option<TokenOut>, Option<Finish>) {
        if s.generated >= s.req.max_new_tokens {
            return (None, Some(Finish::Length));
        }
        let tok = if s.pos < s.script.len() {
            s.script[s.pos] as i32
        } else if s.req.params.ignore_eos {
            if s.script.is_empty() {
                b'.' as i32
            } else {
                s.script[s.pos % s.script.len()] as i32
            }
        } else {
            FAKE_EOS
        };
        s.pos += 1;
        if tok == FAKE_EOS || s.req.params.stop_ids.contains(&tok) {
            return (None, Some(Finish::Stop));
        }
        s.generated += 1;
        s.detok.push(tok as u8);
        let text = match std::str::from_utf8(&s.detok) {
            Ok(_) => std::mem::take(&mut s.detok),
            Err(e) if e.error_len().is_none() => Vec::new(), // an incomplete character: wait
            Err(_) => String::from_utf8_lossy(&std::mem::take(&mut s.detok)).into_owned().into_bytes(),
        };
        // logprobs only when asked, as the engine does
        let lp = if s.req.params.logprobs { -0.25f32 } else { 0.0 };
        let n_top = if s.req.params.logprobs { s.req.params.top_logprobs } else { 0 };
        let top = (0..n_top as i32)
            .map(|i| {
                let t = (tok + i) % 256;
                (t, vec![t as u8], if i == 0 { lp } else { lp - i as f32 })
            })
            .collect();
        let out = TokenOut { token: tok, text, token_bytes: vec![tok as u8], logprob: lp, top };
        (Some(out), None)
    }

    fn prefix_lookup(&mut self, prompt: &[i32]) -> u32 {
        if !self.cfg.prefix_cache {
            return 0;
        }
        let best = self
            .recent_prompts
            .iter()
            .map(|p| p.iter().zip(prompt).take_while(|(a, b)| a == b).count())
            .max()
            .unwrap_or(0);
        // A real cache never serves the whole prompt: the last token must be computed.
        let best = best.min(prompt.len().saturating_sub(1));
        if best > 0 {
            self.m.prefix_cache_hits += 1;
            self.m.prefix_cache_hit_tokens += best as u64;
        } else {
            self.m.prefix_cache_misses += 1;
        }
        self.recent_prompts.push_front(prompt.to_vec());
        self.recent_prompts.truncate(8);
        best as u32
    }
}

impl Backend for FakeBackend {
    fn model_id(&self) -> String {
        self.cfg.model_id.clone()
    }

    fn n_ctx(&self) -> u32 {
        self.cfg.n_ctx
    }

    fn tool_format(&self) -> u32 {
        ferrite::engine::tool_format::GENERIC
    }

    fn tokenize(&mut self, text: &str, _add_special: bool) -> Result<Vec<i32>, String> {
        Ok(text.bytes().map(i32::from).collect())
    }

    /// Eight dimensions: how many ids fall in each eighth of the byte range, unit length.
    fn embed(&mut self, ids: &[i32]) -> Result<Vec<f32>, String> {
        let mut v = [0f32; 8];
        for &t in ids {
            v[(t.clamp(0, 255) / 32) as usize] += 1.0;
        }
        let n = v.iter().map(|x| x * x).sum::<f32>().sqrt();
        Ok(v.iter().map(|x| x / n).collect())
    }

    fn n_embd(&self) -> u32 {
        8
    }

    /// Byte tokens: every token after the first at ln(1/2), its top alternatives itself and the
    /// next byte value at ln(1/4).
    fn prompt_logprobs(&mut self, ids: &[i32], top_n: u32) -> Result<Vec<crate::backend::PromptToken>, String> {
        let bytes = self.detokenize(ids)?;
        Ok(bytes
            .iter()
            .enumerate()
            .map(|(i, &b)| crate::backend::PromptToken {
                bytes: vec![b],
                text_offset: i,
                logprob: (i > 0).then_some(0.5f32.ln()),
                top: if i == 0 { vec![] } else { [(vec![b], 0.5f32.ln()), (vec![b.wrapping_add(1)], 0.25f32.ln())].into_iter().take(top_n as usize).collect() },
            })
            .collect())
    }

    fn detokenize(&mut self, ids: &[i32]) -> Result<Vec<u8>, String> {
        ids.iter()
            .map(|&t| u8::try_from(t).map_err(|_| format!("token {t} is not in the vocabulary (0..256)")))
            .collect()
    }

    fn render_chat(&mut self, request_json: &str) -> Result<String, String> {
        let v: serde_json::Value = serde_json::from_str(request_json).map_err(|e| format!("request: {e}"))?;
        let messages = v["messages"].as_array().ok_or("request: no messages")?;
        let mut s = String::new();
        for m in messages {
            let role = m["role"].as_str().unwrap_or("");
            if !matches!(role, "system" | "user" | "assistant" | "tool") {
                return Err(format!("the chat template has no role `{role}`"));
            }
            if role == "tool" && m.get("tool_call_id").is_none() {
                // as a real template raises on a conversation it cannot take
                return Err("Tool messages need a tool_call_id (the fake template)".to_string());
            }
            let content = match &m["content"] {
                serde_json::Value::String(c) => c.clone(),
                serde_json::Value::Array(parts) => {
                    parts.iter().map(|p| p["text"].as_str().unwrap_or("")).collect::<Vec<_>>().join("\n")
                }
                _ => String::new(),
            };
            s.push_str(&format!("<|{role}|>\n{content}\n"));
        }
        s.push_str("<|assistant|>\n");
        Ok(s)
    }

    fn submit(&mut self, r: GenRequest) -> Result<u64, SubmitError> {
        if let Some(&bad) = r.prompt.iter().find(|&&t| !(0..=FAKE_EOS).contains(&t)) {
            return Err(SubmitError::Invalid(format!("token id {bad} is outside the vocabulary")));
        }
        if r.prompt.len() + r.max_new_tokens as usize > self.cfg.n_ctx as usize {
            return Err(SubmitError::TooLarge("prompt + max tokens exceed the context".into()));
        }
        if self.running.len() + self.queued.len() >= self.cfg.max_running + self.cfg.max_queued {
            return Err(SubmitError::QueueFull { retry_after_s: 1 });
        }
        let id = self.next_id;
        self.next_id += 1;
        self.stats.submitted.fetch_add(1, Ordering::SeqCst);
        let n_cached = self.prefix_lookup(&r.prompt);
        let script = Self::script_for(&r);
        let s = Seq { id, req: r, script, pos: 0, generated: 0, n_cached, detok: Vec::new() };
        self.queued.push_back(s);
        Ok(id)
    }

    fn cancel(&mut self, id: u64) {
        let s = if let Some(i) = self.running.iter().position(|s| s.id == id) {
            self.running.remove(i)
        } else if let Some(i) = self.queued.iter().position(|s| s.id == id) {
            self.queued.remove(i).unwrap()
        } else {
            return;
        };
        self.stats.cancelled.fetch_add(1, Ordering::SeqCst);
        self.finish(s, Finish::Cancelled);
    }

    fn step(&mut self) -> bool {
        while self.running.len() < self.cfg.max_running {
            match self.queued.pop_front() {
                Some(s) => self.running.push(s),
                None => break,
            }
        }
        if self.running.is_empty() {
            return false;
        }
        if !self.cfg.step_delay.is_zero() {
            std::thread::sleep(self.cfg.step_delay);
        }
        self.m.steps += 1;
        self.stats.steps.fetch_add(1, Ordering::SeqCst);
        let mut i = 0;
        while i < self.running.len() {
            let (tok, fin) = Self::advance(&mut self.running[i]);
            if let Some(tok) = tok {
                self.events.push(Event::Token { id: self.running[i].id, tok });
            }
            match fin {
                Some(f) => {
                    let s = self.running.remove(i);
                    self.finish(s, f);
                }
                None => i += 1,
            }
        }
        true
    }

    fn drain(&mut self, out: &mut Vec<Event>) {
        out.append(&mut self.events);
    }

    fn metrics(&self) -> BackendMetrics {
        BackendMetrics {
            running: self.running.len() as u32,
            queued: self.queued.len() as u32,
            kv_committed_bytes: 1024
                * self.running.iter().map(|s| s.req.prompt.len() as u64 + s.generated as u64).sum::<u64>(),
            ..self.m
        }
    }

    fn idle(&self) -> bool {
        self.running.is_empty() && self.queued.is_empty() && self.events.is_empty()
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

fn rfind(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).rposition(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(prompt: &str, max: u32) -> GenRequest {
        GenRequest {
            prompt: prompt.bytes().map(i32::from).collect(),
            max_new_tokens: max,
            params: GenParams::greedy(0),
        }
    }

    fn run(b: &mut FakeBackend) -> Vec<Event> {
        let mut ev = Vec::new();
        while b.step() {}
        b.drain(&mut ev);
        ev
    }

    fn text(ev: &[Event]) -> (String, Option<Finish>) {
        let mut s = Vec::new();
        let mut fin = None;
        for e in ev {
            match e {
                Event::Token { tok, .. } => s.extend_from_slice(&tok.text),
                Event::Finished { finish, tail, .. } => {
                    s.extend_from_slice(tail);
                    fin = Some(finish.clone());
                }
            }
        }
        (String::from_utf8(s).unwrap(), fin)
    }

    #[test]
    fn echoes_the_prompt_or_the_last_user_message() {
        let mut b = FakeBackend::new(FakeConfig::default(), Arc::default());
        b.submit(req("héllo", 100)).unwrap();
        assert_eq!(text(&run(&mut b)), ("héllo".into(), Some(Finish::Stop)));
        let m = r#"{"messages": [{"role": "system", "content": "sys"}, {"role": "user", "content": "hi there"}]}"#;
        let p = b.render_chat(m).unwrap();
        b.submit(req(&p, 100)).unwrap();
        assert_eq!(text(&run(&mut b)), ("hi there".into(), Some(Finish::Stop)));
        assert!(b.idle());
    }

    #[test]
    fn length_stop_ids_and_cancel() {
        let stats = Arc::new(FakeStats::default());
        let mut b = FakeBackend::new(FakeConfig::default(), stats.clone());
        b.submit(req("abcdef", 3)).unwrap();
        assert_eq!(text(&run(&mut b)), ("abc".into(), Some(Finish::Length)));
        let mut r = req("abcdef", 100);
        r.params.stop_ids = vec![b'd' as i32];
        b.submit(r).unwrap();
        assert_eq!(text(&run(&mut b)), ("abc".into(), Some(Finish::Stop)));
        let id = b.submit(req("abcdef", 100)).unwrap();
        b.step();
        b.cancel(id);
        b.cancel(id); // a second cancel is a no-op
        assert_eq!(text(&run(&mut b)), ("a".into(), Some(Finish::Cancelled)));
        assert_eq!(stats.get(&stats.cancelled), 1);
    }

    #[test]
    fn queue_full() {
        let cfg = FakeConfig { max_running: 1, max_queued: 1, ..FakeConfig::default() };
        let mut b = FakeBackend::new(cfg, Arc::default());
        b.submit(req("a", 5)).unwrap();
        b.submit(req("b", 5)).unwrap();
        assert_eq!(b.submit(req("c", 5)), Err(SubmitError::QueueFull { retry_after_s: 1 }));
    }

    #[test]
    fn split_characters_give_empty_text_pieces() {
        let mut b = FakeBackend::new(FakeConfig::default(), Arc::default());
        b.submit(req("é", 10)).unwrap();
        let ev = run(&mut b);
        let Event::Token { tok, .. } = &ev[0] else { panic!() };
        assert!(tok.text.is_empty());
        assert_eq!(tok.token_bytes, vec![0xC3]);
        let Event::Token { tok, .. } = &ev[1] else { panic!() };
        assert_eq!(tok.text, "é".as_bytes());
    }
}
