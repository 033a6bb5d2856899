//! ferrite's executable spec: the f64 oracle ([`oracle`]) and, in `tests/`, the property and claim
//! tests that compare the safe crate `ferrite` (`ffi/ferrite`) against it.
//!
//! The oracle is deliberately simple and obviously right (f64 accumulation, full sorts); where it
//! hands values to C it uses the safe crate's types. Nothing here is part of what a Rust program
//! depends on: that is `ferrite` alone.

pub mod oracle;
