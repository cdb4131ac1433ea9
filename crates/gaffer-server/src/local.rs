//! The local secret: what makes a request on this machine a person's request.
//!
//! Being on loopback proves nothing: every process on the machine is there, agents
//! and what they left running included. So even without configured tokens every
//! request needs a credential, and the one a person holds without configuring
//! anything is a random secret in the data dir (`<data dir>/local-secret`, mode
//! 0600, made by the first gaffer command that needs it). The sandbox keeps agents
//! from reading the data dir; the file mode keeps other users out.
//!
//! - **Scripts** send it as `Authorization: Bearer <secret>` (`gaffer login-link
//!   --json` prints it, or read the file).
//! - **The page**: `gaffer serve` prints a login link once (`/login?code=…`); the
//!   code is signed with the secret (HMAC-SHA256), lasts [`LINK_LIFETIME_MS`] and
//!   is taken once per server process. Opening it sets an HttpOnly, SameSite=Strict
//!   session cookie, itself signed with the secret, so a restarted server (same
//!   data dir, same secret) still accepts the page that logged in before. The CSRF
//!   token is derived from the secret too, so a page loaded before a restart can
//!   still change things after it.
//! - Deleting the file (and restarting) makes a new secret: every link, session and
//!   script holding the old one is refused from then on.
//!
//! Every decision a local credential makes is recorded as the person running the
//! server (the OS user), `via` `web:login-link` or `api:local-secret`: never an
//! anonymous `local`.

use hmac::{Hmac, Mac};
use sha2::Sha256;
use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use subtle::ConstantTimeEq;

/// The secret's file in the data dir.
pub const FILE_NAME: &str = "local-secret";
/// How long a login link can be opened, in ms (24 hours).
pub const LINK_LIFETIME_MS: i64 = 24 * 3600 * 1000;
/// How long the page stays logged in, in ms (30 days).
pub const SESSION_LIFETIME_MS: i64 = 30 * 24 * 3600 * 1000;

const PREFIX: &str = "gls_";

/// Why the local secret cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum LocalSecretError {
    /// The file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The file is not what gaffer writes, or others may read it.
    #[error("{path}: {problem}")]
    Unusable {
        /// The file.
        path: PathBuf,
        /// What is wrong and what to do.
        problem: String,
    },
}

/// The local secret and the person it stands for.
#[derive(Clone)]
pub struct LocalSecret {
    secret: Arc<str>,
    person: Arc<str>,
    /// Nonces of login links already opened (this process), with their expiry.
    used_links: Arc<Mutex<HashMap<String, i64>>>,
}

impl std::fmt::Debug for LocalSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalSecret")
            .field("person", &self.person)
            .finish_non_exhaustive()
    }
}

fn random_hex() -> String {
    // Two v4 UUIDs: 244 random bits from the OS generator.
    format!(
        "{}{}",
        uuid::Uuid::new_v4().simple(),
        uuid::Uuid::new_v4().simple()
    )
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> LocalSecretError + '_ {
    move |source| LocalSecretError::Io {
        path: path.to_owned(),
        source,
    }
}

impl LocalSecret {
    /// A fresh secret kept only in memory (tests, benchmarks).
    pub fn generate(person: &str) -> Self {
        Self::from_secret(format!("{PREFIX}{}", random_hex()), person)
    }

    fn from_secret(secret: String, person: &str) -> Self {
        Self {
            secret: secret.into(),
            person: person.into(),
            used_links: Arc::default(),
        }
    }

    /// The secret in `data_dir`, made (0600, atomically: concurrent first runs agree
    /// on one) when there is none. A file others may read, or one gaffer did not
    /// write, is refused with what to do.
    pub fn load_or_create(data_dir: &Path, person: &str) -> Result<Self, LocalSecretError> {
        let path = data_dir.join(FILE_NAME);
        match Self::load(&path, person) {
            Err(LocalSecretError::Io { source, .. })
                if source.kind() == std::io::ErrorKind::NotFound => {}
            other => return other,
        }
        std::fs::create_dir_all(data_dir).map_err(io(data_dir))?;
        let temp = data_dir.join(format!(".{FILE_NAME}.{}", uuid::Uuid::new_v4().simple()));
        let secret = format!("{PREFIX}{}", random_hex());
        let written = (|| {
            let mut f = private_file(&temp)?;
            f.write_all(format!("{secret}\n").as_bytes())?;
            f.sync_all()
        })();
        // A hard link publishes the whole file or nothing, and never replaces one
        // another process published first (then that one is used).
        let published = written.and_then(|()| std::fs::hard_link(&temp, &path));
        let _ = std::fs::remove_file(&temp);
        match published {
            Ok(()) => Ok(Self::from_secret(secret, person)),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Self::load(&path, person),
            Err(e) => Err(io(&path)(e)),
        }
    }

    fn load(path: &Path, person: &str) -> Result<Self, LocalSecretError> {
        let unusable = |problem: String| LocalSecretError::Unusable {
            path: path.to_owned(),
            problem,
        };
        let meta = std::fs::metadata(path).map_err(io(path))?;
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = meta.permissions().mode() & 0o777;
            if mode & 0o077 != 0 {
                return Err(unusable(format!(
                    "mode {mode:o} lets other users read the secret; `chmod 600` it if nobody else could have read it, else delete it (gaffer makes a new one; old login links and sessions stop working)"
                )));
            }
        }
        let text = std::fs::read_to_string(path).map_err(io(path))?;
        let secret = text.trim();
        let well_formed = secret
            .strip_prefix(PREFIX)
            .is_some_and(|hex| hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_hexdigit()));
        if !well_formed {
            return Err(unusable(
                "is not a secret gaffer wrote; delete it and gaffer makes a new one".into(),
            ));
        }
        Ok(Self::from_secret(secret.to_owned(), person))
    }

    /// The secret itself, for `Authorization: Bearer` and for the redactor.
    pub fn expose(&self) -> &str {
        &self.secret
    }

    /// Who a local credential stands for (the OS user running gaffer).
    pub fn person(&self) -> &str {
        &self.person
    }

    fn mac(&self, parts: &[&str]) -> String {
        // HMAC accepts keys of any length: this cannot fail.
        let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(self.secret.as_bytes()) else {
            return String::new();
        };
        for p in parts {
            mac.update(p.as_bytes());
            mac.update(b"\n");
        }
        hex::encode(mac.finalize().into_bytes())
    }

    /// A login link on `base` (`http://127.0.0.1:7777`), valid from `now_ms` for
    /// [`LINK_LIFETIME_MS`], once.
    pub fn login_link(&self, base: &str, now_ms: i64) -> String {
        let expires = now_ms + LINK_LIFETIME_MS;
        let nonce = uuid::Uuid::new_v4().simple().to_string();
        let mac = self.mac(&["login", &expires.to_string(), &nonce]);
        format!(
            "{}/login?code={expires}.{nonce}.{mac}",
            base.trim_end_matches('/')
        )
    }

    /// A key for `purpose` (like `notify-link`), derived from the secret: stable
    /// across restarts, unknowable without the secret, different per purpose.
    pub fn derived_key(&self, purpose: &str) -> [u8; 32] {
        let mut key = [0u8; 32];
        let _ = hex::decode_to_slice(self.mac(&["derive", purpose]), &mut key);
        key
    }

    /// Whether `bearer` is the secret (constant time).
    pub(crate) fn is_secret(&self, bearer: &str) -> bool {
        crate::auth::secret_eq(bearer, &self.secret)
    }

    /// Take a login code: a fresh session cookie value when the code is genuine,
    /// unexpired and not taken before by this process.
    pub(crate) fn take_code(&self, code: &str, now_ms: i64) -> Option<String> {
        let [expires, nonce, mac] = split3(code)?;
        let expires_at: i64 = expires.parse().ok()?;
        if !self.mac_matches(&["login", expires, nonce], mac) || expires_at <= now_ms {
            return None;
        }
        let mut used = self.used_links.lock().ok()?;
        used.retain(|_, until| *until > now_ms);
        if used.insert(nonce.to_owned(), expires_at).is_some() {
            return None;
        }
        Some(self.new_session(now_ms))
    }

    /// A fresh session cookie value, issued at `now_ms`.
    pub(crate) fn new_session(&self, now_ms: i64) -> String {
        let nonce = uuid::Uuid::new_v4().simple().to_string();
        let issued = now_ms.to_string();
        let mac = self.mac(&["session", &issued, &nonce]);
        format!("{issued}.{nonce}.{mac}")
    }

    /// Whether a session cookie value is genuine and unexpired.
    pub(crate) fn is_session(&self, cookie: &str, now_ms: i64) -> bool {
        let Some([issued, nonce, mac]) = split3(cookie) else {
            return false;
        };
        let Ok(issued_at) = issued.parse::<i64>() else {
            return false;
        };
        self.mac_matches(&["session", issued, nonce], mac)
            && issued_at <= now_ms + 60_000
            && now_ms - issued_at < SESSION_LIFETIME_MS
    }

    /// The CSRF token of gaffer's own page: derived from the secret, so a page
    /// loaded before a restart still works after it, and unknowable without it.
    pub(crate) fn csrf(&self) -> String {
        self.mac(&["csrf"])
    }

    fn mac_matches(&self, parts: &[&str], mac: &str) -> bool {
        self.mac(parts).as_bytes().ct_eq(mac.as_bytes()).into()
    }
}

fn split3(s: &str) -> Option<[&str; 3]> {
    let mut parts = s.split('.');
    let out = [parts.next()?, parts.next()?, parts.next()?];
    parts.next().is_none().then_some(out)
}

#[cfg(unix)]
fn private_file(path: &Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
}

#[cfg(not(unix))]
fn private_file(path: &Path) -> std::io::Result<std::fs::File> {
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn made_once_private_and_read_back_the_same() {
        let dir = tempfile::tempdir().unwrap();
        let a = LocalSecret::load_or_create(dir.path(), "ana").unwrap();
        let b = LocalSecret::load_or_create(dir.path(), "ana").unwrap();
        assert_eq!(a.expose(), b.expose());
        assert!(a.expose().starts_with(PREFIX) && a.expose().len() == 68);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(dir.path().join(FILE_NAME))
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        // Nothing else is left in the directory.
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[test]
    fn concurrent_first_runs_agree_on_one_secret() {
        let dir = tempfile::tempdir().unwrap();
        let secrets: Vec<String> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..8)
                .map(|_| {
                    s.spawn(|| {
                        LocalSecret::load_or_create(dir.path(), "ana")
                            .unwrap()
                            .expose()
                            .to_owned()
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        assert!(secrets.iter().all(|s| *s == secrets[0]), "{secrets:?}");
    }

    #[cfg(unix)]
    #[test]
    fn a_readable_or_foreign_file_is_refused_with_what_to_do() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(FILE_NAME);
        LocalSecret::load_or_create(dir.path(), "ana").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        let err = LocalSecret::load_or_create(dir.path(), "ana").unwrap_err();
        assert!(err.to_string().contains("chmod 600"), "{err}");
        std::fs::write(&path, "hello").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        let err = LocalSecret::load_or_create(dir.path(), "ana").unwrap_err();
        assert!(err.to_string().contains("delete it"), "{err}");
    }

    #[test]
    fn a_link_is_taken_once_before_it_expires_and_only_with_this_secret() {
        let s = LocalSecret::generate("ana");
        let code = |link: &str| link.split_once("code=").unwrap().1.to_owned();
        let link = s.login_link("http://127.0.0.1:7777/", 1_000);
        assert!(
            link.starts_with("http://127.0.0.1:7777/login?code="),
            "{link}"
        );
        let session = s.take_code(&code(&link), 2_000).unwrap();
        assert!(s.is_session(&session, 3_000));
        assert_eq!(s.take_code(&code(&link), 2_000), None, "taken twice");
        let late = s.login_link("http://h", 1_000);
        assert_eq!(s.take_code(&code(&late), 1_000 + LINK_LIFETIME_MS), None);
        let other = LocalSecret::generate("ana");
        let foreign = other.login_link("http://h", 1_000);
        assert_eq!(s.take_code(&code(&foreign), 2_000), None);
        assert!(!other.is_session(&session, 3_000));
        assert!(!s.is_session(&session, 3_000 + SESSION_LIFETIME_MS));
        // A tampered session (a later issue time) fails its MAC.
        let (issued, rest) = session.split_once('.').unwrap();
        let later = issued.parse::<i64>().unwrap() + 1;
        assert!(!s.is_session(&format!("{later}.{rest}"), 3_000));
        assert_ne!(s.csrf(), other.csrf());
    }
}
