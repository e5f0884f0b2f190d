//! The session surface a server's manifest declares in `metadata.agentacp`: modes, config
//! options, slash commands, extension methods and additional directories. Each is sent exactly
//! as declared, checked against the declaration, audited when it changes, and kept across a
//! resume; undeclared ones are refused.

use std::sync::{Arc, Mutex};

use agentacp::audit::{AuditLog, MemorySink};
use agentacp::prelude::*;
use agentacp::server::MemoryStore;
use agentacp::surface::ConfigValue;
use serde_json::Value;

mod common;

use common::{Pipe, WAIT, texts};

/// Modes, config options, commands and extensions, all declared.
#[acp_operator(manifest = "tests/operators/test-surface/ACP.md")]
#[derive(Clone, Default)]
struct Surfacer {
    /// The params of every `_test/ping` notification received.
    pings: Arc<Mutex<Vec<Value>>>,
}

impl SurfacerServer for Surfacer {
    async fn prompt(
        &self,
        turn: &mut Turn<'_, GovernanceAware>,
        _request: wire::PromptRequest,
    ) -> Result<wire::StopReason> {
        if let Some(command) = turn.command() {
            let text = format!("command {}: {}", command.command.name, command.input);
            turn.message(text).await?;
            if command.command.name == "status" {
                turn.set_commands(&["review"]).await?;
            }
            return Ok(wire::StopReason::EndTurn);
        }
        if turn.command().is_none()
            && turn.mode().as_deref() == Some("code")
            && turn.config_value("verbose").and_then(|v| v.as_bool()) == Some(false)
        {
            // The revision's other updates, typed: a title and the context window's use.
            let info = wire::SessionInfoUpdate {
                title: agentacp::wire::support::Patch::Set("Parser review".into()),
                ..Default::default()
            };
            turn.update(&wire::OperatorUpdate::SessionInfoUpdate(info)).await?;
            turn.update(&wire::OperatorUpdate::UsageUpdate(wire::UsageUpdate::new(
                1200, 200_000,
            )))
            .await?;
            return Ok(wire::StopReason::EndTurn);
        }
        let settings = format!(
            "mode={} model={} verbose={}",
            turn.mode().unwrap_or_default(),
            turn.config_value("model")
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_default(),
            turn.config_value("verbose")
                .and_then(|v| v.as_bool())
                .unwrap_or_default(),
        );
        turn.message(settings).await?;
        // The operator switches modes itself, then tries an undeclared one and a made-up value.
        turn.set_mode("ask").await?;
        let refused_mode = turn.set_mode("yolo").await.is_err();
        let refused_value = turn
            .set_config_value("model", ConfigValue::Value("huge".into()))
            .await
            .is_err();
        let refused_update = turn
            .update_json(json!({"sessionUpdate": "current_mode_update", "currentModeId": "yolo"}))
            .await
            .is_err();
        turn.message(format!("refused {refused_mode} {refused_value} {refused_update}"))
            .await?;
        Ok(wire::StopReason::EndTurn)
    }

    async fn load_session(
        &self,
        _session: &SessionContext,
        _request: wire::LoadSessionRequest,
    ) -> Result<wire::LoadSessionResponse> {
        Ok(wire::LoadSessionResponse::default())
    }

    async fn set_mode(
        &self,
        _session: &SessionContext,
        request: wire::SetSessionModeRequest,
    ) -> Result<wire::SetSessionModeResponse> {
        if request.mode_id.as_str() == "locked" {
            return Err(Error::msg("this operator does not switch to `locked`"));
        }
        Ok(wire::SetSessionModeResponse::default())
    }

    async fn set_config_option(
        &self,
        session: &SessionContext,
        _request: wire::SetSessionConfigOptionRequest,
    ) -> Result<wire::SetSessionConfigOptionResponse> {
        // The runtime has already set the value the operator sees.
        assert!(session.config_value("model").is_some());
        Ok(wire::SetSessionConfigOptionResponse::new(Vec::new()))
    }

    async fn extension(&self, method: &str, params: Value) -> Result<Value> {
        Ok(json!({"method": method, "echo": params}))
    }

    async fn extension_notification(&self, _method: &str, params: Value) -> Result<()> {
        self.pings.lock().unwrap().push(params);
        Ok(())
    }
}

/// The same runtime without any of it.
#[acp_operator(manifest = "tests/operators/test-operator-no-editor/ACP.md")]
struct Plain;

ok_server!(PlainServer for Plain, GovernanceAware);

/// One connection, initialized; `booleans`: whether the client takes boolean config options.
async fn connect(
    operator: impl agentacp::server::Operator,
    root: &std::path::Path,
    store: Arc<MemoryStore>,
    audit: &MemorySink,
    booleans: bool,
) -> Pipe {
    let options = ServerOptions {
        workspace_root: Some(root.to_path_buf()),
        audit: Some(AuditLog::with_sink(Box::new(audit.clone()))),
        store: Some(store),
        permission_timeout: WAIT,
        ..ServerOptions::default()
    };
    let mut pipe = Pipe::serve(operator, options);
    let capabilities = if booleans {
        json!({"session": {"configOptions": {"boolean": {}}}})
    } else {
        json!({})
    };
    let params = json!({"protocolVersion": 1, "clientInfo": {"name": "test", "version": "1"}, "clientCapabilities": capabilities});
    pipe.call("initialize", params).await;
    pipe
}

/// The audit records whose action starts with `session.`, as (action, input).
fn session_changes(audit: &MemorySink) -> Vec<(String, Value)> {
    audit
        .lines()
        .iter()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|record| record["action"].as_str().is_some_and(|a| a.starts_with("session.")))
        .map(|record| (record["action"].as_str().unwrap().to_string(), record["input"].clone()))
        .collect()
}

/// `session/new` in `cwd`, and the commands update that follows it: the session's id.
async fn open_session(pipe: &mut Pipe, cwd: &std::path::Path) -> String {
    let (_, answer) = pipe.call("session/new", json!({"cwd": cwd, "mcpServers": []})).await;
    next_update(pipe, "available_commands_update").await;
    answer["result"]["sessionId"]
        .as_str()
        .expect("a session id")
        .to_string()
}

/// The next message, which must be a `session/update` of `kind`.
async fn next_update(pipe: &mut Pipe, kind: &str) -> Value {
    let message = pipe.next().await;
    assert_eq!(message["params"]["update"]["sessionUpdate"], kind, "{message}");
    message["params"]["update"].clone()
}

#[tokio::test]
async fn a_new_session_gets_the_declared_modes_options_and_commands() {
    let root = tempfile::tempdir().unwrap();
    let audit = MemorySink::new();
    let mut pipe = connect(Surfacer::default(), root.path(), Arc::default(), &audit, true).await;
    let (_, answer) = pipe
        .call("session/new", json!({"cwd": root.path(), "mcpServers": []}))
        .await;
    let result = &answer["result"];
    assert_eq!(result["modes"]["currentModeId"], "ask", "{answer}");
    let modes: Vec<&str> = result["modes"]["availableModes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap())
        .collect();
    assert_eq!(modes, ["ask", "code", "locked"]);
    assert_eq!(
        result["configOptions"],
        json!([
            {"id": "model", "name": "Model", "category": "model", "type": "select", "currentValue": "fast",
             "options": [{"value": "fast", "name": "Fast"}, {"value": "deep", "name": "Deep"}]},
            {"id": "verbose", "name": "Verbose", "type": "boolean", "currentValue": false}
        ])
    );
    // The answer decodes as the pinned revision's type.
    serde_json::from_value::<wire::NewSessionResponse>(result.clone()).expect("a NewSessionResponse");
    let commands = next_update(&mut pipe, "available_commands_update").await;
    assert_eq!(
        commands["availableCommands"],
        json!([{"name": "review", "description": "Review the changes", "input": {"hint": "what to review"}},
               {"name": "status", "description": "Show the status"}])
    );
    pipe.finish().await;

    // A client that did not advertise boolean options gets none.
    let mut pipe = connect(Surfacer::default(), root.path(), Arc::default(), &audit, false).await;
    let (_, answer) = pipe
        .call("session/new", json!({"cwd": root.path(), "mcpServers": []}))
        .await;
    let ids: Vec<&str> = answer["result"]["configOptions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["model"], "{answer}");
    pipe.finish().await;
}

#[tokio::test]
async fn mode_and_config_changes_are_checked_audited_and_kept_across_a_resume() {
    let root = tempfile::tempdir().unwrap();
    let audit = MemorySink::new();
    let store: Arc<MemoryStore> = Arc::default();
    let mut pipe = connect(Surfacer::default(), root.path(), store.clone(), &audit, true).await;
    let session = open_session(&mut pipe, root.path()).await;

    let (_, switched) = pipe
        .call("session/set_mode", json!({"sessionId": session, "modeId": "code"}))
        .await;
    assert_eq!(switched["result"], json!({}), "{switched}");
    let (_, unknown) = pipe
        .call("session/set_mode", json!({"sessionId": session, "modeId": "yolo"}))
        .await;
    assert_eq!(unknown["error"]["code"], -32602, "{unknown}");
    assert!(
        unknown["error"]["message"]
            .as_str()
            .unwrap()
            .contains("`ask`, `code`, `locked`"),
        "{unknown}"
    );
    let (_, refused) = pipe
        .call("session/set_mode", json!({"sessionId": session, "modeId": "locked"}))
        .await;
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap()
            .contains("does not switch"),
        "{refused}"
    );

    let (_, set) = pipe
        .call(
            "session/set_config_option",
            json!({"sessionId": session, "configId": "model", "value": "deep"}),
        )
        .await;
    assert_eq!(set["result"]["configOptions"][0]["currentValue"], "deep", "{set}");
    assert_eq!(set["result"]["configOptions"][1]["currentValue"], false, "{set}");
    let (_, flag) = pipe
        .call(
            "session/set_config_option",
            json!({"sessionId": session, "configId": "verbose", "type": "boolean", "value": true}),
        )
        .await;
    assert_eq!(flag["result"]["configOptions"][1]["currentValue"], true, "{flag}");
    for bad in [
        json!({"sessionId": session, "configId": "model", "value": "huge"}),
        json!({"sessionId": session, "configId": "temperature", "value": "hot"}),
        json!({"sessionId": session, "configId": "model", "type": "boolean", "value": true}),
    ] {
        let (_, answer) = pipe.call("session/set_config_option", bad.clone()).await;
        assert_eq!(answer["error"]["code"], -32602, "{bad}: {answer}");
    }

    // The operator sees what the client set.
    let id = pipe.prompt(&session, "settings?").await;
    let (messages, done) = pipe.until_answer(id).await;
    assert_eq!(done["result"]["stopReason"], "end_turn", "{done}");
    assert_eq!(
        texts(&messages),
        ["mode=code model=deep verbose=true", "refused true true true"]
    );
    let mode_updates: Vec<&Value> = messages
        .iter()
        .filter(|m| m["params"]["update"]["sessionUpdate"] == "current_mode_update")
        .collect();
    assert_eq!(mode_updates.len(), 1, "only the declared switch is sent: {messages:?}");
    let (_, back) = pipe
        .call("session/set_mode", json!({"sessionId": session, "modeId": "code"}))
        .await;
    assert_eq!(back["result"], json!({}), "{back}");

    let changes = session_changes(&audit);
    let want = [
        ("session.mode", json!({"from": "ask", "to": "code", "by": "client"})),
        ("session.mode", json!({"from": "code", "to": "locked", "by": "client"})),
        (
            "session.mode",
            json!({"from": "locked", "to": "code", "by": "operator"}),
        ),
        (
            "session.config",
            json!({"option": "model", "from": "fast", "to": "deep", "by": "client"}),
        ),
        (
            "session.config",
            json!({"option": "verbose", "from": false, "to": true, "by": "client"}),
        ),
        ("session.mode", json!({"from": "code", "to": "ask", "by": "operator"})),
        ("session.mode", json!({"from": "ask", "to": "code", "by": "client"})),
    ];
    let got: Vec<(&str, &Value)> = changes.iter().map(|(a, i)| (a.as_str(), i)).collect();
    let want: Vec<(&str, &Value)> = want.iter().map(|(a, i)| (*a, i)).collect();
    assert_eq!(got, want);
    pipe.finish().await;

    // A later connection resumes the session with its mode and values, not the defaults.
    let mut pipe = connect(Surfacer::default(), root.path(), store, &audit, true).await;
    let (_, resumed) = pipe
        .call("session/resume", json!({"sessionId": session, "cwd": root.path()}))
        .await;
    assert_eq!(resumed["result"]["modes"]["currentModeId"], "code", "{resumed}");
    assert_eq!(
        resumed["result"]["configOptions"][0]["currentValue"], "deep",
        "{resumed}"
    );
    assert_eq!(resumed["result"]["configOptions"][1]["currentValue"], true, "{resumed}");
    next_update(&mut pipe, "available_commands_update").await;
    pipe.finish().await;
}

#[tokio::test]
async fn a_prompt_starting_with_a_declared_command_reaches_the_operator_as_one() {
    let root = tempfile::tempdir().unwrap();
    let audit = MemorySink::new();
    let mut pipe = connect(Surfacer::default(), root.path(), Arc::default(), &audit, true).await;
    let session = open_session(&mut pipe, root.path()).await;
    let id = pipe.prompt(&session, "/review the parser").await;
    let (messages, _) = pipe.until_answer(id).await;
    assert_eq!(texts(&messages), ["command review: the parser"]);
    // `/status` narrows the commands to `review`.
    let id = pipe.prompt(&session, "/status").await;
    let (messages, _) = pipe.until_answer(id).await;
    let update = messages
        .iter()
        .find(|m| m["params"]["update"]["sessionUpdate"] == "available_commands_update")
        .expect("the commands were updated");
    assert_eq!(update["params"]["update"]["availableCommands"][0]["name"], "review");
    assert_eq!(
        update["params"]["update"]["availableCommands"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
    pipe.finish().await;
}

#[tokio::test]
async fn declared_extension_methods_reach_the_operator_and_others_are_not_found() {
    let root = tempfile::tempdir().unwrap();
    let audit = MemorySink::new();
    let operator = Surfacer::default();
    let pings = operator.pings.clone();
    let mut pipe = connect(operator, root.path(), Arc::default(), &audit, false).await;
    let params = json!({"x": 1, "_meta": {"trace": "t1"}});
    let (_, echoed) = pipe.call("_test/echo", params.clone()).await;
    assert_eq!(
        echoed["result"],
        json!({"method": "_test/echo", "echo": params}),
        "{echoed}"
    );
    let (_, other) = pipe.call("_test/other", json!({})).await;
    assert_eq!(other["error"]["code"], -32601, "{other}");
    pipe.send(json!({"jsonrpc": "2.0", "method": "_test/ping", "params": {"n": 7}}))
        .await;
    pipe.send(json!({"jsonrpc": "2.0", "method": "_test/unknown", "params": {"n": 8}}))
        .await;
    // The connection ends only after the notification's task has run.
    pipe.finish().await;
    assert_eq!(*pings.lock().unwrap(), [json!({"n": 7})]);
}

#[tokio::test]
async fn additional_directories_are_confined_and_only_taken_when_declared() {
    let root = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let (main, extra) = (root.path().join("main"), root.path().join("extra"));
    std::fs::create_dir(&main).unwrap();
    std::fs::create_dir(&extra).unwrap();
    let audit = MemorySink::new();
    let mut pipe = connect(Surfacer::default(), root.path(), Arc::default(), &audit, false).await;
    let (_, init) = pipe
        .call(
            "session/new",
            json!({"cwd": main, "additionalDirectories": [extra], "mcpServers": []}),
        )
        .await;
    assert!(init["result"]["sessionId"].is_string(), "{init}");
    let (_, escaped) = pipe
        .call(
            "session/new",
            json!({"cwd": main, "additionalDirectories": [outside.path()], "mcpServers": []}),
        )
        .await;
    assert_eq!(escaped["error"]["code"], -32602, "{escaped}");
    pipe.finish().await;

    let mut plain = connect(Plain, root.path(), Arc::default(), &audit, false).await;
    let (_, refused) = plain
        .call(
            "session/new",
            json!({"cwd": main, "additionalDirectories": [extra], "mcpServers": []}),
        )
        .await;
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap()
            .contains("additionalDirectories"),
        "{refused}"
    );
    plain.finish().await;
}

#[tokio::test]
async fn without_declarations_nothing_of_it_is_sent_or_answered() {
    let root = tempfile::tempdir().unwrap();
    let audit = MemorySink::new();
    let mut pipe = connect(Plain, root.path(), Arc::default(), &audit, true).await;
    let (messages, answer) = pipe
        .call("session/new", json!({"cwd": root.path(), "mcpServers": []}))
        .await;
    assert!(messages.is_empty(), "{messages:?}");
    let result = answer["result"].as_object().unwrap();
    assert!(
        !result.contains_key("modes") && !result.contains_key("configOptions"),
        "{answer}"
    );
    let session = result["sessionId"].as_str().unwrap();
    for (method, params) in [
        ("session/set_mode", json!({"sessionId": session, "modeId": "ask"})),
        (
            "session/set_config_option",
            json!({"sessionId": session, "configId": "model", "value": "deep"}),
        ),
        ("_test/echo", json!({})),
    ] {
        let (_, answer) = pipe.call(method, params).await;
        assert_eq!(answer["error"]["code"], -32601, "{method}: {answer}");
    }
    pipe.finish().await;
}

#[tokio::test]
async fn the_revisions_other_updates_reach_the_client_typed() {
    let root = tempfile::tempdir().unwrap();
    let audit = MemorySink::new();
    let mut pipe = connect(Surfacer::default(), root.path(), Arc::default(), &audit, false).await;
    let session = open_session(&mut pipe, root.path()).await;
    pipe.call("session/set_mode", json!({"sessionId": session, "modeId": "code"}))
        .await;
    let id = pipe.prompt(&session, "how big is the context?").await;
    let (messages, _) = pipe.until_answer(id).await;
    let updates: Vec<&Value> = messages.iter().map(|m| &m["params"]["update"]).collect();
    assert_eq!(
        updates,
        [
            &json!({"sessionUpdate": "session_info_update", "title": "Parser review"}),
            &json!({"sessionUpdate": "usage_update", "used": 1200, "size": 200_000}),
        ]
    );
    pipe.finish().await;
}

/// The session surface the runtime builds from the generated spec is the one `scaffold-aip
/// explain` reports for the same manifest (the two are rendered by different crates).
#[test]
fn the_runtimes_session_surface_is_the_one_explain_reports() {
    use agentacp::server::Operator;
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/operators/test-surface/ACP.md");
    let checked = acp_manifest::manifest::check_file(&path).expect("the manifest is readable");
    let explained = acp_manifest::explain::explain(&checked)
        .expect("the manifest checks clean")
        .session_surface
        .expect("a declared surface");
    let surface = &Surfacer::spec().surface;
    let settings = surface.defaults();
    assert_eq!(surface.modes_json(&settings).as_ref(), explained.get("modes"));
    assert_eq!(
        surface.config_options_json(&settings, true).as_ref(),
        explained.get("configOptions")
    );
    let commands = surface.commands_update(&surface.command_names()).expect("commands");
    assert_eq!(commands.get("availableCommands"), explained.get("availableCommands"));
    assert_eq!(
        (surface.extensions.requests, surface.extensions.notifications),
        (&["_test/echo"][..], &["_test/ping"][..])
    );
    assert_eq!(
        explained["extensions"],
        json!({"requests": ["_test/echo"], "notifications": ["_test/ping"]})
    );
}
