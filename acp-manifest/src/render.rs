//! Printing diagnostics: rustc-style snippets for people, JSON for tools, and GitHub
//! Actions workflow commands.

use std::fmt::Write as _;
use std::ops::Range;
use std::path::Path;

use annotate_snippets::{AnnotationKind, Level, Origin, Renderer, Snippet};
use serde_json::json;

use crate::diagnostic::{Diagnostic, Severity};
use crate::source::SourceFile;

/// Counts over a run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Summary {
    /// Manifests read.
    pub files: usize,
    /// Errors found.
    pub errors: usize,
    /// Warnings found.
    pub warnings: usize,
}

impl Summary {
    /// Counts `diagnostics` of one more file.
    pub fn add(&mut self, diagnostics: &[Diagnostic]) {
        self.files += 1;
        for d in diagnostics {
            match d.severity {
                Severity::Error => self.errors += 1,
                Severity::Warning => self.warnings += 1,
            }
        }
    }

    /// `3 manifests: 2 errors, 1 warning`.
    pub fn line(&self) -> String {
        let plural = |n: usize, word: &str| format!("{n} {word}{}", if n == 1 { "" } else { "s" });
        format!(
            "{}: {}, {}",
            plural(self.files, "manifest"),
            plural(self.errors, "error"),
            plural(self.warnings, "warning")
        )
    }
}

/// Most bytes of source one rendered diagnostic quotes. Past it (a one-line list of thousands
/// of items, a label far from the finding) the labels become notes with their positions, the
/// finding is quoted on its first line only, and a line longer than this is not quoted at
/// all: the output of each finding stays small, however the file is shaped.
pub const MAX_EXCERPT: usize = 4096;

/// Renders one diagnostic like rustc; `color` adds ANSI styles.
pub fn human(source: &SourceFile, diagnostic: &Diagnostic, color: bool) -> String {
    let level = match diagnostic.severity {
        Severity::Error => Level::ERROR,
        Severity::Warning => Level::WARNING,
    };
    let path = display_path(source.path());
    let group = level
        .primary_title(diagnostic.message.as_str())
        .id(diagnostic.code.as_str());
    let all = std::iter::once(&diagnostic.span).chain(diagnostic.labels.iter().map(|l| &l.span));
    let whole = source.lines_covering(all.fold(diagnostic.span.clone(), |a, b| a.start.min(b.start)..a.end.max(b.end)));
    let first_line = source.lines_covering(diagnostic.span.start..diagnostic.span.start);
    let mut notes = Vec::new();
    let mut group = if source.text().is_empty() {
        // A file that was not read (too large, not a regular file): its position alone.
        group.element(Origin::path(path).line(1).char_column(1))
    } else if whole.len() <= MAX_EXCERPT {
        let labels = diagnostic.labels.iter().map(|label| {
            AnnotationKind::Context
                .span(shift(&label.span, whole.start))
                .label(label.message.as_str())
        });
        group.element(
            excerpt(source, whole.clone(), &path)
                .annotations(labels)
                .annotation(AnnotationKind::Primary.span(shift(&diagnostic.span, whole.start))),
        )
    } else {
        for label in &diagnostic.labels {
            let at = source.position(label.span.start);
            notes.push(format!("{}: {}:{}", label.message, at.line, at.column));
        }
        if first_line.len() <= MAX_EXCERPT {
            let span = diagnostic.span.start..diagnostic.span.end.min(first_line.end);
            group.element(
                excerpt(source, first_line.clone(), &path)
                    .annotation(AnnotationKind::Primary.span(shift(&span, first_line.start))),
            )
        } else {
            let at = source.position(diagnostic.span.start);
            notes.push(format!(
                "line {} is too long to quote ({} bytes)",
                at.line,
                first_line.len()
            ));
            group.element(Origin::path(path).line(at.line).char_column(at.column))
        }
    };
    for note in &notes {
        group = group.element(Level::NOTE.message(note.as_str()));
    }
    if let Some(help) = &diagnostic.help {
        group = group.element(Level::HELP.message(help.as_str()));
    }
    let renderer = if color { Renderer::styled() } else { Renderer::plain() };
    let mut out = renderer.render(&[group]).to_string();
    out.push('\n');
    out
}

/// A snippet of the whole lines `lines` of `source`.
fn excerpt<'s>(
    source: &'s SourceFile,
    lines: Range<usize>,
    path: &str,
) -> Snippet<'s, annotate_snippets::Annotation<'s>> {
    let line = source.position(lines.start).line;
    Snippet::source(&source.text()[lines])
        .line_start(line)
        .path(path.to_string())
        .fold(true)
}

/// `span` made relative to an excerpt starting at `start`.
fn shift(span: &Range<usize>, start: usize) -> Range<usize> {
    span.start - start..span.end - start
}

/// One diagnostic as a JSON object.
pub fn json_diagnostic(source: &SourceFile, diagnostic: &Diagnostic) -> serde_json::Value {
    let start = source.position(diagnostic.span.start);
    let end = source.position(diagnostic.span.end);
    let labels: Vec<_> = diagnostic
        .labels
        .iter()
        .map(|l| {
            let at = source.position(l.span.start);
            json!({"line": at.line, "column": at.column, "message": l.message})
        })
        .collect();
    json!({
        "path": display_path(source.path()),
        "line": start.line,
        "column": start.column,
        "endLine": end.line,
        "endColumn": end.column,
        "code": diagnostic.code.as_str(),
        "severity": diagnostic.severity.as_str(),
        "message": diagnostic.message,
        "help": diagnostic.help,
        "labels": labels,
    })
}

/// One diagnostic as a GitHub Actions workflow command.
pub fn github(source: &SourceFile, diagnostic: &Diagnostic) -> String {
    let start = source.position(diagnostic.span.start);
    let end = source.position(diagnostic.span.end);
    let command = match diagnostic.severity {
        Severity::Error => "error",
        Severity::Warning => "warning",
    };
    let mut message = diagnostic.message.clone();
    if let Some(help) = &diagnostic.help {
        let _ = write!(message, "\nhelp: {help}");
    }
    format!(
        "::{command} file={},line={},col={},endLine={},endColumn={},title={}::{}\n",
        escape_property(&display_path(source.path())),
        start.line,
        start.column,
        end.line,
        end.column,
        escape_property(diagnostic.code.as_str()),
        escape_data(&message),
    )
}

fn escape_data(text: &str) -> String {
    text.replace('%', "%25").replace('\r', "%0D").replace('\n', "%0A")
}

fn escape_property(text: &str) -> String {
    escape_data(text).replace(':', "%3A").replace(',', "%2C")
}

/// A path as shown to users: forward slashes, no leading `./`.
pub fn display_path(path: &Path) -> String {
    let text = path.to_string_lossy().replace('\\', "/");
    text.strip_prefix("./").map(str::to_string).unwrap_or(text)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diagnostic::Code;

    #[test]
    fn github_commands_escape_their_fields() {
        let source = SourceFile::new("a,b/ACP.md", "---\nid: x\n---\n".to_string());
        let diagnostic = Diagnostic::new(Code::PatternMismatch, 8..9, "50% wrong\nreally").with_help("fix: it");
        assert_eq!(
            github(&source, &diagnostic),
            "::error file=a%2Cb/ACP.md,line=2,col=5,endLine=2,endColumn=6,title=ACP103::50%25 wrong%0Areally%0Ahelp: fix: it\n"
        );
    }

    #[test]
    fn a_finding_on_a_huge_line_is_printed_small() {
        // 100,000 duplicate items on one line: each finding must not quote the whole line.
        let line = format!("tags: [{}]", vec!["x"; 100_000].join(", "));
        let source = SourceFile::new("m/ACP.md", format!("---\n{line}\n---\n"));
        let last = 4 + line.len() - 2;
        let diagnostic = Diagnostic::new(Code::DuplicateItem, last..last + 1, "`tags` lists \"x\" twice")
            .with_label(11..12, "first listed here");
        let text = human(&source, &diagnostic, false);
        assert!(text.len() < 1_000, "{} bytes", text.len());
        assert!(text.contains("error[ACP106]: `tags` lists \"x\" twice"), "{text}");
        assert!(text.contains(&format!("m/ACP.md:2:{}", line.len() - 1)), "{text}");
        assert!(text.contains("first listed here: 2:8"), "{text}");

        assert!(text.contains("line 2 is too long to quote"), "{text}");

        // A line within the excerpt limit is quoted as usual (and trimmed by the renderer).
        let line = format!("tags: [{}]", vec!["x"; 1_000].join(", "));
        let source = SourceFile::new("m/ACP.md", format!("---\n{line}\n---\n"));
        let diagnostic = Diagnostic::new(Code::DuplicateItem, 14..15, "twice").with_label(11..12, "first listed here");
        let text = human(&source, &diagnostic, false);
        assert!(
            text.contains("first listed here") && text.contains('^') && !text.contains("note"),
            "{text}"
        );
        assert!(text.contains("m/ACP.md:2:11"), "{text}");
    }

    #[test]
    fn human_output_names_the_position_and_code() {
        let source = SourceFile::new("m/ACP.md", "---\nid: Bad\n---\n".to_string());
        let diagnostic = Diagnostic::new(Code::PatternMismatch, 8..11, "bad id").with_help("lowercase");
        let text = human(&source, &diagnostic, false);
        assert!(text.contains("error[ACP103]: bad id"), "{text}");
        assert!(text.contains("m/ACP.md:2:5"), "{text}");
        assert!(text.contains("^^^"), "{text}");
        assert!(text.contains("help: lowercase"), "{text}");
        assert!(!text.contains('\u{1b}'), "no colour when asked for none");
    }
}
