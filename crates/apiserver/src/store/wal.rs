//! Durability: an append-only log of changes with group commit (one fsync serves every
//! write queued meanwhile), compacted from time to time into a snapshot file.
//!
//! Record framing: `len: u32 LE | crc32: u32 LE | payload (JSON)`. A torn or corrupt
//! last record is dropped with a warning at recovery.
//!
//! A Secret's data must not outlive the Secret on disk: a write that deletes a Secret or
//! replaces its data ([`erases_secret`]) is followed by a snapshot (the store queues one
//! right after it), which rewrites `snapshot.jsonl` without the old data and empties the
//! log; the write is acknowledged only once that snapshot is on disk.

use std::collections::HashMap;
use std::fs::File;
use std::io::{BufRead, BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::mpsc;

use serde_json::{Value, json};
use tokio::sync::oneshot;

use super::{Change, ChangeType, StoredObject, Table};
use crate::registry::StorageKey;

enum Msg {
    /// A framed record; `erases` holds its acknowledgement until the next snapshot.
    Record {
        bytes: Vec<u8>,
        done: oneshot::Sender<()>,
        erases: bool,
    },
    Snapshot(u64, Vec<(StorageKey, Table)>),
}

/// How long an erasing write waits for the snapshot the store queues after it.
const SNAPSHOT_AFTER_ERASURE: std::time::Duration = std::time::Duration::from_secs(5);

/// The storage key of Secrets.
const SECRET_STORAGE: &str = "/secrets";

/// Whether `change` removes Secret data from the current state (the Secret is deleted,
/// or its `data` replaced), so the old data must leave the disk: the store snapshots
/// right after such a write.
#[must_use]
pub fn erases_secret(change: &Change) -> bool {
    if &*change.storage != SECRET_STORAGE {
        return false;
    }
    match (&change.change, &change.previous) {
        (ChangeType::Deleted, _) => true,
        (ChangeType::Modified, Some(previous)) => {
            previous.value().get("data") != change.object.value().get("data")
        }
        _ => false,
    }
}

/// The log writer handle.
pub struct Wal {
    tx: parking_lot::Mutex<mpsc::Sender<Msg>>,
}

const LOG: &str = "wal.log";
const SNAPSHOT: &str = "snapshot.jsonl";

/// CRC-32 (IEEE).
#[must_use]
pub fn crc32(data: &[u8]) -> u32 {
    let mut crc = 0xFFFF_FFFFu32;
    for byte in data {
        crc ^= u32::from(*byte);
        for _ in 0..8 {
            let mask = (crc & 1).wrapping_neg();
            crc = (crc >> 1) ^ (0xEDB8_8320 & mask);
        }
    }
    !crc
}

type Recovered = (u64, HashMap<StorageKey, Table>, Wal);

impl Wal {
    /// Opens `dir`, recovers snapshot + log, and starts the writer thread.
    ///
    /// # Errors
    /// I/O errors.
    pub fn open(dir: &Path) -> std::io::Result<Recovered> {
        crate::private_fs::create_dir(dir)?;
        let mut tables: HashMap<StorageKey, Table> = HashMap::new();
        let mut rv = 0u64;
        let snapshot_path = dir.join(SNAPSHOT);
        if snapshot_path.exists() {
            crate::private_fs::restrict(&snapshot_path)?;
            let reader = BufReader::new(File::open(&snapshot_path)?);
            for (i, line) in reader.lines().enumerate() {
                let line = line?;
                let Ok(v) = serde_json::from_str::<Value>(&line) else {
                    tracing::warn!(line = i, "skipping an unreadable snapshot line");
                    continue;
                };
                if i == 0 {
                    rv = v["rv"].as_u64().unwrap_or(0);
                    continue;
                }
                put(&mut tables, &v["r"], &v["o"]);
            }
        }
        let log_path = dir.join(LOG);
        let mut good_len = 0u64;
        if log_path.exists() {
            let mut data = Vec::new();
            File::open(&log_path)?.read_to_end(&mut data)?;
            let mut pos = 0usize;
            while pos < data.len() {
                let Some(header) = data.get(pos..pos + 8) else {
                    tracing::warn!(offset = pos, "dropping a torn last log record");
                    break;
                };
                let len = u32::from_le_bytes([header[0], header[1], header[2], header[3]]) as usize;
                let crc = u32::from_le_bytes([header[4], header[5], header[6], header[7]]);
                let Some(payload) = data.get(pos + 8..pos + 8 + len) else {
                    tracing::warn!(offset = pos, "dropping a torn last log record");
                    break;
                };
                if crc32(payload) != crc {
                    tracing::warn!(offset = pos, "dropping a corrupt last log record");
                    break;
                }
                let Ok(record) = serde_json::from_slice::<Value>(payload) else {
                    tracing::warn!(offset = pos, "dropping an unreadable log record");
                    break;
                };
                let record_rv = record["rv"].as_u64().unwrap_or(0);
                if record_rv > rv {
                    rv = record_rv;
                    if record["op"] == "del" {
                        if let Some(table) =
                            tables.get_mut(record["r"].as_str().unwrap_or_default())
                        {
                            let key = (
                                record["ns"].as_str().unwrap_or_default().to_string(),
                                record["n"].as_str().unwrap_or_default().to_string(),
                            );
                            table.remove(&key);
                        }
                    } else {
                        put(&mut tables, &record["r"], &record["o"]);
                    }
                }
                pos += 8 + len;
                good_len = pos as u64;
            }
        }
        let file = crate::private_fs::open_append(&log_path)?;
        file.set_len(good_len)?;
        file.sync_all()?;
        let (tx, rx) = mpsc::channel();
        let dir = dir.to_path_buf();
        std::thread::Builder::new()
            .name("apiserver-wal".into())
            .spawn(move || writer(dir, file, rx))?;
        Ok((
            rv,
            tables,
            Self {
                tx: parking_lot::Mutex::new(tx),
            },
        ))
    }

    /// Queues a change; the receiver resolves once it is fsynced.
    pub fn append(&self, change: &Change) -> Option<oneshot::Receiver<()>> {
        // Called under the store lock: splice the stored bytes rather than re-parse them.
        let payload = match change.change {
            ChangeType::Deleted => serde_json::to_vec(&json!({
                "op": "del", "rv": change.rv, "r": &*change.storage,
                "ns": change.object.namespace(), "n": change.object.name(),
            }))
            .ok()?,
            _ => {
                let head = json!({"op": "put", "rv": change.rv, "r": &*change.storage}).to_string();
                let mut bytes = Vec::with_capacity(head.len() + change.object.json.len() + 8);
                bytes.extend_from_slice(&head.as_bytes()[..head.len() - 1]);
                bytes.extend_from_slice(b",\"o\":");
                bytes.extend_from_slice(&change.object.json);
                bytes.push(b'}');
                bytes
            }
        };
        let mut framed = Vec::with_capacity(payload.len() + 8);
        framed.extend_from_slice(
            &u32::try_from(payload.len())
                .unwrap_or(u32::MAX)
                .to_le_bytes(),
        );
        framed.extend_from_slice(&crc32(&payload).to_le_bytes());
        framed.extend_from_slice(&payload);
        let (done, wait) = oneshot::channel();
        let record = Msg::Record {
            bytes: framed,
            done,
            erases: erases_secret(change),
        };
        self.tx.lock().send(record).ok()?;
        Some(wait)
    }

    /// Queues a snapshot of the state at `rv` (after every record queued before it).
    pub fn snapshot(&self, rv: u64, tables: Vec<(StorageKey, Table)>) {
        let _ = self.tx.lock().send(Msg::Snapshot(rv, tables));
    }
}

fn put(tables: &mut HashMap<StorageKey, Table>, storage: &Value, object: &Value) {
    let Some(storage) = storage.as_str() else {
        return;
    };
    let rv = object["metadata"]["resourceVersion"]
        .as_str()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    if let Some(stored) = StoredObject::new(object, rv) {
        tables
            .entry(Arc::from(storage))
            .or_default()
            .insert(stored.key(), Arc::new(stored));
    }
}

fn writer(dir: PathBuf, file: File, rx: mpsc::Receiver<Msg>) {
    let mut log = BufWriter::new(file);
    // Acknowledgements of Secret-erasing writes, released once a snapshot is written.
    let mut held: Vec<oneshot::Sender<()>> = Vec::new();
    loop {
        let first = if held.is_empty() {
            rx.recv().ok()
        } else {
            // The snapshot is queued right after the record; never hold a write for ever.
            match rx.recv_timeout(SNAPSHOT_AFTER_ERASURE) {
                Ok(msg) => Some(msg),
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    tracing::error!(
                        "no snapshot followed a Secret erasure; acknowledging it anyway"
                    );
                    for done in held.drain(..) {
                        let _ = done.send(());
                    }
                    continue;
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => None,
            }
        };
        let Some(first) = first else {
            break;
        };
        let mut batch = vec![first];
        while let Ok(more) = rx.try_recv() {
            batch.push(more);
        }
        // Only the last snapshot of a batch matters: it holds every record before it.
        let last_snapshot = batch
            .iter()
            .rposition(|msg| matches!(msg, Msg::Snapshot(..)));
        let mut waiting = Vec::new();
        for (index, msg) in batch.into_iter().enumerate() {
            match msg {
                Msg::Record {
                    bytes,
                    done,
                    erases,
                } => {
                    if let Err(e) = log.write_all(&bytes) {
                        tracing::error!(error = %e, "write-ahead log append failed");
                    }
                    if erases {
                        held.push(done);
                    } else {
                        waiting.push(done);
                    }
                }
                Msg::Snapshot(..) if Some(index) != last_snapshot => {}
                Msg::Snapshot(rv, tables) => {
                    if let Err(e) = sync(&mut log) {
                        tracing::error!(error = %e, "write-ahead log sync failed");
                    }
                    match write_snapshot(&dir, rv, &tables) {
                        Ok(()) => {
                            if let Err(e) = log.get_ref().set_len(0) {
                                tracing::error!(error = %e, "write-ahead log truncation failed");
                            }
                        }
                        Err(e) => tracing::error!(error = %e, "snapshot failed; keeping the log"),
                    }
                    waiting.append(&mut held);
                }
            }
        }
        if let Err(e) = sync(&mut log) {
            tracing::error!(error = %e, "write-ahead log sync failed");
        }
        for done in waiting {
            let _ = done.send(());
        }
    }
    // The store is gone: nobody waits for what is still held.
    drop(held);
}

fn sync(log: &mut BufWriter<File>) -> std::io::Result<()> {
    log.flush()?;
    log.get_ref().sync_data()
}

fn write_snapshot(dir: &Path, rv: u64, tables: &[(StorageKey, Table)]) -> std::io::Result<()> {
    let tmp = dir.join(format!("{SNAPSHOT}.tmp"));
    {
        let mut out = BufWriter::new(crate::private_fs::create_file(&tmp)?);
        writeln!(out, "{}", json!({"rv": rv}))?;
        for (storage, table) in tables {
            for object in table.values() {
                out.write_all(b"{\"r\":")?;
                serde_json::to_writer(&mut out, &**storage)?;
                out.write_all(b",\"o\":")?;
                out.write_all(&object.json)?;
                out.write_all(b"}\n")?;
            }
        }
        out.flush()?;
        out.get_ref().sync_all()?;
    }
    std::fs::rename(&tmp, dir.join(SNAPSHOT))?;
    File::open(dir)?.sync_all()?;
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests fail loudly
mod tests {
    use super::crc32;

    #[test]
    fn crc32_matches_the_ieee_check_value() {
        assert_eq!(crc32(b"123456789"), 0xCBF4_3926);
    }
}
