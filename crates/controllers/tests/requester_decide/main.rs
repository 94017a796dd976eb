//! The Requester's contract decision ([`controllers::requester::decide`]),
//! from outside the crate: every phase transition ([`phases`]), how a release ends ([`release`]), the less
//! travelled paths ([`edges`]), a deleted contract ([`deleting`]) and
//! property tests through crashes and lost writes ([`props`]). They use only
//! public items.
#![allow(clippy::unwrap_used, clippy::expect_used)]

// The builders are the crate's own unit-test fixtures, one copy for both.
#[path = "../../src/requester/test_fixtures.rs"]
mod test_fixtures;

// The paths the fixtures and cases name (`super::decide`, `crate::time`, `crate::cache`),
// as the crate's public items.
mod decide {
    pub use controllers::requester::decide::*;
}
mod conditions {
    pub use controllers::requester::conditions::*;
}
mod ttl {
    pub use controllers::requester::ttl::*;
}
mod time {
    pub use controllers::time::*;
}
mod requester {
    pub use controllers::requester::WholeContract;
}

mod deleting;
mod edges;
mod phases;
mod props;
mod release;
mod steps;
