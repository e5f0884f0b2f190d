//! A manifest's text and the mapping from byte offsets to `line:column`.

use std::path::{Path, PathBuf};

/// Characters between two checkpoints of a line: finding a column's byte offset, or an
/// offset's column, walks fewer characters than this, however long the line.
const STRIDE: usize = 64;

/// A 1-based line and 1-based column (columns count characters, not bytes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Position {
    /// 1-based line number.
    pub line: usize,
    /// 1-based column, in characters.
    pub column: usize,
}

/// The text of one file, as diagnostics see it (a leading byte-order mark removed,
/// invalid UTF-8 replaced), with an index of line starts and, within lines, of every
/// 64th character (so a position on a long line costs no more than on a short one).
#[derive(Debug, Clone)]
pub struct SourceFile {
    path: PathBuf,
    text: String,
    line_starts: Vec<usize>,
    /// Byte offsets of the characters at columns `STRIDE`, `2 * STRIDE`, … of each line, in
    /// order (line ends excluded).
    checkpoints: Vec<usize>,
    /// For each line, the index of its first checkpoint in `checkpoints`; one more at the end.
    line_checkpoints: Vec<usize>,
}

impl SourceFile {
    /// Wraps `text`, read from `path`.
    pub fn new(path: impl Into<PathBuf>, text: String) -> Self {
        let mut line_starts = vec![0];
        let mut checkpoints = Vec::new();
        let mut line_checkpoints = vec![0];
        let mut column = 0;
        for (at, c) in text.char_indices() {
            if c == '\n' {
                line_starts.push(at + 1);
                line_checkpoints.push(checkpoints.len());
                column = 0;
                continue;
            }
            if column > 0 && column % STRIDE == 0 {
                checkpoints.push(at);
            }
            column += 1;
        }
        line_checkpoints.push(checkpoints.len());
        SourceFile {
            path: path.into(),
            text,
            line_starts,
            checkpoints,
            line_checkpoints,
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
        let (from, column) = self.checkpoint_for_offset(line_index, offset);
        Position {
            line: line_index + 1,
            column: column + self.text[from..offset].chars().count() + 1,
        }
    }

    /// The byte offset of a 1-based `line` and a 0-based character column within it
    /// (clamped to the end of that line, and to the end of the text).
    pub fn offset_of(&self, line: usize, char_column: usize) -> usize {
        let line_index = line.saturating_sub(1);
        if line_index >= self.line_starts.len() {
            return self.text.len();
        }
        let line_end = self
            .line_starts
            .get(line_index + 1)
            .map_or(self.text.len(), |next| next - 1);
        let (from, column) = self.checkpoint_for_column(line_index, char_column);
        let rest = &self.text[from..line_end];
        from + rest
            .char_indices()
            .nth(char_column - column)
            .map_or(rest.len(), |(i, _)| i)
    }

    /// The byte range of the whole lines `range` touches, with the last one's line ending
    /// (`range` is clamped to the text).
    pub fn lines_covering(&self, range: std::ops::Range<usize>) -> std::ops::Range<usize> {
        let line_of = |offset: usize| self.line_starts.partition_point(|&start| start <= offset) - 1;
        let start = self.line_starts[line_of(range.start.min(self.text.len()))];
        let end = self
            .line_starts
            .get(line_of(range.end.min(self.text.len())) + 1)
            .map_or(self.text.len(), |&next| next);
        start..end
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

    /// The checkpoints of line `line_index` (0-based).
    fn checkpoints_of(&self, line_index: usize) -> &[usize] {
        &self.checkpoints[self.line_checkpoints[line_index]..self.line_checkpoints[line_index + 1]]
    }

    /// Where to start walking to `char_column` of line `line_index` (0-based): a byte offset
    /// fewer than [`STRIDE`] characters before it (or the line's last checkpoint) and its column.
    fn checkpoint_for_column(&self, line_index: usize, char_column: usize) -> (usize, usize) {
        let checkpoints = self.checkpoints_of(line_index);
        match (char_column / STRIDE).min(checkpoints.len()) {
            0 => (self.line_starts[line_index], 0),
            k => (checkpoints[k - 1], k * STRIDE),
        }
    }

    /// Where to start counting the column of `offset`, on line `line_index` (0-based): a byte
    /// offset on that line fewer than [`STRIDE`] characters before it, and its column.
    fn checkpoint_for_offset(&self, line_index: usize, offset: usize) -> (usize, usize) {
        let checkpoints = self.checkpoints_of(line_index);
        match checkpoints.partition_point(|&at| at <= offset) {
            0 => (self.line_starts[line_index], 0),
            k => (checkpoints[k - 1], k * STRIDE),
        }
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
    fn positions_on_a_long_line_walk_a_bounded_stretch_not_the_line() {
        // Columns and offsets are found from a checkpoint near them, so each lookup costs the
        // same however long the line: a one-line list of 100,000 items stays linear.
        let line: String = (0..10_000).map(|i| ['a', 'é', '€', '𝄞'][i % 4]).collect();
        let file = SourceFile::new("x", format!("k: v\n{line}\nend\n"));
        let start = file.line_starts[1];
        for (column, (at, _)) in line.char_indices().enumerate() {
            let (from, from_column) = file.checkpoint_for_column(1, column);
            assert!(
                from_column <= column && column - from_column < STRIDE,
                "column {column}"
            );
            assert_eq!(file.text()[start..from].chars().count(), from_column);
            let (from, from_column) = file.checkpoint_for_offset(1, start + at);
            assert!(from <= start + at && file.text()[from..start + at].chars().count() < STRIDE);
            assert_eq!(file.text()[start..from].chars().count(), from_column);
            assert_eq!(file.offset_of(2, column), start + at);
            assert_eq!(
                file.position(start + at),
                Position {
                    line: 2,
                    column: column + 1
                }
            );
        }
        assert_eq!(file.offset_of(2, 20_000), start + line.len());
        assert_eq!(
            file.position(start + line.len()),
            Position {
                line: 2,
                column: 10_001
            }
        );
        assert_eq!(file.offset_of(3, 1), start + line.len() + 2);
    }

    #[test]
    fn offsets_past_the_end_are_clamped() {
        let file = SourceFile::new("x", "ab".to_string());
        assert_eq!(file.offset_of(9, 0), 2);
        assert_eq!(file.offset_of(1, 9), 2);
        assert_eq!(file.position(99), Position { line: 1, column: 3 });
    }
}
