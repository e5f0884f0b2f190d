//! The agent's Streamable HTTP endpoint: the HTTP client of one connection (its cookie
//! store, TLS), its requests (the token on each), and the sentences its failures make.

use std::sync::Arc;
use std::time::Duration;

use reqwest::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE, HeaderValue};
use reqwest::{Method, RequestBuilder, Response, StatusCode};

use crate::websocket::dial::Dial;
use crate::websocket::stream::Limits;

/// The header naming the connection.
pub(super) const CONNECTION_ID: &str = "acp-connection-id";
/// The header naming a session.
const SESSION_ID: &str = "acp-session-id";
/// The most of a refusal's body read into its sentence.
const REFUSAL_BYTES: usize = 1024;

/// The agent's endpoint, and how to make requests to it.
pub(super) struct Endpoint {
    /// The URL as given, for sentences.
    pub(super) url: String,
    target: reqwest::Url,
    http: reqwest::Client,
    authorization: Option<HeaderValue>,
    pub(super) connect_timeout: Duration,
    pub(super) resume_within: Duration,
    pub(super) limits: Limits,
}

impl Endpoint {
    pub(super) fn new(dial: &Dial) -> std::io::Result<Endpoint> {
        let invalid = |why: String| {
            std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!("cannot reach the agent at {}: {why}", dial.url),
            )
        };
        let target = reqwest::Url::parse(&dial.url).map_err(|error| invalid(format!("not a URL: {error}")))?;
        if target.scheme() == "https" && cfg!(not(feature = "tls")) {
            return Err(invalid("https:// needs agentacp's feature `tls`".into()));
        }
        let authorization = match &dial.token {
            Some(token) => {
                let mut value = HeaderValue::from_str(&format!("Bearer {token}"))
                    .map_err(|_| invalid("the token is not a valid header value".into()))?;
                value.set_sensitive(true);
                Some(value)
            }
            None => None,
        };
        let http = client(dial).map_err(|error| invalid(format!("the HTTP client could not be built: {error}")))?;
        Ok(Endpoint {
            url: dial.url.clone(),
            target,
            http,
            authorization,
            connect_timeout: dial.connect_timeout,
            resume_within: dial.resume_within,
            limits: dial.limits,
        })
    }

    /// A request to the endpoint with the token, naming `connection` if given.
    pub(super) fn request(&self, method: Method, connection: Option<&str>) -> RequestBuilder {
        let mut request = self.http.request(method, self.target.clone());
        if let Some(authorization) = &self.authorization {
            request = request.header(AUTHORIZATION, authorization.clone());
        }
        if let Some(connection) = connection {
            request = request.header(CONNECTION_ID, connection);
        }
        request
    }

    /// A POST of one JSON-RPC message.
    pub(super) fn post(&self, connection: Option<&str>, session: Option<&str>, line: bytes::Bytes) -> RequestBuilder {
        let mut request = self
            .request(Method::POST, connection)
            .header(CONTENT_TYPE, "application/json")
            .header(ACCEPT, "application/json, text/event-stream")
            .body(line);
        if let Some(session) = session {
            request = request.header(SESSION_ID, session);
        }
        request
    }

    /// A GET of the connection's event stream (or `session`'s), resuming after `last`.
    pub(super) fn stream(&self, connection: &str, session: Option<&str>, last: Option<&str>) -> RequestBuilder {
        let mut request = self
            .request(Method::GET, Some(connection))
            .header(ACCEPT, "text/event-stream");
        if let Some(session) = session {
            request = request.header(SESSION_ID, session);
        }
        if let Some(last) = last {
            request = request.header("last-event-id", last);
        }
        request
    }

    /// Reaches the endpoint within the connect timeout: a `GET` that opens nothing, with the
    /// token. Refused with `401`/`403` (`PermissionDenied`), `404` (`NotFound`: no endpoint
    /// there) or a server error; any other answer means it is there.
    pub(super) async fn probe(&self) -> std::io::Result<()> {
        let probe = self.request(Method::GET, None).header(ACCEPT, "text/event-stream");
        let response = self.within_connect_timeout(probe.send()).await?;
        let status = response.status();
        tracing::debug!(agent = %self.url, version = ?response.version(), %status, "reached the agent");
        let kind = match status.as_u16() {
            401 | 403 => std::io::ErrorKind::PermissionDenied,
            404 => std::io::ErrorKind::NotFound,
            _ if status.is_server_error() => std::io::ErrorKind::ConnectionRefused,
            _ => return Ok(()),
        };
        let refusal = self.refusal(response).await;
        Err(std::io::Error::new(
            kind,
            format!(
                "cannot reach the agent at {}: it refused the connection: {refusal}",
                self.url
            ),
        ))
    }

    /// `sending`, bounded by the connect timeout; its error as a sentence naming the URL.
    pub(super) async fn within_connect_timeout(
        &self,
        sending: impl Future<Output = reqwest::Result<Response>>,
    ) -> std::io::Result<Response> {
        match tokio::time::timeout(self.connect_timeout, sending).await {
            Ok(Ok(response)) => Ok(response),
            Ok(Err(error)) => Err(self.unreachable(&error)),
            Err(_) => Err(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                format!(
                    "cannot reach the agent at {}: connecting took over {:?}",
                    self.url, self.connect_timeout
                ),
            )),
        }
    }

    /// A request that failed to get an answer, as a sentence naming the URL and the cause (the
    /// whole chain: reqwest's own words say little), of the kind of the I/O error under it.
    pub(super) fn unreachable(&self, error: &reqwest::Error) -> std::io::Error {
        let mut causes = vec![error.to_string()];
        let mut kind = if error.is_timeout() {
            std::io::ErrorKind::TimedOut
        } else {
            std::io::ErrorKind::Other
        };
        let mut source = std::error::Error::source(error);
        while let Some(cause) = source {
            if let Some(io) = cause.downcast_ref::<std::io::Error>() {
                kind = io.kind();
            }
            let text = cause.to_string();
            if !causes.iter().any(|seen| seen.contains(&text)) {
                causes.push(text);
            }
            source = cause.source();
        }
        std::io::Error::new(
            kind,
            format!("cannot reach the agent at {}: {}", self.url, causes.join(": ")),
        )
    }

    /// A refused request's status and the start of its body (a server's sentence), as
    /// `401 Unauthorized: the token is not accepted`.
    pub(super) async fn refusal(&self, mut response: Response) -> String {
        let status = response.status();
        let mut body = Vec::new();
        let reading = async {
            while body.len() < REFUSAL_BYTES {
                match response.chunk().await {
                    Ok(Some(chunk)) => body.extend_from_slice(&chunk),
                    _ => break,
                }
            }
        };
        let _ = tokio::time::timeout(self.connect_timeout, reading).await;
        body.truncate(REFUSAL_BYTES);
        let text = String::from_utf8_lossy(&body);
        let text = text.split_whitespace().collect::<Vec<_>>().join(" ");
        match text.is_empty() {
            true => status_text(status),
            false => format!("{}: {text}", status_text(status)),
        }
    }
}

/// The waits between attempts to reach the agent again: 50 ms, doubling up to 2 s, for at
/// most [`Endpoint::resume_within`].
pub(super) struct Backoff {
    next: Duration,
    deadline: tokio::time::Instant,
}

impl Backoff {
    pub(super) fn for_resuming(endpoint: &Endpoint) -> Backoff {
        Backoff {
            next: Duration::from_millis(50),
            deadline: tokio::time::Instant::now() + endpoint.resume_within,
        }
    }

    /// Waits before the next attempt; `false` at once when the time is up.
    pub(super) async fn wait(&mut self) -> bool {
        let now = tokio::time::Instant::now();
        if now >= self.deadline {
            return false;
        }
        tokio::time::sleep_until((now + self.next).min(self.deadline)).await;
        self.next = (self.next * 2).min(Duration::from_secs(2));
        true
    }
}

/// Whether a request that got no answer never reached the agent, for a reason that may pass
/// (the network, or the agent, is back soon): it may be sent again.
pub(super) fn not_sent(error: &reqwest::Error) -> bool {
    use std::io::ErrorKind::{ConnectionRefused, HostUnreachable, NetworkUnreachable, TimedOut};
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        if let Some(io) = cause.downcast_ref::<std::io::Error>() {
            return error.is_connect()
                && matches!(
                    io.kind(),
                    ConnectionRefused | HostUnreachable | NetworkUnreachable | TimedOut
                );
        }
        source = cause.source();
    }
    false
}

/// `404 Not Found`.
pub(super) fn status_text(status: StatusCode) -> String {
    format!("{} {}", status.as_u16(), status.canonical_reason().unwrap_or_default())
        .trim_end()
        .to_string()
}

/// The HTTP client of one connection: its own cookie store, no redirects, no proxy, HTTP/2
/// keepalive pings; with feature `tls`, rustls (`dial.tls`, else the webpki roots) offering
/// `h2` and `http/1.1`.
fn client(dial: &Dial) -> Result<reqwest::Client, String> {
    let keepalive = dial.limits.keepalive;
    let builder = reqwest::Client::builder()
        .cookie_provider(Arc::new(reqwest::cookie::Jar::default()))
        .redirect(reqwest::redirect::Policy::none())
        .no_proxy()
        .connect_timeout(dial.connect_timeout)
        .http2_keep_alive_interval(keepalive)
        .http2_keep_alive_timeout(keepalive)
        .http2_keep_alive_while_idle(true);
    #[cfg(feature = "tls")]
    let builder = {
        let base = match &dial.tls {
            Some(config) => config.clone(),
            None => crate::websocket::tls::client_config(&[])?,
        };
        let mut config = (*base).clone();
        config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        builder.tls_backend_preconfigured(config)
    };
    builder.build().map_err(|error| error.to_string())
}
