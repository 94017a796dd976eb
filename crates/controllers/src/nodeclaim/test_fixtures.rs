//! Objects the NodeClaim modules' unit tests share.

use api::{Location, NodeClaim, NodeClaimSpec, Resources};

use crate::cache::CachedClaim;

use super::compose::ClusterKey;

/// The smallest machine.
pub fn resources() -> Resources {
    Resources {
        cpus: 1,
        memory: 1,
        disk: 1,
        network: 1,
    }
}

/// Germany.
pub fn location() -> Location {
    Location {
        country: "DE".into(),
        region: None,
    }
}

/// A claim of Cluster `c1` named and identified by `uid`, as the cache keeps it.
pub fn claim(uid: &str) -> CachedClaim {
    CachedClaim::from(whole_claim(uid))
}

/// A claim of Cluster `c1` named and identified by `uid`.
pub fn whole_claim(uid: &str) -> NodeClaim {
    let mut claim = NodeClaim::new(
        uid,
        NodeClaimSpec {
            cluster_name: "c1".into(),
            resources: resources(),
            location: location(),
            owner_did: None,
            adopt: None,
            join_grace_seconds: 1,
            loss_grace_seconds: 1,
        },
    );
    claim.metadata.uid = Some(uid.into());
    claim
}

/// The key of Cluster `name` in the tenant namespace `tenant-a`.
pub fn cluster_key(name: &str) -> ClusterKey {
    ClusterKey {
        namespace: "tenant-a".into(),
        name: name.into(),
    }
}
