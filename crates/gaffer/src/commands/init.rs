//! `gaffer init`: write the commented config file and the approval policy.

use crate::cli::{Global, InitArgs};
use crate::commands::approvals::policy_file;
use crate::error::{CliError, Result};
use crate::setup::config_file;
use std::path::Path;
use std::process::ExitCode;

pub fn run(global: &Global, args: &InitArgs) -> Result<ExitCode> {
    let (config, _) = config_file(global);
    let policy = policy_file(global);
    // Check both before writing either, so a refusal leaves nothing half done.
    for path in [&config, &policy] {
        if path.exists() && !args.force {
            return Err(CliError::config(format!(
                "{} already exists; edit it, or pass --force to replace it (and {}) with the commented defaults",
                path.display(),
                if *path == config { policy.display() } else { config.display() }
            )));
        }
    }
    write(&config, gaffer_config::TEMPLATE)?;
    write(&policy, gaffer_app::POLICY_TEMPLATE)?;
    outln!("wrote {}", config.display());
    outln!(
        "wrote {} (approval expiry, auto-approve rules, API tokens)",
        policy.display()
    );
    outln!("next: `gaffer doctor` checks that everything gaffer needs is in place");
    Ok(ExitCode::SUCCESS)
}

fn write(path: &Path, text: &str) -> Result<()> {
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent)
            .map_err(|e| CliError::config(format!("cannot create {}: {e}", parent.display())))?;
    }
    std::fs::write(path, text)
        .map_err(|e| CliError::config(format!("cannot write {}: {e}", path.display())))
}
