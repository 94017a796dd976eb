//! The request log, counters by verb/resource/namespace/field manager/user agent, and
//! (through the store) the history of every write.

use std::collections::BTreeMap;

use parking_lot::Mutex;

/// One logged request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestRecord {
    /// HTTP method.
    pub method: String,
    /// Path and query.
    pub uri: String,
    /// Kubernetes verb (get, list, watch, create, update, patch, delete, deletecollection) or "".
    pub verb: String,
    /// Resource plural (with `/status` for the subresource), or "".
    pub resource: String,
    /// Namespace, or "".
    pub namespace: String,
    /// `fieldManager`, or "".
    pub field_manager: String,
    /// User-Agent.
    pub user_agent: String,
    /// The answer's HTTP status.
    pub status: u16,
}

/// Counters keyed by one dimension.
pub type Counts = BTreeMap<String, u64>;

/// Request counters.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Counters {
    /// By verb.
    pub by_verb: Counts,
    /// By resource.
    pub by_resource: Counts,
    /// By namespace.
    pub by_namespace: Counts,
    /// By field manager.
    pub by_field_manager: Counts,
    /// By user agent.
    pub by_user_agent: Counts,
    /// By `verb resource` pair.
    pub by_verb_resource: Counts,
}

/// The audit sink.
#[derive(Debug, Default)]
pub struct Audit {
    log: Mutex<Vec<RequestRecord>>,
    counters: Mutex<Counters>,
    log_cap: usize,
    /// Log only writes (counters still count every request).
    writes_only: bool,
}

/// The verbs that change objects.
pub const WRITE_VERBS: [&str; 5] = ["create", "update", "patch", "delete", "deletecollection"];

impl Audit {
    /// A sink keeping up to `log_cap` requests (counters are unbounded).
    #[must_use]
    pub fn new(log_cap: usize) -> Self {
        Self {
            log: Mutex::default(),
            counters: Mutex::default(),
            log_cap,
            writes_only: false,
        }
    }

    /// Keeps only writes ([`WRITE_VERBS`]) in the log when `writes_only`.
    #[must_use]
    pub fn writes_only(mut self, writes_only: bool) -> Self {
        self.writes_only = writes_only;
        self
    }

    /// Records one request.
    pub fn record(&self, record: RequestRecord) {
        {
            let mut c = self.counters.lock();
            let bump = |map: &mut Counts, key: &str| {
                if !key.is_empty() {
                    *map.entry(key.to_string()).or_default() += 1;
                }
            };
            bump(&mut c.by_verb, &record.verb);
            bump(&mut c.by_resource, &record.resource);
            bump(&mut c.by_namespace, &record.namespace);
            bump(&mut c.by_field_manager, &record.field_manager);
            bump(&mut c.by_user_agent, &record.user_agent);
            if !record.verb.is_empty() {
                bump(
                    &mut c.by_verb_resource,
                    &format!("{} {}", record.verb, record.resource),
                );
            }
        }
        if self.writes_only && !WRITE_VERBS.contains(&record.verb.as_str()) {
            return;
        }
        let mut log = self.log.lock();
        if log.len() < self.log_cap {
            log.push(record);
        }
    }

    /// The requests so far (bounded).
    #[must_use]
    pub fn requests(&self) -> Vec<RequestRecord> {
        self.log.lock().clone()
    }

    /// The counters so far.
    #[must_use]
    pub fn counters(&self) -> Counters {
        self.counters.lock().clone()
    }

    /// Clears log and counters.
    pub fn reset(&self) {
        self.log.lock().clear();
        *self.counters.lock() = Counters::default();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(verb: &str) -> RequestRecord {
        RequestRecord {
            method: String::new(),
            uri: String::new(),
            verb: verb.to_owned(),
            resource: "configmaps".to_owned(),
            namespace: String::new(),
            field_manager: String::new(),
            user_agent: String::new(),
            status: 200,
        }
    }

    #[test]
    fn a_writes_only_log_keeps_writes_and_counts_everything() {
        let audit = Audit::new(10).writes_only(true);
        for verb in ["get", "list", "watch", "create", "patch", "delete", ""] {
            audit.record(request(verb));
        }
        let logged: Vec<String> = audit.requests().into_iter().map(|r| r.verb).collect();
        assert_eq!(logged, ["create", "patch", "delete"]);
        assert_eq!(audit.counters().by_verb.values().sum::<u64>(), 6);
        let everything = Audit::new(10);
        everything.record(request("list"));
        assert_eq!(everything.requests().len(), 1);
    }
}
