//! String formats the real server validates (kube-openapi `strfmt.Default`), with the format
//! names normalized without dashes (`date-time` -> `datetime`).

use std::net::IpAddr;
use std::sync::LazyLock;

use regex::Regex;

fn lazy(pattern: &str) -> Option<Regex> {
    Regex::new(pattern).ok()
}

static UUID: LazyLock<Option<Regex>> = LazyLock::new(|| {
    lazy(r"(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}$")
});
static UUID3: LazyLock<Option<Regex>> = LazyLock::new(|| {
    lazy(r"(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?3[0-9a-f]{3}-?[0-9a-f]{4}-?[0-9a-f]{12}$")
});
static UUID4: LazyLock<Option<Regex>> = LazyLock::new(|| {
    lazy(r"(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?4[0-9a-f]{3}-?[89ab][0-9a-f]{3}-?[0-9a-f]{12}$")
});
static UUID5: LazyLock<Option<Regex>> = LazyLock::new(|| {
    lazy(r"(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?5[0-9a-f]{3}-?[89ab][0-9a-f]{3}-?[0-9a-f]{12}$")
});
static HOSTNAME: LazyLock<Option<Regex>> = LazyLock::new(|| {
    lazy(
        r"^([a-zA-Z0-9\p{S}\p{L}]((-?[a-zA-Z0-9\p{S}\p{L}]{0,62})?)|([a-zA-Z0-9\p{S}\p{L}](([a-zA-Z0-9-\p{S}\p{L}]{0,61}[a-zA-Z0-9\p{S}\p{L}])?)(\.)){1,}([a-zA-Z\p{L}]){2,63})$",
    )
});
static MAC: LazyLock<Option<Regex>> = LazyLock::new(|| {
    lazy(
        r"(?i)^([0-9a-f]{2}([:-][0-9a-f]{2}){5}|[0-9a-f]{2}([:-][0-9a-f]{2}){7}|[0-9a-f]{2}([:-][0-9a-f]{2}){19}|[0-9a-f]{4}(\.[0-9a-f]{4}){2}|[0-9a-f]{4}(\.[0-9a-f]{4}){3}|[0-9a-f]{4}(\.[0-9a-f]{4}){9})$",
    )
});
static HEXCOLOR: LazyLock<Option<Regex>> =
    LazyLock::new(|| lazy(r"^#?([0-9a-fA-F]{3}|[0-9a-fA-F]{6})$"));
static RGBCOLOR: LazyLock<Option<Regex>> = LazyLock::new(|| {
    lazy(
        r"^rgb\(\s*(0|[1-9]\d?|1\d\d?|2[0-4]\d|25[0-5])\s*,\s*(0|[1-9]\d?|1\d\d?|2[0-4]\d|25[0-5])\s*,\s*(0|[1-9]\d?|1\d\d?|2[0-4]\d|25[0-5])\s*\)$",
    )
});
static SSN: LazyLock<Option<Regex>> = LazyLock::new(|| lazy(r"^\d{3}[- ]?\d{2}[- ]?\d{4}$"));
static BSON_OBJECT_ID: LazyLock<Option<Regex>> = LazyLock::new(|| lazy(r"^[0-9a-fA-F]{24}$"));
static URI_SCHEME: LazyLock<Option<Regex>> = LazyLock::new(|| lazy(r"^[a-zA-Z][a-zA-Z0-9+.\-]*:"));
static UNIT_DURATION: LazyLock<Option<Regex>> = LazyLock::new(|| {
    lazy(
        r"^(\d+)\s*(ns|nanoseconds?|us|microseconds?|ms|milliseconds?|s|seconds?|m|minutes?|h|hours?|d|days?|w|weeks?)$",
    )
});

fn matches(re: &LazyLock<Option<Regex>>, s: &str) -> bool {
    re.as_ref().is_none_or(|re| re.is_match(s))
}

/// Whether `s` is valid for the (normalized, supported) `format`.
pub(crate) fn is_valid(format: &str, s: &str) -> bool {
    match format {
        "datetime" => is_date_time(s),
        "date" => chrono::NaiveDate::parse_from_str(s, "%Y-%m-%d").is_ok(),
        "byte" => is_base64(s),
        "uuid" => matches(&UUID, s),
        "uuid3" => matches(&UUID3, s),
        "uuid4" => matches(&UUID4, s),
        "uuid5" => matches(&UUID5, s),
        "ipv4" => s.contains('.') && s.parse::<IpAddr>().is_ok(),
        "ipv6" => s.contains(':') && s.parse::<IpAddr>().is_ok(),
        "cidr" => is_cidr(s),
        "mac" => matches(&MAC, s),
        "hostname" => s.len() <= 255 && matches(&HOSTNAME, s),
        "email" => is_email(s),
        "uri" => matches(&URI_SCHEME, s) || s.starts_with('/'),
        "duration" => parse_go_duration(s).is_some() || matches(&UNIT_DURATION, s),
        "hexcolor" => matches(&HEXCOLOR, s),
        "rgbcolor" => matches(&RGBCOLOR, s),
        "ssn" => matches(&SSN, s),
        "bsonobjectid" => matches(&BSON_OBJECT_ID, s),
        _ => true,
    }
}

/// strfmt's `ParseDateTime` layouts: RFC 3339 with or without a colon in the offset, local
/// times without an offset, and reduced precision.
fn is_date_time(s: &str) -> bool {
    if s.is_empty() {
        return false;
    }
    if chrono::DateTime::parse_from_rfc3339(s).is_ok() {
        return true;
    }
    let with_offset = ["%Y-%m-%dT%H:%M:%S%.f%z", "%Y-%m-%dT%H:%M%z"];
    if with_offset
        .iter()
        .any(|f| chrono::DateTime::parse_from_str(s, f).is_ok())
    {
        return true;
    }
    let local = [
        "%Y-%m-%dT%H:%M:%S%.f",
        "%Y-%m-%dT%H:%M",
        "%Y-%m-%d %H:%M:%S",
    ];
    if local
        .iter()
        .any(|f| chrono::NaiveDateTime::parse_from_str(s, f).is_ok())
    {
        return true;
    }
    s.strip_suffix('Z')
        .is_some_and(|t| chrono::NaiveDateTime::parse_from_str(t, "%Y-%m-%dT%H:%M").is_ok())
}

/// Go `base64.StdEncoding`: padded standard alphabet.
fn is_base64(s: &str) -> bool {
    if !s.len().is_multiple_of(4) {
        return false;
    }
    let body = s.trim_end_matches('=');
    if s.len() - body.len() > 2 {
        return false;
    }
    body.bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'+' || b == b'/')
}

/// Decodes padded standard base64 (Go `base64.StdEncoding`).
pub(crate) fn decode_base64(s: &str) -> Option<Vec<u8>> {
    if !is_base64(s) {
        return None;
    }
    let value = |b: u8| -> Option<u32> {
        Some(match b {
            b'A'..=b'Z' => u32::from(b - b'A'),
            b'a'..=b'z' => u32::from(b - b'a') + 26,
            b'0'..=b'9' => u32::from(b - b'0') + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return None,
        })
    };
    let body = s.trim_end_matches('=').as_bytes();
    let mut out = Vec::with_capacity(body.len() * 3 / 4);
    for chunk in body.chunks(4) {
        let mut acc = 0u32;
        for (i, b) in chunk.iter().enumerate() {
            acc |= value(*b)? << (18 - 6 * i);
        }
        let bytes = acc.to_be_bytes();
        out.extend_from_slice(&bytes[1..chunk.len()]);
    }
    Some(out)
}

fn is_cidr(s: &str) -> bool {
    let Some((ip, prefix)) = s.split_once('/') else {
        return false;
    };
    let Ok(ip) = ip.parse::<IpAddr>() else {
        return false;
    };
    let Ok(prefix) = prefix.parse::<u8>() else {
        return false;
    };
    prefix <= if ip.is_ipv4() { 32 } else { 128 }
}

/// An approximation of Go `net/mail.ParseAddress` for bare and named addresses.
fn is_email(s: &str) -> bool {
    let address = match (s.rfind('<'), s.ends_with('>')) {
        (Some(start), true) => &s[start + 1..s.len() - 1],
        _ => s,
    };
    let Some((local, domain)) = address.rsplit_once('@') else {
        return false;
    };
    !local.is_empty() && !domain.is_empty() && !address.chars().any(char::is_whitespace)
}

/// Go `time.ParseDuration` (`1h30m`, `1.5s`, `-2m`, `300ms`).
pub(crate) fn parse_go_duration(s: &str) -> Option<chrono::Duration> {
    let (negative, mut rest) = match s.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, s.strip_prefix('+').unwrap_or(s)),
    };
    if rest == "0" {
        return Some(chrono::Duration::zero());
    }
    if rest.is_empty() {
        return None;
    }
    let mut total_nanos: f64 = 0.0;
    while !rest.is_empty() {
        let number_end = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        if number_end == 0 {
            return None;
        }
        let number: f64 = rest[..number_end].parse().ok()?;
        rest = &rest[number_end..];
        let unit_end = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let nanos_per_unit = match &rest[..unit_end] {
            "ns" => 1.0,
            "us" | "µs" | "μs" => 1e3,
            "ms" => 1e6,
            "s" => 1e9,
            "m" => 60e9,
            "h" => 3600e9,
            _ => return None,
        };
        rest = &rest[unit_end..];
        total_nanos += number * nanos_per_unit;
    }
    if total_nanos > i64::MAX as f64 {
        return None;
    }
    let nanos = total_nanos as i64;
    Some(chrono::Duration::nanoseconds(if negative {
        -nanos
    } else {
        nanos
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_accept_and_reject_like_strfmt() {
        assert!(is_valid("datetime", "2024-01-02T03:04:05Z"));
        assert!(is_valid("datetime", "2024-01-02T03:04:05.123+02:00"));
        assert!(!is_valid("datetime", "yesterday"));
        assert!(is_valid("date", "2024-01-02"));
        assert!(!is_valid("date", "2024-13-02"));
        assert!(is_valid("byte", "aGVsbG8="));
        assert!(!is_valid("byte", "not base64!"));
        assert!(is_valid("uuid", "123e4567-e89b-12d3-a456-426614174000"));
        assert!(!is_valid("uuid", "123"));
        assert!(is_valid("ipv4", "10.0.0.1"));
        assert!(!is_valid("ipv4", "::1"));
        assert!(is_valid("cidr", "10.0.0.0/8"));
        assert!(!is_valid("cidr", "10.0.0.0/33"));
        assert!(is_valid("duration", "1h30m"));
        assert!(is_valid("duration", "3 days"));
        assert!(!is_valid("duration", "soon"));
        assert!(is_valid("hostname", "node-1.example.com"));
        assert!(!is_valid("hostname", "bad_host!"));
    }

    #[test]
    fn base64_decodes() {
        assert_eq!(decode_base64("aGVsbG8=").as_deref(), Some(&b"hello"[..]));
        assert_eq!(decode_base64("aGk=").as_deref(), Some(&b"hi"[..]));
        assert_eq!(decode_base64("YWJj").as_deref(), Some(&b"abc"[..]));
        assert_eq!(decode_base64(""), Some(Vec::new()));
        assert_eq!(decode_base64("a"), None);
    }

    #[test]
    fn go_durations_parse() {
        assert_eq!(
            parse_go_duration("1h30m"),
            Some(chrono::Duration::minutes(90))
        );
        assert_eq!(
            parse_go_duration("-1.5s"),
            Some(chrono::Duration::milliseconds(-1500))
        );
        assert_eq!(parse_go_duration("10"), None);
    }
}
