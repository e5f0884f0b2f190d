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
    /// redirects followed only by a 307 or 308 to the same origin, at most [`MAX_REDIRECTS`].
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
                    if let Some(data) = sse.data.take().filter(|_| message) {
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
