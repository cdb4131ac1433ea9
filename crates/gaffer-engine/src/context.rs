//! Repository context for a prompt: the files the context manager picks, within
//! the budget, with why.

use crate::driver::CONTEXT_TOKENIZER;
use crate::Engine;
use gaffer_forge::Worktree;

impl Engine {
    /// The files the context manager picks for `text` (or, for review, the changed
    /// files and their neighbourhood), with why, and their contents or signatures
    /// within the context budget. Context is a help, never a reason to fail a step.
    pub(crate) async fn repo_context(
        &self,
        wt: &Worktree,
        text: &str,
        changed: Option<Vec<String>>,
    ) -> String {
        let cache = self.settings.index_cache.clone();
        let root = wt.path.clone();
        let text = text.to_owned();
        let opts = gaffer_index::PackOptions {
            budget: self.settings.context_budget,
            ..Default::default()
        };
        let picked = tokio::task::spawn_blocking(move || {
            let tok = CONTEXT_TOKENIZER;
            match changed {
                Some(files) => {
                    gaffer_index::select_neighbourhood(&root, &files, &opts, tok, cache.as_ref())
                }
                None => gaffer_index::select_context(&root, &text, &opts, tok, cache.as_ref()),
            }
        })
        .await;
        let selection = match picked {
            Ok(Ok(s)) => s,
            Ok(Err(e)) => {
                tracing::warn!("context selection failed: {e}");
                return String::new();
            }
            Err(e) => {
                tracing::warn!("context selection stopped: {e}");
                return String::new();
            }
        };
        if selection.files.is_empty() {
            return String::new();
        }
        let list: Vec<String> = selection
            .files
            .iter()
            .map(|e| format!("- {} ({:?}): {}", e.path, e.mode, e.reasons.join("; ")))
            .collect();
        format!(
            "Files gaffer's context manager picked as a starting point (read others as you need):\n{}\n\n{}",
            list.join("\n"),
            selection.pack()
        )
    }
}
