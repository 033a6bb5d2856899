//! Conversions between f64 and the kernel float formats (f32, IEEE binary16, bfloat16).
//!
//! `round_to_format` is written from the definition (scale by the quantum, round half to even,
//! scale back) rather than taken from `half`, because half 1.6's `from_f64` (both f16 and bf16)
//! drops the low 32 bits of the f64 significand before rounding: a value just above a tie whose
//! excess sits in those bits rounds as a tie. `half`'s `from_f32` is correct round-to-nearest-even
//! (and keeps NaN a NaN); the unit tests below check the two agree on f32 inputs.

use half::{bf16, f16};

/// A binary floating-point format: explicit significand bits, minimum normal and maximum exponent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Format {
    pub mant_bits: i32,
    pub emin: i32,
    pub emax: i32,
}

impl Format {
    pub const F32: Format = Format {
        mant_bits: 23,
        emin: -126,
        emax: 127,
    };
    pub const F16: Format = Format {
        mant_bits: 10,
        emin: -14,
        emax: 15,
    };
    pub const BF16: Format = Format {
        mant_bits: 7,
        emin: -126,
        emax: 127,
    };

    /// Largest finite value.
    pub fn max_finite(self) -> f64 {
        (2.0 - 2f64.powi(-self.mant_bits)) * 2f64.powi(self.emax)
    }

    /// Smallest positive subnormal.
    pub fn min_subnormal(self) -> f64 {
        2f64.powi(self.emin - self.mant_bits)
    }
}

/// floor(log2(|x|)) for finite non-zero x (exact, from the bits).
fn exponent_of(x: f64) -> i32 {
    let bits = x.abs().to_bits();
    let e = ((bits >> 52) & 0x7ff) as i32;
    if e == 0 {
        // f64 subnormal: far below every target format's smallest subnormal
        -1023
    } else {
        e - 1023
    }
}

/// Rounds x to the nearest value of `fmt`, ties to even; overflow gives +-inf; NaN, +-inf and
/// +-0 pass through; an underflow to zero keeps x's sign. The result is an f64 holding a value
/// exactly representable in `fmt`.
pub fn round_to_format(x: f64, fmt: Format) -> f64 {
    if x.is_nan() || x.is_infinite() || x == 0.0 {
        return x;
    }
    let e = exponent_of(x).max(fmt.emin);
    let quantum = 2f64.powi(e - fmt.mant_bits); // >= 2^-149: a normal f64, exact
    let scaled = x / quantum; // exact: division by a power of two, no over/underflow here
    let y = scaled.round_ties_even() * quantum; // exact: an integer < 2^25 times a power of two
    if y.abs() > fmt.max_finite() {
        f64::INFINITY.copysign(x)
    } else if y == 0.0 {
        0.0f64.copysign(x)
    } else {
        y
    }
}

/// Distance between the two `fmt` values around |x| (the quantum at x's binade, subnormal floor).
pub fn ulp(x: f64, fmt: Format) -> f64 {
    let e = if x == 0.0 || !x.is_finite() {
        fmt.emin
    } else {
        exponent_of(x).max(fmt.emin)
    };
    2f64.powi(e.min(fmt.emax) - fmt.mant_bits)
}

/// The float element types the arithmetic kernels take.
pub trait Float: ferrite::Element + std::fmt::Debug {
    const FORMAT: Format;
    const NAME: &'static str;
    fn to_f64(self) -> f64;
    /// Correctly rounded (to nearest even) from f64.
    fn from_f64_rne(x: f64) -> Self;
    fn bits(self) -> u64;
    fn from_bits_u64(bits: u64) -> Self;
    fn is_nan(self) -> bool {
        self.to_f64().is_nan()
    }
}

impl Float for f32 {
    const FORMAT: Format = Format::F32;
    const NAME: &'static str = "f32";
    fn to_f64(self) -> f64 {
        self as f64
    }
    fn from_f64_rne(x: f64) -> Self {
        // Rust's `as` is round-to-nearest-even; the explicit rounding first only documents that.
        round_to_format(x, Format::F32) as f32
    }
    fn bits(self) -> u64 {
        self.to_bits() as u64
    }
    fn from_bits_u64(bits: u64) -> Self {
        f32::from_bits(bits as u32)
    }
}

impl Float for f16 {
    const FORMAT: Format = Format::F16;
    const NAME: &'static str = "f16";
    fn to_f64(self) -> f64 {
        f16::to_f64(self)
    }
    fn from_f64_rne(x: f64) -> Self {
        // The rounded value is exact in f32 and in f16, so half's conversion only re-encodes it.
        f16::from_f32(round_to_format(x, Format::F16) as f32)
    }
    fn bits(self) -> u64 {
        self.to_bits() as u64
    }
    fn from_bits_u64(bits: u64) -> Self {
        f16::from_bits(bits as u16)
    }
}

impl Float for bf16 {
    const FORMAT: Format = Format::BF16;
    const NAME: &'static str = "bf16";
    fn to_f64(self) -> f64 {
        bf16::to_f64(self)
    }
    fn from_f64_rne(x: f64) -> Self {
        bf16::from_f32(round_to_format(x, Format::BF16) as f32)
    }
    fn bits(self) -> u64 {
        self.to_bits() as u64
    }
    fn from_bits_u64(bits: u64) -> Self {
        bf16::from_bits(bits as u16)
    }
}

/// f16 -> f32, exact.
pub fn f16_to_f32(x: f16) -> f32 {
    x.to_f32()
}

/// bf16 -> f32, exact (the bf16 bits are the high half of the f32).
pub fn bf16_to_f32(x: bf16) -> f32 {
    x.to_f32()
}

/// f16 -> f64, exact.
pub fn f16_to_f64(x: f16) -> f64 {
    x.to_f64()
}

/// bf16 -> f64, exact.
pub fn bf16_to_f64(x: bf16) -> f64 {
    x.to_f64()
}

/// f16 from f64, correctly rounded (to nearest even); NaN stays NaN.
pub fn f16_from_f64(x: f64) -> f16 {
    <f16 as Float>::from_f64_rne(x)
}

/// bf16 from f64, correctly rounded (to nearest even); NaN stays NaN.
pub fn bf16_from_f64(x: f64) -> bf16 {
    <bf16 as Float>::from_f64_rne(x)
}

/// bf16 from f32, round to nearest even, NaN stays NaN (half's `from_f32`).
pub fn bf16_from_f32(x: f32) -> bf16 {
    bf16::from_f32(x)
}

/// f16 from f32, round to nearest even, NaN stays NaN (half's `from_f32`).
pub fn f16_from_f32(x: f32) -> f16 {
    f16::from_f32(x)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn splitmix(state: &mut u64) -> u64 {
        *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = *state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    // EVIDENCE: C-CONV-001 (the oracle's rounding agrees with half's correct f32 conversions)
    #[test]
    fn c_conv_001_oracle_rounding_matches_half_from_f32() {
        let mut s = 0x1234_5678u64;
        for i in 0..200_000u32 {
            let bits = if i < 70_000 {
                i.wrapping_mul(61_357)
            } else {
                splitmix(&mut s) as u32
            };
            let x = f32::from_bits(bits);
            let h = f16_from_f32(x);
            let b = bf16_from_f32(x);
            if x.is_nan() {
                assert!(h.is_nan() && b.is_nan(), "NaN {bits:#x} must stay NaN");
                continue;
            }
            let want_h = f16::from_f64_rne(x as f64);
            let want_b = bf16::from_f64_rne(x as f64);
            assert_eq!(h.to_bits(), want_h.to_bits(), "f16 of {x:e} ({bits:#010x})");
            assert_eq!(
                b.to_bits(),
                want_b.to_bits(),
                "bf16 of {x:e} ({bits:#010x})"
            );
        }
    }

    // EVIDENCE: C-CONV-001 (exact ties go to even; just above a tie goes up)
    #[test]
    fn c_conv_001_oracle_ties_to_even() {
        let b = |x: f64| bf16::from_f64_rne(x).to_f64();
        assert_eq!(b(1.0 + 2f64.powi(-8)), 1.0); // tie, 1.0 is even
        assert_eq!(b(1.0 + 3.0 * 2f64.powi(-8)), 1.0 + 2f64.powi(-6)); // tie, round up to even
        assert_eq!(b(1.0 + 2f64.powi(-8) + 2f64.powi(-40)), 1.0 + 2f64.powi(-7)); // above the tie
        let h = |x: f64| f16::from_f64_rne(x).to_f64();
        assert_eq!(h(1.0 + 2f64.powi(-11)), 1.0);
        assert_eq!(
            h(1.0 + 2f64.powi(-11) + 2f64.powi(-45)),
            1.0 + 2f64.powi(-10)
        );
        assert_eq!(h(65520.0), f64::INFINITY); // max 65504 + half ulp 16 ties to even: inf
        assert_eq!(h(65519.0), 65504.0);
        assert_eq!(h(2f64.powi(-25)), 0.0); // half the smallest subnormal: tie to 0
        assert_eq!(h(2f64.powi(-25) + 2f64.powi(-60)), 2f64.powi(-24));
        assert!(h(-1e-30).is_sign_negative());
        assert_eq!(f32::from_f64_rne(1.0 + 2f64.powi(-24)) as f64, 1.0);
        assert_eq!(ulp(1.0, Format::BF16), 2f64.powi(-7));
        assert_eq!(ulp(0.0, Format::F16), 2f64.powi(-24));
        assert_eq!(Format::F16.max_finite(), 65504.0);
        assert_eq!(Format::BF16.max_finite() as f32, bf16::MAX.to_f32());
    }
}
