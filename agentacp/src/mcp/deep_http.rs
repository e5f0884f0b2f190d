//! An HTTP MCP server's answers, read before rmcp reads them: rmcp drops an SSE event whose
//! JSON it cannot read (one nested deeper than [`crate::audit::PEER_READ_DEPTH`]) without a
//! word, and the call would wait out its timeout. [`GuardedHttp`] is rmcp's reqwest client
//! with each SSE message event checked by [`super::deep`]'s rule first: such an event's data
//! becomes an error answer to its request id (a notification's is dropped with a warning).
//!
//! rmcp reads at most [`StreamableHttpResponseLimits`] bytes of one answer (16 MiB, as over
//! stdio), an SSE event or an `application/json` body, and fails what is larger, or an
//! `application/json` answer too deep for it, with a transport error that names its own
//! types. An answer to a request that rmcp refuses for its size or depth becomes an error
//! answer to that request that says so, as over stdio.

use std::collections::HashMap;
use std::sync::Arc;

use futures_util::stream::{BoxStream, StreamExt};
use http::{HeaderName, HeaderValue};
use rmcp::ErrorData;
use rmcp::model::{ClientJsonRpcMessage, RequestId, ServerJsonRpcMessage};
use rmcp::transport::streamable_http_client::{
    SseError, StreamableHttpClient, StreamableHttpError, StreamableHttpPostResponse, StreamableHttpResponseLimits,
};
use sse_stream::Sse;

use super::deep::checked;
use crate::audit::PEER_READ_DEPTH;
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

    /// `events`, each message event's data checked before it is read. `answering`: the
    /// request the events answer, if they answer one: an event larger than
    /// `max_event_bytes` (which rmcp refused to read) becomes an error answer to it, and the
    /// events end there.
    fn checked(&self, events: Events, answering: Option<RequestId>, max_event_bytes: usize) -> Events {
        let server = self.server.clone();
        events
            .scan(false, move |ended, event| {
                if *ended {
                    return std::future::ready(None);
                }
                let event = match event {
                    Ok(sse) => Ok(checked_event(&server, sse)),
                    Err(error) => match &answering {
                        Some(id) if is_event_too_large(&error) => {
                            *ended = true;
                            let answer = error_answer(id.clone(), too_large(&server, max_event_bytes));
                            Ok(Sse::default().data(serde_json::to_string(&answer).unwrap_or_default()))
                        }
                        _ => Err(error),
                    },
                };
                std::future::ready(Some(event))
            })
            .boxed()
    }

    /// The server's `response` to a message (to the request `answering`, if it is one), its
    /// SSE events (if it is a stream of them) checked; an answer to a request that rmcp
    /// refused to read, too large or too deep, becomes an error answer to it that says so.
    fn checked_response(
        &self,
        answering: Option<RequestId>,
        response: Result<StreamableHttpPostResponse, StreamableHttpError<reqwest::Error>>,
        limits: StreamableHttpResponseLimits,
    ) -> Result<StreamableHttpPostResponse, StreamableHttpError<reqwest::Error>> {
        match (response, answering) {
            (Ok(StreamableHttpPostResponse::Sse(events, session)), id) => Ok(StreamableHttpPostResponse::Sse(
                self.checked(events, id, limits.max_sse_event_size),
                session,
            )),
            (Err(error), Some(id)) => match unread_answer(&self.server, &error, limits) {
                Some(why) => Ok(StreamableHttpPostResponse::Json(error_answer(id, why), None)),
                None => Err(error),
            },
            (response, _) => response,
        }
    }
}

/// `sse` with its data, if it is a message event, checked by [`super::deep`]'s rule.
fn checked_event(server: &str, mut sse: Sse) -> Sse {
    let message = matches!(sse.event.as_deref(), None | Some("") | Some("message"));
    if let Some(data) = sse.data.take_if(|_| message) {
        sse.data = checked(server, Frame::Line(data.into_bytes())).and_then(|line| String::from_utf8(line).ok());
    }
    sse
}

/// Whether `error` is rmcp's refusal of an SSE event larger than its limit (rmcp names that
/// error by its words only).
fn is_event_too_large(error: &SseError) -> bool {
    matches!(error, SseError::Body(error) if error.to_string().contains("SSE event exceeded the maximum size"))
}

/// Why rmcp did not read the answer whose reading failed with `error`, if it refused it for
/// its size or its depth.
fn unread_answer(
    server: &str,
    error: &StreamableHttpError<reqwest::Error>,
    limits: StreamableHttpResponseLimits,
) -> Option<String> {
    match error {
        StreamableHttpError::ResponseBodyTooLarge { .. } => Some(too_large(server, limits.max_json_response_size)),
        StreamableHttpError::UnexpectedServerResponse(text) if text.contains("recursion limit exceeded") => Some(
            format!("the MCP server `{server}`'s answer nests too deep: at most {PEER_READ_DEPTH} levels are read"),
        ),
        _ => None,
    }
}

/// Why an answer larger than `max_bytes` was not read.
fn too_large(server: &str, max_bytes: usize) -> String {
    format!("the MCP server `{server}`'s answer is too large: at most {max_bytes} bytes of one answer are read")
}

/// An error answer to the request `id` that says `why` (logged as a warning).
fn error_answer(id: RequestId, why: String) -> ServerJsonRpcMessage {
    tracing::warn!("{why}");
    ServerJsonRpcMessage::error(ErrorData::internal_error(why, None), Some(id))
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
        let limits = StreamableHttpResponseLimits::default();
        self.post_message_with_response_limits(uri, message, session_id, auth_header, custom_headers, limits)
            .await
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
        let mut limits = StreamableHttpResponseLimits::default();
        limits.max_sse_event_size = max_sse_event_size;
        self.post_message_with_response_limits(uri, message, session_id, auth_header, custom_headers, limits)
            .await
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
        let answering = match &message {
            ClientJsonRpcMessage::Request(request) => Some(request.id.clone()),
            _ => None,
        };
        let response = self
            .inner
            .post_message_with_response_limits(uri, message, session_id, auth_header, custom_headers, limits)
            .await;
        self.checked_response(answering, response, limits)
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
        let max_sse_event_size = StreamableHttpResponseLimits::default().max_sse_event_size;
        self.get_stream_with_max_sse_event_size(
            uri,
            session_id,
            last_event_id,
            auth_header,
            custom_headers,
            max_sse_event_size,
        )
        .await
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
        Ok(self.checked(events, None, max_sse_event_size))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A message event too deep for rmcp becomes an error answer to its id, keeping its event
    /// id; one without an id loses its data; other events pass unchanged.
    #[tokio::test]
    async fn an_event_too_deep_is_answered_with_an_error_and_the_others_pass() {
        let deep = |id: &str| super::super::deep::nested_answer(id, 300);
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
            .checked(futures_util::stream::iter(events).boxed(), None, 1024)
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

    /// Serves one HTTP exchange on a loopback port: reads the request, writes `response`
    /// (status line, headers and body) and closes. Returns the URL.
    async fn serve_once(response: String) -> Arc<str> {
        use tokio::io::AsyncWriteExt;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/mcp", listener.local_addr().unwrap());
        tokio::spawn(async move {
            let (mut socket, _) = listener.accept().await.unwrap();
            read_request(&mut socket).await;
            let _ = socket.write_all(response.as_bytes()).await;
            let _ = socket.shutdown().await;
        });
        url.into()
    }

    /// Reads one HTTP request (its head and its `Content-Length` bytes of body).
    async fn read_request(socket: &mut tokio::net::TcpStream) {
        use tokio::io::AsyncReadExt;
        let mut seen = Vec::new();
        let mut buf = [0; 4096];
        loop {
            let n = socket.read(&mut buf).await.unwrap();
            if n == 0 {
                return;
            }
            seen.extend_from_slice(&buf[..n]);
            let text = String::from_utf8_lossy(&seen).to_ascii_lowercase();
            let Some(end) = text.find("\r\n\r\n") else { continue };
            let length = text[..end]
                .lines()
                .find_map(|line| line.strip_prefix("content-length:"))
                .map_or(0, |value| value.trim().parse::<usize>().unwrap());
            if seen.len() >= end + 4 + length {
                return;
            }
        }
    }

    /// What the client makes of `body` (an HTTP response of type `content_type`) answering
    /// `request`, read within `limits`.
    async fn answer(
        request: &str,
        content_type: &str,
        body: &str,
        limits: StreamableHttpResponseLimits,
    ) -> Result<StreamableHttpPostResponse, StreamableHttpError<reqwest::Error>> {
        let response = format!("HTTP/1.1 200 OK\r\nContent-Type: {content_type}\r\nConnection: close\r\n\r\n{body}");
        let url = serve_once(response).await;
        let message: ClientJsonRpcMessage = serde_json::from_str(request).unwrap();
        let client = GuardedHttp::new("s").unwrap();
        let post = client.post_message_with_response_limits(url, message, None, None, HashMap::new(), limits);
        tokio::time::timeout(std::time::Duration::from_secs(30), post)
            .await
            .expect("answered in time")
    }

    /// A ping (id 7) and a notification.
    const PING: &str = r#"{"jsonrpc":"2.0","id":7,"method":"ping"}"#;
    const NOTE: &str = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;

    /// rmcp's limits, with at most `bytes` in one SSE event or `application/json` body.
    fn limits(bytes: usize) -> StreamableHttpResponseLimits {
        let mut limits = StreamableHttpResponseLimits::default();
        limits.max_sse_event_size = bytes;
        limits.max_json_response_size = bytes;
        limits
    }

    /// Asserts that `answer` is an error answer to id 7 whose message says `words`.
    fn assert_error_answer(answer: &ServerJsonRpcMessage, words: &str) {
        let answer = serde_json::to_value(answer).unwrap();
        let message = answer["error"]["message"].as_str().unwrap_or_default();
        assert_eq!(answer["id"], 7, "{answer}");
        assert!(message.contains(words), "{answer}");
    }

    /// An SSE event larger than rmcp reads, answering a request, becomes an error answer to
    /// it that says so, and the events end there.
    #[tokio::test]
    async fn an_sse_event_too_large_is_an_error_answer_to_its_request() {
        let big = format!("data: {}\n\ndata: {{}}\n\n", "x".repeat(200));
        let Ok(StreamableHttpPostResponse::Sse(events, _)) = answer(PING, "text/event-stream", &big, limits(64)).await
        else {
            panic!("an SSE stream")
        };
        let events: Vec<_> = events.collect().await;
        assert_eq!(events.len(), 1, "{events:?}");
        let data = events[0].as_ref().expect("an event").data.clone().unwrap_or_default();
        let answer = serde_json::from_str(&data).expect("an answer");
        assert_error_answer(&answer, "`s`'s answer is too large: at most 64 bytes");
    }

    /// An `application/json` body larger than rmcp reads becomes an error answer to its
    /// request; one answering a notification is left as rmcp makes it.
    #[tokio::test]
    async fn a_json_body_too_large_is_an_error_answer_to_its_request() {
        let huge = "x".repeat(200);
        let Ok(StreamableHttpPostResponse::Json(answer_, _)) =
            answer(PING, "application/json", &huge, limits(64)).await
        else {
            panic!("an answer")
        };
        assert_error_answer(&answer_, "`s`'s answer is too large: at most 64 bytes");
        let refused = answer(NOTE, "application/json", &huge, limits(64)).await;
        assert!(
            matches!(refused, Err(StreamableHttpError::ResponseBodyTooLarge { .. })),
            "{refused:?}"
        );
    }

    /// An `application/json` body nested too deep for rmcp becomes an error answer to its
    /// request.
    #[tokio::test]
    async fn a_json_body_too_deep_is_an_error_answer_to_its_request() {
        let deep = super::super::deep::nested_answer(r#""id":7,"#, 300);
        let Ok(StreamableHttpPostResponse::Json(answer_, _)) =
            answer(PING, "application/json", &deep, limits(4096)).await
        else {
            panic!("an answer")
        };
        assert_error_answer(&answer_, "`s`'s answer nests too deep: at most 127 levels are read");
    }
}
