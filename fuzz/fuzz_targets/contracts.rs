//! The plan, verdict and ruling parsers on arbitrary agent answers.
#![no_main]
use gaffer_protocol::contracts::{Plan, Ruling, Verdict};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = Plan::parse(text);
        let _ = Verdict::parse(text);
        let _ = Ruling::parse(text);
    }
});
