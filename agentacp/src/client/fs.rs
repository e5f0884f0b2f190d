//! The built-in `fs/*` methods: text files inside the workspace root.
//!
//! The runtime has already checked the path (absolute, inside the root, see
//! [`ClientContext::confine`](super::ClientContext::confine)); these functions then open it
//! through the root's handle ([`ClientContext::workspace`](super::ClientContext::workspace)),
//! so a symlink, dangling or not, or a file swapped for one, cannot lead outside. Lines are
//! 1-based, as ACP says.

use std::path::Path;

use super::context::ClientContext;
use crate::jsonrpc::{RpcError, codes};
use crate::wire::default as wire;

/// The largest file `read_text_file` reads, in bytes (64 MiB): an answer must fit in one
/// JSON-RPC message.
pub const MAX_READ_BYTES: u64 = crate::workspace::MAX_FILE_BYTES;

fn io_error(path: &str, error: &std::io::Error) -> RpcError {
    use std::io::ErrorKind;
    let code = match error.kind() {
        ErrorKind::NotFound => codes::RESOURCE_NOT_FOUND,
        ErrorKind::PermissionDenied | ErrorKind::InvalidInput | ErrorKind::InvalidData => codes::INVALID_PARAMS,
        _ => codes::INTERNAL_ERROR,
    };
    RpcError::new(code, format!("`{path}`: {error}"))
}

/// `fs/read_text_file`: the file's text, or `limit` lines from `line` (1-based) on.
pub async fn read_text_file(
    context: &ClientContext,
    request: &wire::ReadTextFileRequest,
) -> Result<wire::ReadTextFileResponse, RpcError> {
    if request.line == Some(0) {
        return Err(RpcError::new(
            codes::INVALID_PARAMS,
            "`line` is 1-based; 0 is not a line",
        ));
    }
    let workspace = context.workspace().clone();
    let path = request.path.clone();
    let text = tokio::task::spawn_blocking(move || workspace.read_to_string(&path))
        .await
        .map_err(|error| RpcError::new(codes::INTERNAL_ERROR, error.to_string()))?
        .map_err(|error| io_error(&request.path, &error))?;
    Ok(wire::ReadTextFileResponse::new(select_lines(
        &text,
        request.line,
        request.limit,
    )))
}

/// `limit` lines from `line` (1-based); the whole text when neither is given. Line ends are
/// kept as they are.
pub fn select_lines(text: &str, line: Option<u32>, limit: Option<u32>) -> String {
    if line.is_none() && limit.is_none() {
        return text.to_string();
    }
    let skip = line.map_or(0, |line| line.saturating_sub(1) as usize);
    let take = limit.map_or(usize::MAX, |limit| limit as usize);
    text.split_inclusive('\n').skip(skip).take(take).collect()
}

/// `fs/write_text_file`: writes the whole file, creating it (and missing folders inside the
/// root), atomically: a temporary file with a random name beside it (created with `O_EXCL`),
/// fsynced, renamed over it, keeping its permission bits; see
/// [`Workspace::write`](crate::workspace::Workspace::write). A failure never leaves a
/// half-written file, and a symlink is never written through.
pub async fn write_text_file(
    context: &ClientContext,
    request: &wire::WriteTextFileRequest,
) -> Result<wire::WriteTextFileResponse, RpcError> {
    let shown = request.path.as_str();
    if Path::new(shown).file_name().is_none() {
        return Err(RpcError::new(codes::INVALID_PARAMS, format!("`{shown}` names no file")));
    }
    let workspace = context.workspace().clone();
    let (path, content) = (request.path.clone(), request.content.clone());
    tokio::task::spawn_blocking(move || workspace.write(&path, content.as_bytes()))
        .await
        .map_err(|error| RpcError::new(codes::INTERNAL_ERROR, error.to_string()))?
        .map_err(|error| io_error(shown, &error))?;
    Ok(wire::WriteTextFileResponse::default())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_one_based_and_keep_their_ends() {
        let text = "one\ntwo\nthree\n";
        assert_eq!(select_lines(text, None, None), text);
        assert_eq!(select_lines(text, Some(1), Some(1)), "one\n");
        assert_eq!(select_lines(text, Some(2), None), "two\nthree\n");
        assert_eq!(select_lines(text, Some(3), Some(5)), "three\n");
        assert_eq!(select_lines(text, Some(9), None), "");
        assert_eq!(select_lines("a\r\nb", Some(2), None), "b");
        assert_eq!(select_lines(text, None, Some(2)), "one\ntwo\n");
    }
}
