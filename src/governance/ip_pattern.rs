//! Dubbo Java 3.3's IP expressions (`NetUtils.matchIpExpression`), which tag rules'
//! `addresses` and configurators' v3.0 `cird` address matches use:
//!
//! * `*` and `*.*.*.*` match every host;
//! * a CIDR block (`10.0.0.0/8`, `fd00::/8`) matches the hosts in it, on any port;
//! * `host` matches that host on any port, `host:port` (`[v6]:port`) only that port;
//! * per segment, `*` matches any value and `a-b` a range (decimal for IPv4, hex for IPv6;
//!   an IPv6 pattern with these must spell all 8 segments);
//! * otherwise the pattern is compared with the host as Java prints it (`0:0:0:0:0:0:0:1`
//!   for `::1`), or as addresses when it is an IP literal in another spelling.
//!
//! Java resolves names that are not IP literals through DNS; this model does no I/O: a name
//! matches only itself, spelled the same. Where Java throws (a malformed pattern), the
//! answer is an [`IpPatternError`], which callers read as no match, as Java's callers do.

use std::net::IpAddr;

/// Why a pattern could not be evaluated against a host.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum IpPatternError {
    /// The host or pattern is a name that Java would resolve through DNS
    /// (`UnknownHostException` when it does not resolve).
    UnknownHost,
    /// The pattern is malformed for the host's family (Java's `IllegalArgumentException`,
    /// `NumberFormatException`).
    Invalid,
}

/// Java's `NetUtils.matchIpExpression(pattern, host, port)`.
pub(crate) fn match_ip_expression(
    pattern: &str,
    host: &str,
    port: u16,
) -> Result<bool, IpPatternError> {
    if pattern.contains('/') {
        return in_cidr(pattern, host);
    }
    match_ip_range(pattern, host, port)
}

/// Java's `NetUtils.matchIpExpression(pattern, address)`, which reads `address` as a host
/// (port 0) unless it ends in `:`, where Java fails.
pub(crate) fn match_ip_expression_address(
    pattern: &str,
    address: &str,
) -> Result<bool, IpPatternError> {
    if address.ends_with(':') {
        return Err(IpPatternError::Invalid);
    }
    match_ip_expression(pattern, address, 0)
}

/// An IP literal as `InetAddress.getByName` reads one: an IPv4-mapped IPv6 address is the
/// IPv4 address; brackets are allowed around IPv6.
fn ip_literal(text: &str) -> Option<IpAddr> {
    let bare = text
        .strip_prefix('[')
        .and_then(|t| t.strip_suffix(']'))
        .unwrap_or(text);
    let ip: IpAddr = bare.parse().ok()?;
    Some(match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    })
}

/// The address as Java's `getHostAddress` prints it: dotted IPv4, or eight unpadded
/// lower-case hex groups for IPv6, never compressed.
fn java_host_address(ip: IpAddr) -> String {
    match ip {
        IpAddr::V4(v4) => v4.to_string(),
        IpAddr::V6(v6) => v6
            .segments()
            .iter()
            .map(|s| format!("{s:x}"))
            .collect::<Vec<_>>()
            .join(":"),
    }
}

/// The address as a number, for range comparisons across families as Java's `BigInteger`s.
fn as_number(ip: IpAddr) -> u128 {
    match ip {
        IpAddr::V4(v4) => u128::from(u32::from(v4)),
        IpAddr::V6(v6) => u128::from(v6),
    }
}

/// Java's `CIDRUtils(pattern).isInRange(host)`.
fn in_cidr(pattern: &str, host: &str) -> Result<bool, IpPatternError> {
    let (network, prefix) = pattern.split_once('/').ok_or(IpPatternError::Invalid)?;
    let network = ip_literal(network).ok_or(IpPatternError::UnknownHost)?;
    let prefix: i32 = prefix.parse().map_err(|_| IpPatternError::Invalid)?;
    let target = ip_literal(host).ok_or(IpPatternError::UnknownHost)?;
    let bits: i32 = if network.is_ipv4() { 32 } else { 128 };
    let all: u128 = if bits == 32 {
        u128::from(u32::MAX)
    } else {
        u128::MAX
    };
    let value = as_number(network);
    let (start, end) = if prefix <= 0 {
        (0, all)
    } else if prefix >= bits {
        (value, value)
    } else {
        let host_bits = (bits - prefix) as u32;
        let low = (1u128 << host_bits) - 1;
        (value & !low & all, (value & !low & all) | low)
    };
    let target = as_number(target);
    Ok(start <= target && target <= end)
}

/// Java's `String.split(regex)` on a single literal character: trailing empty pieces are
/// dropped, an empty text is one empty piece.
fn java_split(text: &str, sep: char) -> Vec<&str> {
    if text.is_empty() {
        return vec![""];
    }
    let mut parts: Vec<&str> = text.split(sep).collect();
    while parts.len() > 1 && parts.last().is_some_and(|p| p.is_empty()) {
        parts.pop();
    }
    if parts.len() == 1 && parts[0].is_empty() {
        parts.clear();
    }
    parts
}

/// Java's `getPatternHostAndPort`: the pattern's host and its port, if it names one.
fn pattern_host_and_port(pattern: &str, is_v4: bool) -> (&str, Option<&str>) {
    if let Some(inner) = pattern.strip_prefix('[') {
        if let Some(end) = inner.find("]:") {
            return (&inner[..end], Some(&inner[end + 2..]));
        }
        if let Some(bare) = inner.strip_suffix(']') {
            return (bare, None);
        }
    }
    if is_v4 && let Some((host, port)) = pattern.split_once(':') {
        return (host, Some(port));
    }
    (pattern, None)
}

fn has_expression(pattern: &str) -> bool {
    pattern.contains('*') || pattern.contains('-')
}

/// Java's `NetUtils.matchIpRange`.
fn match_ip_range(pattern: &str, host: &str, port: u16) -> Result<bool, IpPatternError> {
    let pattern = pattern.trim_matches(|c: char| c <= ' ');
    if pattern == "*.*.*.*" || pattern == "*" {
        return Ok(true);
    }
    let Some(ip) = ip_literal(host) else {
        // A name: Java resolves both sides; here it matches only itself.
        let (name, pattern_port) = pattern_host_and_port(pattern, true);
        if pattern_port.is_some_and(|p| p != port.to_string()) {
            return Ok(false);
        }
        return if name == host {
            Ok(true)
        } else {
            Err(IpPatternError::UnknownHost)
        };
    };
    let is_v4 = ip.is_ipv4();
    let (pattern, pattern_port) = pattern_host_and_port(pattern, is_v4);
    if pattern_port.is_some_and(|p| p != port.to_string()) {
        return Ok(false);
    }
    let sep = if is_v4 { '.' } else { ':' };
    let mask = java_split(pattern, sep);
    if is_v4 {
        if mask.len() != 4 {
            return Err(IpPatternError::Invalid);
        }
    } else if mask.len() != 8 && (has_expression(pattern) || !pattern.contains("::")) {
        return Err(IpPatternError::Invalid);
    }
    let host = java_host_address(ip);
    if pattern == host {
        return Ok(true);
    }
    if !has_expression(pattern) {
        let other = ip_literal(pattern).ok_or(IpPatternError::UnknownHost)?;
        return Ok(java_host_address(other) == host);
    }
    let radix = if is_v4 { 10 } else { 16 };
    let segment =
        |text: &str| i32::from_str_radix(text, radix).map_err(|_| IpPatternError::Invalid);
    let parts = java_split(&host, sep);
    for (i, m) in mask.iter().enumerate() {
        let part = *parts.get(i).ok_or(IpPatternError::Invalid)?;
        if *m == "*" || *m == part {
            continue;
        }
        if m.contains('-') {
            let bounds: Vec<&str> = m.split('-').collect();
            let [min, max] = bounds[..] else {
                return Err(IpPatternError::Invalid);
            };
            let (min, max, value) = (segment(min)?, segment(max)?, segment(part)?);
            if value < min || value > max {
                return Ok(false);
            }
        } else if part == "0" && matches!(*m, "0" | "00" | "000" | "0000") {
            continue;
        } else {
            return Ok(false);
        }
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn matches(pattern: &str, host: &str, port: u16) -> bool {
        match_ip_expression(pattern, host, port) == Ok(true)
    }

    #[test]
    fn hosts_ports_and_anything() {
        assert!(matches("10.0.0.7", "10.0.0.7", 50051));
        assert!(matches("10.0.0.7:50051", "10.0.0.7", 50051));
        assert!(!matches("10.0.0.7:50052", "10.0.0.7", 50051));
        assert!(!matches("10.0.0.8", "10.0.0.7", 50051));
        assert!(matches("*", "10.0.0.7", 1));
        assert!(matches("*.*.*.*", "::1", 1));
        assert!(matches(" 10.0.0.7 ", "10.0.0.7", 1), "trimmed as Java");
        assert!(
            !matches("0.0.0.0", "10.0.0.7", 1),
            "0.0.0.0 is no wildcard here"
        );
    }

    #[test]
    fn segments_ranges_and_cidr() {
        assert!(matches("10.0.0.*", "10.0.0.7", 1));
        assert!(matches("10.0.0.1-9", "10.0.0.7", 1));
        assert!(!matches("10.0.0.1-5", "10.0.0.7", 1));
        assert!(matches("10.0.0.*:80", "10.0.0.7", 80));
        assert!(!matches("10.0.0.*:80", "10.0.0.7", 81));
        assert!(matches("10.0.0.0/24", "10.0.0.7", 1));
        assert!(!matches("10.0.1.0/24", "10.0.0.7", 1));
        assert!(matches("10.0.0.7/32", "10.0.0.7", 1));
        assert!(matches("0.0.0.0/0", "192.168.1.1", 1));
        assert!(matches("fd00::/8", "fd00::1", 1));
        assert!(matches("1:2:3:4:5:6:7:*", "1:2:3:4:5:6:7:ff", 1));
        assert!(matches("1:2:3:4:5:6:7:a-f", "1:2:3:4:5:6:7:c", 1));
        assert!(matches("::1", "0:0:0:0:0:0:0:1", 1));
        assert!(matches("[::1]:80", "::1", 80));
        assert!(!matches("[::1]:80", "::1", 81));
        assert!(matches("10.0.0.7", "::ffff:10.0.0.7", 1), "mapped is IPv4");
    }

    #[test]
    fn malformed_patterns_are_errors_and_names_match_only_themselves() {
        use IpPatternError::{Invalid, UnknownHost};
        // (pattern, address, port, error, why)
        let refused = [
            ("10.0.0", "10.0.0.7", 1, Invalid, ""),
            ("10.0.0.1-x", "10.0.0.7", 1, Invalid, ""),
            ("10.0.0.0/x", "10.0.0.7", 1, Invalid, ""),
            ("1:2:*", "::1", 1, Invalid, ""),
            (
                "0.0.0.0:80",
                "::1",
                80,
                Invalid,
                "an IPv4 pattern against IPv6 fails, as Java",
            ),
            ("db-2", "db-1", 80, UnknownHost, ""),
            (
                "other.host",
                "10.0.0.7",
                80,
                Invalid,
                "two segments are no IPv4 pattern",
            ),
            (
                "db.example.svc.local",
                "10.0.0.7",
                80,
                UnknownHost,
                "a name Java would resolve",
            ),
        ];
        for (pattern, address, port, error, why) in refused {
            assert_eq!(
                match_ip_expression(pattern, address, port),
                Err(error),
                "{pattern} against {address}:{port}: {why}"
            );
        }
        assert!(matches("db-1:80", "db-1", 80));
        assert_eq!(
            match_ip_expression_address("10.0.0.0/8", "10.0.0.7:80"),
            Err(IpPatternError::UnknownHost),
            "an address with a port is no host"
        );
        for hostile in [
            "",
            "[",
            "]:",
            "[]:",
            "-",
            "*-*",
            "1-2-3.4.5.6",
            "::::::::::",
            "/",
            "a/b/c",
        ] {
            let _ = match_ip_expression(hostile, "10.0.0.7", 1);
            let _ = match_ip_expression(hostile, "::1", 1);
            let _ = match_ip_expression("*", hostile, 1);
        }
    }
}
