//! Forge webhooks (`POST /api/hooks/{forge}`): the server hands each delivery, raw,
//! to a [`HookReceiver`] (gaffer-engine implements it with the projects' intake
//! settings), which checks its signature before reading it.

use crate::AppError;
use gaffer_protocol::api::HookAnswer;

/// Why a delivery was refused; nothing was stored for it.
#[derive(Debug, thiserror::Error)]
pub enum HookError {
    /// `{forge}` is not a forge gaffer takes webhooks from. HTTP 404.
    #[error("{0}")]
    UnknownForge(String),
    /// No project's secret verifies the delivery's signature (or it has none).
    /// HTTP 401.
    #[error("the webhook signature is missing or does not match any project's secret; set the same secret in the forge's webhook and in the environment variable [projects.<name>.intake] secret_env names")]
    BadSignature,
    /// A verified body that is not what the forge sends. HTTP 400.
    #[error("{0}")]
    BadBody(String),
    /// Making the task failed. As for [`AppError`].
    #[error(transparent)]
    App(#[from] AppError),
}

/// Receives forge webhook deliveries.
#[async_trait::async_trait]
pub trait HookReceiver: Send + Sync {
    /// Verify, read and act on one delivery from `forge` (`gitea`, `forgejo`,
    /// `github`, `gitlab`): `headers` with lower-case names, `body` as received.
    async fn receive_hook(
        &self,
        forge: &str,
        headers: &[(String, String)],
        body: &[u8],
    ) -> Result<HookAnswer, HookError>;
}
