//! The patch parser and applier on arbitrary model output.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = gaffer_agents::patch::parse_patch(text);
        let _ = gaffer_agents::patch::apply_unified_diff("a\nb\nc\n", text);
    }
});
