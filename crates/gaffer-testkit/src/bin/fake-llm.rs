//! Fake OpenAI-compatible + Anthropic server as a process, for end-to-end tests of the
//! `gaffer` binary. Reads the scenario named by `GAFFER_FAKE_SCENARIO`, listens on
//! 127.0.0.1 (port from the first argument, default any), prints
//! `listening http://127.0.0.1:PORT` on stdout and serves until killed.
//! OpenAI clients use `http://127.0.0.1:PORT/v1`, Anthropic clients `http://127.0.0.1:PORT`.

#[tokio::main(flavor = "current_thread")]
async fn main() -> anyhow::Result<()> {
    let scenario = gaffer_testkit::scenario::Scenario::from_env()?;
    let port: u16 = std::env::args()
        .nth(1)
        .map(|p| p.parse())
        .transpose()?
        .unwrap_or(0);
    let server = gaffer_testkit::llm::FakeLlmServer::start_on(&scenario, port).await?;
    println!("listening {}", server.anthropic_base());
    use std::io::Write;
    std::io::stdout().flush()?;
    std::future::pending::<()>().await;
    Ok(())
}
