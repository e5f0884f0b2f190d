//! A manifest's text and the mapping from byte offsets to `line:column`.

use std::path::{Path, PathBuf};

/// A 1-based line and 1-based column (columns count characters, not bytes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Position {
    /// 1-based line number.
    pub line: usize,
    /// 1-based column, in characters.
    pub column: usize,
}

/// The text of one file, as diagnostics see it (a leading byte-order mark removed,
/// invalid UTF-8 replaced), with an index of line starts.
#[derive(Debug, Clone)]
pub struct SourceFile {
    path: PathBuf,
    text: String,
    line_starts: Vec<usize>,
}

impl SourceFile {
    /// Wraps `text`, read from `path`.
    pub fn new(path: impl Into<PathBuf>, text: String) -> Self {
        let line_starts = std::iter::once(0)
            .chain(text.match_indices('\n').map(|(i, _)| i + 1))
            .collect();
        SourceFile {
            path: path.into(),
            text,
            line_starts,
        }
    }

    /// The path the file was read from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The text.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// The line and column of a byte offset (clamped to the text).
    pub fn position(&self, offset: usize) -> Position {
        let offset = self.floor_char_boundary(offset.min(self.text.len()));
        let line_index = self.line_starts.partition_point(|&start| start <= offset) - 1;
        let line_start = self.line_starts[line_index];
        Position {
            line: line_index + 1,
            column: self.text[line_start..offset].chars().count() + 1,
        }
    }

    /// The byte offset of a 1-based `line` and a 0-based character column within it
    /// (clamped to the end of that line, and to the end of the text).
    pub fn offset_of(&self, line: usize, char_column: usize) -> usize {
        let Some(&line_start) = self.line_starts.get(line.saturating_sub(1)) else {
            return self.text.len();
        };
        let line_text = &self.text[line_start..];
        let line_len = line_text.find('\n').unwrap_or(line_text.len());
        let within = line_text[..line_len]
            .char_indices()
            .nth(char_column)
            .map_or(line_len, |(i, _)| i);
        line_start + within
    }

    /// The byte range of the 1-based `line`, without its line ending.
    pub fn line_range(&self, line: usize) -> std::ops::Range<usize> {
        let start = self.offset_of(line, 0);
        let rest = &self.text[start..];
        let end = rest.find('\n').map_or(self.text.len(), |i| start + i);
        let end = if self.text[start..end].ends_with('\r') {
            end - 1
        } else {
            end
        };
        start..end
    }

    fn floor_char_boundary(&self, mut offset: usize) -> usize {
        while !self.text.is_char_boundary(offset) {
            offset -= 1;
        }
        offset
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_count_characters_not_bytes() {
        let file = SourceFile::new("x", "ab\nçé: x\n".to_string());
        assert_eq!(file.position(0), Position { line: 1, column: 1 });
        assert_eq!(file.position(3), Position { line: 2, column: 1 });
        // "çé" is 4 bytes; the colon is the third character of line 2.
        assert_eq!(file.position(7), Position { line: 2, column: 3 });
        assert_eq!(file.offset_of(2, 2), 7);
    }

    #[test]
    fn offsets_past_the_end_are_clamped() {
        let file = SourceFile::new("x", "ab".to_string());
        assert_eq!(file.offset_of(9, 0), 2);
        assert_eq!(file.offset_of(1, 9), 2);
        assert_eq!(file.position(99), Position { line: 1, column: 3 });
    }
}
