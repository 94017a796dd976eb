//! Label selectors: the grammar, messages and matching of k8s.io/apimachinery
//! `pkg/labels/selector.go`.
//!
//! ```text
//! <selector>    ::= <requirement> | <requirement> "," <selector>
//! <requirement> ::= [!] KEY [ ("in" | "notin") "(" VALUES ")" | ("=" | "==" | "!=" | ">" | "<") VALUE ]
//! ```

use std::collections::BTreeMap;
use std::fmt;

use super::SelectorError;
use super::validation::{is_qualified_name, is_valid_label_value};

/// How a requirement relates a label to its values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operator {
    /// `k in (a,b)`: the label exists and has one of the values.
    In,
    /// `k notin (a,b)`: the label is absent or has none of the values.
    NotIn,
    /// `k=v`
    Equals,
    /// `k==v`
    DoubleEquals,
    /// `k!=v`: the label is absent or differs.
    NotEquals,
    /// `k`
    Exists,
    /// `!k`
    DoesNotExist,
    /// `k>5`: the label exists and is an integer greater than the value.
    GreaterThan,
    /// `k<5`: the label exists and is an integer less than the value.
    LessThan,
}

/// One term of a label selector.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LabelRequirement {
    /// The label key.
    pub key: String,
    /// The relation.
    pub operator: Operator,
    /// The values, sorted and without duplicates (as Go's `sets.String.List()`).
    pub values: Vec<String>,
}

impl LabelRequirement {
    /// Whether a set of labels satisfies this one term.
    #[must_use]
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        let value = labels.get(&self.key);
        let has = |v: &String| self.values.iter().any(|wanted| wanted == v);
        match self.operator {
            Operator::In | Operator::Equals | Operator::DoubleEquals => value.is_some_and(has),
            Operator::NotIn | Operator::NotEquals => !value.is_some_and(has),
            Operator::Exists => value.is_some(),
            Operator::DoesNotExist => value.is_none(),
            Operator::GreaterThan | Operator::LessThan => {
                let (Some(actual), [wanted]) = (value, self.values.as_slice()) else {
                    return false;
                };
                match (actual.parse::<i64>(), wanted.parse::<i64>()) {
                    (Ok(actual), Ok(wanted)) if self.operator == Operator::GreaterThan => {
                        actual > wanted
                    }
                    (Ok(actual), Ok(wanted)) => actual < wanted,
                    _ => false,
                }
            }
        }
    }
}

impl fmt::Display for LabelRequirement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.operator == Operator::DoesNotExist {
            f.write_str("!")?;
        }
        f.write_str(&self.key)?;
        let operator = match self.operator {
            Operator::Exists | Operator::DoesNotExist => return Ok(()),
            Operator::Equals => "=",
            Operator::DoubleEquals => "==",
            Operator::NotEquals => "!=",
            Operator::GreaterThan => ">",
            Operator::LessThan => "<",
            Operator::In => " in ",
            Operator::NotIn => " notin ",
        };
        f.write_str(operator)?;
        let values = self.values.join(",");
        if matches!(self.operator, Operator::In | Operator::NotIn) {
            write!(f, "({values})")
        } else {
            f.write_str(&values)
        }
    }
}

/// A parsed label selector: the AND of its requirements, sorted by key like the real one.
/// `Display` gives the canonical form the real server would print.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LabelSelector {
    requirements: Vec<LabelRequirement>,
}

impl LabelSelector {
    /// Parses a selector as the `labelSelector` query parameter carries it.
    /// The empty string selects everything.
    ///
    /// # Errors
    /// [`SelectorError::Label`] with the real parser's message, e.g.
    /// `unable to parse requirement: <nil>: Invalid value: "a@b": name part must consist of ...`.
    pub fn parse(text: &str) -> Result<Self, SelectorError> {
        let tokens = lex(text);
        let mut parser = Parser {
            tokens,
            position: 0,
        };
        let mut requirements = parser.parse().map_err(SelectorError::Label)?;
        requirements.sort_by(|a, b| a.key.cmp(&b.key));
        Ok(Self { requirements })
    }

    /// Whether the labels satisfy every requirement.
    #[must_use]
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.requirements.iter().all(|r| r.matches(labels))
    }

    /// Whether the selector selects everything.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.requirements.is_empty()
    }

    /// The requirements, sorted by key.
    #[must_use]
    pub fn requirements(&self) -> &[LabelRequirement] {
        &self.requirements
    }

    /// `Some(value)` when the selector requires `key` to equal exactly one value
    /// (`RequiresExactMatch` of the Go selector).
    #[must_use]
    pub fn exact_match(&self, key: &str) -> Option<&str> {
        let requirement = self.requirements.iter().find(|r| r.key == key)?;
        match (requirement.operator, requirement.values.as_slice()) {
            (Operator::Equals | Operator::DoubleEquals | Operator::In, [value]) => Some(value),
            _ => None,
        }
    }
}

impl fmt::Display for LabelSelector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (index, requirement) in self.requirements.iter().enumerate() {
            if index > 0 {
                f.write_str(",")?;
            }
            write!(f, "{requirement}")?;
        }
        Ok(())
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Token {
    Error,
    End,
    ClosedPar,
    Comma,
    DoesNotExist,
    DoubleEquals,
    Equals,
    GreaterThan,
    Identifier,
    In,
    LessThan,
    NotEquals,
    NotIn,
    OpenPar,
}

fn keyword(literal: &str) -> Option<Token> {
    Some(match literal {
        ")" => Token::ClosedPar,
        "," => Token::Comma,
        "!" => Token::DoesNotExist,
        "==" => Token::DoubleEquals,
        "=" => Token::Equals,
        ">" => Token::GreaterThan,
        "in" => Token::In,
        "<" => Token::LessThan,
        "!=" => Token::NotEquals,
        "notin" => Token::NotIn,
        "(" => Token::OpenPar,
        _ => return None,
    })
}

fn is_whitespace(byte: u8) -> bool {
    matches!(byte, b' ' | b'\t' | b'\r' | b'\n')
}

fn is_special(byte: u8) -> bool {
    matches!(byte, b'=' | b'!' | b'(' | b')' | b',' | b'>' | b'<')
}

/// The Go lexer: identifiers run until whitespace or a special symbol; special symbols
/// are read greedily as long as they still form an operator.
fn lex(text: &str) -> Vec<(Token, String)> {
    let bytes = text.as_bytes();
    let mut position = 0;
    let mut tokens = Vec::new();
    loop {
        while position < bytes.len() && is_whitespace(bytes[position]) {
            position += 1;
        }
        if position >= bytes.len() {
            tokens.push((Token::End, String::new()));
            return tokens;
        }
        let start = position;
        if is_special(bytes[position]) {
            let mut last: Option<(Token, usize)> = None;
            while position < bytes.len() && is_special(bytes[position]) {
                position += 1;
                if let Some(token) = keyword(&text[start..position]) {
                    last = Some((token, position));
                } else if last.is_some() {
                    position -= 1;
                    break;
                }
            }
            match last {
                Some((token, end)) => {
                    position = end;
                    tokens.push((token, text[start..end].to_owned()));
                }
                None => tokens.push((
                    Token::Error,
                    format!("error expected: keyword found '{}'", &text[start..position]),
                )),
            }
        } else {
            while position < bytes.len()
                && !is_special(bytes[position])
                && !is_whitespace(bytes[position])
            {
                position += 1;
            }
            let literal = &text[start..position];
            let token = keyword(literal).unwrap_or(Token::Identifier);
            tokens.push((token, literal.to_owned()));
        }
    }
}

struct Parser {
    tokens: Vec<(Token, String)>,
    position: usize,
}

/// In a value position `in` and `notin` are plain identifiers (`x in (in)`).
fn as_value(token: Token) -> Token {
    match token {
        Token::In | Token::NotIn => Token::Identifier,
        other => other,
    }
}

impl Parser {
    fn lookahead(&self) -> (Token, String) {
        // The token list always ends with `End`, and the parser never consumes past it.
        let (token, literal) = self
            .tokens
            .get(self.position)
            .cloned()
            .unwrap_or((Token::End, String::new()));
        (as_value(token), literal)
    }

    fn consume_raw(&mut self) -> (Token, String) {
        let item = self
            .tokens
            .get(self.position)
            .cloned()
            .unwrap_or((Token::End, String::new()));
        self.position += 1;
        item
    }

    fn consume(&mut self) -> (Token, String) {
        let (token, literal) = self.consume_raw();
        (as_value(token), literal)
    }

    fn parse(&mut self) -> Result<Vec<LabelRequirement>, String> {
        let mut requirements = Vec::new();
        loop {
            let (token, literal) = self.lookahead();
            match token {
                Token::Identifier | Token::DoesNotExist => {
                    let requirement = self
                        .parse_requirement()
                        .map_err(|e| format!("unable to parse requirement: {e}"))?;
                    requirements.push(requirement);
                    let (token, literal) = self.consume();
                    match token {
                        Token::End => return Ok(requirements),
                        Token::Comma => {
                            let (next, next_literal) = self.lookahead();
                            if next != Token::Identifier && next != Token::DoesNotExist {
                                return Err(format!(
                                    "found '{next_literal}', expected: identifier after ','"
                                ));
                            }
                        }
                        _ => {
                            return Err(format!(
                                "found '{literal}', expected: ',' or 'end of string'"
                            ));
                        }
                    }
                }
                Token::End => return Ok(requirements),
                _ => {
                    return Err(format!(
                        "found '{literal}', expected: !, identifier, or 'end of string'"
                    ));
                }
            }
        }
    }

    fn parse_requirement(&mut self) -> Result<LabelRequirement, String> {
        let (mut token, mut key) = self.consume();
        let negated = token == Token::DoesNotExist;
        if negated {
            (token, key) = self.consume();
        }
        if token != Token::Identifier {
            return Err(format!("found '{key}', expected: identifier"));
        }
        let key_errors = is_qualified_name(&key);
        if !key_errors.is_empty() {
            return Err(invalid("<nil>", &key, &key_errors));
        }
        let (next, _) = self.lookahead();
        if negated || next == Token::End || next == Token::Comma {
            let operator = if negated {
                Operator::DoesNotExist
            } else {
                Operator::Exists
            };
            return Ok(LabelRequirement {
                key,
                operator,
                values: Vec::new(),
            });
        }
        let (token, literal) = self.consume_raw();
        let operator = match token {
            Token::In => Operator::In,
            Token::Equals => Operator::Equals,
            Token::DoubleEquals => Operator::DoubleEquals,
            Token::GreaterThan => Operator::GreaterThan,
            Token::LessThan => Operator::LessThan,
            Token::NotIn => Operator::NotIn,
            Token::NotEquals => Operator::NotEquals,
            _ => {
                return Err(format!(
                    "found '{literal}', expected: in, notin, =, ==, !=, gt, lt"
                ));
            }
        };
        let mut values = match operator {
            Operator::In | Operator::NotIn => self.parse_values()?,
            _ => vec![self.parse_exact_value()?],
        };
        values.sort();
        values.dedup();
        new_requirement(key, operator, values)
    }

    fn parse_values(&mut self) -> Result<Vec<String>, String> {
        let (token, literal) = self.consume();
        if token != Token::OpenPar {
            return Err(format!("found '{literal}' expected: '('"));
        }
        let (token, literal) = self.lookahead();
        match token {
            Token::Identifier | Token::Comma => {
                let values = self.parse_identifiers()?;
                if self.consume().0 != Token::ClosedPar {
                    return Err(format!("found '{literal}', expected: ')'"));
                }
                Ok(values)
            }
            Token::ClosedPar => {
                self.consume();
                Ok(vec![String::new()])
            }
            _ => Err(format!(
                "found '{literal}', expected: ',', ')' or identifier"
            )),
        }
    }

    fn parse_identifiers(&mut self) -> Result<Vec<String>, String> {
        let mut values: Vec<String> = Vec::new();
        loop {
            let (token, literal) = self.consume();
            match token {
                Token::Identifier => {
                    values.push(literal);
                    let (next, next_literal) = self.lookahead();
                    match next {
                        Token::Comma => {}
                        Token::ClosedPar => return Ok(values),
                        _ => return Err(format!("found '{next_literal}', expected: ',' or ')'")),
                    }
                }
                Token::Comma => {
                    if values.is_empty() {
                        values.push(String::new());
                    }
                    match self.lookahead().0 {
                        Token::ClosedPar => {
                            values.push(String::new());
                            return Ok(values);
                        }
                        Token::Comma => {
                            self.consume();
                            values.push(String::new());
                        }
                        _ => {}
                    }
                }
                _ => return Err(format!("found '{literal}', expected: ',', or identifier")),
            }
        }
    }

    fn parse_exact_value(&mut self) -> Result<String, String> {
        let (token, _) = self.lookahead();
        if token == Token::End || token == Token::Comma {
            return Ok(String::new());
        }
        let (token, literal) = self.consume();
        if token == Token::Identifier {
            Ok(literal)
        } else {
            Err(format!("found '{literal}', expected: identifier"))
        }
    }
}

/// `field.Invalid(path, value, detail).Error()`.
fn invalid(path: &str, value: &str, errors: &[String]) -> String {
    format!("{path}: Invalid value: {value:?}: {}", errors.join("; "))
}

/// `NewRequirement`: the value checks, collected like a Go `field.ErrorList`.
fn new_requirement(
    key: String,
    operator: Operator,
    values: Vec<String>,
) -> Result<LabelRequirement, String> {
    let mut errors = Vec::new();
    if matches!(operator, Operator::GreaterThan | Operator::LessThan) {
        for (index, value) in values.iter().enumerate() {
            if value.parse::<i64>().is_err() {
                errors.push(invalid(
                    &format!("values[{index}]"),
                    value,
                    &["for 'Gt', 'Lt' operators, the value must be an integer".to_owned()],
                ));
            }
        }
    }
    for (index, value) in values.iter().enumerate() {
        let value_errors = is_valid_label_value(value);
        if !value_errors.is_empty() {
            errors.push(invalid(
                &format!("values[{index}][{key}]"),
                value,
                &value_errors,
            ));
        }
    }
    match errors.len() {
        0 => Ok(LabelRequirement {
            key,
            operator,
            values,
        }),
        1 => Err(errors.remove(0)),
        _ => Err(format!("[{}]", errors.join(", "))),
    }
}
