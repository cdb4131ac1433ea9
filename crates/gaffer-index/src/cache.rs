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
pub const FORMAT_VERSION: u32 = 9;

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

    /// The key of a file's tree-sitter symbols (the lazy tier): its content hash and language.
    pub fn for_symbols(content_hash: &[u8; 32], lang_tag: &str) -> Self {
        let mut h = blake3::Hasher::new();
        h.update(b"gaffer-index symbols\0");
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

/// A cache in a directory: a batch of values is written as one immutable pack file
/// (`packs/<hash>.pack`: a table of keys, offsets and lengths, then the values), a single value
/// as one file (`ab/v8-ab….bin`). Every file is written to a temporary name and renamed, so a
/// crash never leaves a torn value and concurrent processes never see one. Packs are never
/// rewritten or removed (delete the directory to reclaim space).
pub struct DirCache {
    dir: PathBuf,
    /// Key → where its value is in a pack; loaded on first use.
    packs: Mutex<Option<PackIndex>>,
}

/// Where a value lives: pack file, offset, length.
type PackSlot = (std::sync::Arc<PathBuf>, u64, u32);
type PackIndex = HashMap<ContentKey, PackSlot>;

const PACK_MAGIC: &[u8; 4] = b"GXP1";
const PACK_ENTRY: usize = 4 + 32 + 8 + 4;

fn unique_tmp(path: &Path) -> PathBuf {
    // Unique per process and write: two writers of one key (the same content twice in a batch,
    // or two processes) must not share a temporary file.
    static SEQ: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let seq = SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    path.with_extension(format!("tmp{}-{seq}", std::process::id()))
}

fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)
            .map_err(|e| Error::Cache(format!("creating {}: {e}", parent.display())))?;
    }
    let tmp = unique_tmp(path);
    std::fs::write(&tmp, bytes)
        .map_err(|e| Error::Cache(format!("writing {}: {e}", tmp.display())))?;
    std::fs::rename(&tmp, path)
        .map_err(|e| Error::Cache(format!("renaming to {}: {e}", path.display())))
}

/// Reads a pack's table; `None` if the file is not a well-formed pack.
fn read_pack_table(path: &Path) -> Option<Vec<(ContentKey, u64, u32)>> {
    use std::io::Read;
    let mut f = std::fs::File::open(path).ok()?;
    let size = f.metadata().ok()?.len();
    let mut head = [0u8; 8];
    f.read_exact(&mut head).ok()?;
    if &head[..4] != PACK_MAGIC {
        return None;
    }
    let count = u32::from_le_bytes(head[4..8].try_into().ok()?) as usize;
    if (8 + count * PACK_ENTRY) as u64 > size {
        return None;
    }
    let mut table = vec![0u8; count * PACK_ENTRY];
    f.read_exact(&mut table).ok()?;
    let mut out = Vec::with_capacity(count);
    for e in table.chunks_exact(PACK_ENTRY) {
        let format = u32::from_le_bytes(e[0..4].try_into().ok()?);
        let digest: [u8; 32] = e[4..36].try_into().ok()?;
        let offset = u64::from_le_bytes(e[36..44].try_into().ok()?);
        let len = u32::from_le_bytes(e[44..48].try_into().ok()?);
        if offset + len as u64 > size {
            return None;
        }
        out.push((ContentKey { format, digest }, offset, len));
    }
    Some(out)
}

impl DirCache {
    /// A cache under `dir` (created on first write).
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self {
            dir: dir.into(),
            packs: Mutex::new(None),
        }
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

    fn load_packs(&self) -> PackIndex {
        let mut map = HashMap::new();
        let Ok(entries) = std::fs::read_dir(self.dir.join("packs")) else {
            return map;
        };
        for e in entries.flatten() {
            let path = e.path();
            if path.extension().is_none_or(|x| x != "pack") {
                continue;
            }
            let Some(table) = read_pack_table(&path) else {
                continue;
            };
            let path = std::sync::Arc::new(path);
            for (k, off, len) in table {
                map.insert(k, (path.clone(), off, len));
            }
        }
        map
    }
}

impl IndexCache for DirCache {
    fn get_many(&self, keys: &[ContentKey]) -> Result<Vec<Option<Vec<u8>>>> {
        use std::io::{Read, Seek, SeekFrom};
        let located: Vec<Option<PackSlot>> = {
            let mut packs = self
                .packs
                .lock()
                .map_err(|_| Error::Cache("pack index lock poisoned".into()))?;
            let map = packs.get_or_insert_with(|| self.load_packs());
            keys.iter().map(|k| map.get(k).cloned()).collect()
        };
        let mut open: Option<(std::sync::Arc<PathBuf>, std::fs::File)> = None;
        let mut out = Vec::with_capacity(keys.len());
        for (k, loc) in keys.iter().zip(located) {
            if let Some((pack, off, len)) = loc {
                if open
                    .as_ref()
                    .is_none_or(|(p, _)| !std::sync::Arc::ptr_eq(p, &pack))
                {
                    open = std::fs::File::open(pack.as_path())
                        .ok()
                        .map(|f| (pack.clone(), f));
                }
                let value = open.as_mut().and_then(|(_, f)| {
                    let mut buf = vec![0u8; len as usize];
                    f.seek(SeekFrom::Start(off)).ok()?;
                    f.read_exact(&mut buf).ok()?;
                    Some(buf)
                });
                if value.is_some() {
                    out.push(value);
                    continue;
                }
            }
            match std::fs::read(self.path_of(k)) {
                Ok(v) => out.push(Some(v)),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => out.push(None),
                Err(e) => {
                    return Err(Error::Cache(format!(
                        "reading {}: {e}",
                        self.path_of(k).display()
                    )))
                }
            }
        }
        Ok(out)
    }

    fn put_many(&self, entries: &[(ContentKey, Vec<u8>)]) -> Result<()> {
        if entries.len() == 1 {
            return write_atomic(&self.path_of(&entries[0].0), &entries[0].1);
        }
        let mut seen = std::collections::HashSet::new();
        let unique: Vec<&(ContentKey, Vec<u8>)> =
            entries.iter().filter(|(k, _)| seen.insert(*k)).collect();
        if unique.is_empty() {
            return Ok(());
        }
        let mut bytes = Vec::new();
        bytes.extend_from_slice(PACK_MAGIC);
        bytes.extend_from_slice(&(unique.len() as u32).to_le_bytes());
        let mut offset = (8 + unique.len() * PACK_ENTRY) as u64;
        let mut hasher = blake3::Hasher::new();
        for (k, v) in &unique {
            bytes.extend_from_slice(&k.format.to_le_bytes());
            bytes.extend_from_slice(&k.digest);
            bytes.extend_from_slice(&offset.to_le_bytes());
            bytes.extend_from_slice(&(v.len() as u32).to_le_bytes());
            offset += v.len() as u64;
            hasher.update(&k.digest);
        }
        for (_, v) in &unique {
            bytes.extend_from_slice(v);
        }
        let name: String = hasher.finalize().as_bytes()[..16]
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        let path = self.dir.join("packs").join(format!("{name}.pack"));
        write_atomic(&path, &bytes)?;
        // Make the new values visible to this instance without rescanning the directory.
        if let Ok(mut packs) = self.packs.lock() {
            if let Some(map) = packs.as_mut() {
                if let Some(table) = read_pack_table(&path) {
                    let path = std::sync::Arc::new(path);
                    for (k, off, len) in table {
                        map.insert(k, (path.clone(), off, len));
                    }
                }
            }
        }
        Ok(())
    }
}
