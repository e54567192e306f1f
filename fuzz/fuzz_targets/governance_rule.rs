//! Fuzzes `checks::governance_rule`.
#![no_main]

#[path = "../checks.rs"]
mod checks;

libfuzzer_sys::fuzz_target!(|data: &[u8]| checks::governance_rule(data));
