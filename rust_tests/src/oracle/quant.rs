//! Block-quantized formats decoded from their specifications, independently of the C code:
//! llama.cpp's `block_q4_0` (f16 d; 16 bytes of nibbles, value (q - 8) d), `block_q4_1` (f16 d,
//! f16 m; nibbles, value q d + m), `block_q8_0` (f16 d; 32 int8, value q d), and OCP MX v1.0
//! MXFP4 in the original system's 17-byte block (E8M0 scale byte, then 16 bytes of E2M1 codes).
//! In every 4-bit format element o < 16 is the low nibble of byte o of the codes and element
//! o >= 16 the high nibble of byte o - 16.

use half::f16;

/// The formats, with their dtype codes in ferrite.h.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QFormat {
    Mxfp4,
    Q4_0,
    Q4_1,
    Q8_0,
}

impl QFormat {
    pub const ALL: [QFormat; 4] = [QFormat::Mxfp4, QFormat::Q4_0, QFormat::Q4_1, QFormat::Q8_0];

    pub fn block_bytes(self) -> usize {
        match self {
            QFormat::Mxfp4 => 17,
            QFormat::Q4_0 => 18,
            QFormat::Q4_1 => 20,
            QFormat::Q8_0 => 34,
        }
    }

    pub fn dtype(self) -> i32 {
        match self {
            QFormat::Mxfp4 => 16,
            QFormat::Q4_0 => 17,
            QFormat::Q4_1 => 18,
            QFormat::Q8_0 => 19,
        }
    }
}

/// OCP MX E2M1: sign bit 3, exponent bits 2-1 (bias 1), mantissa bit 0; exponent 0 is subnormal.
pub fn e2m1(code: u8) -> f32 {
    let sign = if code & 8 != 0 { -1.0f32 } else { 1.0 };
    let e = (code >> 1) & 3;
    let m = (code & 1) as f32;
    let mag = if e == 0 { m * 0.5 } else { (1.0 + m * 0.5) * 2f32.powi(e as i32 - 1) };
    sign * mag
}

/// OCP MX E8M0: 2^(code - 127); 255 is NaN.
pub fn e8m0(code: u8) -> f32 {
    if code == 255 {
        f32::NAN
    } else {
        2f64.powi(code as i32 - 127) as f32
    }
}

fn f16_at(b: &[u8]) -> f32 {
    f16::from_bits(u16::from_le_bytes([b[0], b[1]])).to_f32()
}

fn nibble(codes: &[u8], o: usize) -> u8 {
    if o < 16 {
        codes[o] & 0xF
    } else {
        codes[o - 16] >> 4
    }
}

/// The 32 values of one block.
pub fn dequant_block(f: QFormat, b: &[u8]) -> [f32; 32] {
    assert_eq!(b.len(), f.block_bytes());
    let mut out = [0f32; 32];
    for (o, v) in out.iter_mut().enumerate() {
        *v = match f {
            QFormat::Mxfp4 => e2m1(nibble(&b[1..], o)) * e8m0(b[0]),
            QFormat::Q4_0 => (nibble(&b[2..], o) as i32 - 8) as f32 * f16_at(b),
            QFormat::Q4_1 => nibble(&b[4..], o) as f32 * f16_at(b) + f16_at(&b[2..]),
            QFormat::Q8_0 => (b[2 + o] as i8) as f32 * f16_at(b),
        };
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    // EVIDENCE: C-Q-001 (the oracle against hand-decoded blocks)
    #[test]
    fn c_q_001_oracle_known_blocks() {
        let table: Vec<f32> = (0..16).map(e2m1).collect();
        assert_eq!(&table[..8], &[0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0]);
        assert_eq!(&table[9..], &[-0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0]);
        assert!(table[8] == 0.0 && table[8].is_sign_negative());
        assert_eq!(e8m0(127), 1.0);
        assert_eq!(e8m0(0), 2f32.powi(-127));
        assert!(e8m0(255).is_nan());
        // MXFP4: scale 2^1, byte 1 = 0x71: element 0 code 1 (0.5), element 16 code 7 (6)
        let mut b = [0u8; 17];
        b[0] = 128;
        b[1] = 0x71;
        let v = dequant_block(QFormat::Mxfp4, &b);
        assert_eq!((v[0], v[16], v[1]), (1.0, 12.0, 0.0));
        // Q4_0: d = 0.5, byte 0 = 0x0F: element 0 is (15 - 8) * 0.5, element 16 (0 - 8) * 0.5
        let mut q = [0u8; 18];
        q[..2].copy_from_slice(&f16::from_f32(0.5).to_bits().to_le_bytes());
        q[2] = 0x0F;
        let v = dequant_block(QFormat::Q4_0, &q);
        assert_eq!((v[0], v[16], v[1]), (3.5, -4.0, -4.0));
        // Q4_1: d = 2, m = -1: nibble 3 gives 5
        let mut q = [0u8; 20];
        q[..2].copy_from_slice(&f16::from_f32(2.0).to_bits().to_le_bytes());
        q[2..4].copy_from_slice(&f16::from_f32(-1.0).to_bits().to_le_bytes());
        q[4] = 0x03;
        assert_eq!(dequant_block(QFormat::Q4_1, &q)[0], 5.0);
        // Q8_0: d = 0.25, q = -128
        let mut q = [0u8; 34];
        q[..2].copy_from_slice(&f16::from_f32(0.25).to_bits().to_le_bytes());
        q[2] = 0x80;
        assert_eq!(dequant_block(QFormat::Q8_0, &q)[0], -32.0);
    }
}
