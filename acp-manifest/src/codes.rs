//! The table of diagnostic codes. Codes are stable: never renumber, only add.
//! `docs/diagnostics.md` documents each one with an example.

use crate::diagnostic::Severity;

macro_rules! codes {
    ($( $(#[$doc:meta])* $variant:ident = $code:literal, $severity:ident, $summary:literal; )*) => {
        /// A stable diagnostic code.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub enum Code {
            $( $(#[$doc])* $variant, )*
        }

        impl Code {
            /// Every code, in order.
            pub const ALL: &'static [Code] = &[$(Code::$variant,)*];

            /// The code as printed, e.g. `"ACP103"`.
            pub fn as_str(self) -> &'static str {
                match self { $(Code::$variant => $code,)* }
            }

            /// The severity a diagnostic with this code has.
            pub fn severity(self) -> Severity {
                match self { $(Code::$variant => Severity::$severity,)* }
            }

            /// A short title for documentation and listings.
            pub fn summary(self) -> &'static str {
                match self { $(Code::$variant => $summary,)* }
            }
        }
    };
}

codes! {
    /// The file is not valid UTF-8.
    NotUtf8 = "ACP001", Error, "file is not valid UTF-8";
    /// The file starts with a byte-order mark.
    ByteOrderMark = "ACP002", Warning, "UTF-8 byte-order mark at the start of the file";
    /// The file has CRLF line endings.
    CrlfLineEndings = "ACP003", Warning, "CRLF line endings";
    /// The first line is not `---`.
    NoFrontmatter = "ACP004", Error, "no YAML frontmatter";
    /// No line closes the frontmatter.
    UnclosedFrontmatter = "ACP005", Error, "frontmatter is not closed";
    /// The frontmatter has no content.
    EmptyFrontmatter = "ACP006", Error, "frontmatter is empty";
    /// A tab in indentation.
    TabIndentation = "ACP007", Error, "tab character in indentation";
    /// The YAML parser stopped.
    YamlSyntax = "ACP008", Error, "YAML syntax error";
    /// A key appears twice in one mapping.
    DuplicateKey = "ACP009", Error, "duplicate key";
    /// The frontmatter is a scalar or a list.
    NotAMapping = "ACP010", Error, "frontmatter is not a mapping";
    /// Complex keys, undefined aliases, alias bombs.
    UnsupportedYaml = "ACP011", Error, "unsupported YAML construct";
    /// Lists and mappings nested deeper than the parser allows.
    NestingTooDeep = "ACP012", Error, "YAML nested too deeply";
    /// A file larger than the size limit.
    FileTooLarge = "ACP013", Error, "file is larger than the size limit";
    /// A path that is a FIFO, a device, a socket or a folder.
    NotARegularFile = "ACP014", Error, "not a regular file";

    /// A required field is absent.
    MissingField = "ACP100", Error, "missing required field";
    /// A value of the wrong type.
    WrongType = "ACP101", Error, "wrong type";
    /// A value outside an enumeration.
    NotAllowed = "ACP102", Error, "value is not one of the allowed values";
    /// A string that does not match its pattern.
    PatternMismatch = "ACP103", Error, "value does not match the required pattern";
    /// A string too short or too long.
    LengthOutOfRange = "ACP104", Error, "string length out of range";
    /// A key a closed object does not allow.
    UnknownKey = "ACP105", Error, "unknown key";
    /// A list that must not repeat items repeats one.
    DuplicateItem = "ACP106", Error, "duplicate list item";
    /// A list that must not be empty is.
    EmptyList = "ACP107", Error, "empty list";
    /// An extra key in an open object that looks like a misspelt known key.
    LikelyTypo = "ACP108", Warning, "unknown key, probably misspelt";

    /// `name` differs from the folder.
    NameNotFolder = "ACP200", Error, "name differs from the parent folder";
    /// `transport` lacks `stdio`.
    NoStdio = "ACP201", Error, "transport does not include stdio";
    /// A server without an operator.
    ServerWithoutOperator = "ACP202", Error, "kind: server needs metadata.aip44.operator";
    /// A sandboxed tier without a sandbox.
    SandboxedWithoutSandbox = "ACP203", Error, "tier: sandboxed needs metadata.aip44.sandbox";
    /// External audit without a target.
    ExternalAuditWithoutRef = "ACP204", Error, "audit.kind: external needs audit.ref";
    /// Audit switched off where the tier needs it.
    AuditOffAtGovernedTier = "ACP205", Error, "audit.kind: off at a governed tier";
    /// Agent capabilities in a client manifest.
    AgentCapabilitiesOnClient = "ACP206", Error, "capabilities.agent on a client";
    /// A capability the tier does not give.
    BeyondTier = "ACP208", Warning, "capability beyond the tier";
    /// A capability the tier requires, switched off.
    RequiredCapabilityOff = "ACP209", Error, "capability required by the tier is switched off";
    /// MCP servers the capabilities cannot reach.
    McpWithoutCapability = "ACP210", Warning, "mcp_servers without the MCP capability";
    /// A governed tier with nothing to govern by.
    NoGovernanceBinding = "ACP211", Error, "governed tier without a governance binding";
    /// `name` that is not a kebab-case id.
    NameNotKebab = "ACP212", Error, "name is not a kebab-case id";
    /// Tier `basic` bound to an operator with a `governance` block.
    BasicTierGovernedOperator = "ACP213", Error, "tier: basic bound to a governed operator";
    /// A client capability whose methods the pinned revision does not have.
    ClientCapabilityNotInRevision = "ACP214", Error, "client capability the pinned revision does not have";
    /// Part of an agent's session surface declared where nothing answers it: `sessions` on a
    /// client, `modes`, `configOptions`, `commands` or `extensions` on a client or a bridge.
    SurfaceOnWrongKind = "ACP215", Error, "metadata.agentacp part on a kind that does not answer it";
    /// A declared part whose methods or updates the pinned revision does not define.
    SurfaceNotInRevision = "ACP216", Error, "metadata.agentacp part the pinned revision does not have";
    /// A mode or `select` config option whose `default` is not among its choices.
    DefaultNotOffered = "ACP217", Error, "default that is not among the declared choices";
    /// Two modes, config options, values of one option, commands or extension methods with
    /// one id.
    DuplicateDeclaration = "ACP218", Error, "two declarations with the same id";
    /// A capability or part of `metadata.agentacp` that ACP protocol version 2 does not have
    /// (client `fs` / `terminal`, MCP over SSE, session modes) in a manifest that speaks it.
    NotInProtocolVersion2 = "ACP219", Error, "declared part that protocol version 2 does not have";
    /// A `terminal` sign-in method without `args` (the program would start as an ACP server
    /// in the user's terminal), or an `agent` one with `args` or `env` (never used).
    SignInArgs = "ACP220", Error, "sign-in method whose args do not fit its type";

    /// A ref that is not a relative path.
    RefNotRelative = "ACP300", Error, "ref is not a relative path";
    /// A ref to nothing.
    RefNotFound = "ACP301", Error, "ref target not found";
    /// A ref to a directory or an unreadable file.
    RefUnreadable = "ACP302", Error, "ref target is not a readable UTF-8 file";
    /// A ref to a file without valid frontmatter.
    RefBadFrontmatter = "ACP303", Error, "ref target has no valid frontmatter";
    /// A ref to a document that lacks its AIP's required fields.
    RefMissingFields = "ACP304", Error, "ref target lacks required fields";
    /// A governance ref of an unknown doctype.
    RefUnknownDoctype = "ACP305", Error, "governance ref is not a workspace manifest or a policy";
    /// An operator's `policy:<slug>` that resolves to no AIP-7 policy.
    PolicyNotResolved = "ACP306", Error, "operator policy does not resolve";
    /// A SANDBOX.md whose `provider` the runtime does not implement (it runs `local` only).
    SandboxProviderNotImplemented = "ACP307", Warning, "sandbox provider the runtime does not implement";
    /// A `provider: local` SANDBOX.md that declares what a local sandbox cannot enforce.
    SandboxNotEnforceable = "ACP308", Warning, "local sandbox cannot enforce what it declares";

    /// `acp_rev` names no known revision.
    UnknownRevision = "ACP400", Error, "acp_rev matches no known revision";
    /// `acp_rev` is a prefix of several.
    AmbiguousRevision = "ACP401", Error, "acp_rev prefix is ambiguous";
    /// `protocol_versions` lists 2, but the pinned commit has no built-in version-2 wire types.
    ProtocolVersionNotInRevision = "ACP402", Error, "protocol version the pinned revision has no wire types for";
    /// The wire types `acp_rev` pins (a `regen`-generated module) are not protocol version 1.
    WireNotProtocolVersion1 = "ACP403", Error, "operator wire types that are not protocol version 1";
}

/// Codes that are no longer reported, with what they were and why they went. Their numbers
/// are never given to another diagnostic; `docs/diagnostics.md` keeps a section for each.
pub const RETIRED: &[(&str, &str)] = &[(
    "ACP207",
    "capabilities.client on a server: a server's `capabilities.client` now declares the editor methods its operator may call",
)];

impl std::fmt::Display for Code {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_unique_and_sorted() {
        let strings: Vec<_> = Code::ALL.iter().map(|c| c.as_str()).collect();
        let mut sorted = strings.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!(strings, sorted);
    }

    #[test]
    fn a_retired_code_is_never_reused() {
        for (retired, _) in RETIRED {
            assert!(
                Code::ALL.iter().all(|c| c.as_str() != *retired),
                "{retired} is retired; give the diagnostic a new number"
            );
        }
    }
}
