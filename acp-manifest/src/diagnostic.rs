//! Diagnostics: a code, a severity, a message and where in which file.

use std::ops::Range;

pub use crate::codes::Code;

/// How bad a finding is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Severity {
    /// The manifest is accepted; lint exits 0 unless `--deny-warnings`.
    Warning,
    /// The manifest is rejected.
    Error,
}

impl Severity {
    /// `"error"` or `"warning"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Warning => "warning",
            Severity::Error => "error",
        }
    }
}

/// A second place that explains the first (e.g. where a duplicate key was first defined).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Label {
    /// Byte range in the same file.
    pub span: Range<usize>,
    /// What is there.
    pub message: String,
}

/// One finding about one file. `span` is a byte range of that file's text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnostic {
    /// Stable code, e.g. `ACP103`.
    pub code: Code,
    /// Error or warning (the code's default).
    pub severity: Severity,
    /// One line saying what is wrong.
    pub message: String,
    /// Where, as a byte range of the file's text.
    pub span: Range<usize>,
    /// Other places in the same file that help explain it.
    pub labels: Vec<Label>,
    /// How to fix it, when we can tell.
    pub help: Option<String>,
}

impl Diagnostic {
    /// A diagnostic with the code's default severity.
    pub fn new(code: Code, span: Range<usize>, message: impl Into<String>) -> Self {
        Diagnostic {
            code,
            severity: code.severity(),
            message: message.into(),
            span,
            labels: Vec::new(),
            help: None,
        }
    }

    /// Adds a fix-it hint.
    pub fn with_help(mut self, help: impl Into<String>) -> Self {
        self.help = Some(help.into());
        self
    }

    /// Adds a secondary place.
    pub fn with_label(mut self, span: Range<usize>, message: impl Into<String>) -> Self {
        self.labels.push(Label {
            span,
            message: message.into(),
        });
        self
    }

    /// Whether this is an error (as opposed to a warning).
    pub fn is_error(&self) -> bool {
        self.severity == Severity::Error
    }
}
