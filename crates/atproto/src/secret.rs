//! A wrapper that keeps secrets out of logs and error messages.

use std::fmt;

/// A secret value (an app password, an access or refresh JWT, a private key's
/// bytes). `Debug` prints `Secret(<redacted>)`; there is no `Display`; the
/// value is only reachable through [`Secret::expose`], so every use is visible
/// in the code.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret<T>(T);

impl<T> Secret<T> {
    /// Wraps a secret value.
    pub const fn new(value: T) -> Self {
        Self(value)
    }

    /// The secret itself: for the one place that must send or use it.
    pub const fn expose(&self) -> &T {
        &self.0
    }
}

impl<T> fmt::Debug for Secret<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(<redacted>)")
    }
}

impl From<String> for Secret<String> {
    fn from(value: String) -> Self {
        Self(value)
    }
}

impl From<&str> for Secret<String> {
    fn from(value: &str) -> Self {
        Self(value.to_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_never_prints_the_value() {
        let secret = Secret::new("hunter2-app-password".to_owned());
        let printed = format!("{secret:?} {:#?}", Some(&secret));
        assert!(!printed.contains("hunter2"), "{printed}");
        assert_eq!(secret.expose(), "hunter2-app-password");
    }
}
