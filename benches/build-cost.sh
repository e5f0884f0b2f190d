#!/usr/bin/env bash
# Build-cost benchmark (issue 14: "an operator build as cheap as the official SDK's").
#
#   benches/build-cost.sh            # from anywhere; takes several minutes
#   KEEP=1 benches/build-cost.sh     # keep the temporary folder (printed) for inspection
#   ITERATIONS=N benches/build-cost.sh   # iterations of the macro's manifest check (1000)
#
# In one run, with the same toolchain and the default (shared) CARGO_HOME:
#  (a) a crate made by `scaffold-aip new --kind server --tier basic`, depending on this
#      workspace's `agentacp` by path;
#  (b) a minimal echo agent written with the official Rust SDK (`agent-client-protocol`, the
#      version `interop/Cargo.toml` pins), trimmed from interop/src/bin/sdk-stream-agent.rs.
# Both get this workspace's Cargo.lock (same dependency versions), `cargo fetch` (not timed;
# the registry mirror serves anything missing), then a cold debug `cargo build --offline`
# into an empty target folder of their own. Printed: both wall times, (a)/(b), the packages
# each build compiles (distinct `package_id`s among cargo's `compiler-artifact` messages, so
# a build script and its library count once), then the incremental rebuild of (a) after
# touching src/lib.rs (3 runs), then `cargo bench -p scaffold-aip --bench manifest_check` (the
# manifest read + check and the whole expansion of `#[acp_operator]`, in process), in the
# dev profile (as a debug build runs the macro) and in release.
#
# Targets (issue 14): (a) <= 1.0 x (b); incremental < 1 s; macro manifest check < 5 ms.
# It is slow and noisy on a shared machine: not part of .ci/run.

set -euo pipefail

die() {
    echo "build-cost: $*" >&2
    exit 1
}

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)
[[ -f "$root/Cargo.lock" && -d "$root/agentacp" && -f "$root/interop/Cargo.toml" ]] ||
    die "expected the agentacp workspace at $root"
cargo=${CARGO:-cargo}
command -v "$cargo" >/dev/null || die "cargo not found"
command -v jq >/dev/null || die "jq not found (it reads cargo's JSON messages)"
iterations=${ITERATIONS:-1000}

sdk_version=$(sed -n 's/^agent-client-protocol = { version = "\(=*[0-9][^"]*\)".*/\1/p' "$root/interop/Cargo.toml")
[[ -n "$sdk_version" ]] || die "no agent-client-protocol version in interop/Cargo.toml"
tokio_version=$(sed -n 's/^tokio = { version = "\([^"]*\)".*/\1/p' "$root/Cargo.toml")
[[ -n "$tokio_version" ]] || die "no tokio version in the workspace Cargo.toml"

work=$(mktemp -d "${TMPDIR:-/tmp}/build-cost.XXXXXX")
cleanup() {
    if [[ -n "${KEEP:-}" ]]; then
        echo "kept $work"
    else
        rm -rf "$work"
    fi
}
trap cleanup EXIT

now() { echo "$EPOCHREALTIME"; }
secs() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", b - a }'; }

echo "== build cost, $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores, load: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "   $("$cargo" --version); $(rustc --version)"
echo "   work folder $work"

# --- (a): the scaffolded operator ------------------------------------------------------------
echo "-- building scaffold-aip (not timed)"
(cd "$root" && "$cargo" build -q -p scaffold-aip) || die "cannot build scaffold-aip"
scaffold_aip=$(cd "$root" && "$cargo" metadata -q --format-version 1 --no-deps | jq -r .target_directory)/debug/scaffold-aip
[[ -x "$scaffold_aip" ]] || die "no scaffold-aip binary at $scaffold_aip"
"$scaffold_aip" new cost-op --kind server --tier basic --path "$work" --agentacp-path "$root/agentacp" >/dev/null ||
    die "scaffold-aip new failed"
op="$work/cost-op"
[[ -f "$op/src/lib.rs" ]] || die "the scaffolded crate has no src/lib.rs"

# --- (b): the official-SDK agent --------------------------------------------------------------
sdk="$work/sdk-agent"
mkdir -p "$sdk/src"
cat >"$sdk/Cargo.toml" <<EOF
[package]
name = "sdk-agent"
version = "0.1.0"
edition = "2024"
publish = false

[dependencies]
agent-client-protocol = { version = "$sdk_version", features = ["stdio"] }
tokio = { version = "$tokio_version", features = ["macros", "rt-multi-thread"] }
EOF
cat >"$sdk/src/main.rs" <<'EOF'
//! A minimal ACP agent with the official Rust SDK: `initialize`, `session/new`, and each
//! prompt echoed back as one chunk, then `end_turn` (what `scaffold-aip new --kind server
//! --tier basic` generates, trimmed from interop/src/bin/sdk-stream-agent.rs).

use std::sync::atomic::{AtomicU64, Ordering};

use agent_client_protocol::schema::ProtocolVersion;
use agent_client_protocol::v1::schema::{
    AgentCapabilities, ContentBlock, ContentChunk, Implementation, InitializeRequest, InitializeResponse,
    NewSessionRequest, NewSessionResponse, PromptRequest, PromptResponse, SessionNotification, SessionUpdate,
    StopReason, TextContent,
};
use agent_client_protocol::{Agent, Stdio};

#[tokio::main]
async fn main() -> agent_client_protocol::Result<()> {
    let sessions = AtomicU64::new(0);
    Agent
        .v1()
        .name("sdk-agent")
        .on_receive_request(
            async move |_: InitializeRequest, responder, _cx| {
                responder.respond(
                    InitializeResponse::new(ProtocolVersion::V1)
                        .agent_capabilities(AgentCapabilities::new())
                        .agent_info(Implementation::new("sdk-agent", "0.1.0")),
                )
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |_: NewSessionRequest, responder, _cx| {
                let n = sessions.fetch_add(1, Ordering::Relaxed);
                responder.respond(NewSessionResponse::new(format!("sdk-session-{n}")))
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |prompt: PromptRequest, responder, cx| {
                let text: String = prompt
                    .prompt
                    .iter()
                    .filter_map(|block| match block {
                        ContentBlock::Text(text) => Some(text.text.as_str()),
                        _ => None,
                    })
                    .collect();
                cx.send_notification(SessionNotification::new(
                    prompt.session_id.clone(),
                    SessionUpdate::AgentMessageChunk(ContentChunk::new(ContentBlock::Text(TextContent::new(text)))),
                ))?;
                responder.respond(PromptResponse::new(StopReason::EndTurn))
            },
            agent_client_protocol::on_receive_request!(),
        )
        .connect_to(Stdio::new())
        .await
}
EOF

# --- cold builds ------------------------------------------------------------------------------
# cold_build NAME DIR: fetch (not timed), then a cold debug build into an empty target folder.
# Sets cold_secs and cold_packages.
cold_build() {
    local name=$1 dir=$2 target="$work/target-$1" log="$work/$1.json" start end
    cp "$root/Cargo.lock" "$dir/Cargo.lock"
    (cd "$dir" && "$cargo" fetch -q) || die "$name: cargo fetch failed"
    rm -rf "$target"
    mkdir -p "$target"
    echo "-- cold debug build of $name (target folder $target)"
    start=$(now)
    if ! (cd "$dir" && CARGO_TARGET_DIR="$target" "$cargo" build --offline --message-format=json >"$log" 2>"$log.err"); then
        tail -n 30 "$log.err" >&2
        die "$name: cargo build failed (all of cargo's output: KEEP=1, then $log and $log.err)"
    fi
    end=$(now)
    cold_secs=$(secs "$start" "$end")
    # package_id: `path+file:///…#name@version` or `registry+…#name@version`.
    jq -r 'select(.reason == "compiler-artifact") | .package_id' "$log" | sort -u >"$work/$name.packages"
    cold_packages=$(wc -l <"$work/$name.packages")
    echo "   $name: ${cold_secs} s, $cold_packages packages compiled"
}

cold_build cost-op "$op"
op_secs=$cold_secs op_packages=$cold_packages
cold_build sdk-agent "$sdk"
sdk_secs=$cold_secs sdk_packages=$cold_packages

# --- incremental rebuild of (a) ---------------------------------------------------------------
echo "-- incremental rebuild of cost-op after touching src/lib.rs (3 runs)"
incremental=()
for _ in 1 2 3; do
    touch "$op/src/lib.rs"
    start=$(now)
    (cd "$op" && CARGO_TARGET_DIR="$work/target-cost-op" "$cargo" build -q --offline) ||
        die "cost-op: incremental build failed"
    end=$(now)
    incremental+=("$(secs "$start" "$end")")
done
incremental_median=$(printf '%s\n' "${incremental[@]}" | sort -n | sed -n 2p)

# --- the macro's manifest check ---------------------------------------------------------------
echo "-- manifest check of #[acp_operator], in process (cargo bench -p scaffold-aip --bench manifest_check)"
macro_dev=$(cd "$root" && "$cargo" bench -q -p scaffold-aip --bench manifest_check --profile dev -- "$iterations") ||
    die "the manifest_check bench failed (dev profile)"
macro_release=$(cd "$root" && "$cargo" bench -q -p scaffold-aip --bench manifest_check -- "$iterations") ||
    die "the manifest_check bench failed (release)"

# --- report -----------------------------------------------------------------------------------
ratio=$(awk -v a="$op_secs" -v b="$sdk_secs" 'BEGIN { printf "%.2f", a / b }')
echo
echo "== results (wall clock; one cold build each, so expect +-20 % on a loaded machine)"
printf '   (a) scaffolded operator, cold debug build:  %7s s  %4s packages\n' "$op_secs" "$op_packages"
printf '   (b) official SDK agent, cold debug build:   %7s s  %4s packages\n' "$sdk_secs" "$sdk_packages"
printf '   (a)/(b):                                    %7s    (target <= 1.0)\n' "$ratio"
printf '   incremental rebuild of (a), touched lib.rs: %7s s  median of %s s (target < 1 s)\n' \
    "$incremental_median" "${incremental[*]}"
# The name in a package_id: before the `@` of its fragment, or (`path+file:///…/dir#0.1.0`)
# the folder's name when the fragment is only the version.
names() {
    jq -rR 'split("#") | if (.[1] | contains("@")) then (.[1] | split("@")[0]) else (.[0] | split("/") | last) end' \
        "$work/$1.packages" | sort -u
}
echo "   compiled for (a) only: $(comm -23 <(names cost-op) <(names sdk-agent) | tr '\n' ' ')"
echo "   compiled for (b) only: $(comm -13 <(names cost-op) <(names sdk-agent) | tr '\n' ' ')"
echo "   macro manifest check (target < 5 ms):"
printf '%s\n' "$macro_dev" "$macro_release" | sed 's/^/     /'
