//! Who may read the console, and who is asking.
//!
//! With a token, every `/api/` request but the login must carry either a session cookie
//! (`introspect_console`, HttpOnly, SameSite=Strict, set by `POST /api/login` in exchange
//! for the token) or `Authorization: Bearer TOKEN`; both are compared in constant time.
//! Each login opens a session of its own: the cookie holds a random value made for it,
//! never the token, and the session has a short random label, unrelated to that value, by
//! which the action log names it (the token is shared; the label and the client address
//! tell its users apart). The console keeps the last [`MAX_SESSIONS`] sessions; an older
//! one must log in again. Without a token (loopback only), requests must name a loopback
//! host in `Host`, so a page on another site cannot read the console through DNS
//! rebinding.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::Mutex;

use axum::http::{HeaderMap, header};

/// The session cookie's name.
pub const COOKIE: &str = "introspect_console";
/// The shortest token accepted.
pub const MIN_TOKEN_CHARS: usize = 16;
/// The most sessions kept; the oldest goes when a login would open one more.
pub const MAX_SESSIONS: usize = 1000;

/// Who a request comes from, as far as the console can tell.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Caller {
    /// A session opened by a login, by its label.
    Session(String),
    /// A request with the token itself (`Authorization: Bearer`).
    Bearer,
    /// A console without a token, asked from a loopback host.
    Loopback,
}

impl Caller {
    /// How the action log names it: `session:LABEL`, `bearer` or `loopback`.
    pub fn label(&self) -> String {
        match self {
            Caller::Session(label) => format!("session:{label}"),
            Caller::Bearer => "bearer".to_owned(),
            Caller::Loopback => "loopback".to_owned(),
        }
    }
}

/// One open session: the cookie's value and the label the log shows.
struct Session {
    secret: String,
    label: String,
}

/// What a request must show. See the module docs.
pub struct Auth {
    token: Option<String>,
    sessions: Mutex<VecDeque<Session>>,
    port: u16,
}

fn random_hex<const N: usize>() -> String {
    let bytes: [u8; N] = rand::random();
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

impl Auth {
    /// Checks against `token` (none: loopback only, by Host) for a console bound at `addr`.
    pub fn new(token: Option<String>, addr: SocketAddr) -> Self {
        Auth {
            token,
            sessions: Mutex::new(VecDeque::new()),
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

    /// Opens a session: the `Set-Cookie` value that carries it, and its label.
    pub fn open_session(&self) -> (String, String) {
        let session = Session {
            secret: random_hex::<32>(),
            label: random_hex::<4>(),
        };
        let cookie = format!(
            "{COOKIE}={}; HttpOnly; SameSite=Strict; Path=/",
            session.secret
        );
        let label = session.label.clone();
        let mut sessions = self.sessions.lock().unwrap_or_else(|e| e.into_inner());
        if sessions.len() >= MAX_SESSIONS {
            sessions.pop_front();
        }
        sessions.push_back(session);
        (cookie, label)
    }

    /// Whether a request with `headers` may read the API.
    pub fn allows(&self, headers: &HeaderMap) -> bool {
        self.caller(headers).is_some()
    }

    /// Who a request with `headers` comes from, `None` when it may not read the API.
    pub fn caller(&self, headers: &HeaderMap) -> Option<Caller> {
        let Some(token) = &self.token else {
            return self.host_is_loopback(headers).then_some(Caller::Loopback);
        };
        let bearer = headers
            .get_all(header::AUTHORIZATION)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .filter_map(|v| v.strip_prefix("Bearer "))
            .any(|offered| constant_time_eq(token.as_bytes(), offered.trim().as_bytes()));
        if bearer {
            return Some(Caller::Bearer);
        }
        self.session(headers).map(Caller::Session)
    }

    /// The label of the session a request's cookie names, if it is open.
    fn session(&self, headers: &HeaderMap) -> Option<String> {
        let offered: Vec<&str> = headers
            .get_all(header::COOKIE)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(';'))
            .filter_map(|pair| pair.trim().split_once('='))
            .filter(|(name, _)| *name == COOKIE)
            .map(|(_, value)| value)
            .take(4)
            .collect();
        if offered.is_empty() {
            return None;
        }
        let sessions = self.sessions.lock().unwrap_or_else(|e| e.into_inner());
        sessions
            .iter()
            .find(|s| {
                offered
                    .iter()
                    .any(|value| constant_time_eq(s.secret.as_bytes(), value.as_bytes()))
            })
            .map(|s| s.label.clone())
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
        let (cookie, label) = auth.open_session();
        let pair = cookie.split(';').next().unwrap();
        assert_eq!(
            auth.caller(&headers(&[(header::COOKIE, &format!("a=b; {pair}"))])),
            Some(Caller::Session(label.clone()))
        );
        assert!(!cookie.contains(&label), "the label is not the secret");
        // Another login is another session.
        let (other, other_label) = auth.open_session();
        assert_ne!(other, cookie);
        assert_ne!(other_label, label);
        assert!(!auth.allows(&headers(&[(
            header::COOKIE,
            &format!("{COOKIE}=0123456789abcdef")
        )])));
        assert!(cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict"));
        assert_eq!(
            auth.caller(&headers(&[(
                header::AUTHORIZATION,
                "Bearer 0123456789abcdef"
            )])),
            Some(Caller::Bearer)
        );
    }

    #[test]
    fn the_oldest_session_goes_past_the_bound() {
        let auth = Auth::new(
            Some("0123456789abcdef".into()),
            "127.0.0.1:8080".parse().unwrap(),
        );
        let (first, _) = auth.open_session();
        for _ in 0..MAX_SESSIONS {
            auth.open_session();
        }
        let pair = first.split(';').next().unwrap();
        assert!(!auth.allows(&headers(&[(header::COOKIE, pair)])));
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
