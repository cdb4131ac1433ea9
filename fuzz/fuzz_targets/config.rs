//! The config loader on arbitrary files.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(dir) = tempfile::tempdir() else { return };
    let path = dir.path().join("config.toml");
    if std::fs::write(&path, data).is_err() {
        return;
    }
    let env = |_: &str| None;
    let _ = gaffer_config::load(&gaffer_config::Sources {
        file: Some((path, true)),
        data_dir_flag: None,
        database_flag: None,
        default_data_dir: dir.path().to_path_buf(),
        env: &env,
    });
});
