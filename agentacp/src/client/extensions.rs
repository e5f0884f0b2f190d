//! The agent's extension methods (names starting with `_`): its requests and notifications go
//! to an [`ExtensionHandler`] ([`ClientOptions::extensions`](super::ClientOptions::extensions));
//! without one, requests are answered `-32601` and notifications ignored.

use serde_json::Value;

use super::handlers::HandlerResult;
use crate::jsonrpc::{RpcError, codes};
use crate::oversight::BoxFuture;

/// Answers the agent's `_`-prefixed requests and sees its `_`-prefixed notifications. The
/// params arrive as the agent sent them (`_meta` included); a request's answer is sent as it
/// is. Each request is bounded by [`ClientOptions::request_timeout`](super::ClientOptions::request_timeout)
/// (then `-32603`).
pub trait ExtensionHandler: Send + Sync + 'static {
    /// Answers one extension request. Default: `-32601`.
    fn request(&self, method: &str, params: Value) -> BoxFuture<HandlerResult> {
        let _ = params;
        let error = method_not_found(method);
        Box::pin(async move { Err(error) })
    }

    /// Sees one extension notification. Default: ignored.
    fn notification(&self, method: &str, params: Value) {
        let _ = (method, params);
    }
}

/// The `-32601` answer to an extension request nobody handles.
pub(crate) fn method_not_found(method: &str) -> RpcError {
    RpcError::new(
        codes::METHOD_NOT_FOUND,
        format!("method not found: `{method}` (this client handles no such extension method)"),
    )
}

/// Whether `method` names an extension method (`_` prefix, more after it).
pub(crate) fn is_extension(method: &str) -> bool {
    method.len() > 1 && method.starts_with('_')
}
