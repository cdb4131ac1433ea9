//! One-tap links: `<public url>/link/<token>`, where the token says which approval,
//! which decision, for whom, through which channel, until when — signed with a
//! key only the server has (derived from the local secret), so nobody can make or
//! change one.
//!
//! - **Signed**: `<base64url(JSON claims)>.<hex HMAC-SHA256(key, "gaffer-link\n" +
//!   claims)>`; a changed byte fails the MAC (compared in constant time).
//! - **Expiring**: at the approval's own expiry, and at most [`MAX_AGE_MS`] after
//!   it was issued.
//! - **Single-use**: a link's only effect is to decide its approval, and an
//!   approval is decided once (the journal's rule): a second use finds it decided
//!   and is refused.
//! - **Revocable**: the server checks the claims' target and person against the
//!   configured `[[notify]]` targets ([`Links::open`]); a removed target's links,
//!   or one whose person changed, stop working. A new local secret voids all.

use base64::Engine as _;
use serde::{Deserialize, Serialize};
use subtle::ConstantTimeEq;

/// How long a link lasts at most, whatever the approval's expiry (24 hours).
pub const MAX_AGE_MS: i64 = 24 * 3600 * 1000;

/// The key links are signed with. `Debug` hides it.
#[derive(Clone)]
pub struct LinkKey([u8; 32]);

impl LinkKey {
    /// A key from 32 secret bytes.
    pub fn new(bytes: [u8; 32]) -> Self {
        Self(bytes)
    }

    fn mac(&self, claims: &str) -> String {
        crate::sign::hmac_hex(&self.0, &[b"gaffer-link\n", claims.as_bytes()])
    }
}

impl std::fmt::Debug for LinkKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("LinkKey(<redacted>)")
    }
}

/// What a link says.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Link {
    /// The approval it decides.
    #[serde(rename = "a")]
    pub approval_id: String,
    /// That approval's task (a guard: the decision names it).
    #[serde(rename = "k")]
    pub task_id: String,
    /// `true`: approve; `false`: deny.
    #[serde(rename = "y")]
    pub approve: bool,
    /// The `[[notify]]` target it was sent to.
    #[serde(rename = "n")]
    pub target: String,
    /// `webhook` or `ntfy`.
    #[serde(rename = "c")]
    pub channel: String,
    /// Whom it was issued to.
    #[serde(rename = "p")]
    pub person: String,
    /// Issued at (ms).
    #[serde(rename = "i")]
    pub issued_at: i64,
    /// Not valid from (ms).
    #[serde(rename = "e")]
    pub expires_at: i64,
}

impl Link {
    /// The token of this link, signed with `key`.
    pub fn token(&self, key: &LinkKey) -> String {
        let json = serde_json::to_vec(self).unwrap_or_default();
        let claims = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(json);
        let mac = key.mac(&claims);
        format!("{claims}.{mac}")
    }

    /// The URL of this link on `base` (the server's public URL).
    pub fn url(&self, base: &str, key: &LinkKey) -> String {
        format!("{}/link/{}", base.trim_end_matches('/'), self.token(key))
    }
}

/// Why a link is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LinkError {
    /// Not a link this server signed (cut, changed, or from another gaffer).
    #[error("this link is not valid: it was cut short, changed, or made by another gaffer")]
    Invalid,
    /// Past its expiry.
    #[error("this link expired")]
    Expired {
        /// When (ms).
        at: i64,
    },
    /// Its target or person is no longer configured.
    #[error("this link was issued to `{person}` through `{target}`, which is no longer configured to receive links")]
    Revoked {
        /// The target.
        target: String,
        /// The person.
        person: String,
    },
}

/// The server's side: the key and who links may currently be issued to.
#[derive(Debug, Clone)]
pub struct Links {
    key: LinkKey,
    /// `(target, channel, person)` of every configured target with a person.
    issued_to: Vec<(String, String, String)>,
}

impl Links {
    /// Links signed with `key`, valid for the targets of `config` that name a person.
    pub fn new(key: LinkKey, targets: &[gaffer_config::NotifyTarget]) -> Self {
        let issued_to = targets
            .iter()
            .filter_map(|t| {
                t.person
                    .as_ref()
                    .map(|p| (t.name.clone(), t.channel().to_owned(), p.clone()))
            })
            .collect();
        Self { key, issued_to }
    }

    /// The key links are signed with.
    pub fn key(&self) -> &LinkKey {
        &self.key
    }

    /// The link `token` stands for, at `now` (ms): refused when not signed with this
    /// key, expired, or issued to a target or person no longer configured.
    pub fn open(&self, token: &str, now: i64) -> Result<Link, LinkError> {
        let (claims, mac) = token.split_once('.').ok_or(LinkError::Invalid)?;
        let genuine: bool = self.key.mac(claims).as_bytes().ct_eq(mac.as_bytes()).into();
        if !genuine {
            return Err(LinkError::Invalid);
        }
        let json = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(claims)
            .map_err(|_| LinkError::Invalid)?;
        let link: Link = serde_json::from_slice(&json).map_err(|_| LinkError::Invalid)?;
        if now >= link.expires_at {
            return Err(LinkError::Expired {
                at: link.expires_at,
            });
        }
        let configured = self
            .issued_to
            .iter()
            .any(|(t, c, p)| *t == link.target && *c == link.channel && *p == link.person);
        if !configured {
            return Err(LinkError::Revoked {
                target: link.target,
                person: link.person,
            });
        }
        Ok(link)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target(person: Option<&str>) -> gaffer_config::NotifyTarget {
        gaffer_config::NotifyTarget {
            name: "phone".into(),
            kind: gaffer_config::NotifyKind::Ntfy {
                url: "http://n".into(),
                topic: "t".into(),
                token: None,
            },
            person: person.map(str::to_owned),
            events: gaffer_config::NotifyEvent::ALL.to_vec(),
            secret_env: None,
        }
    }

    fn link() -> Link {
        Link {
            approval_id: "ap-1".into(),
            task_id: "t-1".into(),
            approve: true,
            target: "phone".into(),
            channel: "ntfy".into(),
            person: "ana".into(),
            issued_at: 1_000,
            expires_at: 5_000,
        }
    }

    #[test]
    fn a_genuine_link_opens_until_it_expires_and_nothing_else_does() {
        let links = Links::new(LinkKey::new([7; 32]), &[target(Some("ana"))]);
        let token = link().token(links.key());
        assert_eq!(links.open(&token, 4_999), Ok(link()));
        assert_eq!(
            links.open(&token, 5_000),
            Err(LinkError::Expired { at: 5_000 })
        );
        // Another key, a changed claim, a cut token.
        let other = Links::new(LinkKey::new([8; 32]), &[target(Some("ana"))]);
        assert_eq!(other.open(&token, 2_000), Err(LinkError::Invalid));
        let mut deny = link();
        deny.approve = false;
        let forged = format!(
            "{}.{}",
            deny.token(other.key()).split_once('.').unwrap().0,
            token.split_once('.').unwrap().1
        );
        assert_eq!(links.open(&forged, 2_000), Err(LinkError::Invalid));
        assert_eq!(
            links.open(&token[..token.len() - 1], 2_000),
            Err(LinkError::Invalid)
        );
        assert_eq!(links.open("nonsense", 2_000), Err(LinkError::Invalid));
        // The person is no longer the target's.
        let moved = Links::new(LinkKey::new([7; 32]), &[target(Some("bo"))]);
        assert!(matches!(
            moved.open(&token, 2_000),
            Err(LinkError::Revoked { .. })
        ));
    }
}
