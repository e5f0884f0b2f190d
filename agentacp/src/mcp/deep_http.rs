//! An HTTP MCP server's answers, read before rmcp reads them: rmcp drops an SSE event whose
//! JSON it cannot read (one nested deeper than [`crate::audit::PEER_READ_DEPTH`]) without a
//! word, and the call would wait out its timeout. [`GuardedHttp`] is rmcp's reqwest client
//! with each SSE message event checked by [`super::deep`]'s rule first: such an event's data
//! becomes an error answer to its request id (a notification's is dropped with a warning).

use std::collections::HashMap;
use std::sync::Arc;

use futures_util::stream::{BoxStream, StreamExt};
use http::{HeaderName, HeaderValue};
use rmcp::model::ClientJsonRpcMessage;
use rmcp::transport::streamable_http_client::{
    SseError, StreamableHttpClient, StreamableHttpError, StreamableHttpPostResponse, StreamableHttpResponseLimits,
};
use sse_stream::Sse;

use super::deep::checked;
use crate::jsonrpc::frame::Frame;

/// The most redirects one request follows.
const MAX_REDIRECTS: usize = 10;

/// A stream of a server's SSE events, as rmcp reads them.
type Events = BoxStream<'static, Result<Sse, SseError>>;

/// rmcp's reqwest client for the MCP server `server`, its SSE events checked before rmcp
/// reads them.
#[derive(Clone)]
pub(crate) struct GuardedHttp {
    inner: reqwest::Client,
    server: Arc<str>,
}

impl GuardedHttp {
    /// The client for the server named `server`: no idle connections kept (as rmcp's own),
    /// redirects followed only by a 307 or 308 to the same origin, at most [`MAX_REDIRECTS`];
    /// with feature `tls`, rustls on the ring provider (installed as the process default
    /// unless the application installed one).
    pub(crate) fn new(server: &str) -> Result<Self, String> {
        let redirects = reqwest::redirect::Policy::custom(|attempt| {
            let same_origin = attempt
                .previous()
                .last()
                .is_some_and(|from| from.origin() == attempt.url().origin());
            if attempt.previous().len() > MAX_REDIRECTS {
                attempt.error(format!("more than {MAX_REDIRECTS} redirects"))
            } else if same_origin && matches!(attempt.status().as_u16(), 307 | 308) {
                attempt.follow()
            } else {
                attempt.stop()
            }
        });
        // reqwest builds its TLS configuration for any URL once it has TLS: the provider first.
        #[cfg(feature = "tls")]
        let _ = rustls::crypto::ring::default_provider().install_default();
        let inner = reqwest::Client::builder()
            .pool_max_idle_per_host(0)
            .redirect(redirects)
            .build()
            .map_err(|error| format!("the HTTP client for the MCP server `{server}` could not be built: {error}"))?;
        Ok(Self {
            inner,
            server: server.into(),
        })
    }

    /// `events`, each message event's data checked before it is read.
    fn checked(&self, events: Events) -> Events {
        let server = self.server.clone();
        events
            .map(move |event| {
                event.map(|mut sse| {
                    let message = matches!(sse.event.as_deref(), None | Some("") | Some("message"));
                    if let Some(data) = sse.data.take_if(|_| message) {
                        sse.data = checked(&server, Frame::Line(data.into_bytes()))
                            .and_then(|line| String::from_utf8(line).ok());
                    }
                    sse
                })
            })
            .boxed()
    }

    /// `response`, its SSE events (if it is a stream of them) checked.
    fn checked_response(&self, response: StreamableHttpPostResponse) -> StreamableHttpPostResponse {
        match response {
            StreamableHttpPostResponse::Sse(events, session) => {
                StreamableHttpPostResponse::Sse(self.checked(events), session)
            }
            other => other,
        }
    }
}

impl StreamableHttpClient for GuardedHttp {
    type Error = reqwest::Error;

    async fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<StreamableHttpPostResponse, StreamableHttpError<Self::Error>> {
        let response = self
            .inner
            .post_message(uri, message, session_id, auth_header, custom_headers)
            .await?;
        Ok(self.checked_response(response))
    }

    async fn post_message_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> Result<StreamableHttpPostResponse, StreamableHttpError<Self::Error>> {
        let response = self
            .inner
            .post_message_with_max_sse_event_size(
                uri,
                message,
                session_id,
                auth_header,
                custom_headers,
                max_sse_event_size,
            )
            .await?;
        Ok(self.checked_response(response))
    }

    async fn post_message_with_response_limits(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        limits: StreamableHttpResponseLimits,
    ) -> Result<StreamableHttpPostResponse, StreamableHttpError<Self::Error>> {
        let response = self
            .inner
            .post_message_with_response_limits(uri, message, session_id, auth_header, custom_headers, limits)
            .await?;
        Ok(self.checked_response(response))
    }

    async fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<(), StreamableHttpError<Self::Error>> {
        self.inner
            .delete_session(uri, session_id, auth_header, custom_headers)
            .await
    }

    async fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<Events, StreamableHttpError<Self::Error>> {
        let events = self
            .inner
            .get_stream(uri, session_id, last_event_id, auth_header, custom_headers)
            .await?;
        Ok(self.checked(events))
    }

    async fn get_stream_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> Result<Events, StreamableHttpError<Self::Error>> {
        let events = self
            .inner
            .get_stream_with_max_sse_event_size(
                uri,
                session_id,
                last_event_id,
                auth_header,
                custom_headers,
                max_sse_event_size,
            )
            .await?;
        Ok(self.checked(events))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A message event too deep for rmcp becomes an error answer to its id, keeping its event
    /// id; one without an id loses its data; other events pass unchanged.
    #[tokio::test]
    async fn an_event_too_deep_is_answered_with_an_error_and_the_others_pass() {
        let deep = |id: &str| {
            format!(
                r#"{{"jsonrpc":"2.0",{id}"result":{}1{}}}"#,
                "[".repeat(300),
                "]".repeat(300)
            )
        };
        let event = |name: Option<&str>, data: String| Sse {
            event: name.map(str::to_string),
            data: Some(data),
            id: Some("e1".into()),
            retry: None,
        };
        let shallow = r#"{"jsonrpc":"2.0","id":8,"result":{}}"#.to_string();
        let events = vec![
            Ok(event(Some("message"), deep(r#""id":7,"#))),
            Ok(event(None, deep(""))),
            Ok(event(None, shallow.clone())),
            Ok(event(Some("ping"), deep(""))),
        ];
        let client = GuardedHttp::new("s").unwrap();
        let read: Vec<Sse> = client
            .checked(futures_util::stream::iter(events).boxed())
            .map(|event| event.unwrap())
            .collect()
            .await;
        let answer: serde_json::Value = serde_json::from_str(read[0].data.as_deref().unwrap()).unwrap();
        assert_eq!(answer["id"], 7);
        let message = answer["error"]["message"].as_str().unwrap();
        assert!(message.contains("`s`'s answer nests too deep: 301 levels"), "{message}");
        assert_eq!(read[0].id.as_deref(), Some("e1"));
        assert_eq!(read[1].data, None);
        assert_eq!(read[2].data, Some(shallow));
        assert_eq!(read[3].data, Some(deep("")));
    }
}
