//! A writer that holds an audit log: opens the log named by its one argument for writing
//! (taking the writer's lock), records one event, writes `holding` on stdout, and keeps the
//! log open until its stdin closes. When the log cannot be opened (another writer holds it)
//! it writes the error on stderr and exits 1.
//!
//! `scaffold-aip/tests/wine.rs` runs two of these, built for Windows, under Wine: the lock
//! there is `LockFileEx`, not `flock`.

use std::io::{Read, Write};
use std::path::Path;
use std::process::ExitCode;

use acp_audit::{AuditEvent, AuditLog, FsyncPolicy, Lifecycle};

fn main() -> ExitCode {
    let (Some(path), None) = (std::env::args_os().nth(1), std::env::args_os().nth(2)) else {
        eprintln!("usage: hold_log <audit log>");
        return ExitCode::from(2);
    };
    let log = match AuditLog::open(Path::new(&path), FsyncPolicy::EveryRecord) {
        Ok(log) => log,
        Err(error) => {
            eprintln!("hold_log: {error}");
            return ExitCode::FAILURE;
        }
    };
    let event = AuditEvent::lifecycle("hold", "sess-0", Lifecycle::Invoked, None);
    if let Err(error) = log.record(event) {
        eprintln!("hold_log: cannot record: {error}");
        return ExitCode::FAILURE;
    }
    let mut stdout = std::io::stdout();
    if writeln!(stdout, "holding").and_then(|()| stdout.flush()).is_err() {
        return ExitCode::FAILURE;
    }
    // Until stdin closes (its end or an error alike).
    let _ = std::io::stdin().read_to_end(&mut Vec::new());
    drop(log);
    ExitCode::SUCCESS
}
