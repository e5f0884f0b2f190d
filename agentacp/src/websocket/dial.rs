//! Dialing an agent over WebSocket: `ws://` or (feature `tls`) `wss://`, with a bearer token
//! on the upgrade.

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
    /// `ws://host:port/acp` or `wss://…`.
    pub url: String,
    /// Sent as `Authorization: Bearer <token>` on the upgrade.
    pub token: Option<String>,
    /// How long connecting (TCP, TLS, upgrade) may take (default 10 s).
    pub connect_timeout: Duration,
    /// The connection's bounds.
    pub limits: Limits,
    /// The TLS configuration for `wss://` (default: the webpki roots).
    #[cfg(feature = "tls")]
    pub tls: Option<std::sync::Arc<rustls::ClientConfig>>,
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

    /// Sends `token` on the upgrade.
    pub fn token(mut self, token: impl Into<String>) -> Dial {
        self.token = Some(token.into());
        self
    }

    /// Connects and upgrades; the agent's JSON-RPC lines come from the first half and go to
    /// the second. A refused upgrade (`401`, `403`, …) is an error that says so. Every error
    /// is a sentence naming the URL: `cannot reach the agent at URL: …`.
    pub async fn connect(&self) -> std::io::Result<(ReadHalf<DuplexStream>, WriteHalf<DuplexStream>)> {
        let (read, write, _pump) = self.connect_watched().await?;
        Ok((read, write))
    }

    /// [`connect`](Dial::connect), and the task that tells how the connection ended.
    pub(crate) async fn connect_watched(
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
        #[cfg(feature = "tls")]
        let connecting = {
            let connector = tokio_tungstenite::Connector::Rustls(match &self.tls {
                Some(config) => config.clone(),
                None => super::tls::client_config(&[]).map_err(std::io::Error::other)?,
            });
            tokio_tungstenite::connect_async_tls_with_config(request, Some(config), false, Some(connector))
        };
        #[cfg(not(feature = "tls"))]
        let connecting = tokio_tungstenite::connect_async_with_config(request, Some(config), false);
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
    use super::Dial;

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
