//! Reading a markdown file with YAML frontmatter: encoding checks, the byte-exact
//! frontmatter split (the opening `---` must be line 1; the next `---` or `...` line closes
//! it), and the located YAML tree. Shared by manifests and the documents they reference.

use std::ops::Range;
use std::path::Path;

use crate::diagnostic::{Code, Diagnostic};
use crate::source::SourceFile;
use crate::yaml::{self, Node};

/// The largest manifest, or document a manifest refers to, that is read: 1 MiB. Real ones are
/// a few KiB; the limit bounds the memory `lint`, `explain` and the macro use on any input.
pub const MAX_FILE_BYTES: u64 = 1 << 20;

/// Why a file was not read.
#[derive(Debug)]
pub enum ReadError {
    /// It could not be opened or read.
    Io(std::io::Error),
    /// It is not a file lint reads.
    Refused(Refusal),
}

/// A file that is not read, whatever it holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// It is not a regular file; the text says what it is ("a FIFO", "a directory", ...).
    NotARegularFile(&'static str),
    /// It has more than [`MAX_FILE_BYTES`]; its size, as far as it is known.
    TooLarge(u64),
}

impl std::fmt::Display for Refusal {
    /// The end of a sentence about the file: "is a FIFO, not a regular file".
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refusal::NotARegularFile(kind) => write!(f, "is {kind}, not a regular file"),
            Refusal::TooLarge(size) => write!(f, "is {size} bytes, over the limit of {MAX_FILE_BYTES} (1 MiB)"),
        }
    }
}

/// Reads a manifest or a document it refers to: a regular file of at most
/// [`MAX_FILE_BYTES`]. The file is opened without blocking (a FIFO would wait for a writer),
/// its kind and size are taken from the open handle, and it is read through
/// `take(MAX_FILE_BYTES + 1)`, so neither a huge or growing file nor a device that never ends
/// is read whole.
pub fn read_file(path: &Path) -> Result<Vec<u8>, ReadError> {
    use acp_process::file::{Refused, read_regular};
    read_regular(path, MAX_FILE_BYTES).map_err(|refused| match refused {
        Refused::Io(error) => ReadError::Io(error),
        Refused::NotRegular(kind) => ReadError::Refused(Refusal::NotARegularFile(kind)),
        // Grown past the limit while it was read: one byte over it was seen.
        Refused::TooLarge(size) => ReadError::Refused(Refusal::TooLarge(size.unwrap_or(MAX_FILE_BYTES + 1))),
    })
}

/// The document of a manifest that was refused: no text, and the finding at 1:1.
pub fn refused(path: &Path, refusal: Refusal) -> Parsed {
    let (code, help) = match refusal {
        Refusal::TooLarge(_) => (
            Code::FileTooLarge,
            "manifests are a few KiB; the limit keeps lint and the build from reading a huge file into memory",
        ),
        Refusal::NotARegularFile(_) => (
            Code::NotARegularFile,
            "name the manifest file itself; pipes, devices and folders are not read",
        ),
    };
    Parsed {
        document: Document {
            source: SourceFile::new(path, String::new()),
            frontmatter: None,
            fence: 0..0,
            body: 0..0,
        },
        diagnostics: vec![Diagnostic::new(code, 0..0, format!("the file {refusal}")).with_help(help)],
    }
}

/// A parsed markdown document with frontmatter.
#[derive(Debug, Clone)]
pub struct Document {
    /// The text as diagnostics see it.
    pub source: SourceFile,
    /// The frontmatter's root node; `None` when it could not be read.
    pub frontmatter: Option<Node>,
    /// The byte range of the opening `---` line (where file-level findings point).
    pub fence: Range<usize>,
    /// The byte range of the markdown body after the closing fence (empty if none).
    pub body: Range<usize>,
}

/// Everything found while reading one document.
#[derive(Debug, Clone)]
pub struct Parsed {
    /// The document.
    pub document: Document,
    /// Findings about encoding, frontmatter and YAML.
    pub diagnostics: Vec<Diagnostic>,
}

/// Parses the raw bytes of a document read from `path`.
pub fn parse(path: &Path, bytes: &[u8]) -> Parsed {
    let mut diagnostics = Vec::new();
    let (bytes, had_bom) = match bytes.strip_prefix(b"\xEF\xBB\xBF") {
        Some(rest) => (rest, true),
        None => (bytes, false),
    };
    let text = match std::str::from_utf8(bytes) {
        Ok(text) => text.to_string(),
        Err(error) => {
            let source = SourceFile::new(path, String::from_utf8_lossy(bytes).into_owned());
            let at = error.valid_up_to();
            let end = (at + 3).min(source.text().len());
            let end = (at + 1..=end)
                .find(|&i| source.text().is_char_boundary(i))
                .unwrap_or(end);
            diagnostics.push(
                Diagnostic::new(
                    Code::NotUtf8,
                    at..end,
                    format!("invalid UTF-8 byte 0x{:02X}", bytes[at]),
                )
                .with_help("save the file as UTF-8"),
            );
            return Parsed {
                document: Document {
                    fence: 0..0,
                    body: 0..0,
                    frontmatter: None,
                    source,
                },
                diagnostics,
            };
        }
    };
    let source = SourceFile::new(path, text);
    if had_bom {
        diagnostics.push(
            Diagnostic::new(
                Code::ByteOrderMark,
                0..0,
                "the file starts with a UTF-8 byte-order mark",
            )
            .with_help("remove it: some frontmatter readers then miss the opening `---`"),
        );
    }
    if let Some(cr) = source.text().find("\r\n") {
        diagnostics.push(
            Diagnostic::new(Code::CrlfLineEndings, cr..cr + 1, "the file has CRLF line endings")
                .with_help("use LF line endings (e.g. `.gitattributes`: `ACP.md text eol=lf`)"),
        );
    }
    let fence = source.line_range(1);
    let mut document = Document {
        source,
        frontmatter: None,
        fence,
        body: 0..0,
    };
    if let Some(frontmatter) = split(&document.source, &mut diagnostics) {
        document.body = frontmatter.body.clone();
        document.frontmatter = read_yaml(&document.source, &frontmatter, &mut diagnostics);
    }
    Parsed { document, diagnostics }
}

/// Where the frontmatter is.
struct Frontmatter {
    /// Byte range of the YAML text (between the fences).
    yaml: Range<usize>,
    /// 1-based line of the YAML text's first line.
    first_line: usize,
    /// Byte range of the body.
    body: Range<usize>,
}

fn is_fence(line: &str, closing: bool) -> bool {
    let line = line.trim_end_matches([' ', '\t', '\r', '\n']);
    line == "---" || (closing && line == "...")
}

fn split(source: &SourceFile, diagnostics: &mut Vec<Diagnostic>) -> Option<Frontmatter> {
    let text = source.text();
    let fence = source.line_range(1);
    let mut lines = text.split_inclusive('\n');
    if !lines.next().is_some_and(|first| is_fence(first, false)) {
        diagnostics.push(
            Diagnostic::new(
                Code::NoFrontmatter,
                fence,
                "no YAML frontmatter: the first line must be `---`",
            )
            .with_help("start the file with a `---` line, the YAML fields, and another `---` line"),
        );
        return None;
    }
    let yaml_start = text.find('\n').map_or(text.len(), |i| i + 1);
    let mut offset = yaml_start;
    for line in lines {
        if is_fence(line, true) {
            return Some(Frontmatter {
                yaml: yaml_start..offset,
                first_line: 2,
                body: (offset + line.len())..text.len(),
            });
        }
        offset += line.len();
    }
    diagnostics.push(
        Diagnostic::new(
            Code::UnclosedFrontmatter,
            fence,
            "the frontmatter opened here is never closed",
        )
        .with_help("end the YAML fields with a line containing only `---`"),
    );
    None
}

fn read_yaml(source: &SourceFile, frontmatter: &Frontmatter, diagnostics: &mut Vec<Diagnostic>) -> Option<Node> {
    let yaml = &source.text()[frontmatter.yaml.clone()];
    let has_content = yaml
        .lines()
        .map(str::trim)
        .any(|line| !line.is_empty() && !line.starts_with('#'));
    if !has_content {
        diagnostics.push(
            Diagnostic::new(Code::EmptyFrontmatter, source.line_range(1), "the frontmatter is empty").with_help(
                "an ACP.md needs at least name, id, description, version, kind, transport and metadata.aip44",
            ),
        );
        return None;
    }
    let before = diagnostics.len();
    let mut line_start = frontmatter.yaml.start;
    for line in yaml.split_inclusive('\n') {
        let indent_len = line.len() - line.trim_start_matches([' ', '\t']).len();
        let rest = line[indent_len..].trim();
        if !rest.is_empty()
            && let Some(tab) = line[..indent_len].find('\t')
        {
            let at = line_start + tab;
            diagnostics.push(
                Diagnostic::new(Code::TabIndentation, at..at + 1, "tab character in indentation")
                    .with_help("YAML indentation must use spaces"),
            );
        }
        line_start += line.len();
    }
    if diagnostics.len() > before {
        return None;
    }
    let (root, found) = yaml::parse(source, yaml, frontmatter.first_line);
    diagnostics.extend(found);
    root
}

#[cfg(test)]
mod tests {
    use super::*;

    fn codes(text: &[u8]) -> Vec<(Code, usize)> {
        parse(Path::new("ACP.md"), text)
            .diagnostics
            .iter()
            .map(|d| (d.code, d.span.start))
            .collect()
    }

    #[test]
    fn encoding_findings() {
        assert_eq!(codes(b"---\na: \xff\n---\n"), vec![(Code::NotUtf8, 7)]);
        assert_eq!(codes(b"\xEF\xBB\xBF---\na: 1\n---\n"), vec![(Code::ByteOrderMark, 0)]);
        assert_eq!(codes(b"---\r\na: 1\r\n---\r\n"), vec![(Code::CrlfLineEndings, 3)]);
    }

    #[test]
    fn frontmatter_findings() {
        assert_eq!(codes(b"# title\n"), vec![(Code::NoFrontmatter, 0)]);
        assert_eq!(codes(b""), vec![(Code::NoFrontmatter, 0)]);
        assert_eq!(codes(b"---\na: 1\n"), vec![(Code::UnclosedFrontmatter, 0)]);
        assert_eq!(
            codes(b"---\n# only a comment\n---\n"),
            vec![(Code::EmptyFrontmatter, 0)]
        );
        assert_eq!(
            codes(b"---\na:\n\tb: 1\n  c:\t1\n---\n"),
            vec![(Code::TabIndentation, 7)]
        );
    }

    #[test]
    fn body_follows_the_first_closing_fence() {
        let parsed = parse(Path::new("ACP.md"), b"---\na: 1\n---\nbody\n---\nmore\n");
        assert!(parsed.diagnostics.is_empty());
        let doc = parsed.document;
        assert_eq!(&doc.source.text()[doc.body.clone()], "body\n---\nmore\n");
        assert_eq!(doc.frontmatter.unwrap().to_json(), serde_json::json!({"a": 1}));
    }
}
