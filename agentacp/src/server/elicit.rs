//! A server's questions to the user: [`Turn::elicit`] (`elicitation/create`) and
//! [`Turn::complete_elicitation`] (`elicitation/complete`), at every tier.
//!
//! A question is asked only in a mode the client advertised at `initialize`
//! (`clientCapabilities.elicitation.form` / `.url`); it is checked (the spec's sender rules),
//! recorded (`elicitation.create`), sent, and its answer awaited for at most the permission
//! timeout (`ServerOptions::permission_timeout`, shared `Limits`); the answer is read and, for
//! an accepted form, checked against the requested schema, then recorded
//! (`elicitation.answer`) before the operator gets it.

use crate::error::Error;
use crate::jsonrpc::{self, pending::RequestFailure};
use crate::oversight::elicitation::{self, Elicitation, ElicitationOutcome};
use crate::tier::Tier;

use super::turn::{Turn, TurnScope};

/// Why an elicitation gave no answer. Every case is a sentence; none is the user's answer
/// (decline and cancel are [`ElicitationOutcome`]s).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ElicitationError {
    /// The client did not advertise this mode (`clientCapabilities.elicitation.<mode>`).
    NotOffered(&'static str),
    /// The question breaks a rule of the spec (its schema, its URL, a reused id); not sent.
    Invalid(String),
    /// `complete_elicitation` of an id that is not an outstanding accepted URL interaction.
    UnknownId(String),
    /// The turn was cancelled while the client was asked.
    Cancelled,
    /// The client did not answer within the permission timeout (the request was withdrawn).
    TimedOut,
    /// The connection closed before the answer came.
    Closed,
    /// The client answered with an error.
    Refused(String),
    /// The client's answer is unreadable, or an accepted form's content does not fit the
    /// requested schema.
    Unfit(String),
    /// The audit record could not be written: the question was not sent, or its answer not
    /// given to the operator.
    Audit(String),
}

impl std::fmt::Display for ElicitationError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ElicitationError::NotOffered(mode) => write!(
                f,
                "the client does not offer {mode}-mode elicitation (it did not advertise `elicitation.{mode}` in its `clientCapabilities`)"
            ),
            ElicitationError::Invalid(why) => write!(f, "the elicitation was not sent: {why}"),
            ElicitationError::UnknownId(id) => write!(
                f,
                "`{id}` is not an outstanding URL elicitation of this connection (never asked, declined, or completed already)"
            ),
            ElicitationError::Cancelled => f.write_str("the turn was cancelled while the user was asked"),
            ElicitationError::TimedOut => f.write_str("the client did not answer the elicitation in time"),
            ElicitationError::Closed => f.write_str("the connection closed before the client answered the elicitation"),
            ElicitationError::Refused(why) => write!(f, "the client refused the elicitation: {why}"),
            ElicitationError::Unfit(why) => write!(f, "the client's answer to the elicitation was refused: {why}"),
            ElicitationError::Audit(why) => write!(f, "audit log: {why}"),
        }
    }
}

impl std::error::Error for ElicitationError {}

impl From<ElicitationError> for Error {
    fn from(error: ElicitationError) -> Self {
        match error {
            ElicitationError::Cancelled => Error::Cancelled,
            ElicitationError::Audit(why) => Error::Audit(why),
            other => Error::other(other),
        }
    }
}

impl<T: Tier> Turn<'_, T> {
    /// Asks the user for structured input (`elicitation/create`, scoped to this session) and
    /// waits for the answer: accept (a form's content, checked against its schema), decline
    /// or cancel. The client must have advertised the mode; the question and the answer are
    /// audited first (`elicitation.create`, `elicitation.answer`). Waits at most
    /// `ServerOptions::permission_timeout`; a cancel of the turn ends the wait
    /// ([`ElicitationError::Cancelled`], which `?` turns into [`Error::Cancelled`]).
    pub async fn elicit(&mut self, elicitation: Elicitation) -> Result<ElicitationOutcome, ElicitationError> {
        let scope = self.scope();
        if scope.is_cancelled() {
            return Err(ElicitationError::Cancelled);
        }
        let elicitations = &scope.connection.elicitations;
        if !elicitation.offered_in(elicitations.offered()) {
            return Err(ElicitationError::NotOffered(elicitation.mode()));
        }
        elicitation.check().map_err(ElicitationError::Invalid)?;
        if let Some(id) = elicitation.url_id()
            && !elicitations.outstanding.insert(id)
        {
            return Err(ElicitationError::Invalid(format!(
                "the URL elicitation id `{id}` is already outstanding on this connection"
            )));
        }
        let answer = ask(scope, &elicitation).await;
        // A URL interaction is outstanding only once the user accepted it.
        if let Some(id) = elicitation.url_id()
            && !matches!(answer, Ok(ElicitationOutcome::Accept(_)))
        {
            elicitations.outstanding.remove(id);
        }
        answer
    }

    /// Tells the client that the URL interaction `id` (asked with [`Elicitation::url`] and
    /// accepted) is finished (`elicitation/complete`), once; audited first.
    pub async fn complete_elicitation(&mut self, id: &str) -> Result<(), ElicitationError> {
        let scope = self.scope();
        let connection = &scope.connection;
        if !connection.elicitations.outstanding.remove(id) {
            return Err(ElicitationError::UnknownId(id.to_string()));
        }
        let session = scope.session.id();
        (scope.audit(elicitation::completed(&connection.operator_id, Some(session), id)))
            .map_err(|error| ElicitationError::Audit(error.to_string()))?;
        let line = jsonrpc::encode_notification("elicitation/complete", &serde_json::json!({"elicitationId": id}));
        connection.outbox.send(line).await.map_err(|_| ElicitationError::Closed)
    }
}

/// Records, sends and awaits one question; records its answer (or why there is none).
async fn ask(scope: &TurnScope, elicitation: &Elicitation) -> Result<ElicitationOutcome, ElicitationError> {
    let connection = &scope.connection;
    let operator = &connection.operator_id;
    let session = scope.session.id();
    let params = elicitation.params(session);
    let key = elicitation::next_key();
    scope
        .announce_running()
        .map_err(|error| ElicitationError::Audit(error.to_string()))?;
    (scope.audit(elicitation::asked(operator, &key, &params, "operator", None)))
        .map_err(|error| ElicitationError::Audit(error.to_string()))?;
    let timeout = connection.permission_timeout;
    let answer = tokio::select! {
        biased;
        _ = scope.cancelled() => Err(ElicitationError::Cancelled),
        answer = connection.request("elicitation/create", &params, timeout) => match answer {
            Err(RequestFailure::TimedOut) => Err(ElicitationError::TimedOut),
            Err(RequestFailure::Closed) => Err(ElicitationError::Closed),
            Err(RequestFailure::Rpc(error)) => Err(ElicitationError::Refused(error.to_string())),
            Ok(raw) => elicitation::read_answer(&params, raw.get()).map_err(ElicitationError::Unfit),
        },
    };
    let by = match &answer {
        Ok(_) | Err(ElicitationError::Refused(_) | ElicitationError::Unfit(_)) => connection.client_name(),
        Err(_) => "agentacp".to_string(),
    };
    let recorded = answer.clone().map_err(|error| error.to_string());
    (scope.audit(elicitation::answered(
        operator,
        &key,
        Some(session),
        &recorded,
        &by,
        None,
    )))
    .map_err(|error| ElicitationError::Audit(error.to_string()))?;
    answer
}
