//! Fuzzes `checks::metadata_wire`.
#![no_main]

#[path = "../checks.rs"]
mod checks;

libfuzzer_sys::fuzz_target!(|data: &[u8]| checks::metadata_wire(data));
