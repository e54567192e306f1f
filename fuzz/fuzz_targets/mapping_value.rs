//! Fuzzes `checks::mapping_value`.
#![no_main]

#[path = "../checks.rs"]
mod checks;

libfuzzer_sys::fuzz_target!(|data: &[u8]| checks::mapping_value(data));
