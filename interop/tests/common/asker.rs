//! The operator whose elicitations the official SDKs' clients answer
//! (`tests/ts_elicitation.rs`, `tests/v2_sdk.rs`): it asks what the prompt names, a form or a
//! URL interaction, says what came back, and completes an accepted URL interaction.

#![allow(dead_code)]

use agentacp::audit::MemorySink;
use agentacp::prelude::*;
use agentacp::server::{Elicitation, ElicitationOutcome, SessionContext};

/// The `elicitationId` of the URL interaction.
pub const URL_ELICITATION: &str = "oauth-1";

/// Asks what the prompt names (`form` or `url`) and says what came back.
#[acp_operator(manifest = "../agentacp/tests/operators/test-remote/ACP.md")]
pub struct Asker;

impl AskerServer for Asker {
    async fn prompt(
        &self,
        turn: &mut Turn<'_, GovernanceAware>,
        request: wire::PromptRequest,
    ) -> Result<wire::StopReason> {
        let text = serde_json::to_value(&request.prompt)?[0]["text"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let question = match text.as_str() {
            "url" => Elicitation::url(
                "Sign in to continue",
                URL_ELICITATION,
                format!("https://example.com/oauth?e={URL_ELICITATION}"),
            ),
            _ => {
                let schema = json!({"type": "object", "properties": {
                    "strategy": {"type": "string", "enum": ["safe", "bold"]},
                    "port": {"type": "integer"}}, "required": ["strategy"]});
                Elicitation::form("How careful should I be?", schema)
            }
        };
        let said = match turn.elicit(question).await {
            Ok(ElicitationOutcome::Accept(content)) => format!("accept {}", Value::Object(content)),
            Ok(other) => other.action().to_string(),
            Err(error) => format!("error: {error}"),
        };
        if text == "url" && said.starts_with("accept") {
            turn.complete_elicitation(URL_ELICITATION).await?;
        }
        turn.message(said).await?;
        Ok(wire::StopReason::EndTurn)
    }

    async fn load_session(&self, _: &SessionContext, _: wire::LoadSessionRequest) -> Result<wire::LoadSessionResponse> {
        Ok(wire::LoadSessionResponse::default())
    }

    async fn extension(&self, _method: &str, _params: Value) -> Result<Value> {
        Ok(json!({}))
    }

    async fn extension_notification(&self, _method: &str, _params: Value) -> Result<()> {
        Ok(())
    }

    async fn authenticate(&self, _: wire::AuthenticateRequest) -> Result<wire::AuthenticateResponse> {
        Ok(wire::AuthenticateResponse::default())
    }
}

/// Checks what a client saw of a form then a URL elicitation (`seen`: `{"asked", "completed",
/// "said"}`, `asked` with the wire's names), and the server's audit:
/// each step recorded, the chain intact.
pub fn check_form_then_url(seen: &Value, audit: &MemorySink) {
    let said: Vec<&str> = seen["said"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    let form: Value = serde_json::from_str(said[0].strip_prefix("accept ").expect("the form accepted")).unwrap();
    assert_eq!(form, json!({"strategy": "safe", "port": 8080}));
    assert_eq!(said[1], "accept {}");
    assert_eq!(seen["completed"], json!([URL_ELICITATION]));
    let asked = seen["asked"].as_array().unwrap();
    assert_eq!(
        (asked[0]["mode"].as_str(), asked[1]["mode"].as_str()),
        (Some("form"), Some("url"))
    );
    assert_eq!(asked[1]["elicitationId"], URL_ELICITATION, "{seen}");
    agentacp::audit::verify(audit.contents().as_bytes()).expect("the chain verifies");
    let actions: Vec<String> = (audit.lines().iter())
        .map(|line| {
            serde_json::from_str::<Value>(line).unwrap()["action"]
                .as_str()
                .unwrap_or_default()
                .to_string()
        })
        .filter(|action| action.starts_with("elicitation."))
        .collect();
    let expected = ["create", "answer", "create", "answer", "complete"].map(|step| format!("elicitation.{step}"));
    assert_eq!(actions, expected);
}
