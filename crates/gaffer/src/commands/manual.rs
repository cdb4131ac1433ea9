//! `gaffer completions SHELL` and `gaffer man [DIR]`, generated from the command
//! line's own definition, so they never drift from `--help`.

use crate::cli::{Cli, CompletionsArgs, ManArgs};
use crate::error::{CliError, Result};
use clap::CommandFactory;
use std::io::Write;
use std::process::ExitCode;

pub fn completions(args: &CompletionsArgs) -> Result<ExitCode> {
    let mut cmd = Cli::command();
    // Generated whole first: the generator panics on a failed write (a closed pipe).
    let mut script = Vec::new();
    clap_complete::generate(args.shell, &mut cmd, "gaffer", &mut script);
    std::io::stdout().lock().write_all(&script)?;
    Ok(ExitCode::SUCCESS)
}

pub fn man(args: &ManArgs) -> Result<ExitCode> {
    let cmd = Cli::command();
    let Some(dir) = &args.dir else {
        let mut out = std::io::stdout().lock();
        clap_mangen::Man::new(cmd).render(&mut out)?;
        return Ok(ExitCode::SUCCESS);
    };
    std::fs::create_dir_all(dir)
        .map_err(|e| CliError::config(format!("cannot create {}: {e}", dir.display())))?;
    clap_mangen::generate_to(cmd, dir).map_err(|e| {
        CliError::config(format!(
            "cannot write the pages into {}: {e}",
            dir.display()
        ))
    })?;
    outln!(
        "wrote gaffer.1 and a page per command into {}; `man gaffer` reads it when the directory is on MANPATH",
        dir.display()
    );
    Ok(ExitCode::SUCCESS)
}
