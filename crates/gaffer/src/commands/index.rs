//! `gaffer index` and `gaffer context`, with the index cached in the journal's database.

use crate::cli::Global;
use crate::error::{CliError, Result};
use crate::setup::{load_config, open_journal};
use gaffer_index::cli::{run_context, run_index, ContextArgs, IndexArgs};
use gaffer_index::{ContentKey, IndexCache};
use gaffer_store::Journal;
use std::process::ExitCode;
use std::sync::Arc;

/// The index cache on the store's `blobs` table. The index is synchronous: it runs
/// on a blocking thread and reaches the async store through the runtime's handle.
/// Values are masked before they are stored: a secret in a file name (a manifest) or
/// in a string literal (a file's facts) is overwritten byte for byte, which keeps
/// the value decodable (a masked path costs re-reading that file, no more).
pub struct StoreCache {
    journal: Arc<dyn Journal>,
    redactor: Arc<gaffer_agents::Redactor>,
    runtime: tokio::runtime::Handle,
}

impl StoreCache {
    /// A cache over `journal` masking what `redactor` knows; use it from a blocking
    /// thread.
    pub fn new(journal: Arc<dyn Journal>, redactor: Arc<gaffer_agents::Redactor>) -> Self {
        Self {
            journal,
            redactor,
            runtime: tokio::runtime::Handle::current(),
        }
    }
}

impl IndexCache for StoreCache {
    fn get_many(&self, keys: &[ContentKey]) -> gaffer_index::Result<Vec<Option<Vec<u8>>>> {
        let keys: Vec<String> = keys.iter().map(ContentKey::to_hex).collect();
        self.runtime
            .block_on(self.journal.blobs_get(&keys))
            .map_err(|e| gaffer_index::Error::Cache(e.to_string()))
    }

    fn put_many(&self, entries: &[(ContentKey, Vec<u8>)]) -> gaffer_index::Result<()> {
        let entries: Vec<(String, Vec<u8>)> = entries
            .iter()
            .map(|(k, v)| {
                let mut v = v.clone();
                self.redactor.mask_bytes(&mut v);
                (k.to_hex(), v)
            })
            .collect();
        self.runtime
            .block_on(self.journal.blobs_put(&entries))
            .map_err(|e| gaffer_index::Error::Cache(e.to_string()))
    }
}

fn index_error(e: gaffer_index::Error) -> CliError {
    use gaffer_index::Error as E;
    match e {
        E::Repo { .. }
        | E::NotADirectory { .. }
        | E::EmptyText
        | E::BudgetTooSmall { .. }
        | E::BadWeight(_) => CliError::config(e.to_string()),
        other => CliError::failed(other.to_string()),
    }
}

async fn with_cache<F>(global: &Global, work: F) -> Result<ExitCode>
where
    F: FnOnce(&StoreCache, &mut dyn std::io::Write) -> gaffer_index::Result<()> + Send + 'static,
{
    let config = load_config(global)?;
    let journal = open_journal(&config).await?;
    let redactor = crate::setup::redactor(&config, crate::setup::configured_token_values(&config));
    let cache = StoreCache::new(journal, Arc::new(redactor));
    let outcome = tokio::task::spawn_blocking(move || {
        // File names and contents come from the repository: escaped like the rest.
        let mut out = crate::term::stdout();
        work(&cache, &mut out)
    })
    .await
    .map_err(|e| CliError::failed(e.to_string()))?;
    match outcome {
        Ok(()) => Ok(ExitCode::SUCCESS),
        Err(gaffer_index::Error::Io(e)) if e.kind() == std::io::ErrorKind::BrokenPipe => {
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => Err(index_error(e)),
    }
}

pub async fn index(global: &Global, args: IndexArgs) -> Result<ExitCode> {
    with_cache(global, move |cache, out| run_index(&args, cache, out)).await
}

pub async fn context(global: &Global, args: ContextArgs) -> Result<ExitCode> {
    with_cache(global, move |cache, out| run_context(&args, cache, out)).await
}
