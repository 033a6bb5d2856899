//! A GGUF reader for the oracle, written from the format's specification (ggml's docs/gguf.md),
//! not from the C loader: the header (magic "GGUF", version 3, tensor count, key/value count, all
//! little-endian), the key/values, the tensor infos (name, dims innermost first, ggml type, offset
//! relative to the data section), and the data section at the next multiple of
//! `general.alignment` (32 when absent) after the infos.
//!
//! Tensor data comes out as f64, exactly: F32, F16, and llama.cpp's block formats Q4_0, Q4_1 and
//! Q8_0 ([`decode_row`] states the layouts). Every read is bounds-checked: a short or malformed
//! image is an `Err` naming what is wrong, never a panic.

use std::collections::HashMap;

/// A metadata value. Arrays keep their element type's values (an empty array is `Array(vec![])`).
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    U8(u8),
    I8(i8),
    U16(u16),
    I16(i16),
    U32(u32),
    I32(i32),
    F32(f32),
    Bool(bool),
    Str(String),
    Array(Vec<Value>),
    U64(u64),
    I64(i64),
    F64(f64),
}

impl Value {
    /// Any integer type as u64, when it is non-negative.
    pub fn as_u64(&self) -> Option<u64> {
        match *self {
            Value::U8(v) => Some(v as u64),
            Value::U16(v) => Some(v as u64),
            Value::U32(v) => Some(v as u64),
            Value::U64(v) => Some(v),
            Value::I8(v) if v >= 0 => Some(v as u64),
            Value::I16(v) if v >= 0 => Some(v as u64),
            Value::I32(v) if v >= 0 => Some(v as u64),
            Value::I64(v) if v >= 0 => Some(v as u64),
            _ => None,
        }
    }

    /// F32 or F64 as f64.
    pub fn as_f64(&self) -> Option<f64> {
        match *self {
            Value::F32(v) => Some(v as f64),
            Value::F64(v) => Some(v),
            _ => None,
        }
    }

    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::Str(s) => Some(s),
            _ => None,
        }
    }
}

/// ggml tensor type codes this reader decodes (ggml.h `enum ggml_type`).
pub mod ggml_type {
    pub const F32: u32 = 0;
    pub const F16: u32 = 1;
    pub const Q4_0: u32 = 2;
    pub const Q4_1: u32 = 3;
    pub const Q8_0: u32 = 8;
}

/// One tensor info. `dims[0]` is the innermost (contiguous) axis: a weight stored as `[in, out]` is
/// `out` rows of `in` values.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TensorInfo {
    pub name: String,
    pub dims: Vec<u64>,
    pub ggml_type: u32,
    /// From the start of the data section.
    pub offset: u64,
}

impl TensorInfo {
    pub fn n_elements(&self) -> u64 {
        self.dims.iter().product()
    }

    /// Length of a row (`dims[0]`) and the number of rows (the product of the other dims).
    pub fn rows(&self) -> (usize, usize) {
        let cols = self.dims.first().copied().unwrap_or(1) as usize;
        let rows = self.dims.iter().skip(1).product::<u64>() as usize;
        (cols, rows)
    }

    /// Bytes of one row in its type; Err for a type this reader does not decode or a row that
    /// is not a whole number of blocks.
    pub fn row_bytes(&self) -> Result<usize, String> {
        let (cols, _) = self.rows();
        let block = |bytes: usize| {
            if cols % 32 != 0 {
                Err(format!("{}: row of {} values is not whole blocks of 32", self.name, cols))
            } else {
                Ok(cols / 32 * bytes)
            }
        };
        match self.ggml_type {
            ggml_type::F32 => Ok(cols * 4),
            ggml_type::F16 => Ok(cols * 2),
            ggml_type::Q4_0 => block(18),
            ggml_type::Q4_1 => block(20),
            ggml_type::Q8_0 => block(34),
            t => Err(format!("{}: ggml type {} is not decoded by the oracle", self.name, t)),
        }
    }
}

/// A parsed GGUF image, borrowing its bytes.
pub struct Gguf<'a> {
    bytes: &'a [u8],
    pub version: u32,
    /// Key/values in file order.
    pub kv: Vec<(String, Value)>,
    pub tensors: Vec<TensorInfo>,
    /// Absolute offset of the data section.
    pub data_start: usize,
    pub alignment: u64,
    kv_index: HashMap<String, usize>,
    tensor_index: HashMap<String, usize>,
}

/// A little-endian cursor whose every read is checked against the end.
struct Cursor<'a> {
    b: &'a [u8],
    at: usize,
}

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        let end = self.at.checked_add(n).filter(|&e| e <= self.b.len());
        match end {
            Some(end) => {
                let s = &self.b[self.at..end];
                self.at = end;
                Ok(s)
            }
            None => Err(format!("truncated: {} bytes wanted at offset {} of {}", n, self.at, self.b.len())),
        }
    }
    fn arr<const N: usize>(&mut self) -> Result<[u8; N], String> {
        let mut a = [0u8; N];
        a.copy_from_slice(self.take(N)?);
        Ok(a)
    }
    fn u32(&mut self) -> Result<u32, String> {
        Ok(u32::from_le_bytes(self.arr()?))
    }
    fn u64(&mut self) -> Result<u64, String> {
        Ok(u64::from_le_bytes(self.arr()?))
    }
    fn string(&mut self) -> Result<String, String> {
        let n = self.u64()?;
        let n = usize::try_from(n).map_err(|_| format!("string length {} at offset {}", n, self.at))?;
        let s = self.take(n)?;
        Ok(String::from_utf8_lossy(s).into_owned())
    }

    fn value(&mut self, t: u32, depth: u32) -> Result<Value, String> {
        Ok(match t {
            0 => Value::U8(self.arr::<1>()?[0]),
            1 => Value::I8(self.arr::<1>()?[0] as i8),
            2 => Value::U16(u16::from_le_bytes(self.arr()?)),
            3 => Value::I16(i16::from_le_bytes(self.arr()?)),
            4 => Value::U32(self.u32()?),
            5 => Value::I32(i32::from_le_bytes(self.arr()?)),
            6 => Value::F32(f32::from_le_bytes(self.arr()?)),
            7 => match self.arr::<1>()?[0] {
                0 => Value::Bool(false),
                1 => Value::Bool(true),
                b => return Err(format!("bool value {} at offset {}", b, self.at - 1)),
            },
            8 => Value::Str(self.string()?),
            9 => {
                if depth > 0 {
                    return Err(format!("nested array at offset {}", self.at));
                }
                let et = self.u32()?;
                let n = self.u64()?;
                // Each element takes at least one byte: a count beyond the rest of the image is a lie.
                if n > (self.b.len() - self.at) as u64 {
                    return Err(format!("array of {} elements at offset {} exceeds the image", n, self.at));
                }
                let mut v = Vec::with_capacity(n as usize);
                for _ in 0..n {
                    v.push(self.value(et, depth + 1)?);
                }
                Value::Array(v)
            }
            10 => Value::U64(self.u64()?),
            11 => Value::I64(i64::from_le_bytes(self.arr()?)),
            12 => Value::F64(f64::from_le_bytes(self.arr()?)),
            t => return Err(format!("unknown metadata type {} at offset {}", t, self.at)),
        })
    }
}

impl<'a> Gguf<'a> {
    pub fn parse(bytes: &'a [u8]) -> Result<Gguf<'a>, String> {
        let mut c = Cursor { b: bytes, at: 0 };
        if c.take(4)? != b"GGUF" {
            return Err("not a GGUF image (magic)".into());
        }
        let version = c.u32()?;
        if version != 3 {
            return Err(format!("GGUF version {} (the oracle reads 3)", version));
        }
        let n_tensors = c.u64()?;
        let n_kv = c.u64()?;
        let mut kv = Vec::new();
        let mut kv_index = HashMap::new();
        for _ in 0..n_kv {
            let key = c.string()?;
            let t = c.u32()?;
            let v = c.value(t, 0)?;
            if kv_index.insert(key.clone(), kv.len()).is_some() {
                return Err(format!("duplicate key {}", key));
            }
            kv.push((key, v));
        }
        let mut tensors = Vec::new();
        let mut tensor_index = HashMap::new();
        for _ in 0..n_tensors {
            let name = c.string()?;
            let n_dims = c.u32()?;
            if n_dims == 0 || n_dims > 4 {
                return Err(format!("tensor {}: {} dims", name, n_dims));
            }
            let mut dims = Vec::new();
            for _ in 0..n_dims {
                dims.push(c.u64()?);
            }
            let ggml_type = c.u32()?;
            let offset = c.u64()?;
            if tensor_index.insert(name.clone(), tensors.len()).is_some() {
                return Err(format!("duplicate tensor {}", name));
            }
            tensors.push(TensorInfo { name, dims, ggml_type, offset });
        }
        let alignment = match kv_index.get("general.alignment") {
            Some(&i) => kv[i].1.as_u64().ok_or("general.alignment is not an unsigned integer")?,
            None => 32,
        };
        if alignment == 0 || !alignment.is_power_of_two() {
            return Err(format!("general.alignment {}", alignment));
        }
        let a = alignment as usize;
        let data_start = c.at.div_ceil(a) * a;
        if data_start > bytes.len() {
            return Err("no data section".into());
        }
        Ok(Gguf { bytes, version, kv, tensors, data_start, alignment, kv_index, tensor_index })
    }

    pub fn get(&self, key: &str) -> Option<&Value> {
        self.kv_index.get(key).map(|&i| &self.kv[i].1)
    }

    /// An unsigned integer key (any integer type), Err when absent or of another type.
    pub fn get_u64(&self, key: &str) -> Result<u64, String> {
        self.get(key).ok_or_else(|| format!("key {} is absent", key))?.as_u64().ok_or_else(|| format!("key {} is not an unsigned integer", key))
    }

    pub fn get_f64(&self, key: &str) -> Result<f64, String> {
        self.get(key).ok_or_else(|| format!("key {} is absent", key))?.as_f64().ok_or_else(|| format!("key {} is not a float", key))
    }

    pub fn get_str(&self, key: &str) -> Result<&str, String> {
        self.get(key).ok_or_else(|| format!("key {} is absent", key))?.as_str().ok_or_else(|| format!("key {} is not a string", key))
    }

    pub fn tensor(&self, name: &str) -> Option<&TensorInfo> {
        self.tensor_index.get(name).map(|&i| &self.tensors[i])
    }

    /// The bytes of row `r` of a tensor (Err beyond the image or for an undecoded type).
    fn row_raw(&self, t: &TensorInfo, r: usize) -> Result<&'a [u8], String> {
        let (_, rows) = t.rows();
        if r >= rows {
            return Err(format!("{}: row {} of {}", t.name, r, rows));
        }
        let rb = t.row_bytes()?;
        let start = (self.data_start as u64)
            .checked_add(t.offset)
            .and_then(|s| s.checked_add(r as u64 * rb as u64))
            .filter(|&s| s.checked_add(rb as u64).is_some_and(|e| e <= self.bytes.len() as u64))
            .ok_or_else(|| format!("{}: row {} lies beyond the image", t.name, r))?;
        Ok(&self.bytes[start as usize..start as usize + rb])
    }

    /// Row `r` of a tensor as f64 values, written into `out` (`dims[0]` long).
    pub fn row_into(&self, t: &TensorInfo, r: usize, out: &mut [f64]) -> Result<(), String> {
        let (cols, _) = t.rows();
        if out.len() != cols {
            return Err(format!("{}: row of {} into {} values", t.name, cols, out.len()));
        }
        decode_row(t.ggml_type, self.row_raw(t, r)?, out)
    }

    /// Row `r` of the named tensor.
    pub fn row(&self, name: &str, r: usize) -> Result<Vec<f64>, String> {
        let t = self.tensor(name).ok_or_else(|| format!("tensor {} is absent", name))?;
        let mut out = vec![0.0; t.rows().0];
        self.row_into(t, r, &mut out)?;
        Ok(out)
    }

    /// The whole named tensor as f64, row-major (rows of `dims[0]`).
    pub fn tensor_f64(&self, name: &str) -> Result<Vec<f64>, String> {
        let t = self.tensor(name).ok_or_else(|| format!("tensor {} is absent", name))?;
        let (cols, rows) = t.rows();
        let mut out = vec![0.0; cols * rows];
        for r in 0..rows {
            self.row_into(t, r, &mut out[r * cols..(r + 1) * cols])?;
        }
        Ok(out)
    }
}

fn f16_at(b: &[u8]) -> f64 {
    half::f16::from_bits(u16::from_le_bytes([b[0], b[1]])).to_f64()
}

/// Decodes one row of `ggml_type` from `raw` into `out`, exactly (every value is representable in
/// f64). Block formats, 32 values per block, element i < 16 the low nibble of code byte i and
/// i >= 16 the high nibble of byte i - 16:
/// - Q4_0, 18 bytes: f16 d, 16 code bytes; value (q - 8) d.
/// - Q4_1, 20 bytes: f16 d, f16 m, 16 code bytes; value q d + m.
/// - Q8_0, 34 bytes: f16 d, 32 int8 q; value q d.
pub fn decode_row(ggml_type: u32, raw: &[u8], out: &mut [f64]) -> Result<(), String> {
    let bad = || Err(format!("{} bytes of ggml type {} for {} values", raw.len(), ggml_type, out.len()));
    let blocks = |bytes: usize| out.len().is_multiple_of(32) && raw.len() == out.len() / 32 * bytes;
    match ggml_type {
        ggml_type::F32 if raw.len() == out.len() * 4 => {
            for (o, b) in out.iter_mut().zip(raw.chunks_exact(4)) {
                *o = f32::from_le_bytes([b[0], b[1], b[2], b[3]]) as f64;
            }
        }
        ggml_type::F16 if raw.len() == out.len() * 2 => {
            for (o, b) in out.iter_mut().zip(raw.chunks_exact(2)) {
                *o = f16_at(b);
            }
        }
        ggml_type::Q4_0 if blocks(18) => {
            for (o, b) in out.chunks_exact_mut(32).zip(raw.chunks_exact(18)) {
                let d = f16_at(b);
                for (i, &q) in b[2..].iter().enumerate() {
                    o[i] = ((q & 15) as i32 - 8) as f64 * d;
                    o[i + 16] = ((q >> 4) as i32 - 8) as f64 * d;
                }
            }
        }
        ggml_type::Q4_1 if blocks(20) => {
            for (o, b) in out.chunks_exact_mut(32).zip(raw.chunks_exact(20)) {
                let (d, m) = (f16_at(b), f16_at(&b[2..]));
                for (i, &q) in b[4..].iter().enumerate() {
                    o[i] = (q & 15) as f64 * d + m;
                    o[i + 16] = (q >> 4) as f64 * d + m;
                }
            }
        }
        ggml_type::Q8_0 if blocks(34) => {
            for (o, b) in out.chunks_exact_mut(32).zip(raw.chunks_exact(34)) {
                let d = f16_at(b);
                for (v, &q) in o.iter_mut().zip(&b[2..]) {
                    *v = (q as i8) as f64 * d;
                }
            }
        }
        ggml_type::F32 | ggml_type::F16 | ggml_type::Q4_0 | ggml_type::Q4_1 | ggml_type::Q8_0 => return bad(),
        t => return Err(format!("ggml type {} is not decoded by the oracle", t)),
    }
    Ok(())
}
