//! Who may read the console.
//!
//! With a token, every `/api/` request but the login must carry either the session cookie
//! (`introspect_console`, HttpOnly, SameSite=Strict, set by `POST /api/login` in exchange
//! for the token) or `Authorization: Bearer TOKEN`; both are compared in constant time.
//! The cookie holds a random session value made at start, never the token. Without a
//! token (loopback only), requests must name a loopback host in `Host`, so a page on
//! another site cannot read the console through DNS rebinding.

use std::net::SocketAddr;

use axum::http::{HeaderMap, header};

/// The session cookie's name.
pub const COOKIE: &str = "introspect_console";
/// The shortest token accepted.
pub const MIN_TOKEN_CHARS: usize = 16;

/// What a request must show. See the module docs.
pub struct Auth {
    token: Option<String>,
    session: String,
    port: u16,
}

impl Auth {
    /// Checks against `token` (none: loopback only, by Host) for a console bound at `addr`.
    pub fn new(token: Option<String>, addr: SocketAddr) -> Self {
        let session: [u8; 32] = rand::random();
        Auth {
            token,
            session: session.iter().map(|b| format!("{b:02x}")).collect(),
            port: addr.port(),
        }
    }

    /// Whether a token is needed.
    pub fn needs_token(&self) -> bool {
        self.token.is_some()
    }

    /// Whether `offered` is the token.
    pub fn token_matches(&self, offered: &str) -> bool {
        self.token
            .as_deref()
            .is_some_and(|token| constant_time_eq(token.as_bytes(), offered.as_bytes()))
    }

    /// The `Set-Cookie` value that opens a session.
    pub fn session_cookie(&self) -> String {
        format!(
            "{COOKIE}={}; HttpOnly; SameSite=Strict; Path=/",
            self.session
        )
    }

    /// Whether a request with `headers` may read the API.
    pub fn allows(&self, headers: &HeaderMap) -> bool {
        let Some(token) = &self.token else {
            return self.host_is_loopback(headers);
        };
        let bearer = headers
            .get_all(header::AUTHORIZATION)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .filter_map(|v| v.strip_prefix("Bearer "))
            .any(|offered| constant_time_eq(token.as_bytes(), offered.trim().as_bytes()));
        bearer || self.has_session(headers)
    }

    fn has_session(&self, headers: &HeaderMap) -> bool {
        headers
            .get_all(header::COOKIE)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(';'))
            .filter_map(|pair| pair.trim().split_once('='))
            .any(|(name, value)| {
                name == COOKIE && constant_time_eq(self.session.as_bytes(), value.as_bytes())
            })
    }

    /// Whether `Host` names loopback (with the console's port, or none).
    fn host_is_loopback(&self, headers: &HeaderMap) -> bool {
        let Some(host) = headers.get(header::HOST).and_then(|v| v.to_str().ok()) else {
            return false;
        };
        let (name, port) = match host.rsplit_once(':') {
            Some((name, port)) if !port.contains(']') => (name, Some(port)),
            _ => (host, None),
        };
        let port_ok = port.is_none_or(|p| p.parse::<u16>() == Ok(self.port));
        let name = name.trim_start_matches('[').trim_end_matches(']');
        let loopback = name.eq_ignore_ascii_case("localhost")
            || name
                .parse::<std::net::IpAddr>()
                .is_ok_and(|ip| ip.is_loopback());
        port_ok && loopback
    }
}

/// Whether `a` equals `b`, in time that depends on their lengths only.
pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |diff, (x, y)| diff | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn headers(pairs: &[(header::HeaderName, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(name.clone(), HeaderValue::from_str(value).unwrap());
        }
        map
    }

    #[test]
    fn the_token_opens_by_bearer_or_by_the_session_cookie_only() {
        let auth = Auth::new(
            Some("0123456789abcdef".into()),
            "0.0.0.0:8080".parse().unwrap(),
        );
        assert!(!auth.allows(&HeaderMap::new()));
        assert!(auth.allows(&headers(&[(
            header::AUTHORIZATION,
            "Bearer 0123456789abcdef"
        )])));
        assert!(!auth.allows(&headers(&[(
            header::AUTHORIZATION,
            "Bearer 0123456789abcdeX"
        )])));
        let cookie = auth.session_cookie();
        let pair = cookie.split(';').next().unwrap();
        assert!(auth.allows(&headers(&[(header::COOKIE, &format!("a=b; {pair}"))])));
        assert!(!auth.allows(&headers(&[(
            header::COOKIE,
            &format!("{COOKIE}=0123456789abcdef")
        )])));
        assert!(cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict"));
    }

    #[test]
    fn without_a_token_only_loopback_hosts_are_served() {
        let auth = Auth::new(None, "127.0.0.1:8080".parse().unwrap());
        for ok in [
            "127.0.0.1:8080",
            "localhost:8080",
            "[::1]:8080",
            "localhost",
        ] {
            assert!(auth.allows(&headers(&[(header::HOST, ok)])), "{ok}");
        }
        for bad in ["evil.example:8080", "127.0.0.1:9999", "10.0.0.1:8080"] {
            assert!(!auth.allows(&headers(&[(header::HOST, bad)])), "{bad}");
        }
        assert!(!auth.allows(&HeaderMap::new()));
    }

    #[test]
    fn constant_time_eq_is_eq() {
        assert!(constant_time_eq(b"abc", b"abc"));
        assert!(!constant_time_eq(b"abc", b"abd"));
        assert!(!constant_time_eq(b"abc", b"abcd"));
    }
}
