//! TIDs: the 13-character, time-sortable record keys of atproto.
//!
//! A TID is 64 bits (top bit 0): 53 bits of microseconds since the Unix epoch,
//! then a 10-bit clock id, written in base32-sortable
//! (`234567abcdefghijklmnopqrstuvwxyz`). Written here (about 60 lines) rather
//! than taken from a crate: the atrium crates only validate TIDs, and the
//! generator must take the time from the caller so tests control it.

use std::fmt;
use std::str::FromStr;

use crate::{Error, Result};

const ALPHABET: &[u8; 32] = b"234567abcdefghijklmnopqrstuvwxyz";
const LEN: usize = 13;

/// A TID record key.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Tid(u64);

impl Tid {
    /// The TID of a timestamp (microseconds since the epoch, 53 bits kept)
    /// and a clock id (10 bits kept).
    #[must_use]
    pub const fn new(micros: u64, clock_id: u16) -> Self {
        Self(((micros & ((1 << 53) - 1)) << 10) | (clock_id as u64 & 0x3ff))
    }

    /// Microseconds since the Unix epoch.
    #[must_use]
    pub const fn micros(self) -> u64 {
        self.0 >> 10
    }

    /// The clock id.
    #[must_use]
    pub const fn clock_id(self) -> u16 {
        // Masked to 10 bits, so the cast keeps every bit.
        #[allow(clippy::cast_possible_truncation)]
        let id = (self.0 & 0x3ff) as u16;
        id
    }
}

impl fmt::Display for Tid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut out = [0u8; LEN];
        for (i, slot) in out.iter_mut().enumerate() {
            let shift = 5 * (LEN - 1 - i);
            // 5 bits index a 32-entry table.
            #[allow(clippy::cast_possible_truncation)]
            let index = ((self.0 >> shift) & 0x1f) as usize;
            *slot = ALPHABET[index];
        }
        f.write_str(std::str::from_utf8(&out).map_err(|_| fmt::Error)?)
    }
}

impl FromStr for Tid {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        if s.len() != LEN {
            return Err(Error::invalid("tid", "not 13 characters"));
        }
        let mut value: u64 = 0;
        for byte in s.bytes() {
            let digit = ALPHABET
                .iter()
                .position(|&c| c == byte)
                .ok_or_else(|| Error::invalid("tid", "character outside base32-sortable"))?;
            value = (value << 5) | digit as u64;
        }
        // 13 * 5 = 65 bits: the first character carries the top bit, which
        // must be 0 (first character in 2..j).
        if s.as_bytes()[0] > b'j' {
            return Err(Error::invalid("tid", "top bit set"));
        }
        Ok(Self(value))
    }
}

/// Hands out strictly increasing TIDs for one writer, from the times the
/// caller gives (so two records written in the same microsecond, or after the
/// clock stepped back, still get distinct, increasing keys).
#[derive(Debug, Clone)]
pub struct TidGenerator {
    clock_id: u16,
    last_micros: u64,
}

impl TidGenerator {
    /// A generator with a random clock id.
    #[must_use]
    pub fn new() -> Self {
        Self::with_clock_id(rand::random::<u16>() & 0x3ff)
    }

    /// A generator with a fixed clock id (tests).
    #[must_use]
    pub const fn with_clock_id(clock_id: u16) -> Self {
        Self {
            clock_id,
            last_micros: 0,
        }
    }

    /// The next TID at `now_micros` (microseconds since the epoch).
    pub fn next(&mut self, now_micros: u64) -> Tid {
        let micros = now_micros.max(self.last_micros + 1);
        self.last_micros = micros;
        Tid::new(micros, self.clock_id)
    }

    /// The next TID at the system time.
    pub fn next_now(&mut self) -> Tid {
        let micros = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX));
        self.next(micros)
    }
}

impl Default for TidGenerator {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn tids_of_the_test_vectors_decode_to_their_creation_time() {
        // rfp 3mq4ger7lvs23 was created at 2026-07-08T05:50:24.475Z.
        let tid: Tid = "3mq4ger7lvs23".parse().unwrap();
        let seconds = tid.micros() / 1_000_000;
        assert_eq!(seconds, 1_783_489_824, "{}", tid.micros());
        assert_eq!(tid.to_string(), "3mq4ger7lvs23");
    }

    #[test]
    fn rejects_bad_tids() {
        assert!("3mq4ger7lvs2".parse::<Tid>().is_err());
        assert!("3mq4ger7lvs2!".parse::<Tid>().is_err());
        assert!("zzzzzzzzzzzzz".parse::<Tid>().is_err());
        assert!(
            "3mq4ger7lvs21".parse::<Tid>().is_err(),
            "1 is not in the alphabet"
        );
    }

    #[test]
    fn generator_is_strictly_increasing_even_when_time_stands_still_or_steps_back() {
        let mut generator = TidGenerator::with_clock_id(7);
        let a = generator.next(1_000);
        let b = generator.next(1_000);
        let c = generator.next(500);
        assert!(a < b && b < c);
        assert!(a.to_string() < b.to_string() && b.to_string() < c.to_string());
    }

    proptest! {
        #[test]
        fn round_trips_and_sorts_like_the_numbers(a in 0u64..(1 << 53), b in 0u64..(1 << 53), ca in 0u16..1024, cb in 0u16..1024) {
            let (x, y) = (Tid::new(a, ca), Tid::new(b, cb));
            prop_assert_eq!(x.to_string().parse::<Tid>().unwrap(), x);
            prop_assert_eq!(x.micros(), a);
            prop_assert_eq!(x.clock_id(), ca);
            prop_assert_eq!(x.to_string().cmp(&y.to_string()), x.cmp(&y));
        }
    }
}
