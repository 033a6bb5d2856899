//! ferrite serve: an OpenAI-compatible HTTP server over ferrite's scheduler (being built: issue 21).

fn main() {
    eprintln!("ferrite-serve: not built yet (issue 21)");
    std::process::exit(2);
}
