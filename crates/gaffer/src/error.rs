//! How the CLI fails: a message with a hint, and an exit code scripts can rely on.

use std::process::ExitCode;

/// The command did not do what was asked (unknown id, broken journal, …).
pub const EXIT_FAILED: u8 = 1;
/// The command line is wrong (clap's own code for usage errors).
pub const EXIT_USAGE: u8 = 2;
/// Configuration or a precondition is wrong (sysexits `EX_CONFIG`): fix and rerun.
pub const EXIT_CONFIG: u8 = 78;
/// Stopped by Ctrl-C (128 + SIGINT, what a shell reports for a killed command).
pub const EXIT_INTERRUPTED: u8 = 130;

/// A failure the user can act on.
#[derive(Debug)]
pub struct CliError {
    code: u8,
    message: String,
}

impl CliError {
    /// Exit 1: the operation failed.
    pub fn failed(message: impl Into<String>) -> Self {
        Self {
            code: EXIT_FAILED,
            message: message.into(),
        }
    }

    /// Exit 78: configuration or precondition.
    pub fn config(message: impl Into<String>) -> Self {
        Self {
            code: EXIT_CONFIG,
            message: message.into(),
        }
    }

    /// The exit code it ends the command with.
    #[cfg(test)]
    pub fn code(&self) -> u8 {
        self.code
    }

    /// What went wrong, with what to do.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// Exit 2: the command line asks for something that cannot be (an ambiguous id).
    pub fn usage(message: impl Into<String>) -> Self {
        Self {
            code: EXIT_USAGE,
            message: message.into(),
        }
    }

    /// Print the message (its control characters made visible: it may quote what an
    /// agent or a repository said) and return the exit code.
    pub fn report(self) -> ExitCode {
        crate::term::note(format_args!("gaffer: {}", crate::term::text(&self.message)));
        ExitCode::from(self.code)
    }
}

impl From<gaffer_config::ConfigError> for CliError {
    fn from(e: gaffer_config::ConfigError) -> Self {
        Self::config(e.to_string())
    }
}

impl From<gaffer_store::StoreError> for CliError {
    fn from(e: gaffer_store::StoreError) -> Self {
        use gaffer_store::StoreError as E;
        match e {
            E::NewerSchema { .. }
            | E::Foreign { .. }
            | E::Open { .. }
            | E::Migrate(_)
            | E::Unsupported(_)
            | E::Copy(_)
            | E::Backup(_) => Self::config(e.to_string()),
            other => Self::failed(other.to_string()),
        }
    }
}

impl From<std::io::Error> for CliError {
    fn from(e: std::io::Error) -> Self {
        // Writing to a closed pipe (`gaffer task list | head`) is not a failure.
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            std::process::exit(0);
        }
        Self::failed(e.to_string())
    }
}

/// The CLI's result type.
pub type Result<T, E = CliError> = std::result::Result<T, E>;
