//! The AIP-44 tiers as types. A turn handle is `Turn<'_, T>` for the manifest's tier `T`;
//! what the tier allows exists on the handle only where `T` implements the matching trait,
//! so using a tool call below `governance-aware` does not compile.
//!
//! A server whose manifest lists protocol version 2 (`metadata.agentacp.protocol_versions`)
//! has the tier [`V2<T>`](V2): the powers of `T` without what version 2 removed, so that
//! `turn.editor()` ([`ClientTools`]) and `turn.set_mode()` ([`SessionModes`]) do not compile.

use std::marker::PhantomData;

mod sealed {
    pub trait Sealed {}
    /// The three tiers of AIP-44 (not [`super::V2`] of one).
    pub trait Base {}
}

/// A tier (`basic`, `governance-aware`, `sandboxed`).
pub trait Tier: sealed::Sealed + Send + Sync + 'static {
    /// As written in ACP.md.
    const NAME: &'static str;
}

/// Tiers whose tool calls are governed and audited (`governance-aware` and up).
#[diagnostic::on_unimplemented(
    message = "tool calls and permission requests need `tier: governance-aware` or `sandboxed` in ACP.md, but this operator's tier is `{Self}`",
    label = "not available at this tier",
    note = "raise `metadata.aip44.tier` in ACP.md (and bind a governance document), or remove the tool call"
)]
pub trait Governed: Tier {}

/// Tiers that run in a sandbox and may use MCP servers (`sandboxed`).
#[diagnostic::on_unimplemented(
    message = "MCP servers and sandboxed commands need `tier: sandboxed` in ACP.md, but this operator's tier is `{Self}`",
    label = "not available at this tier",
    note = "set `metadata.aip44.tier: sandboxed` and a `sandbox` ref in ACP.md"
)]
pub trait SandboxedTier: Governed {}

/// `tier: basic`: stream messages, thoughts and plans.
#[derive(Debug)]
pub enum Basic {}
/// `tier: governance-aware`: + `session/load`, governed and audited tool calls.
#[derive(Debug)]
pub enum GovernanceAware {}
/// `tier: sandboxed`: + MCP servers, cwd confined to the sandbox root.
#[derive(Debug)]
pub enum Sandboxed {}

impl sealed::Sealed for Basic {}
impl sealed::Sealed for GovernanceAware {}
impl sealed::Sealed for Sandboxed {}
impl sealed::Base for Basic {}
impl sealed::Base for GovernanceAware {}
impl sealed::Base for Sandboxed {}

impl Tier for Basic {
    const NAME: &'static str = "basic";
}
impl Tier for GovernanceAware {
    const NAME: &'static str = "governance-aware";
}
impl Tier for Sandboxed {
    const NAME: &'static str = "sandboxed";
}

impl Governed for GovernanceAware {}
impl Governed for Sandboxed {}
impl SandboxedTier for Sandboxed {}

/// Tier `T` of a server whose manifest lists 2 in `metadata.agentacp.protocol_versions`
/// (`[2]` or `[1, 2]`): `#[acp_operator]` types its turn `Turn<'_, V2<T>>`. It has the
/// powers of `T` (tool calls from `governance-aware`, MCP servers at `sandboxed`) but not what
/// ACP protocol version 2 removed, which such a manifest cannot declare (ACP219): the client's
/// file system and terminals (`turn.editor()`, [`ClientTools`]) and session modes
/// (`turn.set_mode()`, [`SessionModes`]). Its `NAME` is `T`'s.
pub struct V2<T>(PhantomData<fn() -> T>);

impl<T: Tier> std::fmt::Debug for V2<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "V2<{}>", T::NAME)
    }
}

impl<T: Tier + sealed::Base> sealed::Sealed for V2<T> {}

impl<T: Tier + sealed::Base> Tier for V2<T> {
    const NAME: &'static str = T::NAME;
}
// Not offered in diagnostics: a tier that lacks `Governed` is raised in ACP.md, not wrapped.
#[diagnostic::do_not_recommend]
impl<T: Governed + sealed::Base> Governed for V2<T> {}
#[diagnostic::do_not_recommend]
impl<T: SandboxedTier + sealed::Base> SandboxedTier for V2<T> {}

/// Tiers whose operator may call the client's file system and terminals (`turn.editor()`):
/// `governance-aware` and `sandboxed` on a manifest that speaks only protocol version 1.
#[diagnostic::on_unimplemented(
    message = "`turn.editor()` calls the client's file system and terminals, which ACP protocol version 2 does not have, and this operator's manifest lists 2 in `metadata.agentacp.protocol_versions` (its tier is `{Self}`)",
    label = "not available on protocol version 2",
    note = "on version 2 the client offers file access as an MCP server passed in `session/new` (`turn.mcp_servers()` at `tier: sandboxed`), and file changes are `diff` tool-call content; or speak only version 1 (`protocol_versions: [1]`)"
)]
pub trait ClientTools: Governed {}

impl ClientTools for GovernanceAware {}
impl ClientTools for Sandboxed {}

/// Tiers whose operator may switch session modes (`turn.set_mode()`): every tier on a
/// manifest that speaks only protocol version 1.
#[diagnostic::on_unimplemented(
    message = "`turn.set_mode()` switches session modes, which ACP protocol version 2 does not have, and this operator's manifest lists 2 in `metadata.agentacp.protocol_versions` (its tier is `{Self}`)",
    label = "not available on protocol version 2",
    note = "on version 2 a mode is a `select` config option with `category: mode` (`metadata.agentacp.configOptions`), set with `turn.set_config_value`; or speak only version 1 (`protocol_versions: [1]`)"
)]
pub trait SessionModes: Tier {}

impl SessionModes for Basic {}
impl SessionModes for GovernanceAware {}
impl SessionModes for Sandboxed {}
