//! The method table: every ACP method of one revision, which side handles it, and its
//! request / response / notification types, from `meta.json` and the `x-side` / `x-method`
//! annotations on `$defs`.

use std::collections::BTreeMap;

use serde_json::Value;

/// Which side handles a method.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Side {
    /// The agent handles it (the client sends it).
    Agent,
    /// The client handles it (the agent sends it).
    Client,
    /// Either side (`$/cancel_request`).
    Protocol,
}

/// One method.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Method {
    /// The wire name (`session/prompt`).
    pub name: String,
    /// Who handles it.
    pub side: Side,
    /// The request params type, for requests.
    pub request: Option<String>,
    /// The result type, for requests.
    pub response: Option<String>,
    /// The params type, for notifications.
    pub notification: Option<String>,
}

/// The methods of one revision, sorted by side then name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MethodTable {
    /// Every method.
    pub methods: Vec<Method>,
}

impl MethodTable {
    /// Builds the table; `Err` says what does not fit (a method in `meta.json` with no type,
    /// an annotated type whose method `meta.json` does not list, or an unknown side).
    pub fn read(schema: &Value, meta: &Value) -> Result<Self, String> {
        let mut methods: BTreeMap<String, Method> = BTreeMap::new();
        for (group, side) in [
            ("agentMethods", Side::Agent),
            ("clientMethods", Side::Client),
            ("protocolMethods", Side::Protocol),
        ] {
            for name in meta
                .get(group)
                .and_then(Value::as_object)
                .into_iter()
                .flat_map(|m| m.values())
            {
                let name = name
                    .as_str()
                    .ok_or_else(|| format!("{group}: a method name is not a string"))?;
                methods.insert(
                    name.to_string(),
                    Method {
                        name: name.to_string(),
                        side,
                        request: None,
                        response: None,
                        notification: None,
                    },
                );
            }
        }
        let defs = schema
            .get("$defs")
            .and_then(Value::as_object)
            .ok_or("schema has no $defs")?;
        for (def, body) in defs {
            let Some(name) = body.get("x-method").and_then(Value::as_str) else {
                continue;
            };
            let method = methods
                .get_mut(name)
                .ok_or_else(|| format!("{def} is annotated with method `{name}`, which meta.json does not list"))?;
            let slot = if def.ends_with("Request") {
                &mut method.request
            } else if def.ends_with("Response") {
                &mut method.response
            } else if def.ends_with("Notification") {
                &mut method.notification
            } else {
                return Err(format!(
                    "{def}: cannot tell whether it is a request, response or notification"
                ));
            };
            *slot = Some(def.clone());
        }
        let methods: Vec<Method> = methods.into_values().collect();
        if let Some(m) = methods.iter().find(|m| m.request.is_none() && m.notification.is_none()) {
            return Err(format!("method `{}` has no request or notification type", m.name));
        }
        let mut methods = methods;
        methods.sort_by(|a, b| (a.side, &a.name).cmp(&(b.side, &b.name)));
        Ok(MethodTable { methods })
    }

    /// The method with this wire name.
    pub fn get(&self, name: &str) -> Option<&Method> {
        self.methods.iter().find(|m| m.name == name)
    }
}
