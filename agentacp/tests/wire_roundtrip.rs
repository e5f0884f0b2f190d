//! Differential round-trip against the official crate `agent-client-protocol-schema` 1.15.1
//! (built from rev 0fc18323, our default): every case of `tests/wire-corpus/*.json` is parsed
//! with our generated types and with theirs, both re-serialised, and the JSON compared.
//!
//! A case where the two differ must be listed in [`DIVERGENCES`] with the reason, and must
//! still differ (so the list cannot go stale); everything else must agree exactly (both
//! accept with equal JSON, or both reject).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use agent_client_protocol_schema::v1 as theirs;
use agentacp::wire::rev_0fc18323 as ours;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

/// Cases where our result differs from the official crate's on purpose, and why. Each is
/// explained at more length in `docs/design/regen.md` ("Where we differ from the official crate").
const DIVERGENCES: &[(&str, &str)] = &[
    // 1. Values the official crate drops because they equal its Rust `Default`; we keep what
    //    was sent (the schema names no default for these fields).
    (
        "tool-call-default-kind-status-explicit",
        "explicit kind \"other\" / status \"pending\" are kept",
    ),
    // 2. Unknown values of a closed enum: the official crate maps them to `other` (an
    //    `#[serde(other)]` the schema does not show); the schema says closed, so a strict field
    //    rejects and a lenient field (`x-deserialize-default-on-error`) reads as absent.
    ("tool-kind-unknown-string", "closed enum: unknown value rejected"),
    (
        "tool-call-update-unknown-kind",
        "closed enum in a lenient field: unknown value reads as absent",
    ),
    // 3. An object type without properties keeps its keys (no data loss) where the official
    //    struct drops them.
    (
        "compaction-capabilities-unknown-field",
        "property-less object keeps unknown keys",
    ),
    (
        "unknown-in-capabilities",
        "property-less object (compaction) keeps unknown keys",
    ),
    // 4. A known tag whose payload does not fit is an error; serde's derive in the official
    //    crate silently falls back to the untagged branch and drops the tag.
    (
        "mcp-http-missing-headers-with-stdio-fields",
        "known tag, bad payload: error, not stdio",
    ),
    (
        "set-config-boolean-tag-string-value",
        "known tag, bad payload: error, not the value-id form",
    ),
    // 5. serde accepts a variant *index* as the tag of an internally tagged enum it buffers;
    //    the schema says the tag is a string constant, so we do not.
    ("quirk-elicit-action-index", "integer tag is not a variant index"),
    ("quirk-mcp-server-type-index", "integer tag is not a variant index"),
    ("quirk-auth-method-type-index", "integer tag is not a variant index"),
    ("quirk-set-config-type-index", "integer tag is not a variant index"),
    (
        "quirk-tool-call-update-content-index",
        "integer tag is not a variant index",
    ),
    ("quirk-elicit-property-type-index", "integer tag is not a variant index"),
    // 6. The catch-all branch of a tagged union keeps the whole object; we do not check the
    //    nested `anyOf` (session or request scope) inside the catch-all of `elicitation/create`.
    (
        "elicit-unknown-mode-no-scope",
        "unknown mode kept without checking its scope",
    ),
    // 7. A bare `null` for a payload whose fields are all optional: the types reject it, but
    //    the method enums' `decode` reads absent or `null` params as `{}` (tested below), which
    //    is where a payload meets `null` on the wire.
    (
        "payload-null-authenticate-response",
        "null payload: accepted by decode, not by the type",
    ),
    (
        "payload-null-logout-request",
        "null payload: accepted by decode, not by the type",
    ),
    (
        "payload-null-list-sessions-request",
        "null payload: accepted by decode, not by the type",
    ),
    (
        "payload-null-write-response",
        "null payload: accepted by decode, not by the type",
    ),
    (
        "payload-null-wait-exit-response",
        "null payload: accepted by decode, not by the type",
    ),
    (
        "payload-null-load-session-response",
        "null payload: accepted by decode, not by the type",
    ),
];

/// What one side made of a case: the re-serialised JSON, or the error.
type Outcome = Result<Value, String>;

fn run<T: DeserializeOwned + Serialize>(value: &Value) -> Outcome {
    let parsed: T = serde_json::from_value(value.clone()).map_err(|e| e.to_string())?;
    serde_json::to_value(&parsed).map_err(|e| format!("serialize: {e}"))
}

macro_rules! both_sides {
    ($($name:ident,)*) => {
        /// `(ours, theirs)` for the type named `name`, `None` for a name we do not map.
        fn both(name: &str, value: &Value) -> Option<(Outcome, Outcome)> {
            match name {
                "ProtocolVersion" => Some((
                    run::<ours::ProtocolVersion>(value),
                    run::<agent_client_protocol_schema::ProtocolVersion>(value),
                )),
                $(stringify!($name) => Some((run::<ours::$name>(value), run::<theirs::$name>(value))),)*
                _ => None,
            }
        }
    };
}

both_sides! {
    AgentAuthCapabilities,
    AgentCapabilities,
    Annotations,
    AudioContent,
    AuthCapabilities,
    AuthMethod,
    AuthMethodAgent,
    AuthMethodId,
    AuthMethodTerminal,
    AuthenticateRequest,
    AuthenticateResponse,
    AvailableCommand,
    AvailableCommandInput,
    AvailableCommandsUpdate,
    BlobResourceContents,
    BooleanConfigOptionCapabilities,
    BooleanPropertySchema,
    CancelNotification,
    CancelRequestNotification,
    ClientCapabilities,
    ClientSessionCapabilities,
    CloseSessionRequest,
    CloseSessionResponse,
    CompactionCapabilities,
    CompactionId,
    CompactionStatus,
    CompactionSummaryChunk,
    CompactionUpdate,
    CompleteElicitationNotification,
    ConfigOptionUpdate,
    Content,
    ContentBlock,
    ContentChunk,
    Cost,
    CreateElicitationRequest,
    CreateElicitationResponse,
    CreateTerminalRequest,
    CreateTerminalResponse,
    CurrentModeUpdate,
    DeleteSessionRequest,
    DeleteSessionResponse,
    Diff,
    ElicitationAcceptAction,
    ElicitationCapabilities,
    ElicitationContentValue,
    ElicitationFormCapabilities,
    ElicitationFormMode,
    ElicitationId,
    ElicitationPropertySchema,
    ElicitationRequestScope,
    ElicitationSchema,
    ElicitationSchemaType,
    ElicitationSessionScope,
    ElicitationUrlCapabilities,
    ElicitationUrlMode,
    EmbeddedResource,
    EmbeddedResourceResource,
    EnumOption,
    EnvVariable,
    Error,
    ErrorCode,
    ExtNotification,
    ExtRequest,
    ExtResponse,
    FileSystemCapabilities,
    HttpHeader,
    ImageContent,
    Implementation,
    InitializeRequest,
    InitializeResponse,
    IntegerPropertySchema,
    KillTerminalRequest,
    KillTerminalResponse,
    ListSessionsRequest,
    ListSessionsResponse,
    LoadSessionRequest,
    LoadSessionResponse,
    LogoutCapabilities,
    LogoutRequest,
    LogoutResponse,
    McpCapabilities,
    McpServer,
    McpServerHttp,
    McpServerSse,
    McpServerStdio,
    MessageId,
    MultiSelectItems,
    MultiSelectPropertySchema,
    NewSessionRequest,
    NewSessionResponse,
    Notice,
    NoticeCapabilities,
    NoticeSeverity,
    NumberPropertySchema,
    PermissionOption,
    PermissionOptionId,
    PermissionOptionKind,
    Plan,
    PlanEntry,
    PlanEntryPriority,
    PlanEntryStatus,
    PromptCapabilities,
    PromptRequest,
    PromptResponse,
    ReadTextFileRequest,
    ReadTextFileResponse,
    ReleaseTerminalRequest,
    ReleaseTerminalResponse,
    RequestId,
    RequestPermissionOutcome,
    RequestPermissionRequest,
    RequestPermissionResponse,
    ResourceLink,
    ResumeSessionRequest,
    ResumeSessionResponse,
    Role,
    SelectedPermissionOutcome,
    SessionAdditionalDirectoriesCapabilities,
    SessionCapabilities,
    SessionCloseCapabilities,
    SessionConfigBoolean,
    SessionConfigGroupId,
    SessionConfigId,
    SessionConfigOption,
    SessionConfigOptionCategory,
    SessionConfigOptionsCapabilities,
    SessionConfigSelect,
    SessionConfigSelectGroup,
    SessionConfigSelectOption,
    SessionConfigSelectOptions,
    SessionConfigValueId,
    SessionDeleteCapabilities,
    SessionId,
    SessionInfo,
    SessionInfoUpdate,
    SessionListCapabilities,
    SessionMode,
    SessionModeId,
    SessionModeState,
    SessionNotification,
    SessionResumeCapabilities,
    SessionUpdate,
    SetSessionConfigOptionRequest,
    SetSessionConfigOptionResponse,
    SetSessionModeRequest,
    SetSessionModeResponse,
    StopReason,
    StringFormat,
    StringMultiSelectItems,
    StringPropertySchema,
    Terminal,
    TerminalExitStatus,
    TerminalId,
    TerminalOutputRequest,
    TerminalOutputResponse,
    TextContent,
    TextResourceContents,
    TitledMultiSelectItems,
    ToolCall,
    ToolCallContent,
    ToolCallId,
    ToolCallLocation,
    ToolCallStatus,
    ToolCallUpdate,
    ToolKind,
    UnstructuredCommandInput,
    UsageUpdate,
    WaitForTerminalExitRequest,
    WaitForTerminalExitResponse,
    WriteTextFileRequest,
    WriteTextFileResponse,
}

#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Case {
    name: String,
    #[serde(rename = "type")]
    type_name: String,
    #[allow(dead_code)]
    covers: String,
    value: Value,
    #[serde(default)]
    official: Option<String>,
}

fn corpus_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/wire-corpus")
}

fn corpus() -> Vec<(String, Case)> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(corpus_dir())
        .expect("tests/wire-corpus")
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    let mut cases = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        let list: Vec<Case> = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        let stem = file.file_stem().unwrap().to_string_lossy().into_owned();
        cases.extend(list.into_iter().map(|c| (stem.clone(), c)));
    }
    cases
}

#[test]
fn the_corpus_is_big_and_its_names_are_unique() {
    let cases = corpus();
    assert!(cases.len() >= 200, "only {} cases", cases.len());
    let mut seen = BTreeSet::new();
    for (file, case) in &cases {
        assert!(
            seen.insert(case.name.clone()),
            "{file}: duplicate case name {}",
            case.name
        );
    }
}

#[test]
fn every_case_round_trips_like_the_official_crate() {
    let divergences: BTreeMap<&str, &str> = DIVERGENCES.iter().copied().collect();
    let mut failures = Vec::new();
    let mut diverged = BTreeSet::new();
    for (file, case) in corpus() {
        let Some((ours, theirs)) = both(&case.type_name, &case.value) else {
            failures.push(format!("{file}/{}: type {} is not mapped", case.name, case.type_name));
            continue;
        };
        if let Some(label) = &case.official {
            let rejects = theirs.is_err();
            if (label == "rejects") != rejects {
                failures.push(format!(
                    "{file}/{}: labelled official={label}, but theirs gave {theirs:?}",
                    case.name
                ));
            }
        }
        let agree = match (&ours, &theirs) {
            (Ok(a), Ok(b)) => a == b,
            (Err(_), Err(_)) => true,
            _ => false,
        };
        match (agree, divergences.get(case.name.as_str())) {
            (true, None) => {}
            (false, Some(_)) => {
                diverged.insert(case.name.clone());
            }
            (true, Some(why)) => failures.push(format!(
                "{file}/{}: listed as a divergence ({why}) but both sides agree now",
                case.name
            )),
            (false, None) => failures.push(format!(
                "{file}/{}: {}\n    input:  {}\n    ours:   {}\n    theirs: {}",
                case.name,
                case.type_name,
                case.value,
                show(&ours),
                show(&theirs)
            )),
        }
    }
    for name in divergences.keys() {
        if !diverged.contains(*name) {
            failures.push(format!("divergence {name} names no corpus case"));
        }
    }
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

fn show(outcome: &Outcome) -> String {
    match outcome {
        Ok(value) => value.to_string(),
        Err(error) => format!("error: {error}"),
    }
}

/// Decodes `value` as the params (or result) of `method` through the typed method enums, the
/// way a peer's message is decoded, and re-encodes it.
fn decode_by_method(info: &agentacp::wire::support::MethodInfo, as_result: bool, value: &Value) -> Outcome {
    use agentacp::wire::support::Side;
    let raw = serde_json::value::to_raw_value(value).map_err(|e| e.to_string())?;
    let raw = Some(raw.as_ref());
    let encoded = match (info.side, as_result, info.is_notification()) {
        (Side::Agent, false, false) => ours::ClientRequest::decode(info.name, raw).map(serde_json::to_value),
        (Side::Agent, true, _) => ours::AgentResponse::decode(info.name, raw).map(serde_json::to_value),
        (Side::Client, false, false) => ours::AgentRequest::decode(info.name, raw).map(serde_json::to_value),
        (Side::Client, true, _) => ours::ClientResponse::decode(info.name, raw).map(serde_json::to_value),
        (Side::Agent, false, true) | (Side::Protocol, _, _) => {
            ours::ClientNotification::decode(info.name, raw).map(serde_json::to_value)
        }
        (Side::Client, false, true) => ours::AgentNotification::decode(info.name, raw).map(serde_json::to_value),
    };
    encoded.map_err(|e| e.to_string())?.map_err(|e| e.to_string())
}

#[test]
fn decoding_by_method_name_agrees_with_decoding_by_type() {
    let mut checked = 0;
    for (file, case) in corpus() {
        for info in ours::METHODS {
            let as_result = info.result == Some(case.type_name.as_str());
            if info.params != case.type_name && !as_result {
                continue;
            }
            let by_method = decode_by_method(info, as_result, &case.value);
            if case.value.is_null() {
                // Absent or null params read as `{}`: all-optional payloads accept them.
                let empty = both(&case.type_name, &serde_json::json!({})).unwrap().0;
                assert_eq!(by_method.ok(), empty.ok(), "{file}/{}", case.name);
            } else {
                // Equal JSON, or both errors (the messages differ: decode names the method).
                let by_type = both(&case.type_name, &case.value).unwrap().0;
                assert_eq!(by_method.ok(), by_type.ok(), "{file}/{} via {}", case.name, info.name);
            }
            checked += 1;
        }
    }
    assert!(checked >= 100, "only {checked} cases are method payloads");
}

#[test]
fn every_method_payload_of_the_revision_is_in_the_corpus() {
    let types: BTreeSet<String> = corpus().into_iter().map(|(_, c)| c.type_name).collect();
    for info in ours::METHODS {
        assert!(
            types.contains(info.params),
            "no corpus case for {} params ({})",
            info.name,
            info.params
        );
        if let Some(result) = info.result {
            assert!(
                types.contains(result),
                "no corpus case for {} result ({result})",
                info.name
            );
        }
    }
}

#[test]
fn unknown_methods_and_extensions_decode_as_the_protocol_says() {
    use agentacp::wire::support::DecodeError;
    let params = serde_json::value::to_raw_value(&serde_json::json!({"x": [1, 2]})).unwrap();
    let error = ours::ClientRequest::decode("session/teleport", Some(&params)).unwrap_err();
    assert!(matches!(error, DecodeError::UnknownMethod(_)));
    assert_eq!(error.code(), -32601);
    match ours::ClientRequest::decode("_zed/ping", Some(&params)).unwrap() {
        ours::ClientRequest::Extension { method, params } => {
            assert_eq!(method, "_zed/ping");
            assert_eq!(params, serde_json::json!({"x": [1, 2]}));
        }
        other => panic!("{other:?}"),
    }
    let error = ours::ClientRequest::decode("session/prompt", Some(&params)).unwrap_err();
    assert_eq!(error.code(), -32602);
    assert!(error.to_string().contains("sessionId"), "{error}");
    // A request sent to the wrong side is not one of that side's methods.
    assert!(ours::ClientRequest::decode("fs/read_text_file", Some(&params)).is_err());
    assert_eq!(
        <ours::PromptRequest as agentacp::wire::support::RequestParams>::METHOD,
        "session/prompt"
    );
}
