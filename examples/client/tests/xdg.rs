//! Issue #45.9: the agent `acp-client` starts sees the user's XDG base folders, so an agent
//! that keeps its state in `$XDG_STATE_HOME` does not fall back to `~/.local/state`.

use std::process::Command;

#[test]
fn the_agent_sees_the_users_xdg_base_folders() {
    // The agent prints what it sees on stderr and exits: the client reports its stderr.
    let script =
        r#"echo "state=$XDG_STATE_HOME config=$XDG_CONFIG_HOME data=$XDG_DATA_HOME cache=$XDG_CACHE_HOME" >&2; exit 3"#;
    let output = Command::new(env!("CARGO_BIN_EXE_acp-client"))
        .args(["--prompt", "hi", "--", "sh", "-c", script])
        .env("XDG_STATE_HOME", "/xdg/state")
        .env("XDG_CONFIG_HOME", "/xdg/config")
        .env("XDG_DATA_HOME", "/xdg/data")
        .env("XDG_CACHE_HOME", "/xdg/cache")
        .stdin(std::process::Stdio::null())
        .output()
        .expect("acp-client runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("state=/xdg/state config=/xdg/config data=/xdg/data cache=/xdg/cache"),
        "{stderr}"
    );
}
