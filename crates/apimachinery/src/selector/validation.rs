//! The name checks of k8s.io/apimachinery `pkg/util/validation`, with the real messages.
//!
//! Each function returns the list of problems (empty = valid), as the Go functions do,
//! so callers can join them with `"; "` exactly like the real server.

const QUALIFIED_NAME_FMT: &str = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]";
const QUALIFIED_NAME_ERR: &str = "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
const QUALIFIED_NAME_MAX: usize = 63;
const LABEL_VALUE_FMT: &str = "(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?";
const LABEL_VALUE_ERR: &str = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
const LABEL_VALUE_MAX: usize = 63;
const DNS1123_LABEL_FMT: &str = "[a-z0-9]([-a-z0-9]*[a-z0-9])?";
const DNS1123_LABEL_ERR: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character";
const DNS1123_LABEL_MAX: usize = 63;
const DNS1123_SUBDOMAIN_FMT: &str =
    "[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*";
const DNS1123_SUBDOMAIN_ERR: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character";
const DNS1123_SUBDOMAIN_MAX: usize = 253;

/// `RegexError` of the Go package, down to its odd `',  or '` spacing.
fn regex_error(message: &str, format: &str, examples: &[&str]) -> String {
    let mut text = format!("{message} (e.g. ");
    for (index, example) in examples.iter().enumerate() {
        if index > 0 {
            text.push_str(" or ");
        }
        text.push_str(&format!("'{example}', "));
    }
    text.push_str(&format!("regex used for validation is '{format}')"));
    text
}

fn max_len_error(length: usize) -> String {
    format!("must be no more than {length} characters")
}

const EMPTY_ERROR: &str = "must be non-empty";

/// `([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]`
fn is_qualified_name_part(name: &str) -> bool {
    let bytes = name.as_bytes();
    match (bytes.first(), bytes.last()) {
        (Some(first), Some(last)) => {
            first.is_ascii_alphanumeric()
                && last.is_ascii_alphanumeric()
                && bytes
                    .iter()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        }
        _ => false,
    }
}

/// `[a-z0-9]([-a-z0-9]*[a-z0-9])?`
fn is_dns1123_label_part(label: &str) -> bool {
    let bytes = label.as_bytes();
    let alnum = |b: &u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    match (bytes.first(), bytes.last()) {
        (Some(first), Some(last)) => {
            alnum(first) && alnum(last) && bytes.iter().all(|b| alnum(b) || *b == b'-')
        }
        _ => false,
    }
}

/// A label key or annotation key: `[prefix/]name`, the prefix a DNS subdomain.
#[must_use]
pub fn is_qualified_name(value: &str) -> Vec<String> {
    let parts: Vec<&str> = value.split('/').collect();
    let mut errors = Vec::new();
    let name = match parts.as_slice() {
        [name] => *name,
        [prefix, name] => {
            if prefix.is_empty() {
                errors.push(format!("prefix part {EMPTY_ERROR}"));
            } else {
                errors.extend(
                    is_dns1123_subdomain(prefix)
                        .into_iter()
                        .map(|message| format!("prefix part {message}")),
                );
            }
            *name
        }
        _ => {
            return vec![format!(
                "a qualified name {} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')",
                regex_error(
                    QUALIFIED_NAME_ERR,
                    QUALIFIED_NAME_FMT,
                    &["MyName", "my.name", "123-abc"]
                )
            )];
        }
    };
    if name.is_empty() {
        errors.push(format!("name part {EMPTY_ERROR}"));
    } else if name.len() > QUALIFIED_NAME_MAX {
        errors.push(format!("name part {}", max_len_error(QUALIFIED_NAME_MAX)));
    }
    if !is_qualified_name_part(name) {
        errors.push(format!(
            "name part {}",
            regex_error(
                QUALIFIED_NAME_ERR,
                QUALIFIED_NAME_FMT,
                &["MyName", "my.name", "123-abc"]
            )
        ));
    }
    errors
}

/// A label value: empty, or a qualified name part of at most 63 characters.
#[must_use]
pub fn is_valid_label_value(value: &str) -> Vec<String> {
    let mut errors = Vec::new();
    if value.len() > LABEL_VALUE_MAX {
        errors.push(max_len_error(LABEL_VALUE_MAX));
    }
    if !value.is_empty() && !is_qualified_name_part(value) {
        errors.push(regex_error(
            LABEL_VALUE_ERR,
            LABEL_VALUE_FMT,
            &["MyValue", "my_value", "12345"],
        ));
    }
    errors
}

/// An RFC 1123 label (namespace names, most resource names of the core group).
#[must_use]
pub fn is_dns1123_label(value: &str) -> Vec<String> {
    let mut errors = Vec::new();
    if value.len() > DNS1123_LABEL_MAX {
        errors.push(max_len_error(DNS1123_LABEL_MAX));
    }
    if !is_dns1123_label_part(value) {
        errors.push(regex_error(
            DNS1123_LABEL_ERR,
            DNS1123_LABEL_FMT,
            &["my-name", "123-abc"],
        ));
    }
    errors
}

/// An RFC 1035 label (Service names: a letter first).
#[must_use]
pub fn is_dns1035_label(value: &str) -> Vec<String> {
    let mut errors = Vec::new();
    if value.len() > DNS1123_LABEL_MAX {
        errors.push(max_len_error(DNS1123_LABEL_MAX));
    }
    let starts_with_letter = value.as_bytes().first().is_some_and(u8::is_ascii_lowercase);
    if !(starts_with_letter && is_dns1123_label_part(value)) {
        errors.push(regex_error(
            "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character",
            "[a-z]([-a-z0-9]*[a-z0-9])?",
            &["my-name", "abc-123"],
        ));
    }
    errors
}

/// A name that can be a path segment (`path.IsValidPathSegmentName`: RBAC object names).
#[must_use]
pub fn is_valid_path_segment_name(value: &str) -> Vec<String> {
    if value == "." || value == ".." {
        return vec![format!("may not be '{value}'")];
    }
    ["/", "%"]
        .iter()
        .filter(|illegal| value.contains(*illegal))
        .map(|illegal| format!("may not contain '{illegal}'"))
        .collect()
}

/// An RFC 1123 subdomain (object names, label key prefixes). Its dot-separated parts have
/// no length limit of their own: only the whole is limited to 253 characters.
#[must_use]
pub fn is_dns1123_subdomain(value: &str) -> Vec<String> {
    let mut errors = Vec::new();
    if value.len() > DNS1123_SUBDOMAIN_MAX {
        errors.push(max_len_error(DNS1123_SUBDOMAIN_MAX));
    }
    if !value.split('.').all(is_dns1123_label_part) {
        errors.push(regex_error(
            DNS1123_SUBDOMAIN_ERR,
            DNS1123_SUBDOMAIN_FMT,
            &["example.com"],
        ));
    }
    errors
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_subdomain_of_253_characters_without_dots_is_valid() {
        assert!(is_dns1123_subdomain(&"a".repeat(253)).is_empty());
        assert_eq!(
            is_dns1123_subdomain(&"a".repeat(254)),
            ["must be no more than 253 characters"]
        );
        assert_eq!(
            is_dns1123_label(&"a".repeat(64)),
            ["must be no more than 63 characters"]
        );
    }

    #[test]
    fn service_names_start_with_a_letter() {
        assert!(is_dns1035_label("web-1").is_empty());
        assert_eq!(is_dns1035_label("1web").len(), 1);
        assert_eq!(is_valid_path_segment_name(".."), ["may not be '..'"]);
        assert_eq!(
            is_valid_path_segment_name("a/b%"),
            ["may not contain '/'", "may not contain '%'"]
        );
    }

    #[test]
    fn qualified_names() {
        assert!(is_qualified_name("app").is_empty());
        assert!(is_qualified_name("app.kubernetes.io/name").is_empty());
        assert!(is_qualified_name("A_b-9").is_empty());
        assert_eq!(
            is_qualified_name("/app"),
            vec!["prefix part must be non-empty"]
        );
        assert_eq!(
            is_qualified_name("a/b/c")[0],
            "a qualified name must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
        );
        assert!(is_qualified_name("-app")[0].starts_with("name part must consist"));
        assert!(
            is_qualified_name("Example.com/app")[0]
                .starts_with("prefix part a lowercase RFC 1123 subdomain")
        );
        assert_eq!(
            is_qualified_name(&"a".repeat(64)),
            vec!["name part must be no more than 63 characters"]
        );
        assert_eq!(
            is_qualified_name("app/"),
            vec![
                "name part must be non-empty",
                "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
            ]
        );
    }

    #[test]
    fn label_values() {
        assert!(is_valid_label_value("").is_empty());
        assert!(is_valid_label_value("v1.2_x-Y").is_empty());
        assert!(!is_valid_label_value("a b").is_empty());
        assert!(!is_valid_label_value("a.").is_empty());
        assert_eq!(
            is_valid_label_value(&"a".repeat(64)),
            vec!["must be no more than 63 characters"]
        );
    }

    #[test]
    fn dns_names() {
        assert!(is_dns1123_subdomain("my-app.example.com").is_empty());
        assert!(!is_dns1123_subdomain("My-app").is_empty());
        assert!(!is_dns1123_subdomain("a..b").is_empty());
        assert!(!is_dns1123_subdomain("").is_empty());
        assert!(is_dns1123_label("default").is_empty());
        assert!(!is_dns1123_label("a.b").is_empty());
    }
}
