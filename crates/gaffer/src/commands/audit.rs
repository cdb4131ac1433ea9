//! `gaffer audit [--task ID]`: who decided what, from where; `gaffer token new`.

use crate::cli::{AuditArgs, Global, TokenNewArgs, TokenRole};
use crate::commands::approvals::{app_error, open_app};
use crate::error::Result;
use crate::output;
use gaffer_core::ActorKind;
use std::io::Write;
use std::process::ExitCode;

pub async fn run(global: &Global, args: &AuditArgs) -> Result<ExitCode> {
    let (_, _, app) = open_app(global).await?;
    let task = match &args.task {
        Some(given) => Some(crate::ids::task(app.journal().as_ref(), given).await?),
        None => None,
    };
    let entries = app.audit(task.as_deref()).await.map_err(app_error)?;
    if args.json {
        output::json(&entries)?;
        return Ok(ExitCode::SUCCESS);
    }
    let mut out = crate::term::stdout();
    if entries.is_empty() {
        writeln!(out, "nothing decided yet")?;
        return Ok(ExitCode::SUCCESS);
    }
    writeln!(
        out,
        "{:<24} {:<17} {:<24} {:<35} SUBJECT",
        "WHEN (UTC)", "ACTION", "WHO", "STREAM"
    )?;
    for e in &entries {
        let who = match e.by.kind {
            ActorKind::User => format!("{} via {}", e.by.name, e.by.via),
            ActorKind::Policy => format!("policy: {}", e.by.name),
            ActorKind::System => format!("gaffer ({})", e.by.via),
        };
        let mut subject = e.subject.replace('\n', " ");
        if let Some(note) = &e.note {
            subject.push_str(&format!(" — note: {}", note.replace('\n', " ")));
        }
        writeln!(
            out,
            "{:<24} {:<17} {:<24} {:<35} {}",
            output::utc(e.at),
            e.action,
            who,
            e.stream_id,
            subject
        )?;
    }
    Ok(ExitCode::SUCCESS)
}

pub fn new_token(args: &TokenNewArgs) -> Result<ExitCode> {
    // Two v4 UUIDs: 244 random bits from the OS generator.
    let secret = format!(
        "gft_{}{}",
        uuid::Uuid::new_v4().simple(),
        uuid::Uuid::new_v4().simple()
    );
    let digest = gaffer_server::auth::token_sha256(&secret);
    let role = match args.role {
        TokenRole::Viewer => "viewer",
        TokenRole::Approver => "approver",
        TokenRole::Admin => "admin",
    };
    if args.json {
        output::json(&serde_json::json!({
            "name": args.name, "role": role, "secret": secret, "secret_sha256": digest,
        }))?;
    } else {
        outln!(
            "secret (shown once; give it to {}):\n  {secret}\n",
            args.name
        );
        outln!("add to policy.toml:\n");
        outln!(
            "[[tokens]]\nname = {:?}\nrole = \"{role}\"\nsecret_sha256 = \"{digest}\"",
            args.name
        );
    }
    Ok(ExitCode::SUCCESS)
}
