//! The live view the demo prints: Cluster -> Infra -> ComputeContracts, with phases.
//!
//! Rendering is a pure function of the objects, so it is unit-tested and the
//! demo prints only when the rendered text changes.

use std::fmt::Write as _;

use api::{Cluster, ComputeContract, Infra, NodeClaim, names};
use kube::ResourceExt;

/// Everything the view shows, as read from the API server.
#[derive(Debug, Default, Clone)]
pub struct Snapshot {
    /// Clusters of the tenant namespace.
    pub clusters: Vec<Cluster>,
    /// NodeClaims of the tenant namespace.
    pub claims: Vec<NodeClaim>,
    /// Infras of the contract namespace.
    pub infras: Vec<Infra>,
    /// ComputeContracts of the contract namespace.
    pub contracts: Vec<ComputeContract>,
}

/// Renders the tree, one line per object, sorted by name so equal states render equally.
#[must_use]
pub fn render(snapshot: &Snapshot) -> String {
    let mut out = String::new();
    let mut clusters: Vec<&Cluster> = snapshot.clusters.iter().collect();
    clusters.sort_by_key(|c| c.name_any());
    for cluster in clusters {
        let phase = cluster
            .status
            .as_ref()
            .and_then(|s| s.phase)
            .map_or_else(|| "-".to_owned(), |p| format!("{p:?}"));
        let deleting = if cluster.metadata.deletion_timestamp.is_some() {
            " (deleting)"
        } else {
            ""
        };
        let claims: Vec<&NodeClaim> = snapshot
            .claims
            .iter()
            .filter(|c| {
                c.spec.cluster_name == cluster.name_any() && c.namespace() == cluster.namespace()
            })
            .collect();
        let _ = writeln!(
            out,
            "Cluster {}/{}  phase={phase}  claims={}{deleting}",
            cluster.namespace().unwrap_or_default(),
            cluster.name_any(),
            claims.len()
        );
        let mut claims = claims;
        claims.sort_by_key(|c| c.name_any());
        for claim in claims {
            let _ = writeln!(
                out,
                "  NodeClaim {}  {}",
                claim.name_any(),
                claim_phase(claim)
            );
        }
        let infra_name = names::infra_name(
            &cluster.namespace().unwrap_or_default(),
            &cluster.name_any(),
        );
        render_infra(&mut out, snapshot, &infra_name);
    }
    // An Infra whose Cluster is already gone is still worth showing: it is releasing.
    for infra in &snapshot.infras {
        let orphaned = !snapshot.clusters.iter().any(|c| {
            names::infra_name(&c.namespace().unwrap_or_default(), &c.name_any()) == infra.name_any()
        });
        if orphaned {
            let _ = writeln!(out, "(Cluster gone)");
            render_infra(&mut out, snapshot, &infra.name_any());
        }
    }
    // Claims whose Cluster is gone are held by their finalizer until released.
    for claim in &snapshot.claims {
        let has_cluster = snapshot
            .clusters
            .iter()
            .any(|c| c.name_any() == claim.spec.cluster_name && c.namespace() == claim.namespace());
        if !has_cluster {
            let _ = writeln!(
                out,
                "NodeClaim {}/{}  {}  (Cluster gone)",
                claim.namespace().unwrap_or_default(),
                claim.name_any(),
                claim_phase(claim)
            );
        }
    }
    if out.is_empty() {
        out.push_str("(nothing)\n");
    }
    out
}

fn claim_phase(claim: &NodeClaim) -> String {
    let status = claim.status.as_ref();
    let phase = status
        .and_then(|s| s.phase)
        .map_or_else(|| "phase=-".to_owned(), |p| format!("phase={p:?}"));
    let deleting = if claim.metadata.deletion_timestamp.is_some() {
        " (deleting)"
    } else {
        ""
    };
    format!("{phase}{deleting}")
}

fn render_infra(out: &mut String, snapshot: &Snapshot, infra_name: &str) {
    let Some(infra) = snapshot.infras.iter().find(|i| i.name_any() == infra_name) else {
        let _ = writeln!(out, "  Infra {infra_name}  (not composed yet)");
        return;
    };
    let status = infra.status.as_ref();
    let phase = status
        .and_then(|s| s.phase)
        .map_or_else(|| "-".to_owned(), |p| format!("{p:?}"));
    let deleting = if infra.metadata.deletion_timestamp.is_some() {
        " (deleting)"
    } else {
        ""
    };
    let _ = writeln!(
        out,
        "  Infra {infra_name}  phase={phase}  entries={}{deleting}",
        infra.spec.contracts.len()
    );
    let mut contracts: Vec<&ComputeContract> = snapshot
        .contracts
        .iter()
        .filter(|c| c.labels().get(names::INFRA_NAME_LABEL).map(String::as_str) == Some(infra_name))
        .collect();
    contracts.sort_by_key(|c| c.name_any());
    for contract in contracts {
        let status = contract.status.as_ref();
        let phase = status
            .and_then(|s| s.phase)
            .map_or_else(|| "Pending".to_owned(), |p| format!("{p:?}"));
        let winner = status
            .and_then(|s| s.winner.as_ref())
            .map(|w| format!("  winner={} {} {}/h", w.bidder, w.cost, w.currency))
            .unwrap_or_default();
        let address = status
            .and_then(|s| s.guest.as_ref())
            .and_then(|g| g.address.clone())
            .map(|a| format!("  address={a}"))
            .unwrap_or_default();
        let release = if contract.spec.release {
            "  release=true"
        } else {
            ""
        };
        let entry = contract
            .labels()
            .get(names::CONTRACT_LABEL)
            .cloned()
            .unwrap_or_default();
        let _ = writeln!(
            out,
            "    Contract {entry}  phase={phase}{winner}{address}{release}"
        );
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use api::{ClusterSpec, ComputeContractStatus, InfraSpec};
    use std::collections::BTreeMap;

    fn cluster(ns: &str, name: &str) -> Cluster {
        let mut c = Cluster::new(
            name,
            ClusterSpec {
                account: "did:plc:t".into(),
                running: true,
            },
        );
        c.metadata.namespace = Some(ns.into());
        c
    }

    fn infra(name: &str) -> Infra {
        let spec: InfraSpec =
            serde_json::from_value(serde_json::json!({"description": "demo"})).unwrap();
        let mut i = Infra::new(name, spec);
        i.metadata.namespace = Some("socialweb-system".into());
        i
    }

    fn contract(infra: &str, entry: &str, phase: api::ComputeContractPhase) -> ComputeContract {
        let spec = serde_json::from_value(serde_json::json!({
            "resources": {"cpus": 1, "memory": 1, "disk": 1, "network": 1},
            "location": {"country": "DE"},
        }))
        .unwrap();
        let mut c = ComputeContract::new(&names::compute_contract_name(infra, entry), spec);
        c.metadata.labels = Some(BTreeMap::from([
            (names::INFRA_NAME_LABEL.to_owned(), infra.to_owned()),
            (names::CONTRACT_LABEL.to_owned(), entry.to_owned()),
        ]));
        c.status = Some(ComputeContractStatus {
            phase: Some(phase),
            ..Default::default()
        });
        c
    }

    #[test]
    fn renders_each_cluster_with_its_infra_and_contracts() {
        let infra_name = names::infra_name("tenant", "demo");
        let snapshot = Snapshot {
            clusters: vec![cluster("tenant", "demo")],
            claims: vec![],
            infras: vec![infra(&infra_name)],
            contracts: vec![
                contract(&infra_name, "node-b", api::ComputeContractPhase::Bidding),
                contract(&infra_name, "node-a", api::ComputeContractPhase::Deployed),
                contract("nodes-other", "node-c", api::ComputeContractPhase::Deployed),
            ],
        };
        let text = render(&snapshot);
        assert!(text.starts_with("Cluster tenant/demo"), "{text}");
        assert!(text.contains(&format!("Infra {infra_name}")), "{text}");
        let a = text.find("node-a  phase=Deployed").expect("node-a shown");
        let b = text.find("node-b  phase=Bidding").expect("node-b shown");
        assert!(a < b, "contracts are sorted by name: {text}");
        assert!(
            !text.contains("node-c"),
            "another Infra's contract must not show: {text}"
        );
    }

    #[test]
    fn an_infra_outliving_its_cluster_is_still_shown() {
        let snapshot = Snapshot {
            infras: vec![infra("nodes-0123")],
            ..Default::default()
        };
        let text = render(&snapshot);
        assert!(
            text.contains("(Cluster gone)") && text.contains("Infra nodes-0123"),
            "{text}"
        );
    }

    #[test]
    fn nothing_renders_as_nothing() {
        assert_eq!(render(&Snapshot::default()), "(nothing)\n");
    }
}
