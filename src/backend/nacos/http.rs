//! Reading an app's instances over Nacos's HTTP open API (`GET /nacos/v1/ns/instance/list`),
//! for lists the SDK cannot receive over gRPC.
//!
//! nacos-sdk (0.8) builds its tonic clients with tonic's default decoding limit, 4 MiB, and
//! lets its user change nothing there, while Nacos's own Java client and server take
//! 10 MiB: a list answer over 4 MiB (about 4,500 of Introspect's records, 8,000 of Dubbo
//! Java's) fails over gRPC. The same list over HTTP has no such limit, so the backend reads
//! an app over HTTP when its gRPC answer would be (or was) too large, and a follow of such
//! an app polls it over HTTP (see `follow`).
//!
//! The endpoint is Nacos 1.x's, kept by Nacos 2.x and by Nacos 3.x (where it is an "open API
//! compatibility" endpoint, on by default: `nacos.core.api.compatibility.client.enabled`)
//! and served by rnacos. It is asked with `healthyOnly=false` (the backend filters healthy,
//! enabled instances itself, as it does with the gRPC answer) and without `udpPort`, so
//! the server registers no push target for it. With credentials, the client logs in
//! (`POST /nacos/v1/auth/login`) and sends the token as `accessToken`, logging in again when
//! the token's lifetime is half gone or the server refuses it.
//!
//! Servers are tried in the order given; the first that answers is kept for the next read.

use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use nacos_sdk::api::naming::ServiceInstance as NacosInstance;
use serde::Deserialize;

use super::options::NacosOptions;
use crate::error::{Error, Result};

/// How long one HTTP read may take, from the request until its last byte: a list of
/// 10,000 records is about 9 MB.
pub(super) const READ_TIMEOUT: Duration = Duration::from_secs(30);

/// The largest answer read (a bound on what a hostile registry costs): 128 MiB, about
/// 140,000 of Introspect's records.
pub(super) const MAX_ANSWER: usize = 128 << 20;

/// A client of the HTTP open API of one backend's servers.
pub(super) struct HttpReader {
    client: reqwest::Client,
    options: NacosOptions,
    /// The server that answered last (an index into the options' servers).
    preferred: AtomicUsize,
    token: Mutex<Option<Token>>,
}

#[derive(Clone)]
struct Token {
    value: String,
    renew_at: Instant,
}

/// The part of the list answer read.
#[derive(Deserialize)]
struct ListAnswer {
    #[serde(default)]
    hosts: Vec<NacosInstance>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct LoginAnswer {
    access_token: String,
    #[serde(default)]
    token_ttl: u64,
}

impl HttpReader {
    pub(super) fn new(options: NacosOptions) -> Result<Self> {
        let client = reqwest::Client::builder()
            .connect_timeout(options.connect_timeout)
            .timeout(READ_TIMEOUT)
            .no_proxy()
            .build()
            .map_err(|e| Error::config(format!("an HTTP client for Nacos: {e}")).caused_by(e))?;
        Ok(HttpReader {
            client,
            options,
            preferred: AtomicUsize::new(0),
            token: Mutex::new(None),
        })
    }

    /// The naming instances of `service` in `group` (all of them, healthy or not).
    pub(super) async fn instances(&self, group: &str, service: &str) -> Result<Vec<NacosInstance>> {
        let what = format!("list {group}@@{service} over HTTP");
        let servers = self.options.servers.len();
        let first = self.preferred.load(Ordering::Relaxed) % servers.max(1);
        let mut last = None;
        for offset in 0..servers {
            let index = (first + offset) % servers;
            let base = base_url(&self.options.servers[index]);
            match self.list_at(&base, group, service, &what).await {
                Ok(list) => {
                    self.preferred.store(index, Ordering::Relaxed);
                    return Ok(list);
                }
                Err(e) if e.is_transient() => last = Some(e),
                Err(e) => return Err(e),
            }
        }
        Err(last.unwrap_or_else(|| Error::config("no Nacos server given")))
    }

    async fn list_at(
        &self,
        base: &str,
        group: &str,
        service: &str,
        what: &str,
    ) -> Result<Vec<NacosInstance>> {
        for attempt in 0..2 {
            let mut query = vec![
                ("serviceName", service.to_owned()),
                ("groupName", group.to_owned()),
                ("namespaceId", self.options.namespace.clone()),
                ("healthyOnly", "false".to_owned()),
            ];
            if let Some(token) = self.token(base, what, attempt > 0).await? {
                query.push(("accessToken", token));
            }
            let sent = self
                .client
                .get(format!("{base}/nacos/v1/ns/instance/list"))
                .query(&query)
                .send()
                .await
                .map_err(|e| transport_error(e, what))?;
            let status = sent.status();
            let body = read_bounded(sent, what).await?;
            if status.is_success() {
                let answer: ListAnswer = serde_json::from_slice(&body).map_err(|e| {
                    Error::malformed("Nacos reply", format!("{what}: {e}")).caused_by(e)
                })?;
                return Ok(answer.hosts);
            }
            let text = Error::shorten(&String::from_utf8_lossy(&body));
            let refused = status == reqwest::StatusCode::FORBIDDEN
                || status == reqwest::StatusCode::UNAUTHORIZED;
            if refused && self.options.credentials.is_some() && attempt == 0 {
                continue;
            }
            return Err(answer_error(status, &text, what));
        }
        unreachable!("the loop returns on its second attempt")
    }

    /// The access token to send, logging in when there is none, it is old, or `renew`.
    async fn token(&self, base: &str, what: &str, renew: bool) -> Result<Option<String>> {
        let Some((user, password)) = &self.options.credentials else {
            return Ok(None);
        };
        if !renew {
            let held = self.token.lock().expect("token lock").clone();
            if let Some(token) = held.filter(|t| t.renew_at > Instant::now()) {
                return Ok(Some(token.value));
            }
        }
        let sent = self
            .client
            .post(format!("{base}/nacos/v1/auth/login"))
            .form(&[("username", user.as_str()), ("password", password.as_str())])
            .send()
            .await
            .map_err(|e| transport_error(e, what))?;
        let status = sent.status();
        let body = read_bounded(sent, what).await?;
        if !status.is_success() {
            let text = Error::shorten(&String::from_utf8_lossy(&body));
            return Err(Error::unauthenticated(format!(
                "{what}: Nacos refused the credentials ({status}): {text}"
            )));
        }
        let login: LoginAnswer = serde_json::from_slice(&body).map_err(|e| {
            Error::malformed("Nacos login reply", format!("{what}: {e}")).caused_by(e)
        })?;
        let ttl = Duration::from_secs(login.token_ttl.max(10));
        let token = Token {
            value: login.access_token,
            renew_at: Instant::now() + ttl / 2,
        };
        let value = token.value.clone();
        *self.token.lock().expect("token lock") = Some(token);
        Ok(Some(value))
    }
}

/// `http://{server}` unless the server is given with its scheme.
fn base_url(server: &str) -> String {
    let server = server.trim_end_matches('/');
    if server.contains("://") {
        server.to_owned()
    } else {
        format!("http://{server}")
    }
}

/// Reads an answer's body, failing once it is over [`MAX_ANSWER`].
async fn read_bounded(mut answer: reqwest::Response, what: &str) -> Result<Vec<u8>> {
    if let Some(length) = answer.content_length() {
        let length = usize::try_from(length).unwrap_or(usize::MAX);
        if length > MAX_ANSWER {
            return Err(too_large(length, what));
        }
    }
    let mut body = Vec::new();
    while let Some(chunk) = answer.chunk().await.map_err(|e| transport_error(e, what))? {
        if body.len() + chunk.len() > MAX_ANSWER {
            return Err(too_large(body.len() + chunk.len(), what));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

fn too_large(size: usize, what: &str) -> Error {
    Error::store(format!(
        "{what}: the Nacos server's answer is over {} MiB ({size} bytes or more)",
        MAX_ANSWER >> 20
    ))
}

fn transport_error(error: reqwest::Error, what: &str) -> Error {
    Error::store_unavailable(format!("{what}: {error}")).caused_by(error)
}

fn answer_error(status: reqwest::StatusCode, text: &str, what: &str) -> Error {
    let lower = text.to_ascii_lowercase();
    match status.as_u16() {
        401 => Error::unauthenticated(format!("{what}: Nacos refused the credentials: {text}")),
        403 if lower.contains("permission") => {
            Error::permission_denied(format!("{what}: Nacos refused: {text}"))
        }
        403 => Error::unauthenticated(format!("{what}: Nacos refused the credentials: {text}")),
        500..=599 => Error::store_unavailable(format!("{what}: Nacos answered {status}: {text}")),
        _ => Error::store(format!("{what}: Nacos answered {status}: {text}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn servers_become_base_urls() {
        assert_eq!(base_url("10.0.0.1:8848"), "http://10.0.0.1:8848");
        assert_eq!(
            base_url("https://n.example:8848/"),
            "https://n.example:8848"
        );
    }

    #[test]
    fn answers_sort_into_the_crate_s_errors() {
        let forbidden = reqwest::StatusCode::FORBIDDEN;
        assert!(answer_error(forbidden, "user not found", "x").is_permanent());
        assert!(matches!(
            answer_error(forbidden, "no namespace permission", "x"),
            Error::PermissionDenied { .. }
        ));
        let busy = reqwest::StatusCode::SERVICE_UNAVAILABLE;
        assert!(answer_error(busy, "starting", "x").is_transient());
    }

    #[test]
    fn a_list_answer_reads_as_naming_instances() {
        let answer = br#"{"name":"DEFAULT_GROUP@@shop","groupName":"DEFAULT_GROUP",
            "clusters":"","cacheMillis":10000,"lastRefTime":1,"checksum":"","allIPs":false,
            "reachProtectionThreshold":false,"valid":true,"hosts":[{"instanceId":
            "10.0.0.7#20880#DEFAULT#DEFAULT_GROUP@@shop","ip":"10.0.0.7","port":20880,
            "weight":1.0,"healthy":true,"enabled":true,"ephemeral":true,"clusterName":
            "DEFAULT","serviceName":"DEFAULT_GROUP@@shop","metadata":{"meta-v":"2.0.0"},
            "instanceHeartBeatInterval":5000,"instanceHeartBeatTimeOut":15000,
            "ipDeleteTimeout":30000}]}"#;
        let list: ListAnswer = serde_json::from_slice(answer).unwrap();
        assert_eq!(list.hosts.len(), 1);
        assert_eq!(list.hosts[0].ip, "10.0.0.7");
        assert_eq!(list.hosts[0].metadata["meta-v"], "2.0.0");
    }
}
