//! The exit statuses of every `scaffold-aip` command.

/// Exit status: success.
pub const EXIT_OK: i32 = 0;
/// Exit status: findings (errors, or warnings under `--deny-warnings`).
pub const EXIT_FINDINGS: i32 = 1;
/// Exit status: bad usage or an I/O error.
pub const EXIT_USAGE: i32 = 2;
