//! Dialing a remote agent: over WebSocket (`ws://`, or with feature `tls` `wss://`), with a
//! bearer token on the upgrade, or over Streamable HTTP (`http://`, `https://`: see
//! [`http_dial`](super::http_dial)), with it on every request. The URL's scheme picks.

use std::time::Duration;

use tokio::io::{DuplexStream, ReadHalf, WriteHalf};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::http::HeaderValue;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;

use super::stream::{Ended, Limits, into_lines};

/// Where and how to dial.
#[derive(Clone)]
pub struct Dial {
    /// `ws://host:port/acp` or `wss://…` (WebSocket), `http://host:port/acp` or `https://…`
    /// (Streamable HTTP).
    pub url: String,
    /// Sent as `Authorization: Bearer <token>` on the upgrade (WebSocket), or on every
    /// request (Streamable HTTP).
    pub token: Option<String>,
    /// How long connecting (TCP, TLS, upgrade) may take (default 10 s). Over Streamable HTTP,
    /// also each attempt to open an event stream, and the closing `DELETE`.
    pub connect_timeout: Duration,
    /// The connection's bounds.
    pub limits: Limits,
    /// Streamable HTTP: how long an event stream that broke is tried again (each attempt
    /// resuming it with `Last-Event-ID`) before the connection is given up (default 60 s, the
    /// time an agentacp server keeps a connection that has no stream open).
    pub resume_within: Duration,
    /// The TLS configuration for `wss://` and `https://` (default: the webpki roots). Over
    /// `https://`, ALPN offers `h2` and `http/1.1` whatever this configuration says.
    #[cfg(feature = "tls")]
    pub tls: Option<std::sync::Arc<rustls::ClientConfig>>,
}

/// Which remote profile a [`Dial`]'s URL names (its scheme).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    /// `ws://` or `wss://`.
    WebSocket,
    /// `http://` or `https://`: the upstream RFD's Streamable HTTP (POST, GET event streams,
    /// DELETE on one `/acp` endpoint).
    StreamableHttp,
}

impl std::fmt::Debug for Dial {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Dial")
            .field("url", &self.url)
            .field("token", &self.token.as_ref().map(|_| "<redacted>"))
            .field("connect_timeout", &self.connect_timeout)
            .finish_non_exhaustive()
    }
}

impl Dial {
    /// Dialing `url` with no token and the defaults.
    pub fn new(url: impl Into<String>) -> Dial {
        Dial {
            url: url.into(),
            token: None,
            connect_timeout: Duration::from_secs(10),
            limits: Limits::default(),
            resume_within: Duration::from_secs(60),
            #[cfg(feature = "tls")]
            tls: None,
        }
    }

    /// Whether the URL names this machine (`localhost`, a loopback address): whether the agent
    /// can reach what the dialer serves on loopback (a bridge's MCP endpoints). An unreadable
    /// URL does not.
    #[cfg_attr(not(feature = "mcp"), allow(dead_code))]
    pub(crate) fn is_loopback(&self) -> bool {
        let Ok(uri) = self.url.parse::<tokio_tungstenite::tungstenite::http::Uri>() else {
            return false;
        };
        let host = uri.host().unwrap_or_default();
        let host = host.trim_start_matches('[').trim_end_matches(']');
        host.eq_ignore_ascii_case("localhost") || host.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback())
    }

    /// Sends `token` on the upgrade (WebSocket) or on every request (Streamable HTTP).
    pub fn token(mut self, token: impl Into<String>) -> Dial {
        self.token = Some(token.into());
        self
    }

    /// The profile the URL's scheme names: `ws`/`wss` WebSocket, `http`/`https` Streamable
    /// HTTP. Any other scheme, or no URL at all, is an `InvalidInput` error naming the URL.
    pub fn transport(&self) -> std::io::Result<Transport> {
        let scheme = self
            .url
            .split_once("://")
            .map(|(scheme, _)| scheme.to_ascii_lowercase());
        match scheme.as_deref() {
            Some("ws" | "wss") => Ok(Transport::WebSocket),
            Some("http" | "https") => Ok(Transport::StreamableHttp),
            _ => Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!(
                    "cannot reach the agent at `{}`: not a URL of a remote agent (ws://, wss://, http:// or https://)",
                    self.url
                ),
            )),
        }
    }

    /// [`connect`](Dial::connect) over WebSocket (`connect.rs` picks it by the URL's scheme).
    pub(crate) async fn connect_websocket(
        &self,
    ) -> std::io::Result<(ReadHalf<DuplexStream>, WriteHalf<DuplexStream>, JoinHandle<Ended>)> {
        let mut request = self.url.as_str().into_client_request().map_err(|error| {
            std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!("cannot reach the agent at `{}`: not a WebSocket URL: {error}", self.url),
            )
        })?;
        if let Some(token) = &self.token {
            let value = HeaderValue::from_str(&format!("Bearer {token}")).map_err(|_| {
                std::io::Error::new(
                    std::io::ErrorKind::InvalidInput,
                    format!(
                        "cannot reach the agent at {}: the token is not a valid header value",
                        self.url
                    ),
                )
            })?;
            request.headers_mut().insert("authorization", value);
        }
        let config = WebSocketConfig::default()
            .max_message_size(Some(self.limits.max_message_bytes))
            .max_frame_size(Some(self.limits.max_message_bytes));
        // `true`: Nagle off, so each message goes out at once (as the listener's sockets).
        #[cfg(feature = "tls")]
        let connecting = {
            let connector = tokio_tungstenite::Connector::Rustls(match &self.tls {
                Some(config) => config.clone(),
                None => super::tls::client_config(&[]).map_err(std::io::Error::other)?,
            });
            tokio_tungstenite::connect_async_tls_with_config(request, Some(config), true, Some(connector))
        };
        #[cfg(not(feature = "tls"))]
        let connecting = tokio_tungstenite::connect_async_with_config(request, Some(config), true);
        let (ws, _response) = tokio::time::timeout(self.connect_timeout, connecting)
            .await
            .map_err(|_| {
                std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    format!(
                        "cannot reach the agent at {}: connecting took over {:?}",
                        self.url, self.connect_timeout
                    ),
                )
            })?
            .map_err(|error| refused(&self.url, error))?;
        // A dialed connection ends when either side closes it; nothing stops it from outside.
        // The sender is kept until the pump is done with the receiver: a dropped sender would
        // end the input at once (as a listener's shutdown does).
        let (stop, stopped) = watch::channel(false);
        tokio::spawn(async move { stop.closed().await });
        Ok(into_lines(ws, self.limits, stopped))
    }
}

/// How the connection to `url` ended, as a remote agent's last "stderr" line (`None`: its
/// task was dropped).
pub(crate) fn ended_line(url: &str, ended: Option<Ended>) -> String {
    let what = match Dial::new(url).transport() {
        Ok(Transport::StreamableHttp) => "Streamable HTTP connection",
        _ => "WebSocket connection",
    };
    match ended {
        Some(Ended::Closed) => format!("the {what} to {url} was closed"),
        Some(Ended::Failed(reason)) => format!("the {what} to {url} failed: {reason}"),
        None => format!("the {what} to {url} was dropped"),
    }
}

fn refused(url: &str, error: tokio_tungstenite::tungstenite::Error) -> std::io::Error {
    use tokio_tungstenite::tungstenite::Error;
    match error {
        Error::Http(response) => {
            let status = response.status();
            let body = response
                .body()
                .as_ref()
                .map(|body| String::from_utf8_lossy(body).trim().to_string())
                .unwrap_or_default();
            let kind = match status.as_u16() {
                401 | 403 => std::io::ErrorKind::PermissionDenied,
                _ => std::io::ErrorKind::ConnectionRefused,
            };
            let message = format!("cannot reach the agent at {url}: it refused the connection: {status} {body}");
            std::io::Error::new(kind, message.trim_end().to_string())
        }
        Error::Io(error) => std::io::Error::new(error.kind(), format!("cannot reach the agent at {url}: {error}")),
        other => std::io::Error::other(format!("cannot reach the agent at {url}: {other}")),
    }
}

#[cfg(test)]
mod tests {
    use super::{Dial, Transport};

    #[test]
    fn the_scheme_picks_the_transport() {
        for (url, transport) in [
            ("ws://h/acp", Transport::WebSocket),
            ("WSS://h/acp", Transport::WebSocket),
            ("http://h:1/acp", Transport::StreamableHttp),
            ("https://h/acp", Transport::StreamableHttp),
        ] {
            assert_eq!(Dial::new(url).transport().unwrap(), transport, "{url}");
        }
        for url in ["ftp://h/acp", "h:1/acp", ""] {
            let error = Dial::new(url).transport().unwrap_err();
            assert_eq!(error.kind(), std::io::ErrorKind::InvalidInput);
            assert!(error.to_string().contains("http://"), "{error}");
        }
    }

    #[test]
    fn loopback_urls_are_told_from_others() {
        for url in [
            "ws://127.0.0.1:8080/acp",
            "ws://localhost/acp",
            "wss://LOCALHOST:9/acp",
            "ws://[::1]:9000/acp",
            "ws://127.0.0.2/acp",
        ] {
            assert!(Dial::new(url).is_loopback(), "{url}");
        }
        for url in [
            "wss://agent.example.com/acp",
            "ws://10.0.0.2:80/acp",
            "ws://[2001:db8::1]/acp",
            "ws://localhost.example.com/acp",
            "not a url",
        ] {
            assert!(!Dial::new(url).is_loopback(), "{url}");
        }
    }
}
