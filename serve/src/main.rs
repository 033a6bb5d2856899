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

/// This process's rank as mpirun set it in the environment (Open MPI's OMPI_COMM_WORLD_RANK, or
/// PMIx's PMIX_RANK); 0 when neither is set. Read before the engine starts MPI, since rank 0 alone
/// listens for HTTP.
fn mpi_rank() -> u32 {
    ["OMPI_COMM_WORLD_RANK", "PMIX_RANK"]
        .iter()
        .find_map(|k| std::env::var(k).ok()?.parse().ok())
        .unwrap_or(0)
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
    if (opts.tp > 1 || opts.pp > 1) && mpi_rank() != 0 {
        // a tensor-parallel rank other than 0: no HTTP, its share of every step rank 0 runs
        if let Err(e) = ferrite_serve::ferrite_backend::follow_rank_0(&opts) {
            eprintln!("ferrite-serve: {e}");
            std::process::exit(1);
        }
        return;
    }
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
