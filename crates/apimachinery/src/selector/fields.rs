//! Field selectors: the grammar, escapes and matching of k8s.io/apimachinery
//! `pkg/fields/selector.go`. Which field names a resource supports is the server's business.

use std::fmt;

use super::SelectorError;

/// One term `field=value`, `field==value` or `field!=value`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldRequirement {
    /// The field path, e.g. `metadata.name`.
    pub field: String,
    /// `true` for `!=`.
    pub negated: bool,
    /// The unescaped value.
    pub value: String,
}

/// A parsed field selector: the AND of its terms, sorted like the real one.
/// `Display` gives the canonical (escaped) form.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldSelector {
    requirements: Vec<FieldRequirement>,
}

impl FieldSelector {
    /// Parses a selector as the `fieldSelector` query parameter carries it.
    /// The empty string selects everything. `\,`, `\=` and `\\` escape inside values.
    ///
    /// # Errors
    /// [`SelectorError::Field`] with the real parser's message, e.g.
    /// `invalid selector: 'foo'; can't understand 'foo'`.
    pub fn parse(text: &str) -> Result<Self, SelectorError> {
        let mut terms = split_terms(text);
        terms.sort_unstable();
        let mut requirements = Vec::new();
        for term in terms {
            if term.is_empty() {
                continue;
            }
            let Some((field, operator, value)) = split_term(term) else {
                return Err(SelectorError::Field(format!(
                    "invalid selector: '{text}'; can't understand '{term}'"
                )));
            };
            let value = unescape_value(value).map_err(SelectorError::Field)?;
            requirements.push(FieldRequirement {
                field: field.to_owned(),
                negated: operator == "!=",
                value,
            });
        }
        Ok(Self { requirements })
    }

    /// The field names the selector mentions, in order, for the server to check them.
    #[must_use]
    pub fn field_names(&self) -> Vec<&str> {
        self.requirements.iter().map(|r| r.field.as_str()).collect()
    }

    /// Whether an object matches; `value_of(field)` is the object's value of a field,
    /// `None` when it has none (compared as `""`, like the real `fields.Set`).
    pub fn matches(&self, value_of: impl Fn(&str) -> Option<String>) -> bool {
        self.requirements.iter().all(|requirement| {
            let actual = value_of(&requirement.field).unwrap_or_default();
            (actual == requirement.value) != requirement.negated
        })
    }

    /// Whether the selector selects everything.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.requirements.is_empty()
    }

    /// The terms, sorted.
    #[must_use]
    pub fn requirements(&self) -> &[FieldRequirement] {
        &self.requirements
    }

    /// `Some(value)` when the selector requires `field` to equal a value
    /// (`RequiresExactMatch` of the Go selector).
    #[must_use]
    pub fn exact_match(&self, field: &str) -> Option<&str> {
        self.requirements
            .iter()
            .find(|r| r.field == field && !r.negated)
            .map(|r| r.value.as_str())
    }

    /// `Some(name)` when the selector pins `metadata.name=<name>`.
    #[must_use]
    pub fn exact_name(&self) -> Option<&str> {
        self.exact_match("metadata.name")
    }
}

impl fmt::Display for FieldSelector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (index, requirement) in self.requirements.iter().enumerate() {
            if index > 0 {
                f.write_str(",")?;
            }
            let operator = if requirement.negated { "!=" } else { "=" };
            write!(
                f,
                "{}{operator}{}",
                requirement.field,
                escape_value(&requirement.value)
            )?;
        }
        Ok(())
    }
}

/// Splits on commas not preceded by an escaping backslash.
fn split_terms(text: &str) -> Vec<&str> {
    if text.is_empty() {
        return Vec::new();
    }
    let mut terms = Vec::new();
    let mut start = 0;
    let mut escaped = false;
    for (index, character) in text.char_indices() {
        if escaped {
            escaped = false;
        } else if character == '\\' {
            escaped = true;
        } else if character == ',' {
            terms.push(&text[start..index]);
            start = index + 1;
        }
    }
    terms.push(&text[start..]);
    terms
}

/// The first operator in the term wins, trying `!=`, `==`, `=` at each position.
fn split_term(term: &str) -> Option<(&str, &str, &str)> {
    for (index, _) in term.char_indices() {
        let remaining = &term[index..];
        for operator in ["!=", "==", "="] {
            if let Some(value) = remaining.strip_prefix(operator) {
                return Some((&term[..index], operator, value));
            }
        }
    }
    None
}

fn unescape_value(value: &str) -> Result<String, String> {
    if !value.contains(['\\', '=', ',']) {
        return Ok(value.to_owned());
    }
    let mut result = String::with_capacity(value.len());
    let mut escaped = false;
    for character in value.chars() {
        if escaped {
            match character {
                '\\' | '=' | ',' => result.push(character),
                other => {
                    return Err(format!(
                        "invalid field selector: invalid escape sequence: \\{other}"
                    ));
                }
            }
            escaped = false;
            continue;
        }
        match character {
            '\\' => escaped = true,
            // Go formats the rune with `%v`, which prints its code point number.
            '=' | ',' => {
                return Err(format!(
                    "invalid field selector: unescaped character in value: {}",
                    u32::from(character)
                ));
            }
            other => result.push(other),
        }
    }
    if escaped {
        return Err("invalid field selector: invalid escape sequence: \\".to_owned());
    }
    Ok(result)
}

fn escape_value(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace(',', "\\,")
        .replace('=', "\\=")
}
