//! What a server's manifest declares of the session surface beyond capabilities
//! (`metadata.agentacp`): modes, config options, slash commands and extension methods, as the
//! static [`Surface`] of an [`crate::spec::OperatorSpec`]; each session's current mode and
//! config values ([`Settings`]); and how they are shown on the wire.

use serde_json::{Value, json};

/// The declared session surface. Empty for clients and bridges.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Surface {
    /// `metadata.agentacp.modes`.
    pub modes: Option<Modes>,
    /// `metadata.agentacp.configOptions`, in order.
    pub config_options: &'static [ConfigOption],
    /// `metadata.agentacp.commands`, in order.
    pub commands: &'static [Command],
    /// `metadata.agentacp.extensions`.
    pub extensions: Extensions,
    /// `metadata.agentacp.auth`, in order: the ways to sign in over stdio.
    pub sign_in: &'static [SignIn],
}

/// One sign-in method (`metadata.agentacp.auth[]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SignIn {
    /// Its id (`methodId` of `authenticate`).
    pub id: &'static str,
    /// How the user signs in.
    pub kind: SignInKind,
    /// What an editor shows.
    pub name: &'static str,
    /// What it does.
    pub description: Option<&'static str>,
    /// `terminal`: the arguments the program is run with.
    pub args: &'static [&'static str],
    /// `terminal`: the environment variables set for that run.
    pub env: &'static [(&'static str, &'static str)],
}

/// How a user signs in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SignInKind {
    /// The operator answers `authenticate`.
    Agent,
    /// The client runs the program with the method's `args` in a terminal.
    Terminal,
}

impl SignIn {
    /// Its `authMethods` entry (the same as `scaffold-aip explain` prints).
    pub fn to_json(&self) -> Value {
        let kind = match self.kind {
            SignInKind::Agent => "agent",
            SignInKind::Terminal => "terminal",
        };
        let mut entry = json!({"id": self.id, "name": self.name, "type": kind});
        if let Some(description) = self.description {
            entry["description"] = json!(description);
        }
        if self.kind == SignInKind::Terminal {
            entry["args"] = json!(self.args);
            if !self.env.is_empty() {
                let env: serde_json::Map<String, Value> = self
                    .env
                    .iter()
                    .map(|(key, value)| (key.to_string(), json!(value)))
                    .collect();
                entry["env"] = Value::Object(env);
            }
        }
        entry
    }
}

/// The session modes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Modes {
    /// The mode a new session starts in.
    pub default: &'static str,
    /// Every mode, in order.
    pub available: &'static [Mode],
}

/// One session mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mode {
    /// Its id.
    pub id: &'static str,
    /// Its display name.
    pub name: &'static str,
    /// What it does.
    pub description: Option<&'static str>,
}

/// One config option.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConfigOption {
    /// Its id.
    pub id: &'static str,
    /// Its display name.
    pub name: &'static str,
    /// What it changes.
    pub description: Option<&'static str>,
    /// What an editor groups it under (`model`, `mode`, `thought_level`, ...).
    pub category: Option<&'static str>,
    /// Its values.
    pub kind: ConfigKind,
}

/// What values a config option takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConfigKind {
    /// One of `options`.
    Select {
        /// The value a new session starts with.
        default: &'static str,
        /// The values.
        options: &'static [Choice],
    },
    /// On or off.
    Boolean {
        /// The value a new session starts with.
        default: bool,
    },
}

/// One value of a `select` config option.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Choice {
    /// The value.
    pub value: &'static str,
    /// Its display name.
    pub name: &'static str,
    /// What it means.
    pub description: Option<&'static str>,
}

/// One slash command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Command {
    /// Its name, without the `/`.
    pub name: &'static str,
    /// What an editor shows beside it.
    pub description: &'static str,
    /// When it takes input: the hint for it.
    pub hint: Option<&'static str>,
}

/// The extension methods an operator answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Extensions {
    /// Requests.
    pub requests: &'static [&'static str],
    /// Notifications.
    pub notifications: &'static [&'static str],
}

impl Surface {
    /// Nothing declared.
    pub const NONE: Surface = Surface {
        modes: None,
        config_options: &[],
        commands: &[],
        extensions: Extensions {
            requests: &[],
            notifications: &[],
        },
        sign_in: &[],
    };

    /// The declared mode `id`.
    pub fn mode(&self, id: &str) -> Option<&'static Mode> {
        self.modes?.available.iter().find(|mode| mode.id == id)
    }

    /// The declared config option `id`.
    pub fn config_option(&self, id: &str) -> Option<&'static ConfigOption> {
        self.config_options.iter().find(|option| option.id == id)
    }

    /// The declared command `name`.
    pub fn command(&self, name: &str) -> Option<&'static Command> {
        self.commands.iter().find(|command| command.name == name)
    }

    /// A new session's settings: every default.
    pub fn defaults(&self) -> Settings {
        Settings {
            mode: self.modes.map(|modes| modes.default.to_string()),
            values: self
                .config_options
                .iter()
                .map(|option| match option.kind {
                    ConfigKind::Select { default, .. } => ConfigValue::Value(default.to_string()),
                    ConfigKind::Boolean { default } => ConfigValue::Boolean(default),
                })
                .collect(),
        }
    }

    /// `modes` of a session setup answer (`SessionModeState`), `None` without modes.
    pub fn modes_json(&self, settings: &Settings) -> Option<Value> {
        let modes = self.modes?;
        let available: Vec<Value> = modes
            .available
            .iter()
            .map(|mode| {
                let mut entry = json!({"id": mode.id, "name": mode.name});
                if let Some(description) = mode.description {
                    entry["description"] = json!(description);
                }
                entry
            })
            .collect();
        let current = settings.mode.as_deref().unwrap_or(modes.default);
        Some(json!({"currentModeId": current, "availableModes": available}))
    }

    /// `configOptions` with their current values, `None` without any. Boolean options are
    /// left out unless the client advertised `session.configOptions.boolean`.
    pub fn config_options_json(&self, settings: &Settings, booleans: bool) -> Option<Value> {
        if self.config_options.is_empty() {
            return None;
        }
        let options: Vec<Value> = self
            .config_options
            .iter()
            .zip(&settings.values)
            .filter(|(option, _)| booleans || !matches!(option.kind, ConfigKind::Boolean { .. }))
            .map(|(option, value)| {
                let mut entry = json!({"id": option.id, "name": option.name});
                if let Some(description) = option.description {
                    entry["description"] = json!(description);
                }
                if let Some(category) = option.category {
                    entry["category"] = json!(category);
                }
                match (option.kind, value) {
                    (ConfigKind::Select { options, .. }, ConfigValue::Value(current)) => {
                        entry["type"] = json!("select");
                        entry["currentValue"] = json!(current);
                        entry["options"] = options
                            .iter()
                            .map(|choice| {
                                let mut entry = json!({"value": choice.value, "name": choice.name});
                                if let Some(description) = choice.description {
                                    entry["description"] = json!(description);
                                }
                                entry
                            })
                            .collect();
                    }
                    (_, ConfigValue::Boolean(current)) => {
                        entry["type"] = json!("boolean");
                        entry["currentValue"] = json!(current);
                    }
                    (_, ConfigValue::Value(current)) => {
                        entry["type"] = json!("select");
                        entry["currentValue"] = json!(current);
                    }
                }
                entry
            })
            .collect();
        Some(Value::Array(options))
    }

    /// The `available_commands_update` of `names` (each a declared command), `None` when no
    /// command is declared.
    pub fn commands_update(&self, names: &[&str]) -> Option<Value> {
        if self.commands.is_empty() {
            return None;
        }
        let commands: Vec<Value> = self
            .commands
            .iter()
            .filter(|command| names.contains(&command.name))
            .map(|command| {
                let mut entry = json!({"name": command.name, "description": command.description});
                if let Some(hint) = command.hint {
                    entry["input"] = json!({"hint": hint});
                }
                entry
            })
            .collect();
        Some(json!({"sessionUpdate": "available_commands_update", "availableCommands": commands}))
    }

    /// Every declared command's name.
    pub fn command_names(&self) -> Vec<&'static str> {
        self.commands.iter().map(|command| command.name).collect()
    }

    /// Checks `value` for config option `id`: the option is declared and the value is one of
    /// its values (a `select`) or a boolean (a `boolean`).
    pub fn check_config_value(&self, id: &str, value: &ConfigValue) -> Result<(), String> {
        let option = self
            .config_option(id)
            .ok_or_else(|| format!("no config option `{id}`; the manifest declares {}", self.config_ids()))?;
        match (option.kind, value) {
            (ConfigKind::Select { options, .. }, ConfigValue::Value(value)) => {
                if options.iter().any(|choice| choice.value == value) {
                    Ok(())
                } else {
                    let values: Vec<&str> = options.iter().map(|choice| choice.value).collect();
                    Err(format!(
                        "`{value}` is not a value of `{id}`; its values are `{}`",
                        values.join("`, `")
                    ))
                }
            }
            (ConfigKind::Boolean { .. }, ConfigValue::Boolean(_)) => Ok(()),
            (ConfigKind::Select { .. }, ConfigValue::Boolean(_)) => {
                Err(format!("`{id}` takes one of its values, not a boolean"))
            }
            (ConfigKind::Boolean { .. }, ConfigValue::Value(_)) => Err(format!("`{id}` takes a boolean")),
        }
    }

    fn config_ids(&self) -> String {
        let ids: Vec<String> = self.config_options.iter().map(|o| format!("`{}`", o.id)).collect();
        if ids.is_empty() { "none".into() } else { ids.join(", ") }
    }

    /// Checks a mode id: one the manifest declares.
    pub fn check_mode(&self, id: &str) -> Result<(), String> {
        let Some(modes) = self.modes else {
            return Err("the manifest declares no modes".into());
        };
        if self.mode(id).is_some() {
            return Ok(());
        }
        let ids: Vec<&str> = modes.available.iter().map(|mode| mode.id).collect();
        Err(format!("no mode `{id}`; the manifest declares `{}`", ids.join("`, `")))
    }
}

/// A config option's value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConfigValue {
    /// A `select`'s value.
    Value(String),
    /// A `boolean`'s value.
    Boolean(bool),
}

impl ConfigValue {
    /// A value as the wire has it: a string (a `select`'s value) or a boolean; `None` for
    /// anything else.
    pub fn from_json(value: &Value) -> Option<ConfigValue> {
        match value {
            Value::String(value) => Some(ConfigValue::Value(value.clone())),
            Value::Bool(value) => Some(ConfigValue::Boolean(*value)),
            _ => None,
        }
    }

    /// The value as a string, for a `select`.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            ConfigValue::Value(value) => Some(value),
            ConfigValue::Boolean(_) => None,
        }
    }

    /// The value as a boolean, for a `boolean`.
    pub fn as_bool(&self) -> Option<bool> {
        match self {
            ConfigValue::Boolean(value) => Some(*value),
            ConfigValue::Value(_) => None,
        }
    }

    /// As JSON (a string or a boolean).
    pub fn to_json(&self) -> Value {
        match self {
            ConfigValue::Value(value) => json!(value),
            ConfigValue::Boolean(value) => json!(value),
        }
    }
}

/// A session's current mode and config values, in the order the manifest declares the options.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Settings {
    /// The current mode, when modes are declared.
    pub mode: Option<String>,
    /// Each declared config option's value, in declaration order.
    pub values: Vec<ConfigValue>,
}

impl Settings {
    /// Sets config option `index` (its place in the declaration); returns the old value.
    fn set(&mut self, index: usize, value: ConfigValue) -> Option<ConfigValue> {
        self.values.get_mut(index).map(|slot| std::mem::replace(slot, value))
    }

    /// Sets option `id` of `surface` to `value` (already checked); returns the old value.
    pub fn set_config(&mut self, surface: &Surface, id: &str, value: ConfigValue) -> Option<ConfigValue> {
        let index = surface.config_options.iter().position(|option| option.id == id)?;
        self.set(index, value)
    }

    /// The value of option `id` of `surface`.
    pub fn config(&self, surface: &Surface, id: &str) -> Option<ConfigValue> {
        let index = surface.config_options.iter().position(|option| option.id == id)?;
        self.values.get(index).cloned()
    }

    /// Takes in what a stored update says of the settings (`current_mode_update`,
    /// `config_option_update`), for a session loaded or resumed from its history; anything not
    /// declared is ignored.
    pub fn apply_stored(&mut self, surface: &Surface, update: &Value) {
        match update.get("sessionUpdate").and_then(Value::as_str) {
            Some("current_mode_update") => {
                if let Some(mode) = update.get("currentModeId").and_then(Value::as_str)
                    && surface.mode(mode).is_some()
                {
                    self.mode = Some(mode.to_string());
                }
            }
            Some("config_option_update") => {
                let Some(options) = update.get("configOptions").and_then(Value::as_array) else {
                    return;
                };
                for option in options {
                    let Some(id) = option.get("id").and_then(Value::as_str) else {
                        continue;
                    };
                    let Some(value) = option.get("currentValue").and_then(ConfigValue::from_json) else {
                        continue;
                    };
                    if surface.check_config_value(id, &value).is_ok() {
                        self.set_config(surface, id, value);
                    }
                }
            }
            _ => {}
        }
    }
}

/// A prompt that starts with a declared slash command: `/name input`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandInput {
    /// The command, as declared.
    pub command: &'static Command,
    /// What follows the name, trimmed (empty when nothing does).
    pub input: String,
}

impl CommandInput {
    /// The declared command a prompt's first text starts with, if any.
    pub fn parse(surface: &Surface, text: &str) -> Option<CommandInput> {
        let rest = text.trim_start().strip_prefix('/')?;
        let (name, input) = rest.split_once(char::is_whitespace).unwrap_or((rest, ""));
        Some(CommandInput {
            command: surface.command(name)?,
            input: input.trim().to_string(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SURFACE: Surface = Surface {
        modes: Some(Modes {
            default: "ask",
            available: &[
                Mode {
                    id: "ask",
                    name: "Ask",
                    description: None,
                },
                Mode {
                    id: "code",
                    name: "Code",
                    description: Some("Writes code"),
                },
            ],
        }),
        config_options: &[
            ConfigOption {
                id: "model",
                name: "Model",
                description: None,
                category: Some("model"),
                kind: ConfigKind::Select {
                    default: "fast",
                    options: &[
                        Choice {
                            value: "fast",
                            name: "Fast",
                            description: None,
                        },
                        Choice {
                            value: "deep",
                            name: "Deep",
                            description: None,
                        },
                    ],
                },
            },
            ConfigOption {
                id: "verbose",
                name: "Verbose",
                description: None,
                category: None,
                kind: ConfigKind::Boolean { default: false },
            },
        ],
        commands: &[Command {
            name: "review",
            description: "Review",
            hint: Some("what to review"),
        }],
        extensions: Extensions {
            requests: &[],
            notifications: &[],
        },
        sign_in: &[],
    };

    #[test]
    fn defaults_render_as_the_wire_shapes() {
        let settings = SURFACE.defaults();
        assert_eq!(
            SURFACE.modes_json(&settings).unwrap(),
            json!({"currentModeId": "ask", "availableModes": [
                {"id": "ask", "name": "Ask"}, {"id": "code", "name": "Code", "description": "Writes code"}]})
        );
        let options = SURFACE.config_options_json(&settings, true).unwrap();
        assert_eq!(options[0]["currentValue"], "fast");
        assert_eq!(options[0]["type"], "select");
        assert_eq!(
            options[1],
            json!({"id": "verbose", "name": "Verbose", "type": "boolean", "currentValue": false})
        );
        let without_booleans = SURFACE.config_options_json(&settings, false).unwrap();
        assert_eq!(
            without_booleans.as_array().unwrap().len(),
            1,
            "no boolean for a client that did not ask"
        );
        assert_eq!(
            SURFACE.commands_update(&["review"]).unwrap()["availableCommands"],
            json!([{"name": "review", "description": "Review", "input": {"hint": "what to review"}}])
        );
    }

    #[test]
    fn values_are_checked_against_the_declarations() {
        assert!(
            SURFACE
                .check_config_value("model", &ConfigValue::Value("deep".into()))
                .is_ok()
        );
        assert!(
            SURFACE
                .check_config_value("model", &ConfigValue::Value("huge".into()))
                .is_err()
        );
        assert!(
            SURFACE
                .check_config_value("model", &ConfigValue::Boolean(true))
                .is_err()
        );
        assert!(
            SURFACE
                .check_config_value("verbose", &ConfigValue::Boolean(true))
                .is_ok()
        );
        assert!(SURFACE.check_config_value("nope", &ConfigValue::Boolean(true)).is_err());
        assert!(SURFACE.check_mode("code").is_ok());
        assert!(SURFACE.check_mode("yolo").unwrap_err().contains("`ask`, `code`"));
    }

    #[test]
    fn stored_updates_restore_only_declared_settings() {
        let mut settings = SURFACE.defaults();
        settings.apply_stored(
            &SURFACE,
            &json!({"sessionUpdate": "current_mode_update", "currentModeId": "code"}),
        );
        settings.apply_stored(
            &SURFACE,
            &json!({"sessionUpdate": "current_mode_update", "currentModeId": "yolo"}),
        );
        settings.apply_stored(
            &SURFACE,
            &json!({"sessionUpdate": "config_option_update", "configOptions": [
                {"id": "model", "currentValue": "deep"}, {"id": "model2", "currentValue": "x"},
                {"id": "verbose", "currentValue": "nope"}]}),
        );
        assert_eq!(settings.mode.as_deref(), Some("code"));
        assert_eq!(
            settings.config(&SURFACE, "model"),
            Some(ConfigValue::Value("deep".into()))
        );
        assert_eq!(settings.config(&SURFACE, "verbose"), Some(ConfigValue::Boolean(false)));
    }

    #[test]
    fn a_prompt_names_a_declared_command_or_none() {
        let input = CommandInput::parse(&SURFACE, "  /review the parser ").unwrap();
        assert_eq!((input.command.name, input.input.as_str()), ("review", "the parser"));
        assert_eq!(CommandInput::parse(&SURFACE, "/review").unwrap().input, "");
        assert_eq!(CommandInput::parse(&SURFACE, "/deploy now"), None);
        assert_eq!(CommandInput::parse(&SURFACE, "review"), None);
    }
}
