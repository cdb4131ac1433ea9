//! Opening either backend from what the user wrote: a path, `sqlite://PATH`,
//! or `postgres://…` / `postgresql://…`.

use crate::{Durability, Journal, PgJournal, Result, SqliteJournal};
use std::path::PathBuf;
use std::sync::Arc;

/// Where a journal lives, parsed from a URL or a path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Location {
    /// A SQLite file (a plain path or `sqlite://PATH`).
    Sqlite(PathBuf),
    /// A PostgreSQL database URL (`postgres://…` or `postgresql://…`), as given.
    Postgres(String),
}

impl Location {
    /// Parse `url_or_path`. Any other `scheme://` is refused with a message naming
    /// what is supported.
    pub fn parse(url_or_path: &str) -> std::result::Result<Self, String> {
        let lower = url_or_path.to_ascii_lowercase();
        if lower.starts_with("postgres://") || lower.starts_with("postgresql://") {
            return Ok(Self::Postgres(url_or_path.to_owned()));
        }
        if let Some(path) = url_or_path.strip_prefix("sqlite://") {
            return Ok(Self::Sqlite(PathBuf::from(path)));
        }
        if let Some((scheme, _)) = url_or_path.split_once("://") {
            return Err(format!(
                "`{scheme}://` is not a journal this build can open: use a file path, sqlite://PATH or postgres://USER:PASSWORD@HOST:PORT/DATABASE"
            ));
        }
        Ok(Self::Sqlite(PathBuf::from(url_or_path)))
    }

    /// What to show in messages: the path, or the URL with its password masked.
    pub fn shown(&self) -> String {
        match self {
            Self::Sqlite(path) => path.display().to_string(),
            Self::Postgres(url) => crate::mask_url(url),
        }
    }
}

/// Open the journal at `url_or_path` (see [`Location::parse`]), migrating it to
/// this build's schema. A URL of another scheme is [`crate::StoreError::Unsupported`].
pub async fn open(url_or_path: &str, durability: Durability) -> Result<Arc<dyn Journal>> {
    match Location::parse(url_or_path).map_err(crate::StoreError::Unsupported)? {
        Location::Sqlite(path) => Ok(Arc::new(SqliteJournal::open(&path, durability).await?)),
        Location::Postgres(url) => Ok(Arc::new(PgJournal::open(&url, durability).await?)),
    }
}

/// The schema a database is at, against the one this build migrates it to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct SchemaFound {
    /// The version the database holds (`None`: no database or no tables yet).
    pub found: Option<i64>,
    /// The newest version this build knows.
    pub supported: i64,
}

impl SchemaFound {
    /// Migrations the next open will apply (0 for a new database, which is
    /// simply created).
    pub fn pending(&self) -> i64 {
        self.found.map_or(0, |f| (self.supported - f).max(0))
    }
}

/// The schema version of the journal at `url_or_path`, read without migrating or
/// creating anything. A newer or foreign schema is the same error [`open`] gives.
pub async fn schema_found(url_or_path: &str) -> Result<SchemaFound> {
    match Location::parse(url_or_path).map_err(crate::StoreError::Unsupported)? {
        Location::Sqlite(path) => Ok(SchemaFound {
            found: SqliteJournal::schema_found(&path).await?,
            supported: SqliteJournal::supported_schema_version(),
        }),
        Location::Postgres(url) => Ok(SchemaFound {
            found: PgJournal::schema_found(&url).await?,
            supported: PgJournal::supported_schema_version(),
        }),
    }
}
