//! `[projects.<name>.intake]` into the engine's settings: the webhook secrets are read
//! from the environment here, once, so a missing one stops the start (exit 78) instead
//! of refusing every delivery later.

use crate::error::{CliError, Result};
use gaffer_config::Config;
use gaffer_engine::{Intake, Settings};
use gaffer_forge::Secret;

/// Shorter secrets are refused: the HMAC is only as strong as the secret.
pub(super) const MIN_SECRET_LEN: usize = 16;

/// Each project's intake into `settings`; the webhook secrets read, for the redactor.
pub fn intake(config: &Config, settings: &mut Settings) -> Result<Vec<String>> {
    let mut secrets = Vec::new();
    for (name, i) in &config.intake {
        let secret = match &i.secret_env {
            None => None,
            Some(var) => {
                let field = format!("projects.{name}.intake.secret_env");
                let secret = Secret::from_env(var).ok_or_else(|| {
                    CliError::config(format!(
                        "{field}: the environment variable {var} is not set or empty; put the webhook secret you gave the forge in it"
                    ))
                })?;
                if secret.expose().len() < MIN_SECRET_LEN {
                    return Err(CliError::config(format!(
                        "{field}: the secret in {var} is shorter than {MIN_SECRET_LEN} characters; use a long random one (`openssl rand -hex 32`) in the forge's webhook and in {var}"
                    )));
                }
                secrets.push(secret.expose().to_owned());
                Some(secret)
            }
        };
        settings.intake.insert(
            name.clone(),
            Intake {
                label: i.label.clone(),
                assignee: i.assignee.clone(),
                secret,
                poll_interval: i.poll_interval,
            },
        );
    }
    Ok(secrets)
}
