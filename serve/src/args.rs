//! Command-line options, parsed by hand (clap is not packaged for these machines).
//!
//! `Options` is also what a backend reads at creation (model path, parallelism, KV budget,
//! threads, context, prefix cache), so it is the one place the server's configuration lives.

use std::path::PathBuf;
use std::time::Duration;

pub const USAGE: &str = "\
usage: ferrite-serve (--model PATH | --fake) [options]

An OpenAI-compatible HTTP server: POST /v1/chat/completions, POST /v1/completions,
POST /v1/embeddings, GET /v1/models, GET /health, GET /metrics; llama-server's POST /tokenize,
/detokenize and /apply-template.

  --model PATH        the GGUF model to serve
  --chat-template F   a Jinja chat template file to use instead of the model's own (a file
                      without one, such as a base model, needs it for chat requests)
  --fake              serve the deterministic fake backend (it echoes the prompt; for tests)
  --fake-delay-ms N   with --fake: milliseconds per engine step (default 0)
  --host HOST         address to listen on (default 127.0.0.1)
  --port N            port (default 8080; 0 = any free port). Prints `listening on http://HOST:PORT`
  --parallel N        sequences decoded together (default 4, 1..=1024)
  --kv-budget BYTES   KV cache memory budget, with K/M/G suffix (default: the engine's)
  --kv-dtype T        K and V element type: f32, f16, bf16 or q8_0 (8-bit blocks of 32, about
                      half of f16's bytes; default: the engine's)
  --threads N         engine CPU threads (default: the engine's)
  --ctx N             most tokens per request, prompt + completion (default: the model's)
  --max-queued N      requests waiting for a slot before 503 (default 64)
  --body-limit BYTES  largest request body, with K/M/G suffix (default 4M)
  --timeout SECS      a request's headers, and then its body, must arrive within this (default 10)
  --no-prefix-cache   do not reuse KV of shared prompt prefixes
  --matmul MODE       i8 (8-bit activations, llama.cpp's arithmetic; the default) or exact (f32)
  --tp N              tensor parallelism over the N processes of `mpirun -n N ferrite-serve ...`:
                      each holds 1/N of the model, rank 0 serves HTTP, the others follow it
  --pp N              pipeline parallelism over the N processes of `mpirun -n N ferrite-serve ...`:
                      each runs a run of the layers (rank 0 serves HTTP); the same answers, bit for bit;
                      with --tp T: N stages of T tensor-parallel processes each, `mpirun -n T*N`
  --tp-timeout SECS   with --tp or --pp: how long a rank waits for another in a step (default 30);
                      past it (a rank died) requests get 503 and the server exits with status 3
  --device D          cpu (the default) or cuda[:N]: where the forward pass runs (the CUDA backend is
                      being built: without a GPU, or until it runs, the server says so and exits)
  --tp-wire FORMAT    with --tp: the all-reduces' activations as f32 (the default) or q8_0 blocks
                      (3.76x fewer bytes, each sum off by up to half a step of its 8-bit blocks)
  -h, --help          this text

FERRITE_TEMPLATE_NOW=YYYY-MM-DD fixes the date chat templates print (reproducible prompts).
";

#[derive(Clone, Debug, PartialEq)]
pub struct Options {
    pub model: Option<PathBuf>,
    /// A Jinja file replacing the model's chat template (None: the model's).
    pub chat_template: Option<PathBuf>,
    pub fake: bool,
    pub fake_delay: Duration,
    pub host: String,
    pub port: u16,
    pub parallel: u32,
    pub kv_budget: Option<u64>,
    /// `ferrite::dtype` code of K and V (None: the engine's default)
    pub kv_dtype: Option<i32>,
    pub threads: Option<u32>,
    pub ctx: Option<u32>,
    pub max_queued: u32,
    pub body_limit: u64,
    pub timeout: Duration,
    pub prefix_cache: bool,
    /// `ferrite::matmul` mode (None: the engine's default).
    pub matmul: Option<i32>,
    /// Ranks of a tensor-parallel job (1: one process).
    pub tp: u32,
    /// Pipeline stages (1: one process).
    pub pp: u32,
    /// With tp or pp: seconds a rank waits for another inside a step (None: the engine's 30).
    pub tp_timeout: Option<u32>,
    /// With tp: `ferrite::tp_wire` (None: the engine's f32).
    pub tp_wire: Option<i32>,
    /// `ferrite::engine::device` and the CUDA device's index (None: the engine's CPU).
    pub device: Option<(i32, u32)>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            model: None,
            chat_template: None,
            fake: false,
            fake_delay: Duration::ZERO,
            host: "127.0.0.1".to_string(),
            port: 8080,
            parallel: 4,
            kv_budget: None,
            kv_dtype: None,
            threads: None,
            ctx: None,
            max_queued: 64,
            body_limit: 4 << 20,
            timeout: Duration::from_secs(10),
            prefix_cache: true,
            matmul: None,
            tp: 1,
            pp: 1,
            tp_timeout: None,
            tp_wire: None,
            device: None,
        }
    }
}

#[derive(Debug, PartialEq)]
pub enum Parsed {
    Run(Options),
    Help,
}

/// Parses a size: digits with an optional K, M or G suffix (binary: K = 1024), e.g. `512M`.
pub fn parse_size(s: &str) -> Result<u64, String> {
    let (digits, mult) = match s.as_bytes().last() {
        Some(b'K' | b'k') => (&s[..s.len() - 1], 1u64 << 10),
        Some(b'M' | b'm') => (&s[..s.len() - 1], 1u64 << 20),
        Some(b'G' | b'g') => (&s[..s.len() - 1], 1u64 << 30),
        _ => (s, 1),
    };
    let n: u64 = digits.parse().map_err(|_| format!("`{s}` is not a size (digits with K/M/G)"))?;
    n.checked_mul(mult).ok_or_else(|| format!("`{s}` is too large"))
}

/// `cpu`, `cuda` or `cuda:N` (N in 0..=4095, digits only) as a device code and index.
fn parse_device(v: &str) -> Result<(i32, u32), String> {
    let bad = || format!("--device: `{v}` is not cpu, cuda or cuda:N (N 0..4095)");
    match v {
        "cpu" => Ok((ferrite::engine::device::CPU, 0)),
        "cuda" => Ok((ferrite::engine::device::CUDA, 0)),
        _ => {
            let n = v.strip_prefix("cuda:").ok_or_else(bad)?;
            if n.is_empty() || n.len() > 4 || !n.bytes().all(|b| b.is_ascii_digit()) {
                return Err(bad());
            }
            let i: u32 = n.parse().map_err(|_| bad())?;
            if i > 4095 {
                return Err(bad());
            }
            Ok((ferrite::engine::device::CUDA, i))
        }
    }
}

fn parse_num<T>(flag: &str, v: &str, lo: T, hi: T) -> Result<T, String>
where
    T: std::str::FromStr + PartialOrd + std::fmt::Display + Copy,
{
    let n: T = v.parse().map_err(|_| format!("{flag}: `{v}` is not a number"))?;
    if n < lo || n > hi {
        return Err(format!("{flag}: {n} is outside {lo}..={hi}"));
    }
    Ok(n)
}

/// A KV dtype by its name (the engine's FERRITE_KV_DTYPE names).
fn parse_kv_dtype(v: &str) -> Result<i32, String> {
    use ferrite::dtype;
    match v {
        "f32" => Ok(dtype::F32),
        "f16" => Ok(dtype::F16),
        "bf16" => Ok(dtype::BF16),
        "q8_0" => Ok(dtype::Q8_0),
        _ => Err(format!("--kv-dtype: `{v}` is not f32, f16, bf16 or q8_0")),
    }
}

/// Parses the arguments after the program name. Accepts `--flag value` and `--flag=value`.
pub fn parse_args<I: IntoIterator<Item = String>>(args: I) -> Result<Parsed, String> {
    let mut o = Options::default();
    let mut it = args.into_iter();
    while let Some(arg) = it.next() {
        let (flag, inline) = match arg.split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f.to_string(), Some(v.to_string())),
            _ => (arg.clone(), None),
        };
        let value = |it: &mut I::IntoIter| -> Result<String, String> {
            match inline.clone() {
                Some(v) => Ok(v),
                None => it.next().ok_or_else(|| format!("{flag} needs a value")),
            }
        };
        match flag.as_str() {
            "-h" | "--help" => return Ok(Parsed::Help),
            "--model" => o.model = Some(PathBuf::from(value(&mut it)?)),
            "--chat-template" => o.chat_template = Some(PathBuf::from(value(&mut it)?)),
            "--fake" => o.fake = true,
            "--fake-delay-ms" => {
                o.fake_delay = Duration::from_millis(parse_num(&flag, &value(&mut it)?, 0, 60_000)?)
            }
            "--host" => o.host = value(&mut it)?,
            "--port" => o.port = parse_num(&flag, &value(&mut it)?, 0, 65535)?,
            "--parallel" => o.parallel = parse_num(&flag, &value(&mut it)?, 1, 1024)?,
            "--kv-budget" => o.kv_budget = Some(parse_size(&value(&mut it)?)?),
            "--kv-dtype" => o.kv_dtype = Some(parse_kv_dtype(&value(&mut it)?)?),
            "--threads" => o.threads = Some(parse_num(&flag, &value(&mut it)?, 1, 1024)?),
            "--ctx" => o.ctx = Some(parse_num(&flag, &value(&mut it)?, 1, 1 << 24)?),
            "--max-queued" => o.max_queued = parse_num(&flag, &value(&mut it)?, 0, 1 << 20)?,
            "--body-limit" => o.body_limit = parse_size(&value(&mut it)?)?,
            "--timeout" => o.timeout = Duration::from_secs(parse_num(&flag, &value(&mut it)?, 1, 3600)?),
            "--no-prefix-cache" => o.prefix_cache = false,
            "--matmul" => {
                o.matmul = Some(match value(&mut it)?.as_str() {
                    "i8" => ferrite::engine::matmul::I8,
                    "exact" => ferrite::engine::matmul::EXACT,
                    v => return Err(format!("--matmul: `{v}` is not i8 or exact")),
                })
            }
            "--tp" => o.tp = parse_num(&flag, &value(&mut it)?, 1, 4096)?,
            "--pp" => o.pp = parse_num(&flag, &value(&mut it)?, 1, 4096)?,
            "--tp-timeout" => o.tp_timeout = Some(parse_num(&flag, &value(&mut it)?, 1, 3600)?),
            "--device" => o.device = Some(parse_device(&value(&mut it)?)?),
            "--tp-wire" => {
                o.tp_wire = Some(match value(&mut it)?.as_str() {
                    "f32" => ferrite::engine::tp_wire::F32,
                    "q8_0" => ferrite::engine::tp_wire::Q8_0,
                    v => return Err(format!("--tp-wire: `{v}` is not f32 or q8_0")),
                })
            }
            _ => return Err(format!("unknown option `{arg}` (see --help)")),
        }
    }
    if o.model.is_none() && !o.fake {
        return Err("one of --model PATH or --fake is needed (see --help)".to_string());
    }
    if o.body_limit == 0 {
        return Err("--body-limit must be above 0".to_string());
    }
    Ok(Parsed::Run(o))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> Result<Parsed, String> {
        parse_args(s.split_whitespace().map(String::from))
    }

    #[test]
    fn defaults_and_values() {
        let Parsed::Run(o) = parse("--fake").unwrap() else { panic!() };
        assert_eq!(o.port, 8080);
        assert_eq!(o.host, "127.0.0.1");
        assert_eq!(o.body_limit, 4 << 20);
        assert_eq!(o.timeout, Duration::from_secs(10));
        let Parsed::Run(o) = parse(
            "--model m.gguf --host 0.0.0.0 --port=0 --parallel 8 --kv-budget 2G --threads 3 \
             --ctx 2048 --max-queued 5 --body-limit 512K --timeout 3 --no-prefix-cache",
        )
        .unwrap() else {
            panic!()
        };
        assert_eq!(o.model, Some(PathBuf::from("m.gguf")));
        assert_eq!(o.chat_template, None);
        let Parsed::Run(t) = parse("--model m.gguf --chat-template=t.jinja").unwrap() else { panic!() };
        assert_eq!(t.chat_template, Some(PathBuf::from("t.jinja")));
        assert_eq!((t.matmul, t.tp), (None, 1));
        let Parsed::Run(t) = parse("--model m.gguf --matmul exact --tp 2").unwrap() else { panic!() };
        assert_eq!((t.matmul, t.tp), (Some(ferrite::engine::matmul::EXACT), 2));
        let Parsed::Run(t) = parse("--model m.gguf --pp 3 --tp-timeout 5").unwrap() else { panic!() };
        assert_eq!((t.pp, t.tp_timeout), (3, Some(5)));
        let Parsed::Run(t) = parse("--model m.gguf --tp 2 --tp-wire q8_0").unwrap() else { panic!() };
        assert_eq!(t.tp_wire, Some(ferrite::engine::tp_wire::Q8_0));
        assert!(parse("--model m.gguf --tp 2 --tp-wire bf16").is_err());
        let Parsed::Run(t) = parse("--model m.gguf --device cuda:3").unwrap() else { panic!() };
        assert_eq!(t.device, Some((ferrite::engine::device::CUDA, 3)));
        let Parsed::Run(t) = parse("--model m.gguf --device cpu").unwrap() else { panic!() };
        assert_eq!(t.device, Some((ferrite::engine::device::CPU, 0)));
        for bad in ["gpu", "cuda:", "cuda:x", "cuda:4096", "cuda:+1", "CUDA", "cuda:00000"] {
            assert!(parse(&format!("--model m.gguf --device {bad}")).is_err(), "{bad}");
        }
        assert!(parse("--model m.gguf --matmul f16").is_err() && parse("--model m.gguf --tp 0").is_err());
        assert_eq!((o.port, o.parallel, o.threads, o.ctx), (0, 8, Some(3), Some(2048)));
        assert_eq!((o.kv_budget, o.body_limit), (Some(2 << 30), 512 << 10));
        assert_eq!((o.max_queued, o.timeout, o.prefix_cache), (5, Duration::from_secs(3), false));
    }

    #[test]
    fn errors() {
        assert_eq!(parse("--help"), Ok(Parsed::Help));
        assert!(parse("").is_err(), "no model and no --fake");
        assert!(parse("--fake --port 70000").is_err());
        assert!(parse("--fake --parallel 0").is_err());
        let Parsed::Run(o) = parse("--fake --kv-dtype q8_0").unwrap() else { panic!() };
        assert_eq!(o.kv_dtype, Some(ferrite::dtype::Q8_0));
        assert!(parse("--fake --kv-dtype q4_0").is_err());
        assert!(parse("--fake --kv-dtype F16").is_err());
        assert!(parse("--fake --kv-budget 12X").is_err());
        assert!(parse("--fake --bogus").is_err());
        assert!(parse("--fake --port").is_err(), "missing value");
        assert!(parse("--fake --chat-template").is_err(), "missing value");
        assert!(parse("--fake --body-limit 0").is_err());
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_size("4M"), Ok(4 << 20));
        assert_eq!(parse_size("7"), Ok(7));
        assert_eq!(parse_size("1g"), Ok(1 << 30));
        assert!(parse_size("M").is_err());
        assert!(parse_size("99999999999999999999G").is_err());
    }
}
