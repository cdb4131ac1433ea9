//! Repository context for a prompt: the files the context manager picks, within
//! the budget, with why; recorded with the step.
//!
//! The process keeps the index of each project's checkout and of each task's worktree in
//! memory ([`Indexes`]), shared by every role and every task of the process. A worktree's index
//! starts from its project's (same content, same facts: only files that differ are read from
//! the cache or extracted) and is refreshed before each pack by a walk and a stat per file
//! (git's rule: size and mtime, files changed in the last two seconds hashed again): robust
//! against edits by the agent, by the check, by git, by a person in the worktree, with no
//! watcher to miss an event.

use crate::driver::CONTEXT_TOKENIZER;
use crate::failure::Failure;
use crate::Engine;
use gaffer_core::{ContextPack, Event, PackMode, PackedFile, Role, Step, TaskState};
use gaffer_forge::Worktree;
use gaffer_index::{IndexCache, LiveIndex, Selection};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

/// How many indexes a process keeps (project checkouts and worktrees); the least recently
/// used goes first, and one whose directory is gone (a finished task's worktree) at once.
const HELD_INDEXES: usize = 12;

/// The in-memory indexes of one process, by canonical directory.
#[derive(Default)]
pub(crate) struct Indexes {
    held: Mutex<HashMap<PathBuf, Held>>,
    clock: std::sync::atomic::AtomicU64,
    /// One tokenizer for the process: it remembers the counts it made.
    tok: std::sync::OnceLock<gaffer_index::Tokenizer>,
    /// Project checkouts whose tree-sitter tier was handed out to be warmed.
    warmed: Mutex<std::collections::HashSet<PathBuf>>,
}

struct Held {
    index: Arc<Mutex<Option<LiveIndex>>>,
    used: u64,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding an index leaves it as it was; the next refresh repairs it.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Indexes {
    /// The slot of `dir`'s index (empty until first built); forgets gone directories and the
    /// least recently used beyond [`HELD_INDEXES`].
    fn slot(&self, dir: &Path) -> Arc<Mutex<Option<LiveIndex>>> {
        let now = self
            .clock
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let mut held = lock(&self.held);
        held.retain(|d, _| d.is_dir());
        let slot = held.entry(dir.to_path_buf()).or_insert_with(|| Held {
            index: Arc::default(),
            used: now,
        });
        slot.used = now;
        let index = slot.index.clone();
        while held.len() > HELD_INDEXES {
            let Some(oldest) = held
                .iter()
                .min_by_key(|(_, h)| h.used)
                .map(|(d, _)| d.clone())
            else {
                break;
            };
            held.remove(&oldest);
        }
        index
    }

    /// How many indexes are held now.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        lock(&self.held).len()
    }

    /// `dir`'s index, brought up to date: refreshed if held, else started from `base`'s
    /// (refreshed first) or built. An index whose refresh failed is dropped and built again
    /// next time.
    fn refreshed(
        &self,
        dir: &Path,
        base: Option<&Path>,
        cache: &dyn IndexCache,
    ) -> gaffer_index::Result<Arc<Mutex<Option<LiveIndex>>>> {
        let slot = self.slot(dir);
        let mut held = lock(&slot);
        let fresh = match held.take() {
            Some(mut live) => live.refresh(cache).map(|_| live),
            None => match base.filter(|b| *b != dir) {
                Some(base) => {
                    let base = self.refreshed(base, None, cache)?;
                    let base = lock(&base);
                    match base.as_ref() {
                        Some(b) => LiveIndex::seeded(dir, b, cache),
                        None => LiveIndex::build(dir, cache, &Default::default()),
                    }
                }
                None => LiveIndex::build(dir, cache, &Default::default()),
            },
        };
        *held = Some(fresh?);
        drop(held);
        Ok(slot)
    }

    /// A copy of `base`'s index the first time it is asked for (once it is held), for its
    /// tree-sitter tier to be parsed into the cache in the background
    /// ([`LiveIndex::warm_symbols`]): later packs find their candidates' symbols there.
    pub(crate) fn unwarmed(&self, base: &Path) -> Option<LiveIndex> {
        let base = std::fs::canonicalize(base).ok()?;
        let live = lock(&self.slot(&base)).clone()?;
        lock(&self.warmed).insert(base).then_some(live)
    }

    /// The pack for `text` (or, with `changed`, the changed files' neighbourhood) from the
    /// index of `worktree`, started from `base`'s the first time.
    pub(crate) fn select(
        &self,
        worktree: &Path,
        base: Option<&Path>,
        text: &str,
        changed: Option<&[String]>,
        opts: &gaffer_index::PackOptions,
        cache: &dyn IndexCache,
    ) -> gaffer_index::Result<Selection> {
        let worktree =
            std::fs::canonicalize(worktree).map_err(|source| gaffer_index::Error::Repo {
                path: worktree.to_path_buf(),
                source,
            })?;
        let base = base.and_then(|b| std::fs::canonicalize(b).ok());
        let tok = match self.tok.get() {
            Some(tok) => tok,
            None => {
                let loaded = gaffer_index::Tokenizer::load(CONTEXT_TOKENIZER)?;
                self.tok.get_or_init(|| loaded)
            }
        };
        let slot = self.refreshed(&worktree, base.as_deref(), cache)?;
        let held = lock(&slot);
        let Some(live) = held.as_ref() else {
            return Ok(Selection {
                budget: opts.budget,
                used: 0,
                files: Vec::new(),
            });
        };
        match changed {
            Some(files) => live.select_neighbourhood(files, opts, tok, cache),
            None => live.select_context(text, opts, tok, cache),
        }
    }
}

impl Engine {
    /// The files the context manager picks for `text` (or, for review, the changed
    /// files and their neighbourhood), with why, and their contents or signatures
    /// within the context budget; the pack (files, full or skeleton, tokens) is
    /// recorded with `step` before the prompt goes out. Context is a help, never a
    /// reason to fail a step: a selection that fails gives an empty context.
    pub(crate) async fn repo_context(
        &self,
        task: &TaskState,
        step: &Step,
        role: Role,
        wt: &Worktree,
        text: &str,
        changed: Option<Vec<String>>,
    ) -> Result<String, Failure> {
        let Some(selection) = self.select_context(task, wt, text, changed).await else {
            return Ok(String::new());
        };
        self.record_pack(task, step, role, &selection).await?;
        if selection.files.is_empty() {
            return Ok(String::new());
        }
        let list: Vec<String> = selection
            .files
            .iter()
            .map(|e| format!("- {} ({:?}): {}", e.path, e.mode, e.reasons.join("; ")))
            .collect();
        Ok(format!(
            "Files gaffer's context manager picked as a starting point (read others as you need):\n{}\n\n{}",
            list.join("\n"),
            selection.pack()
        ))
    }

    /// The context manager's selection for `text` (or the neighbourhood of `changed`)
    /// from the worktree's held index; `None` when it fails.
    pub(crate) async fn select_context(
        &self,
        task: &TaskState,
        wt: &Worktree,
        text: &str,
        changed: Option<Vec<String>>,
    ) -> Option<gaffer_index::Selection> {
        let base = self.project(task).await.ok().map(|p| PathBuf::from(p.path));
        let cache = self.settings.index_cache.clone();
        let indexes = self.indexes.clone();
        let root = wt.path.clone();
        let text = text.to_owned();
        let opts = gaffer_index::PackOptions {
            budget: self.settings.context_budget,
            ..Default::default()
        };
        let warm_cache = cache.clone();
        let picked = tokio::task::spawn_blocking(move || {
            let selection = indexes.select(
                &root,
                base.as_deref(),
                &text,
                changed.as_deref(),
                &opts,
                cache.as_ref(),
            );
            (selection, base.and_then(|b| indexes.unwarmed(&b)))
        })
        .await
        .map(|(selection, unwarmed)| {
            if let Some(live) = unwarmed {
                tokio::task::spawn_blocking(move || {
                    if let Err(e) = live.warm_symbols(warm_cache.as_ref()) {
                        tracing::warn!("warming the index's tree-sitter tier failed: {e}");
                    }
                });
            }
            selection
        });
        match picked {
            Ok(Ok(s)) => Some(s),
            Ok(Err(e)) => {
                tracing::warn!("context selection failed: {e}");
                None
            }
            Err(e) => {
                tracing::warn!("context selection stopped: {e}");
                None
            }
        }
    }

    /// Record the pack `role` receives with `step`: which files, full or skeleton, and
    /// their tokens (empty packs too, so a person sees the agent got nothing).
    pub(crate) async fn record_pack(
        &self,
        task: &TaskState,
        step: &Step,
        role: Role,
        selection: &gaffer_index::Selection,
    ) -> Result<(), Failure> {
        let pack = ContextPack {
            budget: selection.budget as u64,
            used: selection.used as u64,
            files: selection
                .files
                .iter()
                .map(|e| PackedFile {
                    path: self.settings.redactor.redact(&e.path),
                    mode: match e.mode {
                        gaffer_index::Mode::Full => PackMode::Full,
                        gaffer_index::Mode::Skeleton => PackMode::Skeleton,
                    },
                    tokens: e.tokens as u64,
                })
                .collect(),
        };
        // The reducer refuses a pack that cannot be one (a path a redaction broke): the
        // agent still gets its context, the record is left out with a warning.
        match pack.problem() {
            Some(problem) => tracing::warn!("context pack not recorded: {problem}"),
            None => {
                self.append(
                    &task.id,
                    vec![Event::StepContextPacked {
                        step_id: step.id.clone(),
                        role,
                        pack,
                    }],
                )
                .await?
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use gaffer_index::{MemoryCache, PackOptions};
    use pretty_assertions::assert_eq;

    fn write(dir: &Path, path: &str, text: &str) {
        let p = dir.join(path);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }

    fn tree(dir: &Path) {
        write(dir, "pkg/__init__.py", "");
        write(
            dir,
            "pkg/render.py",
            "from .layout import place\n\ndef render_total(frame):\n    return place(frame)\n",
        );
        write(
            dir,
            "pkg/layout.py",
            "def place(frame):\n    return frame\n",
        );
        write(dir, "README.md", "# Widgets\n");
    }

    #[test]
    fn every_role_of_a_worktree_shares_one_index_that_follows_its_edits() {
        let (base, wt) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        tree(base.path());
        tree(wt.path());
        write(
            wt.path(),
            "pkg/layout.py",
            "def place(frame, gap=0):\n    return frame\n",
        );
        let cache = MemoryCache::new();
        let indexes = Indexes::default();
        let opts = PackOptions {
            budget: 2000,
            ..PackOptions::default()
        };
        let text = "render_total places the frame wrong";
        let first = indexes
            .select(wt.path(), Some(base.path()), text, None, &opts, &cache)
            .unwrap();
        // The worktree's index, started from the project's: what a build from scratch picks.
        assert_eq!(indexes.len(), 2);
        let fresh = gaffer_index::select_context(
            wt.path(),
            text,
            &opts,
            CONTEXT_TOKENIZER,
            &MemoryCache::new(),
        )
        .unwrap();
        assert_eq!(first, fresh);
        let held = |d: &Path| indexes.slot(&std::fs::canonicalize(d).unwrap());
        assert!(Arc::ptr_eq(&held(wt.path()), &held(wt.path())));
        // The next role sees the worktree as it is now, from the same held index.
        write(
            wt.path(),
            "pkg/invoice.py",
            "def parse_invoice_total(text):\n    return 0\n",
        );
        let second = indexes
            .select(
                wt.path(),
                Some(base.path()),
                "parse_invoice_total returns 0",
                None,
                &opts,
                &cache,
            )
            .unwrap();
        assert_eq!(second.files[0].path, "pkg/invoice.py");
        let review = indexes
            .select(
                wt.path(),
                Some(base.path()),
                "",
                Some(&["pkg/invoice.py".to_string()]),
                &opts,
                &cache,
            )
            .unwrap();
        assert_eq!(review.files[0].path, "pkg/invoice.py");
        assert_eq!(
            indexes.len(),
            2,
            "one index for the worktree, one for the project"
        );
        // The project's tree-sitter tier is handed out to be warmed once.
        let warm = indexes.unwarmed(base.path()).unwrap();
        // The project's layout.py differs from the worktree's: no pack parsed it yet.
        assert!(warm.warm_symbols(&cache).unwrap() >= 1);
        assert_eq!(
            warm.warm_symbols(&cache).unwrap(),
            0,
            "all in the cache now"
        );
        assert!(indexes.unwarmed(base.path()).is_none());
        // The project's checkout was not changed by the worktree's edits.
        let base_only = indexes
            .select(
                base.path(),
                None,
                "parse_invoice_total",
                None,
                &opts,
                &cache,
            )
            .unwrap();
        assert!(base_only.files.iter().all(|f| f.path != "pkg/invoice.py"));
        // A finished task's worktree, once removed, is forgotten.
        let wt_path = wt.path().to_path_buf();
        drop(wt);
        assert!(!wt_path.exists());
        indexes
            .select(base.path(), None, "render_total", None, &opts, &cache)
            .unwrap();
        assert_eq!(indexes.len(), 1);
    }
}
