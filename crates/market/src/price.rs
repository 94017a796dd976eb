//! What a bid costs: an exact decimal amount, a currency and how often it is
//! charged.
//!
//! Markets quote differently: the local market in integer minor units per
//! hour, the atproto market's `bids.x402` as a JSON number per hour, month or
//! once. [`Amount`] holds either exactly (no floating point), so two bids
//! compare the same way after a restart and a price read back from a state
//! file is the one written.

use std::cmp::Ordering;
use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// An exact, non-negative decimal: `units × 10^-scale`.
///
/// Normalized (no trailing zero digit when `scale > 0`), so equal values are
/// equal structs and hash alike.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Amount {
    units: u64,
    scale: u8,
}

/// Why text or a number is not an [`Amount`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid amount {text:?}: {reason}")]
pub struct AmountError {
    /// The text that was rejected.
    pub text: String,
    /// Why.
    pub reason: &'static str,
}

impl Amount {
    /// Zero.
    pub const ZERO: Self = Self { units: 0, scale: 0 };
    /// The most decimal places an amount keeps (a millionth of a millionth).
    pub const MAX_SCALE: u8 = 12;

    /// `units` whole units (e.g. the local market's minor units).
    #[must_use]
    pub const fn from_units(units: u64) -> Self {
        Self { units, scale: 0 }
    }

    /// `units × 10^-scale`.
    ///
    /// # Errors
    /// When `scale` is above [`Amount::MAX_SCALE`].
    pub fn new(units: u64, scale: u8) -> Result<Self, AmountError> {
        if scale > Self::MAX_SCALE {
            return Err(AmountError {
                text: format!("{units}e-{scale}"),
                reason: "more than 12 decimal places",
            });
        }
        let (mut units, mut scale) = (units, scale);
        while scale > 0 && units % 10 == 0 {
            units /= 10;
            scale -= 1;
        }
        Ok(Self { units, scale })
    }

    /// The digits, without the decimal point.
    #[must_use]
    pub const fn units(self) -> u64 {
        self.units
    }

    /// How many of the digits are decimals.
    #[must_use]
    pub const fn scale(self) -> u8 {
        self.scale
    }

    /// True for zero (a free bid).
    #[must_use]
    pub const fn is_zero(self) -> bool {
        self.units == 0
    }

    /// The whole part, decimals dropped (for fields that hold an integer).
    #[must_use]
    pub fn truncated(self) -> u64 {
        self.units / 10_u64.pow(u32::from(self.scale))
    }

    /// The value scaled to [`Amount::MAX_SCALE`] decimals, exact in a u128.
    fn at_max_scale(self) -> u128 {
        u128::from(self.units) * 10_u128.pow(u32::from(Self::MAX_SCALE - self.scale))
    }

    /// Reads a JSON number as the market sent it: an integer, or a decimal
    /// through its shortest round-trip text (`0.05`, not `0.05000000000000000277`).
    ///
    /// # Errors
    /// A negative, non-finite or too precise number.
    pub fn from_f64(value: f64) -> Result<Self, AmountError> {
        if !value.is_finite() || value < 0.0 {
            return Err(AmountError {
                text: value.to_string(),
                reason: "not a finite, non-negative number",
            });
        }
        // Display of f64 never uses an exponent and is the shortest text
        // that reads back as the same number.
        value.to_string().parse()
    }
}

impl Ord for Amount {
    fn cmp(&self, other: &Self) -> Ordering {
        self.at_max_scale().cmp(&other.at_max_scale())
    }
}

impl PartialOrd for Amount {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl From<u64> for Amount {
    fn from(units: u64) -> Self {
        Self::from_units(units)
    }
}

impl fmt::Display for Amount {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.scale == 0 {
            return write!(f, "{}", self.units);
        }
        let divisor = 10_u64.pow(u32::from(self.scale));
        write!(
            f,
            "{}.{:0width$}",
            self.units / divisor,
            self.units % divisor,
            width = usize::from(self.scale)
        )
    }
}

impl fmt::Debug for Amount {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Amount({self})")
    }
}

impl FromStr for Amount {
    type Err = AmountError;

    /// Plain decimal text: digits, optionally `.` and more digits.
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let error = |reason| AmountError {
            text: text.to_owned(),
            reason,
        };
        let (whole, decimals) = text.split_once('.').unwrap_or((text, ""));
        let digits_only = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
        if whole.is_empty() || !digits_only(whole) || !digits_only(decimals) {
            return Err(error("not a plain non-negative decimal"));
        }
        let decimals = decimals.trim_end_matches('0');
        let scale = u8::try_from(decimals.len())
            .ok()
            .filter(|s| *s <= Self::MAX_SCALE)
            .ok_or_else(|| error("more than 12 decimal places"))?;
        let units = format!("{whole}{decimals}")
            .parse::<u64>()
            .map_err(|_| error("too large"))?;
        Self::new(units, scale).map_err(|_| error("more than 12 decimal places"))
    }
}

impl Serialize for Amount {
    /// An integer as a JSON number (what the local market always wrote), a
    /// decimal as a string (exact, unlike a float).
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        if self.scale == 0 {
            serializer.serialize_u64(self.units)
        } else {
            serializer.collect_str(self)
        }
    }
}

impl<'de> Deserialize<'de> for Amount {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl serde::de::Visitor<'_> for Visitor {
            type Value = Amount;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a non-negative number or decimal string")
            }

            fn visit_u64<E: serde::de::Error>(self, value: u64) -> Result<Amount, E> {
                Ok(Amount::from_units(value))
            }

            fn visit_i64<E: serde::de::Error>(self, value: i64) -> Result<Amount, E> {
                u64::try_from(value)
                    .map(Amount::from_units)
                    .map_err(|_| E::custom("a negative amount"))
            }

            fn visit_f64<E: serde::de::Error>(self, value: f64) -> Result<Amount, E> {
                Amount::from_f64(value).map_err(E::custom)
            }

            fn visit_str<E: serde::de::Error>(self, value: &str) -> Result<Amount, E> {
                value.parse().map_err(E::custom)
            }
        }
        deserializer.deserialize_any(Visitor)
    }
}

/// How often a price is charged (the atproto market's x402 `frequency`).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default, Serialize, Deserialize,
)]
#[serde(rename_all = "kebab-case")]
pub enum Frequency {
    /// Per hour the guest runs (the local market's only frequency).
    #[default]
    Hourly,
    /// Per month.
    Monthly,
    /// Once, for the guest's whole life.
    OneTime,
}

impl Frequency {
    /// The hours one charge covers when prices of different frequencies are
    /// compared: 1 for hourly, 730 (a year's 8760 hours over 12) for monthly,
    /// and 730 for one-time too, i.e. a one-time price is compared as if
    /// spread over a month of use.
    #[must_use]
    pub const fn hours(self) -> u64 {
        match self {
            Self::Hourly => 1,
            Self::Monthly | Self::OneTime => 730,
        }
    }

    /// The wire name (`hourly`, `monthly`, `one-time`).
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Hourly => "hourly",
            Self::Monthly => "monthly",
            Self::OneTime => "one-time",
        }
    }
}

/// What a bidder asks for a guest.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Price {
    /// The amount per `frequency`, in the unit the market quotes
    /// `currency` in (the local market: minor units, e.g. cents; the atproto
    /// market: the x402 `cost` as written, e.g. `0.05`).
    pub cost: Amount,
    /// Currency code, e.g. `EUR`; empty for a free bid that names none.
    pub currency: String,
    /// How often `cost` is charged.
    #[serde(default)]
    pub frequency: Frequency,
}

impl Price {
    /// `cost` per hour in `currency`.
    #[must_use]
    pub fn hourly(cost: impl Into<Amount>, currency: impl Into<String>) -> Self {
        Self {
            cost: cost.into(),
            currency: currency.into(),
            frequency: Frequency::Hourly,
        }
    }

    /// Nothing (the atproto market's `bids.free`).
    #[must_use]
    pub fn free() -> Self {
        Self::hourly(Amount::ZERO, "")
    }

    /// Compares what two prices cost per hour of use ([`Frequency::hours`]),
    /// exactly. Currencies are not converted: compare prices of one currency.
    #[must_use]
    pub fn cmp_per_hour(&self, other: &Self) -> Ordering {
        // a/ha vs b/hb  <=>  a*hb vs b*ha; at most 1.9e31 * 730, well inside u128.
        let left = self.cost.at_max_scale() * u128::from(other.frequency.hours());
        let right = other.cost.at_max_scale() * u128::from(self.frequency.hours());
        left.cmp(&right)
    }
}

impl fmt::Display for Price {
    /// `5 EUR per hour`, `0.05 USD per month`, `20 USD once`, `free`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.cost.is_zero() && self.currency.is_empty() {
            return f.write_str("free");
        }
        let per = match self.frequency {
            Frequency::Hourly => "per hour",
            Frequency::Monthly => "per month",
            Frequency::OneTime => "once",
        };
        write!(f, "{} {} {per}", self.cost, self.currency)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn amounts_read_and_print_as_decimals() {
        for (text, units, scale, printed) in [
            ("7", 7, 0, "7"),
            ("0.05", 5, 2, "0.05"),
            ("1.50", 15, 1, "1.5"),
            ("2.000", 2, 0, "2"),
            ("0.000000000001", 1, 12, "0.000000000001"),
        ] {
            let amount: Amount = text.parse().unwrap();
            assert_eq!((amount.units(), amount.scale()), (units, scale), "{text}");
            assert_eq!(amount.to_string(), printed);
        }
        for bad in [
            "",
            ".5",
            "-1",
            "1e3",
            "0.0000000000001",
            "1.2.3",
            "99999999999999999999",
        ] {
            assert!(bad.parse::<Amount>().is_err(), "{bad}");
        }
        assert_eq!(Amount::from_f64(0.05).unwrap(), "0.05".parse().unwrap());
        assert!(Amount::from_f64(-1.0).is_err());
        assert!(Amount::from_f64(f64::NAN).is_err());
        assert_eq!("12.9".parse::<Amount>().unwrap().truncated(), 12);
    }

    #[test]
    fn serde_keeps_integers_as_numbers_and_reads_every_form() {
        assert_eq!(serde_json::to_string(&Amount::from_units(7)).unwrap(), "7");
        let decimal: Amount = "0.05".parse().unwrap();
        assert_eq!(serde_json::to_string(&decimal).unwrap(), "\"0.05\"");
        for json in ["0.05", "\"0.05\""] {
            assert_eq!(serde_json::from_str::<Amount>(json).unwrap(), decimal);
        }
        assert!(serde_json::from_str::<Amount>("-3").is_err());
        // A price written before frequencies existed reads as hourly.
        let old: Price = serde_json::from_str(r#"{"cost":7,"currency":"EUR"}"#).unwrap();
        assert_eq!(old, Price::hourly(7, "EUR"));
    }

    #[test]
    fn prices_compare_per_hour_of_use() {
        let hourly = Price::hourly(1, "USD");
        let monthly = Price {
            cost: Amount::from_units(700),
            currency: "USD".to_owned(),
            frequency: Frequency::Monthly,
        };
        assert_eq!(monthly.cmp_per_hour(&hourly), Ordering::Less, "700/730 < 1");
        let exact = Price {
            cost: Amount::from_units(730),
            ..monthly.clone()
        };
        assert_eq!(exact.cmp_per_hour(&hourly), Ordering::Equal);
        assert_eq!(Price::free().cmp_per_hour(&hourly), Ordering::Less);
        assert_eq!(hourly.to_string(), "1 USD per hour");
        assert_eq!(Price::free().to_string(), "free");
    }

    fn amount() -> impl Strategy<Value = Amount> {
        (any::<u64>(), 0..=Amount::MAX_SCALE).prop_map(|(u, s)| Amount::new(u, s).unwrap())
    }

    proptest! {
        #[test]
        fn text_round_trips_and_order_follows_the_value(a in amount(), b in amount()) {
            prop_assert_eq!(a.to_string().parse::<Amount>().unwrap(), a);
            let json = serde_json::to_string(&a).unwrap();
            prop_assert_eq!(serde_json::from_str::<Amount>(&json).unwrap(), a);
            // Order agrees with the printed decimals: whole parts, then the
            // decimals padded to one width.
            let split = |x: Amount| {
                let text = x.to_string();
                let (whole, decimals) = text.split_once('.').map_or((text.clone(), String::new()), |(w, d)| (w.to_owned(), d.to_owned()));
                (whole.parse::<u64>().unwrap(), format!("{decimals:0<12}"))
            };
            let expected = split(a).cmp(&split(b));
            prop_assert_eq!(a.cmp(&b), expected);
            prop_assert_eq!(a == b, expected == Ordering::Equal);
        }
    }
}
