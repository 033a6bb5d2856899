//! Structured output: `GrammarVocab<'t>` borrows a `Tokenizer`, `Grammar<'v>` borrows its
//! vocabulary, `Matcher<'g>` borrows its grammar, so none can outlive what it was made from (the C
//! side refuses that with BUSY; here it does not compile). Vocabularies and grammars are read-only
//! and shareable between threads; a matcher is one sequence's, used by one thread at a time.

use crate::error::{check, status, Result};
use crate::sys;
use crate::tokenizer::Tokenizer;
use std::marker::PhantomData;
use std::ptr::{self, NonNull};

/// `fer_grammar_kind` values.
pub mod kind {
    pub const JSON_SCHEMA: i32 = crate::sys::FER_GRAMMAR_JSON_SCHEMA as i32;
    pub const REGEX: i32 = crate::sys::FER_GRAMMAR_REGEX as i32;
    pub const GBNF: i32 = crate::sys::FER_GRAMMAR_GBNF as i32;
}

/// `fer_grammar_flag` bits.
pub mod flag {
    pub const JSON_COMPACT: u32 = crate::sys::FER_GRAMMAR_JSON_COMPACT;
    pub const NO_FORCING: u32 = crate::sys::FER_GRAMMAR_NO_FORCING;
}

pub type VocabInfo = sys::fer_grammar_vocab_info;
pub type MatcherState = sys::fer_matcher_state;

pub struct GrammarVocab<'t> {
    raw: NonNull<sys::fer_grammar_vocab>,
    _tok: PhantomData<&'t Tokenizer>,
}

// SAFETY: the header states a vocabulary is read-only once made and usable by any number of threads.
unsafe impl Send for GrammarVocab<'_> {}
unsafe impl Sync for GrammarVocab<'_> {}

impl<'t> GrammarVocab<'t> {
    /// `fer_grammar_vocab_create`: n_vocab 0 is the tokenizer's size, eos -1 the tokenizer's end token.
    pub fn new(tok: &'t Tokenizer, n_vocab: u32, eos: i32) -> Result<GrammarVocab<'t>> {
        // SAFETY: a valid tokenizer, borrowed for 't.
        unsafe { GrammarVocab::on(tok.as_ptr(), n_vocab, eos) }
    }

    /// `fer_grammar_vocab_create` over tok.
    ///
    /// # Safety
    /// tok must be a valid tokenizer that outlives 't (the engine's tokenizer borrows the engine).
    pub(crate) unsafe fn on(tok: *const sys::fer_tokenizer, n_vocab: u32, eos: i32) -> Result<GrammarVocab<'t>> {
        let mut out = ptr::null_mut();
        // SAFETY: valid tokenizer (the caller's promise) and out-pointer.
        check(unsafe { sys::fer_grammar_vocab_create(tok, n_vocab, eos, &mut out) })?;
        Ok(GrammarVocab { raw: NonNull::new(out).expect("OK implies a vocabulary"), _tok: PhantomData })
    }

    pub fn info(&self) -> VocabInfo {
        // SAFETY: plain-data struct, overwritten by the call.
        let mut info: VocabInfo = unsafe { std::mem::zeroed() };
        // SAFETY: valid vocabulary and out-pointer.
        check(unsafe { sys::fer_grammar_vocab_get_info(self.raw.as_ptr(), &mut info) }).expect("vocab info");
        info
    }

    /// `fer_grammar_compile` of src as `kind` with `flag` bits.
    pub fn compile(&self, kind: i32, src: &[u8], flags: u32) -> Result<Grammar<'_>> {
        let mut out = ptr::null_mut();
        // SAFETY: src valid for its length; valid vocabulary and out-pointer.
        check(unsafe { sys::fer_grammar_compile(self.raw.as_ptr(), kind, src.as_ptr().cast(), src.len(), flags, &mut out) })?;
        Ok(Grammar { raw: NonNull::new(out).expect("OK implies a grammar"), _vocab: PhantomData })
    }
}

impl Drop for GrammarVocab<'_> {
    fn drop(&mut self) {
        // SAFETY: raw came from new(); no grammar can be alive (they borrow self).
        let st = unsafe { sys::fer_grammar_vocab_free(self.raw.as_ptr()) };
        debug_assert_eq!(st, status::OK);
    }
}

pub struct Grammar<'v> {
    raw: NonNull<sys::fer_grammar>,
    _vocab: PhantomData<&'v ()>,
}

// SAFETY: the header states a compiled grammar is read-only and shareable across threads.
unsafe impl Send for Grammar<'_> {}
unsafe impl Sync for Grammar<'_> {}

impl Grammar<'_> {
    /// A matcher at the start of this grammar.
    pub fn matcher(&self) -> Result<Matcher<'_>> {
        let mut out = ptr::null_mut();
        // SAFETY: valid grammar (borrowed by the matcher) and out-pointer.
        check(unsafe { sys::fer_matcher_create(self.raw.as_ptr(), &mut out) })?;
        Ok(Matcher { raw: NonNull::new(out).expect("OK implies a matcher"), _g: PhantomData })
    }

    pub fn as_ptr(&self) -> *const sys::fer_grammar {
        self.raw.as_ptr()
    }
}

impl Drop for Grammar<'_> {
    fn drop(&mut self) {
        // SAFETY: raw came from compile(); no matcher can be alive (they borrow self).
        let st = unsafe { sys::fer_grammar_free(self.raw.as_ptr()) };
        debug_assert_eq!(st, status::OK);
    }
}

pub struct Matcher<'g> {
    raw: NonNull<sys::fer_matcher>,
    _g: PhantomData<&'g ()>,
}

// SAFETY: a matcher may move between threads; it is used by one at a time (&mut self), so not Sync.
unsafe impl Send for Matcher<'_> {}

impl Matcher<'_> {
    /// `fer_matcher_fill_mask` into mask (at least the vocabulary's mask_words).
    pub fn fill_mask(&mut self, mask: &mut [u32]) -> Result<()> {
        // SAFETY: mask valid for its length; valid matcher.
        check(unsafe { sys::fer_matcher_fill_mask(self.raw.as_ptr(), mask.as_mut_ptr(), mask.len()) })
    }

    /// `fer_matcher_accept`.
    pub fn accept(&mut self, token: i32) -> Result<()> {
        // SAFETY: valid matcher.
        check(unsafe { sys::fer_matcher_accept(self.raw.as_ptr(), token) })
    }

    /// `fer_matcher_rollback`.
    pub fn rollback(&mut self, n: u32) -> Result<()> {
        // SAFETY: valid matcher.
        check(unsafe { sys::fer_matcher_rollback(self.raw.as_ptr(), n) })
    }

    pub fn state(&self) -> MatcherState {
        // SAFETY: plain-data struct, overwritten by the call.
        let mut st: MatcherState = unsafe { std::mem::zeroed() };
        // SAFETY: valid matcher and out-pointer.
        check(unsafe { sys::fer_matcher_get_state(self.raw.as_ptr(), &mut st) }).expect("matcher state");
        st
    }

    /// `fer_matcher_forced_tokens`, up to cap of them.
    pub fn forced_tokens(&mut self, cap: usize) -> Result<Vec<i32>> {
        let mut ids = vec![0i32; cap];
        let mut n = 0usize;
        // SAFETY: ids holds cap ids; valid matcher and out-pointer.
        check(unsafe { sys::fer_matcher_forced_tokens(self.raw.as_ptr(), ids.as_mut_ptr(), cap, &mut n) })?;
        ids.truncate(n);
        Ok(ids)
    }

    pub fn as_ptr(&mut self) -> *mut sys::fer_matcher {
        self.raw.as_ptr()
    }
}

impl Drop for Matcher<'_> {
    fn drop(&mut self) {
        // SAFETY: raw came from Grammar::matcher().
        unsafe { sys::fer_matcher_free(self.raw.as_ptr()) };
    }
}

/// Whether token t is set in a mask of llguidance's layout.
pub fn mask_has(mask: &[u32], t: i32) -> bool {
    t >= 0 && (mask[t as usize / 32] >> (t as u32 % 32)) & 1 == 1
}
