//! Links the ferrite C library into this crate.
//!
//! - `FERRITE_LIB_DIR` set: link the Bazel-built merged archive `$FERRITE_LIB_DIR/libferrite.a`
//!   (it includes the real CUDA objects) plus the static CUDA runtime from `CUDA_LIB_DIR`
//!   (default `/usr/local/cuda/lib64`) and the system libraries cudart_static needs.
//! - otherwise (so a plain `cargo test` works): compile every `*.c` under `c/` with the `cc` crate,
//!   except `c/cuda/cuda_api.c` (the CUDA build replaces `c/cuda/cuda_stub.c` with it), `c/tools/`,
//!   `c/testing/` (helpers of the C unit tests), `*_test.c` and `*_bench.c` files, with `-std=c11 -O2 -g1 -pthread
//!   -D_GNU_SOURCE` plus `-ffp-contract=off` as in c/defs.bzl.
//!
//! - `FERRITE_CC_OPT_LEVEL` (without `FERRITE_LIB_DIR`; 0-3, default 2): the cc build's `-O`
//!   level. `make test` compiles the fallback at 0 to check that it builds, links and runs (the C
//!   at `-O2` takes minutes on two cores; the Rust tests run over Bazel's archive there).
//! - `FERRITE_SANITIZER_LIBS` (with `FERRITE_LIB_DIR`, e.g. `asan ubsan`): the runtimes a
//!   sanitized archive needs, linked into everything that links this crate. A build-script
//!   directive, not RUSTFLAGS, so no other crate is built again for the sanitizer run.
//!
//! Bazel is never run from here (two servers would fight over the output base lock): the top-level
//! script builds with Bazel first and exports the directory.

use std::env;
use std::fs;
use std::path::{Path, PathBuf};

fn main() {
    println!("cargo:rerun-if-env-changed=FERRITE_LIB_DIR");
    println!("cargo:rerun-if-env-changed=CUDA_LIB_DIR");
    println!("cargo:rerun-if-env-changed=FERRITE_SANITIZER_LIBS");
    println!("cargo:rerun-if-env-changed=FERRITE_CC_OPT_LEVEL");
    println!("cargo:rerun-if-changed=build.rs");

    match env::var_os("FERRITE_LIB_DIR") {
        Some(dir) if !dir.is_empty() => link_prebuilt(PathBuf::from(dir)),
        _ => build_fallback(),
    }
}

fn link_prebuilt(dir: PathBuf) {
    // the sanitizer runtimes first: ASan wants its runtime early in the library order
    for lib in env::var("FERRITE_SANITIZER_LIBS").unwrap_or_default().split_whitespace() {
        assert!(
            lib.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'),
            "FERRITE_SANITIZER_LIBS: `{lib}` is not a library name"
        );
        println!("cargo:rustc-link-lib=dylib={}", lib);
    }
    let archive = dir.join("libferrite.a");
    if !archive.is_file() {
        panic!(
            "FERRITE_LIB_DIR={} does not contain libferrite.a (build it with Bazel first, or unset \
             FERRITE_LIB_DIR to compile the C sources with cc)",
            dir.display()
        );
    }
    println!("cargo:rerun-if-changed={}", archive.display());
    warn_if_older_than_sources(&archive);
    println!("cargo:rustc-link-search=native={}", dir.display());
    println!("cargo:rustc-link-lib=static=ferrite");

    let cuda = env::var("CUDA_LIB_DIR").unwrap_or_else(|_| "/usr/local/cuda/lib64".to_string());
    println!("cargo:rustc-link-search=native={}", cuda);
    println!("cargo:rustc-link-lib=static=cudart_static");
    link_system_libraries();
    for lib in ["stdc++", "dl", "rt", "pthread", "m"] {
        println!("cargo:rustc-link-lib=dylib={}", lib);
    }
}

/// A warning when a C source or header changed after the archive was written: cargo links
/// whatever archive is there, so a benchmark run after `bazel test` (which does not rebuild
/// //:libferrite_static) measures the old code without a word. (Bazel leaves the archive as it is
/// when a change leaves every object the same, e.g. a comment: then the warning is a false alarm.)
fn warn_if_older_than_sources(archive: &Path) {
    let manifest = PathBuf::from(env::var("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR"));
    let root = match manifest.join("../..").canonicalize() {
        Ok(r) => r,
        Err(_) => return,
    };
    let c_dir = root.join("c");
    println!("cargo:rerun-if-changed={}", c_dir.display());
    let built = match fs::metadata(archive).and_then(|m| m.modified()) {
        Ok(t) => t,
        Err(_) => return,
    };
    let mut newest: Option<(std::time::SystemTime, PathBuf)> = None;
    let mut stack = vec![c_dir, root.join("ffi")];
    while let Some(dir) = stack.pop() {
        for entry in fs::read_dir(&dir).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
                continue;
            }
            let ext = path.extension().and_then(|e| e.to_str()).unwrap_or("");
            if !["c", "h", "inc", "cu"].contains(&ext) {
                continue;
            }
            if let Ok(t) = entry.metadata().and_then(|m| m.modified()) {
                if newest.as_ref().map_or(true, |(n, _)| t > *n) {
                    newest = Some((t, path));
                }
            }
        }
    }
    if let Some((t, path)) = newest {
        if t > built {
            println!(
                "cargo:warning={} is older than {}: if that change altered code, run `bazel build \
                 //:libferrite_static` first (cargo links the archive as it is)",
                archive.display(),
                path.strip_prefix(&root).unwrap_or(&path).display()
            );
        }
    }
}

fn build_fallback() {
    let manifest = PathBuf::from(env::var("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR"));
    let root = manifest
        .join("../..")
        .canonicalize()
        .expect("repository root");
    let c_dir = root.join("c");
    let ffi_dir = root.join("ffi");

    println!("cargo:rerun-if-changed={}", c_dir.display());
    println!(
        "cargo:rerun-if-changed={}",
        ffi_dir.join("ferrite.h").display()
    );

    let mut sources = Vec::new();
    collect_sources(&c_dir, &c_dir, &mut sources);
    sources.sort();
    if sources.is_empty() {
        println!(
            "cargo:warning=no C sources under {}; the ferrite symbols will be missing at link time",
            c_dir.display()
        );
        return;
    }

    let units = unique_units(&c_dir, &sources);
    let mut build = cc::Build::new();
    build
        .files(&units)
        .include(&ffi_dir)
        .include(&c_dir)
        .opt_level(cc_opt_level())
        // line tables (-g1) instead of cargo's full debug info in the test profile: backtraces
        // keep their files and lines, and the C compiles in two thirds of the time (the 8-bit
        // kernels: 22 -> 18 s a file)
        .debug(false)
        .flag("-g1")
        .flag("-std=c11")
        .flag("-pthread")
        // as c/defs.bzl's FER_COPTS: no silent a*b+c fusion, so results match the Bazel build
        .flag("-ffp-contract=off")
        .define("_GNU_SOURCE", None);
    build.compile("ferrite");

    link_system_libraries();
    println!("cargo:rustc-link-lib=dylib=m");
    println!("cargo:rustc-link-lib=dylib=pthread");
}

/// One file per source in OUT_DIR, named after its path under `c/` (`grammar__lexer.c`), that
/// includes the source: cc names each object after its source's file name alone, so two sources of
/// the same name in different folders (`c/grammar/lexer.c`, `c/template/lexer.c`) overwrote one
/// object with the other and the link missed the first's symbols. Diagnostics and debug lines still
/// name the real file.
fn unique_units(c_dir: &Path, sources: &[PathBuf]) -> Vec<PathBuf> {
    let dir = PathBuf::from(env::var("OUT_DIR").expect("OUT_DIR")).join("units");
    fs::create_dir_all(&dir).expect("OUT_DIR/units");
    sources
        .iter()
        .map(|src| {
            let rel = src.strip_prefix(c_dir).unwrap_or(src);
            let name = rel.to_string_lossy().replace('/', "__");
            let unit = dir.join(name);
            let text = format!("#include \"{}\"\n", src.display());
            if fs::read_to_string(&unit).ok().as_deref() != Some(text.as_str()) {
                fs::write(&unit, text).expect("write a unit file");
            }
            unit
        })
        .collect()
}

/// `FERRITE_CC_OPT_LEVEL` when set (a level from 0 to 3), else 2.
fn cc_opt_level() -> u32 {
    match env::var("FERRITE_CC_OPT_LEVEL") {
        Err(_) => 2,
        Ok(v) => match v.trim().parse::<u32>() {
            Ok(level) if level <= 3 => level,
            _ => panic!("FERRITE_CC_OPT_LEVEL={v}: give an optimisation level from 0 to 3"),
        },
    }
}

/// The Debian libraries the tokenizer uses (c/tokenizer/BUILD.bazel's linkopts).
fn link_system_libraries() {
    // mpi: c/comm's collectives (Open MPI from Debian's libopenmpi-dev) for tensor parallelism
    for lib in ["pcre2-8", "cjson", "utf8proc", "mpi"] {
        println!("cargo:rustc-link-lib=dylib={}", lib);
    }
}

/// Every `*.c` below `dir`, minus `c/cuda/cuda_api.c`, `c/tools/`, `c/testing/`, `*_test.c`, the
/// libFuzzer harnesses `*_fuzz.c` and the benchmark programs `*_bench.c`.
fn collect_sources(c_dir: &Path, dir: &Path, out: &mut Vec<PathBuf>) {
    let entries = match fs::read_dir(dir) {
        Ok(e) => e,
        Err(_) => return,
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let rel = path.strip_prefix(c_dir).unwrap_or(&path).to_path_buf();
        if path.is_dir() {
            // c/tools: programs with their own main; c/testing: the C unit tests' helpers
            if rel == Path::new("tools") || rel == Path::new("testing") {
                continue;
            }
            collect_sources(c_dir, &path, out);
        } else {
            let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
            if !name.ends_with(".c") || name.ends_with("_test.c") || name.ends_with("_fuzz.c") || name.ends_with("_bench.c") {
                continue;
            }
            if rel == Path::new("cuda/cuda_api.c") {
                continue;
            }
            out.push(path);
        }
    }
}
