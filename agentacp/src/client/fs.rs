//! The built-in `fs/*` methods: text files inside the workspace root.
//!
//! The runtime has already checked the path (absolute, inside the root once canonical, see
//! [`ClientContext::confine`](super::ClientContext::confine)). Lines are 1-based, as ACP says.

use std::path::Path;

use crate::jsonrpc::{RpcError, codes};
use crate::wire::default as wire;

/// The largest file `read_text_file` reads, in bytes (64 MiB): an answer must fit in one
/// JSON-RPC message.
pub const MAX_READ_BYTES: u64 = 64 * 1024 * 1024;

fn io_error(path: &str, error: &std::io::Error) -> RpcError {
    let code = if error.kind() == std::io::ErrorKind::NotFound {
        codes::RESOURCE_NOT_FOUND
    } else {
        codes::INTERNAL_ERROR
    };
    RpcError::new(code, format!("`{path}`: {error}"))
}

/// `fs/read_text_file`: the file's text, or `limit` lines from `line` (1-based) on.
pub async fn read_text_file(request: &wire::ReadTextFileRequest) -> Result<wire::ReadTextFileResponse, RpcError> {
    let path = request.path.as_str();
    if request.line == Some(0) {
        return Err(RpcError::new(
            codes::INVALID_PARAMS,
            "`line` is 1-based; 0 is not a line",
        ));
    }
    let metadata = tokio::fs::metadata(path).await.map_err(|e| io_error(path, &e))?;
    if !metadata.is_file() {
        return Err(RpcError::new(codes::INVALID_PARAMS, format!("`{path}` is not a file")));
    }
    if metadata.len() > MAX_READ_BYTES {
        return Err(RpcError::new(
            codes::INVALID_PARAMS,
            format!(
                "`{path}` is {} bytes, over the {MAX_READ_BYTES}-byte read limit",
                metadata.len()
            ),
        ));
    }
    let bytes = tokio::fs::read(path).await.map_err(|e| io_error(path, &e))?;
    let text = String::from_utf8(bytes)
        .map_err(|_| RpcError::new(codes::INVALID_PARAMS, format!("`{path}` is not UTF-8 text")))?;
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
/// root). The new content goes to a temporary file beside it that is then renamed over it,
/// so a failure never leaves a half-written file.
pub async fn write_text_file(request: &wire::WriteTextFileRequest) -> Result<wire::WriteTextFileResponse, RpcError> {
    let path = Path::new(&request.path);
    let shown = request.path.as_str();
    if path.is_dir() {
        return Err(RpcError::new(codes::INVALID_PARAMS, format!("`{shown}` is a folder")));
    }
    let (Some(folder), Some(name)) = (path.parent(), path.file_name()) else {
        return Err(RpcError::new(codes::INVALID_PARAMS, format!("`{shown}` names no file")));
    };
    tokio::fs::create_dir_all(folder)
        .await
        .map_err(|e| io_error(shown, &e))?;
    let temporary = folder.join(format!(
        ".{}.agentacp-{}.tmp",
        name.to_string_lossy(),
        std::process::id()
    ));
    let written = async {
        tokio::fs::write(&temporary, request.content.as_bytes()).await?;
        tokio::fs::rename(&temporary, path).await
    }
    .await;
    if let Err(error) = written {
        let _ = tokio::fs::remove_file(&temporary).await;
        return Err(io_error(shown, &error));
    }
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
