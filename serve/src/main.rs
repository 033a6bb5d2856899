//! ferrite-serve: parses the options, opens the backend and serves until killed.

use ferrite_serve::args::{parse_args, Options, Parsed, USAGE};
use ferrite_serve::backend::Backend;
use ferrite_serve::fake::{FakeBackend, FakeConfig};
use std::io::Write;
use std::sync::Arc;

/// Opens the backend the options ask for. Runs on the engine thread (the backend never moves
/// between threads, so it need not be `Send`); an Err ends the program with that message.
fn open_backend(opts: &Options) -> Result<Box<dyn Backend>, String> {
    if opts.fake {
        let cfg = FakeConfig {
            n_ctx: opts.ctx.unwrap_or(4096),
            max_running: opts.parallel as usize,
            max_queued: opts.max_queued as usize,
            step_delay: opts.fake_delay,
            prefix_cache: opts.prefix_cache,
            ..FakeConfig::default()
        };
        return Ok(Box::new(FakeBackend::new(cfg, Arc::default())));
    }
    ferrite_serve::ferrite_backend::FerriteBackend::open(opts).map(|b| Box::new(b) as Box<dyn Backend>)
}

fn main() {
    let opts = match parse_args(std::env::args().skip(1)) {
        Ok(Parsed::Run(o)) => o,
        Ok(Parsed::Help) => {
            print!("{USAGE}");
            return;
        }
        Err(e) => {
            eprintln!("ferrite-serve: {e}");
            std::process::exit(2);
        }
    };
    let for_engine = opts.clone();
    let server = match ferrite_serve::start(&opts, Box::new(move || open_backend(&for_engine))) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("ferrite-serve: {e}");
            std::process::exit(1);
        }
    };
    println!("listening on http://{}", server.addr);
    let _ = std::io::stdout().flush();
    server.wait();
}
