//! The one error of the settings: which flag or key is wrong, and why.

/// A configuration error: names the flag or key and says what is wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {reason}")]
pub struct ConfigError {
    /// The flag and its key (`--web.listen-address (web.listen-address)`), a key alone
    /// (`collectors.infiniband.foo`), or `command line` for what the parser refused.
    pub(crate) field: String,
    /// What is wrong.
    pub(crate) reason: String,
}

impl ConfigError {
    /// An error of `field`.
    pub(crate) fn new(field: impl Into<String>, reason: impl Into<String>) -> ConfigError {
        ConfigError {
            field: field.into(),
            reason: reason.into(),
        }
    }
}
