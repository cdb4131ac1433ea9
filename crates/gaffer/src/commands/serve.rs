//! `gaffer serve`: the HTTP API, SSE and the web page on one port.

use crate::cli::Global;
use crate::commands::approvals::open_app;
use crate::error::{CliError, Result};
use gaffer_server::{Server, ServerConfig, ServerError};
use std::net::SocketAddr;
use std::process::ExitCode;

pub async fn run(global: &Global, listen: Option<String>) -> Result<ExitCode> {
    let (config, policy, app) = open_app(global).await?;
    let addr: SocketAddr = match listen {
        Some(l) => l.parse().map_err(|e| {
            CliError::config(format!(
                "--listen {l}: {e}; give an address like 127.0.0.1:7777"
            ))
        })?,
        None => config.listen,
    };
    let env = |name: &str| std::env::var(name).ok();
    let server_config = ServerConfig::new(addr)
        .with_policy_tokens(&policy, &env)
        .map_err(|e| CliError::config(e.to_string()))?;
    let server = Server::bind(app, server_config)
        .await
        .map_err(|e| match e {
            ServerError::Config(m) => CliError::config(m),
            ServerError::Bind { .. } => {
                CliError::config(format!("{e}; is another gaffer serving there?"))
            }
        })?;
    let bound = server.local_addr()?;
    println!("gaffer is serving on http://{bound}/  (API: http://{bound}/api/openapi.json)");
    server
        .run(async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await?;
    Ok(ExitCode::SUCCESS)
}
