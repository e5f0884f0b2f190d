//! The AIP-44 tiers as types. A turn handle is `Turn<'_, T>` for the manifest's tier `T`;
//! what the tier allows exists on the handle only where `T` implements the matching trait,
//! so using a tool call below `governance-aware` does not compile.

mod sealed {
    pub trait Sealed {}
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
