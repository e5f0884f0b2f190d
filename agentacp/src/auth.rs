//! TEMPORARY stand-in until the `tokens` branch lands (same API).
use std::path::Path;

/// A principal.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Identity(String);
impl Identity {
    /// New.
    pub fn new(id: impl Into<String>) -> Result<Identity, String> {
        Ok(Identity(id.into()))
    }
    /// Str.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}
impl std::fmt::Display for Identity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}
/// Tokens.
#[derive(Debug)]
pub struct TokenStore(Vec<(Identity, String)>);
impl TokenStore {
    /// Env.
    pub fn from_env() -> Result<Option<TokenStore>, String> {
        Ok(std::env::var("AGENTACP_TOKEN")
            .ok()
            .map(|t| TokenStore::single(Identity::new("token").unwrap(), &t)))
    }
    /// One.
    pub fn single(identity: Identity, token: &str) -> TokenStore {
        TokenStore(vec![(identity, token.to_string())])
    }
    /// File.
    pub fn from_file(path: &Path) -> Result<TokenStore, String> {
        let text = std::fs::read_to_string(path).map_err(|e| e.to_string())?;
        Ok(TokenStore(
            text.lines()
                .filter_map(|l| l.split_once(' '))
                .map(|(i, h)| (Identity(i.into()), h.trim_start_matches("plain:").to_string()))
                .collect(),
        ))
    }
    /// Verify.
    pub fn verify(&self, presented: &str) -> Option<Identity> {
        self.0.iter().find(|(_, t)| t == presented).map(|(i, _)| i.clone())
    }
    /// Len.
    pub fn len(&self) -> usize {
        self.0.len()
    }
    /// Empty.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}
/// Hash.
pub fn hash_token(token: &str) -> String {
    format!("plain:{token}")
}
