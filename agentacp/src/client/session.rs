//! What the agent said about each session: the modes, config options and slash commands of
//! its answers to `session/new`, `session/load` and `session/resume`, kept up to date by its
//! `current_mode_update`, `config_option_update` and `available_commands_update` updates.

use std::collections::HashMap;
use std::sync::Mutex;

use super::error::ClientError;
use super::events::Update;
use crate::sync::lock;
use crate::wire::default as wire;

/// One session as the agent described it (see [`Client::session_state`](super::Client::session_state)).
#[derive(Debug, Clone, Default, PartialEq)]
#[non_exhaustive]
pub struct SessionState {
    /// The modes the agent offers and the current one (`modes` of its answer); `None`: it
    /// offers no modes, and `session/set_mode` is not offered.
    pub modes: Option<wire::SessionModeState>,
    /// The session's config options with their current values; `None`: the agent offers
    /// none, and `session/set_config_option` is not offered.
    pub config_options: Option<Vec<wire::SessionConfigOption>>,
    /// The slash commands of the latest `available_commands_update`; `None`: none arrived.
    pub commands: Option<Vec<wire::AvailableCommand>>,
    /// The `_meta` of the agent's latest answer about the session (`session/new`, `load`,
    /// `resume`, `set_mode`, `set_config_option`).
    pub meta: Option<serde_json::Map<String, serde_json::Value>>,
}

impl SessionState {
    /// The config option `id`, when the agent offers it.
    pub fn config_option(&self, id: &str) -> Option<&wire::SessionConfigOption> {
        self.config_options.as_ref()?.iter().find(|option| option.id.0 == id)
    }

    /// The slash command `name` (without its `/`), when the agent offers it.
    pub fn command(&self, name: &str) -> Option<&wire::AvailableCommand> {
        self.commands.as_ref()?.iter().find(|command| command.name == name)
    }
}

/// The value to send in `session/set_config_option` for `option`, read from `text`: `true` or
/// `false` for a boolean option, else one of a select option's values.
pub fn config_value(
    option: &wire::SessionConfigOption,
    text: &str,
) -> Result<wire::SetSessionConfigOptionRequestKind, ClientError> {
    use wire::SetSessionConfigOptionRequestKind as Kind;
    match &option.kind {
        wire::SessionConfigOptionKind::Boolean(_) => match text {
            "true" | "on" => Ok(Kind::Boolean(wire::SetSessionConfigOptionRequestKindBoolean::new(true))),
            "false" | "off" => Ok(Kind::Boolean(wire::SetSessionConfigOptionRequestKindBoolean::new(
                false,
            ))),
            _ => Err(ClientError::InvalidState(format!(
                "`{}` is a boolean option: its value is `true` or `false`, not `{text}`",
                option.id
            ))),
        },
        wire::SessionConfigOptionKind::Select(select) => {
            let values = select_values(select);
            if values.iter().any(|value| value.0 == text) {
                Ok(Kind::ValueId(wire::SetSessionConfigOptionRequestKindValueId::new(
                    text.into(),
                )))
            } else {
                Err(ClientError::InvalidState(format!(
                    "`{text}` is not a value of `{}` (its values: {})",
                    option.id,
                    values.iter().map(|v| v.0.as_str()).collect::<Vec<_>>().join(", ")
                )))
            }
        }
    }
}

/// Every value of a select option, grouped or not.
pub fn select_values(select: &wire::SessionConfigSelect) -> Vec<&wire::SessionConfigValueId> {
    match &select.options {
        wire::SessionConfigSelectOptions::Ungrouped(options) => options.iter().map(|o| &o.value).collect(),
        wire::SessionConfigSelectOptions::Grouped(groups) => {
            groups.iter().flat_map(|g| g.options.iter().map(|o| &o.value)).collect()
        }
    }
}

/// The kept state of every session of one connection.
#[derive(Default)]
pub(crate) struct Sessions {
    states: Mutex<HashMap<String, SessionState>>,
}

impl Sessions {
    pub(crate) fn get(&self, session: &str) -> Option<SessionState> {
        lock(&self.states).get(session).cloned()
    }

    /// Changes the state of `session` (created when unknown).
    pub(crate) fn edit(&self, session: &str, change: impl FnOnce(&mut SessionState)) {
        change(lock(&self.states).entry(session.to_string()).or_default());
    }

    /// An answer describing the session (`session/new`, `load`, `resume`): its modes and
    /// config options replace the kept ones; the commands stay.
    pub(crate) fn answered(
        &self,
        session: &str,
        modes: Option<wire::SessionModeState>,
        config_options: Option<Vec<wire::SessionConfigOption>>,
        meta: Option<serde_json::Map<String, serde_json::Value>>,
    ) {
        self.edit(session, |state| {
            state.modes = modes;
            state.config_options = config_options;
            state.meta = meta;
        });
    }

    /// A `session/update`: mode, config options and commands are kept.
    pub(crate) fn observe(&self, session: &str, update: &Update) {
        match update {
            Update::CurrentMode(mode) => self.edit(session, |state| match &mut state.modes {
                Some(modes) => modes.current_mode_id = mode.current_mode_id.clone(),
                None => tracing::debug!(%session, "a mode update for a session without modes was ignored"),
            }),
            Update::ConfigOptions(update) => self.edit(session, |state| {
                state.config_options = Some(update.config_options.clone())
            }),
            Update::AvailableCommands(update) => self.edit(session, |state| {
                state.commands = Some(update.available_commands.clone())
            }),
            _ => {}
        }
    }

    pub(crate) fn forget(&self, session: &str) {
        lock(&self.states).remove(session);
    }
}
