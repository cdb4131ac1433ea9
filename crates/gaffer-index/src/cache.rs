//! The index cache: per-file facts keyed by content hash.
//!
//! The trait is synchronous and byte-oriented so that the store can implement it on a SQLite
//! table `(key TEXT PRIMARY KEY, value BLOB)`. Two implementations live here: [`MemoryCache`]
//! (tests, one-shot runs) and [`DirCache`] (one file per key under a directory).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use crate::error::{Error, Result};

/// Bump when the layout of cached values changes: old entries are then never read again.
pub const FORMAT_VERSION: u32 = 8;

/// The key of one cached value: a 32-byte digest plus the index format version.
///
/// For a file the digest covers its content and its language, so the same bytes under another
/// extension are parsed again; for a repository manifest it covers the repository path.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ContentKey {
    /// [`FORMAT_VERSION`] when the key was made.
    pub format: u32,
    /// blake3 digest.
    pub digest: [u8; 32],
}

impl ContentKey {
    /// The key of a file's facts: its content hash and language tag.
    pub fn for_file(content_hash: &[u8; 32], lang_tag: &str) -> Self {
        let mut h = blake3::Hasher::new();
        h.update(b"gaffer-index file\0");
        h.update(content_hash);
        h.update(lang_tag.as_bytes());
        Self {
            format: FORMAT_VERSION,
            digest: *h.finalize().as_bytes(),
        }
    }

    /// The key of a repository's manifest (path → size, mtime, content hash).
    pub fn for_manifest(root: &Path) -> Self {
        let mut h = blake3::Hasher::new();
        h.update(b"gaffer-index manifest\0");
        h.update(root.to_string_lossy().as_bytes());
        Self {
            format: FORMAT_VERSION,
            digest: *h.finalize().as_bytes(),
        }
    }

    /// A stable text form, `v{format}-{hex digest}`: a file name or a TEXT primary key.
    pub fn to_hex(&self) -> String {
        let mut s = format!("v{}-", self.format);
        for b in self.digest {
            s.push_str(&format!("{b:02x}"));
        }
        s
    }
}

/// Where the index keeps per-file facts between runs. Implemented by the store on its SQLite
/// tables; values are opaque bytes.
pub trait IndexCache: Send + Sync {
    /// Values for `keys`, in the same order; `None` where absent.
    fn get_many(&self, keys: &[ContentKey]) -> Result<Vec<Option<Vec<u8>>>>;
    /// Stores (or replaces) values.
    fn put_many(&self, entries: &[(ContentKey, Vec<u8>)]) -> Result<()>;
}

/// An in-memory cache; counts how many values were put (tests use it).
#[derive(Default)]
pub struct MemoryCache {
    map: Mutex<HashMap<ContentKey, Vec<u8>>>,
}

impl MemoryCache {
    /// An empty cache.
    pub fn new() -> Self {
        Self::default()
    }

    /// Number of stored values.
    pub fn len(&self) -> usize {
        self.map.lock().map(|m| m.len()).unwrap_or(0)
    }

    /// Whether nothing is stored.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl IndexCache for MemoryCache {
    fn get_many(&self, keys: &[ContentKey]) -> Result<Vec<Option<Vec<u8>>>> {
        let map = self
            .map
            .lock()
            .map_err(|_| Error::Cache("memory cache lock poisoned".into()))?;
        Ok(keys.iter().map(|k| map.get(k).cloned()).collect())
    }

    fn put_many(&self, entries: &[(ContentKey, Vec<u8>)]) -> Result<()> {
        let mut map = self
            .map
            .lock()
            .map_err(|_| Error::Cache("memory cache lock poisoned".into()))?;
        for (k, v) in entries {
            map.insert(*k, v.clone());
        }
        Ok(())
    }
}

/// A cache with one file per key under a directory (`ab/v3-ab….bin`); writes go through a
/// temporary file and a rename, so a crash never leaves a torn value.
pub struct DirCache {
    dir: PathBuf,
}

impl DirCache {
    /// A cache under `dir` (created on first write).
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self { dir: dir.into() }
    }

    /// `$XDG_CACHE_HOME/gaffer/index`, else `$HOME/.cache/gaffer/index`, else a temp dir.
    pub fn default_dir() -> PathBuf {
        let base = std::env::var_os("XDG_CACHE_HOME")
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
            .unwrap_or_else(std::env::temp_dir);
        base.join("gaffer").join("index")
    }

    /// The directory holding the values.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn path_of(&self, key: &ContentKey) -> PathBuf {
        let hex = key.to_hex();
        let shard = format!("{:02x}", key.digest[0]);
        self.dir.join(shard).join(format!("{hex}.bin"))
    }
}

impl IndexCache for DirCache {
    fn get_many(&self, keys: &[ContentKey]) -> Result<Vec<Option<Vec<u8>>>> {
        keys.iter()
            .map(|k| match std::fs::read(self.path_of(k)) {
                Ok(v) => Ok(Some(v)),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
                Err(e) => Err(Error::Cache(format!(
                    "reading {}: {e}",
                    self.path_of(k).display()
                ))),
            })
            .collect()
    }

    fn put_many(&self, entries: &[(ContentKey, Vec<u8>)]) -> Result<()> {
        use rayon::prelude::*;
        entries.par_iter().try_for_each(|(k, v)| {
            let path = self.path_of(k);
            let parent = path.parent().unwrap_or(&self.dir);
            std::fs::create_dir_all(parent)
                .map_err(|e| Error::Cache(format!("creating {}: {e}", parent.display())))?;
            // Unique per process and write: two writers of one key (the same content twice in a
            // batch, or two processes) must not share a temporary file.
            static SEQ: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
            let seq = SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let tmp = path.with_extension(format!("tmp{}-{seq}", std::process::id()));
            std::fs::write(&tmp, v)
                .map_err(|e| Error::Cache(format!("writing {}: {e}", tmp.display())))?;
            std::fs::rename(&tmp, &path)
                .map_err(|e| Error::Cache(format!("renaming to {}: {e}", path.display())))
        })
    }
}
