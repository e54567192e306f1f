//! Fuzzes `checks::consumer_record`.
#![no_main]

#[path = "../checks.rs"]
mod checks;

libfuzzer_sys::fuzz_target!(|data: &[u8]| checks::consumer_record(data));
