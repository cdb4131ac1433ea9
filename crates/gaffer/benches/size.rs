//! The size of the `gaffer` binary as built by this profile, against the 40 MiB
//! target for a release build, and whether it still carries debug information.
//!
//! `cargo bench -p gaffer --bench size` measures the release-like bench profile
//! (the release profile's settings, `debug = false` and debug info stripped) and
//! fails above the target; `cargo test --benches` runs it on the test build, whose
//! size is only printed.

#![allow(clippy::unwrap_used, clippy::expect_used)]

const TARGET_MIB: f64 = 40.0;

fn main() {
    let bench = std::env::args().any(|a| a == "--bench");
    let path = env!("CARGO_BIN_EXE_gaffer");
    let bytes = std::fs::read(path).unwrap();
    let mib = bytes.len() as f64 / (1024.0 * 1024.0);
    let debug = debug_bytes(&bytes);
    let profile = if cfg!(debug_assertions) {
        "test build"
    } else {
        "release settings"
    };
    println!(
        "gaffer binary ({profile}): {mib:.1} MiB ({} bytes), {:.2}× the {TARGET_MIB} MiB target; debug info: {:.1} MiB",
        bytes.len(),
        mib / TARGET_MIB,
        debug as f64 / (1024.0 * 1024.0)
    );
    if bench {
        assert!(
            mib <= TARGET_MIB,
            "the release binary is {mib:.1} MiB, over {TARGET_MIB} MiB"
        );
        assert_eq!(debug, 0, "the release binary carries debug info");
    }
}

/// Bytes in the `.debug_*` sections of a 64-bit little-endian ELF file.
fn debug_bytes(elf: &[u8]) -> u64 {
    let u16_at = |o: usize| u16::from_le_bytes(elf[o..o + 2].try_into().unwrap()) as usize;
    let u32_at = |o: usize| u32::from_le_bytes(elf[o..o + 4].try_into().unwrap()) as usize;
    let u64_at = |o: usize| u64::from_le_bytes(elf[o..o + 8].try_into().unwrap());
    assert_eq!(&elf[..5], b"\x7fELF\x02", "not a 64-bit ELF file");
    let (table, entry, count) = (u64_at(0x28) as usize, u16_at(0x3a), u16_at(0x3c));
    let section = |i: usize| table + i * entry;
    let names = u64_at(section(u16_at(0x3e)) + 0x18) as usize;
    (0..count)
        .filter(|&i| {
            let name = &elf[names + u32_at(section(i))..];
            name.starts_with(b".debug")
        })
        .map(|i| u64_at(section(i) + 0x20))
        .sum()
}
