//! `scaffold-aip regen`: generate a revision's wire module, write it, or check it is current.

use std::io::Write;
use std::path::PathBuf;

use similar::TextDiff;

use acp_wire_gen::{MethodBinding, Options, SchemaFiles, generate_files};

use crate::exit::{EXIT_FINDINGS, EXIT_OK, EXIT_USAGE};

/// Arguments of `regen`.
#[derive(Debug, clap::Args)]
pub struct RegenArgs {
    /// The revision's folder (holding schema.json and meta.json) or its schema.json.
    #[arg(long)]
    pub schema: PathBuf,
    /// The full commit SHA of the revision [default: the schema folder's name, when it is one].
    #[arg(long)]
    pub rev: Option<String>,
    /// Write the module here instead of to stdout.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Write nothing; exit 1 and show a diff when --out differs from what would be generated.
    #[arg(long, requires = "out")]
    pub check: bool,
    /// Turn the schema's descriptions into doc comments.
    #[arg(long)]
    pub docs: bool,
    /// Name a method's types where the schema does not bind them: `METHOD=ParamsType[:ResultType]`
    /// (repeatable; with a result type the method is a request).
    #[arg(long, value_name = "METHOD=PARAMS[:RESULT]")]
    pub method: Vec<MethodBinding>,
}

/// Most diff lines `--check` prints before summarising the rest.
const DIFF_LINES: usize = 60;

/// Runs `regen` with parsed arguments.
pub fn run(args: &RegenArgs, out: &mut dyn Write, err: &mut dyn Write) -> std::io::Result<i32> {
    let files = match SchemaFiles::locate(&args.schema) {
        Ok(files) => files,
        Err(message) => {
            writeln!(err, "scaffold-aip regen: {message}")?;
            return Ok(EXIT_USAGE);
        }
    };
    let Some(rev) = args.rev.clone().or_else(|| files.rev_from_path()) else {
        writeln!(
            err,
            "scaffold-aip regen: say which revision this is with --rev <full commit SHA> \
             (the schema's folder is not named by one)"
        )?;
        return Ok(EXIT_USAGE);
    };
    let options = Options {
        rev,
        docs: args.docs,
        methods: args.method.clone(),
    };
    let generated = match generate_files(&files, &options) {
        Ok(generated) => generated,
        Err(error) => {
            writeln!(err, "scaffold-aip regen: {}: {error}", files.schema.display())?;
            return Ok(EXIT_FINDINGS);
        }
    };
    for note in &generated.notes {
        writeln!(err, "scaffold-aip regen: note: {note}")?;
    }
    let Some(path) = &args.out else {
        out.write_all(generated.source.as_bytes())?;
        return Ok(EXIT_OK);
    };
    if args.check {
        let current = match std::fs::read_to_string(path) {
            Ok(text) => text,
            Err(error) => {
                writeln!(err, "scaffold-aip regen --check: {}: {error}", path.display())?;
                return Ok(EXIT_FINDINGS);
            }
        };
        if current == generated.source {
            writeln!(out, "{}: up to date", path.display())?;
            return Ok(EXIT_OK);
        }
        write_diff(out, &path.display().to_string(), &current, &generated.source)?;
        return Ok(EXIT_FINDINGS);
    }
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent)?;
    }
    // Whole or not at all: a crash never leaves half a module for `--check` to puzzle over.
    crate::atomic::write_file(path, generated.source.as_bytes())?;
    writeln!(
        err,
        "scaffold-aip regen: wrote {} ({} types, {} methods)",
        path.display(),
        generated.type_count,
        generated.method_count
    )?;
    Ok(EXIT_OK)
}

/// A unified diff of `current` (on disk) against `wanted`, cut after [`DIFF_LINES`] lines,
/// then a count of the lines added and removed.
fn write_diff(out: &mut dyn Write, path: &str, current: &str, wanted: &str) -> std::io::Result<()> {
    let diff = TextDiff::from_lines(current, wanted);
    let (mut added, mut removed) = (0, 0);
    for change in diff.iter_all_changes() {
        match change.tag() {
            similar::ChangeTag::Insert => added += 1,
            similar::ChangeTag::Delete => removed += 1,
            similar::ChangeTag::Equal => {}
        }
    }
    writeln!(out, "{path}: out of date; `scaffold-aip regen` would change it:")?;
    let text = diff
        .unified_diff()
        .context_radius(2)
        .header(&format!("{path} (on disk)"), &format!("{path} (generated)"))
        .to_string();
    let lines: Vec<&str> = text.lines().collect();
    for line in lines.iter().take(DIFF_LINES) {
        writeln!(out, "{line}")?;
    }
    if lines.len() > DIFF_LINES {
        writeln!(out, "... {} more diff lines", lines.len() - DIFF_LINES)?;
    }
    writeln!(out, "{added} lines added, {removed} removed")?;
    Ok(())
}
