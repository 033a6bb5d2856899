//! OpenBLAS as its users run it on this CPU: Debian's 0.3.21 is a DYNAMIC_ARCH build that picks
//! its kernels from the CPU it recognises at load time, and it does not know every CPU of this
//! project (Intel Emerald Rapids, family 6 model 207, loads as `Prescott`: an SSE3 kernel, 3.4x
//! slower than its AVX-512 one at 32x1024x1024; Zen 5 as `Haswell`). A user who benchmarks it sets
//! `OPENBLAS_CORETYPE` to the best kernel the library has for the CPU; [`best_core`] does that
//! for a benchmark process: when the variable is unset and the core OpenBLAS chose lacks an
//! instruction set the CPU has (AVX-512, else AVX2), the process runs itself again with it set
//! (the choice is made when the library loads, so only a new process can change it).

use std::ffi::CStr;
use std::os::raw::c_char;

#[link(name = "openblas")]
extern "C" {
    fn openblas_get_corename() -> *const c_char;
}

/// The core OpenBLAS runs with in this process (`SkylakeX`, `Haswell`, `Prescott`, ...).
pub fn corename() -> String {
    // SAFETY: OpenBLAS returns a static NUL-terminated string.
    unsafe { CStr::from_ptr(openblas_get_corename()) }.to_string_lossy().into_owned()
}

/// The best OpenBLAS kernel for this CPU: `Cooperlake` (AVX-512 with BF16), `SkylakeX`
/// (AVX-512), `Haswell` (AVX2 and FMA), or None.
pub fn best_for_cpu() -> Option<&'static str> {
    #[cfg(target_arch = "x86_64")]
    {
        let avx512 = is_x86_feature_detected!("avx512f")
            && is_x86_feature_detected!("avx512bw")
            && is_x86_feature_detected!("avx512vl")
            && is_x86_feature_detected!("avx512dq");
        if avx512 && is_x86_feature_detected!("avx512bf16") {
            return Some("Cooperlake");
        }
        if avx512 {
            return Some("SkylakeX");
        }
        if is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma") {
            return Some("Haswell");
        }
    }
    None
}

/// Whether a core name is one of OpenBLAS's kernels for that level or above.
fn covers(core: &str, best: &str) -> bool {
    let c = core.to_ascii_lowercase();
    let avx512 = ["skylakex", "cooperlake", "sapphirerapids"].iter().any(|k| c.contains(k));
    match best {
        "Cooperlake" | "SkylakeX" => avx512,
        "Haswell" => avx512 || ["haswell", "zen", "skylake"].iter().any(|k| c.contains(k)),
        _ => true,
    }
}

/// Runs this process again with `OPENBLAS_CORETYPE` set to [`best_for_cpu`] when the user has not
/// set it and OpenBLAS chose a weaker core (never returns then); prints the core it runs with.
pub fn best_core() {
    let core = corename();
    if std::env::var_os("OPENBLAS_CORETYPE").is_none() {
        if let Some(best) = best_for_cpu() {
            if !covers(&core, best) {
                use std::os::unix::process::CommandExt;
                eprintln!("openblas: it loaded as {core} on a CPU with {best}'s instruction sets; running again with OPENBLAS_CORETYPE={best}");
                let exe = std::env::current_exe().expect("the benchmark's own path");
                let err = std::process::Command::new(exe).args(std::env::args_os().skip(1)).env("OPENBLAS_CORETYPE", best).exec();
                panic!("could not run the benchmark again: {err}");
            }
        }
    }
    eprintln!(
        "openblas: core {core} (OPENBLAS_CORETYPE {})",
        std::env::var("OPENBLAS_CORETYPE").unwrap_or_else(|_| "unset: the library's own choice".to_string())
    );
}

#[cfg(test)]
mod tests {
    use super::covers;

    #[test]
    fn a_weaker_core_is_not_taken_for_the_best() {
        assert!(!covers("Prescott", "SkylakeX"));
        assert!(!covers("Prescott", "Haswell"));
        assert!(!covers("Zen", "SkylakeX")); // 0.3.21 on Zen 4/5: AVX2 kernels
        assert!(!covers("Haswell", "Cooperlake"));
        assert!(covers("Zen", "Haswell"));
        assert!(covers("SkylakeX", "Cooperlake"));
        assert!(covers("Cooperlake", "SkylakeX"));
    }
}
