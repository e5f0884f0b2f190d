//! `scaffold-aip audit verify --database URL` and `scaffold-aip audit export --database URL`:
//! the audit chains a fleet of replicas keeps in PostgreSQL (one chain per replica), checked
//! or written out as files the file verifier accepts. Without the cargo feature `postgres`
//! (on by default) both say so and exit 2.

use std::io::Write;
use std::path::Path;

use crate::cli::AuditFormat;

/// `audit verify --database URL [--chain NAME]`: a verdict per chain; exit 0 when every chain
/// is intact, 1 when one is broken (or `--chain` names none), 2 when the database cannot be
/// read.
pub fn verify(
    url: &str,
    chain: Option<&str>,
    format: AuditFormat,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> std::io::Result<i32> {
    imp::verify(url, chain, format, out, err)
}

/// `audit export --database URL --out DIR [--chain NAME]`: one `<chain>.jsonl` a chain; exit
/// 0, or 2 when the database cannot be read or a file cannot be written.
pub fn export(
    url: &str,
    dir: &Path,
    chain: Option<&str>,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> std::io::Result<i32> {
    imp::export(url, dir, chain, out, err)
}

#[cfg(feature = "postgres")]
mod imp {
    use std::io::Write;
    use std::path::Path;
    use std::time::Duration;

    use acp_audit::{ChainVerdict, export_database, verify_database};
    use acp_postgres::{Database, Options};

    use super::AuditFormat;
    use crate::exit::{EXIT_FINDINGS, EXIT_OK, EXIT_USAGE};

    fn connect(url: &str) -> Result<Database, String> {
        let options = Options {
            connections: 1,
            answer_within: Duration::from_secs(60),
            application_name: "scaffold-aip audit".to_string(),
            ..Options::default()
        };
        Database::connect(url, options).map_err(|e| e.to_string())
    }

    pub(super) fn verify(
        url: &str,
        chain: Option<&str>,
        format: AuditFormat,
        out: &mut dyn Write,
        err: &mut dyn Write,
    ) -> std::io::Result<i32> {
        let verdicts = match connect(url).and_then(|db| verify_database(&db, chain).map_err(|e| e.to_string())) {
            Ok(verdicts) => verdicts,
            Err(message) => {
                writeln!(err, "scaffold-aip audit verify: {message}")?;
                return Ok(EXIT_USAGE);
            }
        };
        let worst = if verdicts.iter().all(|v| v.result.is_ok()) {
            EXIT_OK
        } else {
            EXIT_FINDINGS
        };
        match format {
            AuditFormat::Human if verdicts.is_empty() => {
                writeln!(
                    out,
                    "no audit chains in the database at {}",
                    acp_postgres::shown_url(url)
                )?;
            }
            AuditFormat::Human => {
                for verdict in &verdicts {
                    out.write_all(human(verdict).as_bytes())?;
                }
            }
            AuditFormat::Json => {
                let documents: Vec<_> = verdicts.iter().map(document).collect();
                let document = match (chain, documents.as_slice()) {
                    (Some(_), [one]) => one.clone(),
                    _ => serde_json::Value::Array(documents),
                };
                writeln!(out, "{}", serde_json::to_string_pretty(&document).unwrap_or_default())?;
            }
        }
        Ok(worst)
    }

    fn human(verdict: &ChainVerdict) -> String {
        let chain = &verdict.chain;
        match &verdict.result {
            Ok(summary) => {
                let records = summary.records;
                let noun = if records == 1 { "record" } else { "records" };
                let hash = summary.last_hash.as_deref().unwrap_or("none");
                format!("chain {chain}: {records} {noun}, chain intact (last hash {hash})\n")
            }
            Err(fault) => match fault.seq {
                Some(seq) => {
                    let before = match seq {
                        0 => String::new(),
                        1 => "  the record before it is intact\n".to_string(),
                        n => format!("  the {n} records before it are intact\n"),
                    };
                    format!("chain {chain}: broken at seq {seq}: {}\n{before}", fault.reason)
                }
                None => format!("chain {chain}: broken: {}\n", fault.reason),
            },
        }
    }

    fn document(verdict: &ChainVerdict) -> serde_json::Value {
        match &verdict.result {
            Ok(summary) => serde_json::json!({
                "chain": verdict.chain, "intact": true, "records": summary.records, "lastHash": summary.last_hash,
            }),
            Err(fault) => serde_json::json!({
                "chain": verdict.chain, "intact": false, "seq": fault.seq, "reason": fault.reason,
            }),
        }
    }

    pub(super) fn export(
        url: &str,
        dir: &Path,
        chain: Option<&str>,
        out: &mut dyn Write,
        err: &mut dyn Write,
    ) -> std::io::Result<i32> {
        let exports = match connect(url).and_then(|db| export_database(&db, dir, chain).map_err(|e| e.to_string())) {
            Ok(exports) => exports,
            Err(message) => {
                writeln!(err, "scaffold-aip audit export: {message}")?;
                return Ok(EXIT_USAGE);
            }
        };
        if exports.is_empty() {
            writeln!(
                out,
                "no audit chains in the database at {}",
                acp_postgres::shown_url(url)
            )?;
        }
        for export in &exports {
            let noun = if export.records == 1 { "record" } else { "records" };
            writeln!(
                out,
                "chain {}: {} {noun} written to {}",
                export.chain,
                export.records,
                export.path.display()
            )?;
        }
        Ok(EXIT_OK)
    }
}

#[cfg(not(feature = "postgres"))]
mod imp {
    use std::io::Write;
    use std::path::Path;

    use super::AuditFormat;
    use crate::exit::EXIT_USAGE;

    const WITHOUT: &str = "this scaffold-aip was built without the cargo feature `postgres`, so it cannot read audit \
                           chains in a database: build it with `--features postgres` (on by default)";

    pub(super) fn verify(
        _url: &str,
        _chain: Option<&str>,
        _format: AuditFormat,
        _out: &mut dyn Write,
        err: &mut dyn Write,
    ) -> std::io::Result<i32> {
        writeln!(err, "scaffold-aip audit verify: {WITHOUT}")?;
        Ok(EXIT_USAGE)
    }

    pub(super) fn export(
        _url: &str,
        _dir: &Path,
        _chain: Option<&str>,
        _out: &mut dyn Write,
        err: &mut dyn Write,
    ) -> std::io::Result<i32> {
        writeln!(err, "scaffold-aip audit export: {WITHOUT}")?;
        Ok(EXIT_USAGE)
    }
}
