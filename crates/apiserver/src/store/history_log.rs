//! The debug history on disk: with a data directory, the writes the history keeps are
//! also appended to `debug-history.jsonl` there, so a chaos test can read the history of
//! a server it killed and restarted.
//!
//! Each line is written, under the store lock, before the write's WAL record is queued,
//! so every write a restart recovers has its line. A write whose line made it and whose
//! record did not was never acknowledged and is not part of the recovered state: at
//! start, lines above the recovered resourceVersion are dropped (and the file rewritten
//! without them), as is a torn last line. What remains is exactly the recovered writes.
//!
//! Secrets are written without `data` and `stringData`: a deleted Secret's data must
//! leave the disk (wal docs), the debug history included.

use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{Change, ChangeType, StoredObject};
use crate::private_fs;

/// The file inside the data directory.
pub const FILE: &str = "debug-history.jsonl";

const SECRET_STORAGE: &str = "/secrets";

/// One write of the history, as the debug endpoint serves it and the file keeps it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HistoryRecord {
    /// The write's resourceVersion.
    pub resource_version: u64,
    /// `ADDED`, `MODIFIED` or `DELETED`.
    #[serde(rename = "type")]
    pub change: String,
    /// `<group>/<plural>` (`/secrets` for core).
    pub resource: String,
    /// The object after the write (a delete: its last state).
    pub object: Value,
}

impl HistoryRecord {
    /// The record of a change; a Secret's without its data.
    #[must_use]
    pub fn of(change: &Change) -> Self {
        let mut object = change.object.value();
        if &*change.storage == SECRET_STORAGE
            && let Some(fields) = object.as_object_mut()
        {
            fields.remove("data");
            fields.remove("stringData");
        }
        Self {
            resource_version: change.rv,
            change: change.change.as_str().to_owned(),
            resource: change.storage.to_string(),
            object,
        }
    }

    /// The change this record describes (without the object before it), or None when
    /// the type or the object is not one a change can have.
    #[must_use]
    pub fn to_change(&self) -> Option<Change> {
        let change = match self.change.as_str() {
            "ADDED" => ChangeType::Added,
            "MODIFIED" => ChangeType::Modified,
            "DELETED" => ChangeType::Deleted,
            _ => return None,
        };
        let object = StoredObject::new(&self.object, self.resource_version)?;
        Some(Change {
            rv: self.resource_version,
            storage: Arc::from(self.resource.as_str()),
            change,
            object: Arc::new(object),
            previous: None,
        })
    }
}

/// The open file the store appends to.
#[derive(Debug)]
pub struct HistoryLog {
    file: File,
}

impl HistoryLog {
    /// Appends the line of `change` (a Secret without its data). A failed write is
    /// logged: the debug history must never fail a write of the server.
    pub fn append(&mut self, change: &Change) {
        let mut line = serde_json::to_vec(&HistoryRecord::of(change)).unwrap_or_default();
        line.push(b'\n');
        // One write call per line: a kill leaves at most the last line torn.
        if let Err(error) = self.file.write_all(&line) {
            tracing::warn!(%error, "cannot append to the debug history");
        }
    }
}

/// Opens `dir`'s history file: the changes it holds up to `recovered_rv` (the rest were
/// never durable), and the file, rewritten with only those, open for appending.
///
/// # Errors
/// I/O errors reading or writing the file.
pub fn open(dir: &Path, recovered_rv: u64) -> std::io::Result<(Vec<Change>, HistoryLog)> {
    let path = dir.join(FILE);
    let mut kept = Vec::new();
    let mut text = Vec::new();
    match File::open(&path) {
        Ok(file) => {
            for line in BufReader::new(file).lines() {
                let line = line?;
                // A torn last line does not parse; a later one cannot exist.
                let Ok(record) = serde_json::from_str::<HistoryRecord>(&line) else {
                    break;
                };
                if record.resource_version > recovered_rv {
                    break;
                }
                if let Some(change) = record.to_change() {
                    text.extend_from_slice(line.as_bytes());
                    text.push(b'\n');
                    kept.push(change);
                }
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    private_fs::write(&path, &text)?;
    let file = private_fs::open_append(&path)?;
    Ok((kept, HistoryLog { file }))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use serde_json::json;

    use super::*;

    fn change(rv: u64, storage: &str, object: &Value) -> Change {
        Change {
            rv,
            storage: Arc::from(storage),
            change: ChangeType::Added,
            object: Arc::new(StoredObject::new(object, rv).unwrap()),
            previous: None,
        }
    }

    fn cm(name: &str) -> Value {
        json!({"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": name, "namespace": "default"}})
    }

    #[test]
    fn lines_past_the_recovered_version_and_a_torn_last_line_are_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let (_, mut log) = open(dir.path(), 0).unwrap();
        for rv in 1..=4 {
            log.append(&change(rv, "/configmaps", &cm(&format!("c{rv}"))));
        }
        drop(log);
        let mut file = private_fs::open_append(&dir.path().join(FILE)).unwrap();
        file.write_all(b"{\"resourceVersion\":5,\"ty").unwrap();
        drop(file);

        let (kept, _) = open(dir.path(), 3).unwrap();
        assert_eq!(kept.iter().map(|c| c.rv).collect::<Vec<_>>(), [1, 2, 3]);
        assert_eq!(kept[2].object.name(), "c3");
        // The file now holds only those: a new write at rv 4 is not a second rv 4.
        let (kept, _) = open(dir.path(), 10).unwrap();
        assert_eq!(kept.len(), 3);
    }

    #[test]
    fn secrets_are_written_without_their_data() {
        let dir = tempfile::tempdir().unwrap();
        let (_, mut log) = open(dir.path(), 0).unwrap();
        let secret = json!({"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": "s", "namespace": "default"},
            "data": {"token": "c2VjcmV0LXRva2Vu"}, "stringData": {"a": "plain-secret"}});
        log.append(&change(1, SECRET_STORAGE, &secret));
        let text = std::fs::read_to_string(dir.path().join(FILE)).unwrap();
        assert!(!text.contains("c2VjcmV0LXRva2Vu") && !text.contains("plain-secret"));
        let (kept, _) = open(dir.path(), 1).unwrap();
        assert_eq!(kept[0].object.name(), "s");
    }
}
