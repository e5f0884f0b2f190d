//! Printing diagnostics: rustc-style snippets for people, JSON for tools, and GitHub
//! Actions workflow commands.

use std::fmt::Write as _;
use std::path::Path;

use annotate_snippets::{AnnotationKind, Level, Renderer, Snippet};
use serde_json::json;

use crate::diagnostic::{Diagnostic, Severity};
use crate::source::SourceFile;

/// An output format of `lint`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// Source snippets with carets, like rustc.
    Human,
    /// One JSON document with every diagnostic and a summary.
    Json,
    /// GitHub Actions `::error`/`::warning` workflow commands.
    Github,
}

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

/// Renders one diagnostic like rustc; `color` adds ANSI styles.
pub fn human(source: &SourceFile, diagnostic: &Diagnostic, color: bool) -> String {
    let level = match diagnostic.severity {
        Severity::Error => Level::ERROR,
        Severity::Warning => Level::WARNING,
    };
    let path = display_path(source.path());
    let mut snippet = Snippet::source(source.text())
        .path(path)
        .fold(true)
        .annotation(AnnotationKind::Primary.span(diagnostic.span.clone()));
    for label in &diagnostic.labels {
        snippet = snippet.annotation(
            AnnotationKind::Context
                .span(label.span.clone())
                .label(label.message.as_str()),
        );
    }
    let mut group = level
        .primary_title(diagnostic.message.as_str())
        .id(diagnostic.code.as_str())
        .element(snippet);
    if let Some(help) = &diagnostic.help {
        group = group.element(Level::HELP.message(help.as_str()));
    }
    let renderer = if color { Renderer::styled() } else { Renderer::plain() };
    let mut out = renderer.render(&[group]).to_string();
    out.push('\n');
    out
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
