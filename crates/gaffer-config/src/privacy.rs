//! `[projects.<name>] privacy` and `[privacy] private_networks`: which model endpoints
//! may see a project's source.

use std::net::IpAddr;

use crate::{invalid, ConfigError};

/// What a project's source may be shown to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Privacy {
    /// Any configured agent, cloud or local.
    #[default]
    Standard,
    /// Only agents whose model runs on loopback or a configured private network.
    LocalOnly,
    /// Cloud roles see a masked pack (identifiers, strings, comments replaced); roles
    /// that read or write source run on local models.
    Masked,
}

/// The values `privacy` takes, as written in the config.
pub const PRIVACY_MODES: [&str; 3] = ["standard", "local-only", "masked"];

impl Privacy {
    /// As written in the config.
    pub fn as_str(self) -> &'static str {
        match self {
            Privacy::Standard => "standard",
            Privacy::LocalOnly => "local-only",
            Privacy::Masked => "masked",
        }
    }
}

pub(crate) fn parse_mode(origin: &str, field: &str, value: &str) -> Result<Privacy, ConfigError> {
    match value {
        "standard" => Ok(Privacy::Standard),
        "local-only" => Ok(Privacy::LocalOnly),
        "masked" => Ok(Privacy::Masked),
        other => Err(invalid(
            origin,
            field,
            format!(
                "is `{other}`; use one of \"{}\"",
                PRIVACY_MODES.join("\", \"")
            ),
        )),
    }
}

/// An IP network in CIDR form (`10.0.0.0/8`, `fd00::/8`); a bare address is a /32 or /128.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Network {
    addr: IpAddr,
    prefix: u8,
}

impl Network {
    /// Parse `a.b.c.d/n`, `x::/n` or a bare address.
    pub fn parse(s: &str) -> Option<Self> {
        let (addr, prefix) = match s.split_once('/') {
            Some((a, p)) => (a.parse::<IpAddr>().ok()?, Some(p.parse::<u8>().ok()?)),
            None => (s.parse::<IpAddr>().ok()?, None),
        };
        let max = if addr.is_ipv4() { 32 } else { 128 };
        let prefix = prefix.unwrap_or(max);
        (prefix <= max).then_some(Network { addr, prefix })
    }

    /// Whether `ip` is in this network (an IPv4-mapped IPv6 address counts as IPv4).
    pub fn contains(&self, ip: IpAddr) -> bool {
        let ip = match ip {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
            v4 => v4,
        };
        match (self.addr, ip) {
            (IpAddr::V4(net), IpAddr::V4(ip)) => {
                let mask = u32::MAX
                    .checked_shl(32 - u32::from(self.prefix))
                    .unwrap_or(0);
                u32::from(net) & mask == u32::from(ip) & mask
            }
            (IpAddr::V6(net), IpAddr::V6(ip)) => {
                let mask = u128::MAX
                    .checked_shl(128 - u32::from(self.prefix))
                    .unwrap_or(0);
                u128::from(net) & mask == u128::from(ip) & mask
            }
            _ => false,
        }
    }
}

impl std::fmt::Display for Network {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.addr, self.prefix)
    }
}

pub(crate) fn networks<'a>(
    origin: &str,
    list: impl Iterator<Item = &'a str>,
) -> Result<Vec<Network>, ConfigError> {
    list.map(|n| {
        Network::parse(n).ok_or_else(|| {
            invalid(
                origin,
                "privacy.private_networks",
                format!("has `{n}`, which is not a network; write CIDR like \"10.0.0.0/8\" or \"fd00::/8\", or one address"),
            )
        })
    })
    .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn networks_contain_their_addresses_only() {
        let ten = Network::parse("10.0.0.0/8").unwrap();
        assert!(ten.contains("10.200.1.2".parse().unwrap()));
        assert!(ten.contains("::ffff:10.1.1.1".parse().unwrap()));
        assert!(!ten.contains("11.0.0.1".parse().unwrap()));
        let one = Network::parse("192.168.1.7").unwrap();
        assert!(one.contains("192.168.1.7".parse().unwrap()));
        assert!(!one.contains("192.168.1.8".parse().unwrap()));
        let ula = Network::parse("fd00::/8").unwrap();
        assert!(ula.contains("fd12::1".parse().unwrap()));
        assert!(!ula.contains("fe80::1".parse().unwrap()));
        assert!(Network::parse("0.0.0.0/0")
            .unwrap()
            .contains("8.8.8.8".parse().unwrap()));
        for bad in ["10.0.0.0/33", "10.0.0/8", "example.com", "10.0.0.0/x", ""] {
            assert_eq!(Network::parse(bad), None, "{bad}");
        }
    }
}
