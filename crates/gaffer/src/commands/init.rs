//! `gaffer init`: write the commented config file.

use crate::cli::{Global, InitArgs};
use crate::error::{CliError, Result};
use crate::setup::config_file;
use std::process::ExitCode;

pub fn run(global: &Global, args: &InitArgs) -> Result<ExitCode> {
    let (path, _) = config_file(global);
    if path.exists() && !args.force {
        return Err(CliError::config(format!(
            "{} already exists; edit it, or pass --force to replace it with the commented defaults",
            path.display()
        )));
    }
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent)
            .map_err(|e| CliError::config(format!("cannot create {}: {e}", parent.display())))?;
    }
    std::fs::write(&path, gaffer_config::TEMPLATE)
        .map_err(|e| CliError::config(format!("cannot write {}: {e}", path.display())))?;
    println!("wrote {}", path.display());
    println!("next: `gaffer doctor` checks that everything gaffer needs is in place");
    Ok(ExitCode::SUCCESS)
}
