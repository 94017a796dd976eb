//! The one cap on what a condition message, a `status.message` or an Event
//! note says: a status is not a log, and the API server refuses an Event
//! whose note is over 1 KiB. Every controller's conditions and Events go
//! through [`cap`].

/// Longest message written to a condition, `status.message` or an Event note (bytes).
pub const MAX_MESSAGE_LEN: usize = 1024;

/// `message`, cut to [`MAX_MESSAGE_LEN`] bytes on a character boundary and
/// ending in `...` when it was cut.
#[must_use]
pub fn cap(message: &str) -> String {
    if message.len() <= MAX_MESSAGE_LEN {
        return message.to_owned();
    }
    let mut end = MAX_MESSAGE_LEN - 3;
    while !message.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}...", &message[..end])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_messages_are_capped_on_a_char_boundary() {
        let long = "é".repeat(MAX_MESSAGE_LEN);
        let capped = cap(&long);
        assert!(capped.len() <= MAX_MESSAGE_LEN);
        assert!(capped.ends_with("..."));
        assert_eq!(cap("short"), "short");
        let exact = "a".repeat(MAX_MESSAGE_LEN);
        assert_eq!(cap(&exact), exact, "a message at the cap is kept whole");
    }
}
