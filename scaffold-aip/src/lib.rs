//! `scaffold-aip`: the command line of agentacp, as a library so that its tests and benches
//! drive it in-process. [`cli::run`] parses the arguments and runs one command:
//! `lint` ([`lint`] finds and checks manifests), `explain`, `schema`, `regen` ([`regen`], over
//! `acp-wire-gen`), `new` ([`scaffold`], the handlebars templates), `audit verify` and `audit export` ([`audit_db`] for a database's chains), `token` ([`token`]), `conform` ([`conform`], over `acp-conform`) and `registry` ([`registry`], the ACP registry's `agent.json`).
//! What a manifest means is `acp-manifest`'s job; this crate only reads arguments and prints.

pub mod atomic;
pub mod audit_db;
pub mod cli;
pub mod conform;
pub mod database_url;
pub mod exit;
pub mod lint;
pub mod regen;
pub mod registry;
pub mod scaffold;
pub mod token;
