//! Which file a program name starts on Windows, and which arguments a batch file may be given.
//!
//! Rust's standard library looks a bare name up as `name.exe` only, so `npx` — on Windows
//! `npx.cmd`, as npm installs every command — is not found. [`resolve`] searches the
//! folders of `PATH` with the extensions of `PATHEXT` as `cmd.exe` would (never the current
//! folder first), so that the full path goes to `Command`, which starts a `.cmd`/`.bat` file
//! through `cmd.exe` with its arguments escaped — never a `cmd /c` line of ours.
//!
//! `cmd.exe` reads a batch file's arguments by its own rules, and the batch file reads them
//! again where it uses `%1`/`%*`: a `"` ends a quoted stretch, after which `&`, `|`, `<`, `>`
//! start other commands, and `%` expands variables (CVE-2024-24576, "BatBadBut"). The
//! standard library refuses only line breaks there and escapes the rest, which holds for the
//! command line but not for every batch file's own use of it: [`batch_unsafe_argument`]
//! refuses, before anything starts, an argument holding `"`, `%` or a line break. The
//! functions are pure (the file system is a parameter), so they are tested on every system.

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};

/// `PATHEXT` when the environment has none: what Windows sets.
pub const DEFAULT_PATHEXT: &str = ".COM;.EXE;.BAT;.CMD";

/// The extensions `CreateProcess` can start (the batch files through `cmd.exe`, as the
/// standard library does): other `PATHEXT` entries (`.JS`, `.PY`, ...) open through file
/// associations, which `Command` does not use.
const STARTABLE: &[&str] = &["com", "exe", "bat", "cmd"];

/// The file `program` names, found as `cmd.exe` finds it: a name with a folder (`\`, `/` or a
/// drive) is taken as is when it has an extension, else with the first `pathext` extension
/// that `exists`; a bare name is looked for in each of `path`'s folders in order, as is when
/// it has an extension, then with each extension of `pathext` (`;`-separated, as in
/// `PATHEXT`; only those `CreateProcess` can start). `None` when nothing is found (the caller
/// hands the name to `Command` unchanged, which then reports it missing).
pub fn resolve<I, P>(program: &OsStr, path: I, pathext: &str, exists: impl Fn(&Path) -> bool) -> Option<PathBuf>
where
    I: IntoIterator<Item = P>,
    P: AsRef<Path>,
{
    if program.is_empty() {
        return None;
    }
    let extensions: Vec<&str> = pathext
        .split(';')
        .map(str::trim)
        .filter(|ext| ext.len() > 1 && ext.starts_with('.'))
        .filter(|ext| STARTABLE.iter().any(|ok| ok.eq_ignore_ascii_case(&ext[1..])))
        .collect();
    let has_extension = Path::new(program).extension().is_some();
    let candidates = |base: PathBuf| {
        let as_is = has_extension.then(|| base.clone());
        let with_extensions = extensions.clone().into_iter().map(move |ext| {
            let mut name = OsString::from(base.as_os_str());
            name.push(ext);
            PathBuf::from(name)
        });
        as_is.into_iter().chain(with_extensions)
    };
    if has_folder(program) {
        if has_extension {
            return None;
        }
        return candidates(PathBuf::from(program)).find(|candidate| exists(candidate));
    }
    path.into_iter()
        .filter(|folder| !folder.as_ref().as_os_str().is_empty())
        .flat_map(|folder| candidates(folder.as_ref().join(program)))
        .find(|candidate| exists(candidate))
}

/// Whether `program` names a folder too (`a\b`, `./b`, `C:b`), not a bare name.
fn has_folder(program: &OsStr) -> bool {
    let text = program.to_string_lossy();
    text.contains(['\\', '/']) || text.as_bytes().get(1) == Some(&b':')
}

/// Whether `program` is a batch file (`.bat`, `.cmd`: started through `cmd.exe`).
pub fn is_batch_file(program: &Path) -> bool {
    program
        .extension()
        .and_then(OsStr::to_str)
        .is_some_and(|ext| ext.eq_ignore_ascii_case("bat") || ext.eq_ignore_ascii_case("cmd"))
}

/// An argument a batch file may not be given, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnsafeArgument {
    /// Its position, 1 for the first argument after the program.
    pub position: usize,
    /// The character that makes it unsafe.
    pub character: char,
}

impl UnsafeArgument {
    /// The character, as words: `` `"` ``, `` `%` ``, "a line feed", "a carriage return".
    pub fn character_shown(&self) -> String {
        match self.character {
            '\r' => "a carriage return".to_string(),
            '\n' => "a line feed".to_string(),
            c => format!("`{c}`"),
        }
    }

    /// What `cmd.exe` would make of the character, as words.
    pub fn reason(&self) -> &'static str {
        match self.character {
            '"' => "a `\"` ends cmd.exe's quoting, and what follows it (`&`, `|`, `>`) may run as commands",
            '%' => "cmd.exe expands `%` into variables, and into more of the command line",
            _ => "a line break ends cmd.exe's command line, and what follows it may run as a command",
        }
    }
}

/// The first of `args` that a batch file may not be given (see the module's text): one holding
/// `"`, `%`, a carriage return or a line feed.
pub fn batch_unsafe_argument<A: AsRef<OsStr>>(args: &[A]) -> Option<UnsafeArgument> {
    args.iter().enumerate().find_map(|(index, arg)| {
        let text = arg.as_ref().to_string_lossy();
        text.chars()
            .find(|c| matches!(c, '"' | '%' | '\r' | '\n'))
            .map(|character| UnsafeArgument {
                position: index + 1,
                character,
            })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A file system holding exactly `files`, whose names compare as on Windows (ignoring
    /// ASCII case).
    fn only(files: &[&str]) -> impl Fn(&Path) -> bool {
        let files: Vec<String> = files.iter().map(|file| file.to_ascii_lowercase()).collect();
        move |candidate| files.contains(&candidate.to_string_lossy().to_ascii_lowercase())
    }

    /// What `resolve` found, lower-cased (the extension's case is `PATHEXT`'s).
    fn found(program: &str, path: &[&str], pathext: &str, files: &[&str]) -> Option<String> {
        resolve(OsStr::new(program), path, pathext, only(files)).map(|file| file.to_string_lossy().to_ascii_lowercase())
    }

    #[test]
    fn a_bare_name_finds_its_cmd_file_in_path_order() {
        let files = ["/npm/npx.cmd", "/later/npx.exe"];
        let path = ["/first", "/npm", "/later"];
        assert_eq!(
            found("npx", &path, DEFAULT_PATHEXT, &files).as_deref(),
            Some("/npm/npx.cmd")
        );
    }

    #[test]
    fn pathext_order_decides_within_a_folder() {
        let files = ["/bin/agent.cmd", "/bin/agent.exe"];
        assert_eq!(
            found("agent", &["/bin"], DEFAULT_PATHEXT, &files).as_deref(),
            Some("/bin/agent.exe")
        );
        assert_eq!(
            found("agent", &["/bin"], ".CMD;.EXE", &files).as_deref(),
            Some("/bin/agent.cmd")
        );
        assert_eq!(
            found("agent", &["/bin"], " .cmd ; .exe ;", &files).as_deref(),
            Some("/bin/agent.cmd")
        );
    }

    #[test]
    fn a_name_with_an_extension_is_tried_as_is_first() {
        let files = ["/bin/agent.cmd", "/bin/agent.cmd.exe"];
        assert_eq!(
            found("agent.cmd", &["/bin"], DEFAULT_PATHEXT, &files).as_deref(),
            Some("/bin/agent.cmd")
        );
        let files = ["/bin/agent.cmd.exe"];
        assert_eq!(
            found("agent.cmd", &["/bin"], DEFAULT_PATHEXT, &files).as_deref(),
            Some("/bin/agent.cmd.exe")
        );
    }

    #[test]
    fn extensions_createprocess_cannot_start_are_skipped() {
        let files = ["/bin/tool.js", "/bin/tool.bat"];
        assert_eq!(
            found("tool", &["/bin"], ".JS;.BAT", &files).as_deref(),
            Some("/bin/tool.bat")
        );
        assert_eq!(found("tool", &["/bin"], ".JS;.PY", &files), None);
    }

    #[test]
    fn a_name_with_a_folder_is_not_searched_for() {
        let files = ["/bin/agent.cmd", "./agent.cmd"];
        assert_eq!(
            found("./agent", &["/bin"], DEFAULT_PATHEXT, &files).as_deref(),
            Some("./agent.cmd")
        );
        // With an extension it is the caller's to start as is.
        assert_eq!(found("./agent.cmd", &["/bin"], DEFAULT_PATHEXT, &files), None);
        assert_eq!(found(r"C:agent", &["/bin"], DEFAULT_PATHEXT, &files), None);
        assert_eq!(found(r"sub\agent", &["/bin"], DEFAULT_PATHEXT, &files), None);
    }

    #[test]
    fn nothing_found_is_none_and_empty_path_entries_are_skipped() {
        assert_eq!(found("npx", &["/bin", ""], DEFAULT_PATHEXT, &[]), None);
        assert_eq!(found("npx", &[""], DEFAULT_PATHEXT, &["npx.cmd"]), None);
        assert_eq!(found("", &["/bin"], DEFAULT_PATHEXT, &["/bin/.cmd"]), None);
    }

    #[test]
    fn batch_files_are_told_by_their_extension() {
        assert!(is_batch_file(Path::new(r"C:\npm\npx.cmd")));
        assert!(is_batch_file(Path::new("run.BAT")));
        assert!(!is_batch_file(Path::new("agent.exe")));
        assert!(!is_batch_file(Path::new("agent")));
    }

    #[test]
    fn quotes_percent_and_line_breaks_are_refused_for_batch_files() {
        assert_eq!(
            batch_unsafe_argument(&["--model", "a b", r"C:\x\", "a&b|c<d>e^f"]),
            None
        );
        let unsafe_one = batch_unsafe_argument(&["ok", "x\"&calc"]).unwrap();
        assert_eq!((unsafe_one.position, unsafe_one.character), (2, '"'));
        assert!(unsafe_one.reason().contains("quoting"));
        let unsafe_one = batch_unsafe_argument(&["%PATH%"]).unwrap();
        assert_eq!((unsafe_one.position, unsafe_one.character), (1, '%'));
        let unsafe_one = batch_unsafe_argument(&["a", "b", "one\ntwo"]).unwrap();
        assert_eq!(unsafe_one.position, 3);
        assert_eq!(unsafe_one.character_shown(), "a line feed");
        let unsafe_one = batch_unsafe_argument(&["\"\r"]).unwrap();
        assert_eq!(unsafe_one.character_shown(), "`\"`");
    }
}
