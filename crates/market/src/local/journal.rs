//! The local market's state directory: an append-only journal of
//! [`Change`]s, one JSON line each, compacted into a snapshot as it grows.
//!
//! - A change is appended and fsynced before the call that made it returns,
//!   so what a caller was told survives a kill of the process and a crash of
//!   the machine. The cost of a change is its own line, never the whole state.
//! - A line cut short by a crash (the last one, without its newline) was never
//!   acknowledged: it is ignored and cut off when the journal is opened. Any
//!   other line that does not decode is corruption, and the market refuses to
//!   open rather than forget guests that run.
//! - Once the journal has grown by as many lines as it had after the last
//!   compaction (at least [`COMPACT_AFTER`]), the state is written as a new
//!   journal (one line per RFP, guest and released guest) beside it, fsynced
//!   and renamed over it: a crash leaves the old journal or the new one. Each
//!   compaction is paid for by at least as many appends as it writes lines.
//! - A state directory written before the journal (`local-market.json`, one
//!   document rewritten on every change) is read once and becomes a journal.

use std::fs::{self, File, OpenOptions};
use std::io::{BufWriter, Write as _};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use tracing::{info, warn};

use super::records::{GuestRecord, RfpRecord};
use super::state::{Change, MarketState};
use crate::{MarketError, RfpId};

/// The journal inside the state directory.
pub(crate) const JOURNAL_FILE: &str = "local-market.log";
/// The state file of markets before the journal.
pub(crate) const LEGACY_FILE: &str = "local-market.json";
/// The journal's format version (its first line); bump it on an incompatible change.
const JOURNAL_VERSION: u32 = 2;
/// The legacy state file's only version.
const LEGACY_VERSION: u32 = 1;
/// The fewest appends between two compactions.
pub(crate) const COMPACT_AFTER: usize = 1024;

/// The journal's first line.
#[derive(Debug, Serialize, Deserialize)]
struct Header {
    version: u32,
}

/// Where changes go: nowhere for a market without a state directory.
#[derive(Debug)]
pub(crate) struct Journal {
    file: Option<JournalFile>,
}

#[derive(Debug)]
struct JournalFile {
    dir: PathBuf,
    path: PathBuf,
    /// Open for appending.
    file: File,
    /// The journal's length: where the next line starts.
    len: u64,
    /// Changes in the journal.
    lines: usize,
    /// Compact once the journal holds this many changes.
    compact_at: usize,
    /// The fewest appends between two compactions.
    compact_after: usize,
    /// A failed append could not be cut off again: nothing more may follow it.
    broken: bool,
}

impl Journal {
    /// Opens the journal in `dir` and replays it; without a directory, an
    /// empty market kept in memory only.
    ///
    /// # Errors
    /// [`MarketError::State`] when the directory cannot be read or written,
    /// [`MarketError::CorruptState`] when a line does not decode.
    pub fn open(dir: Option<PathBuf>) -> Result<(Self, MarketState), MarketError> {
        Self::open_compacting_after(dir, COMPACT_AFTER)
    }

    pub(crate) fn open_compacting_after(
        dir: Option<PathBuf>,
        compact_after: usize,
    ) -> Result<(Self, MarketState), MarketError> {
        let Some(dir) = dir else {
            return Ok((Self { file: None }, MarketState::default()));
        };
        let path = dir.join(JOURNAL_FILE);
        let io = |action, source| MarketError::State {
            action,
            path: path.clone(),
            source,
        };
        fs::create_dir_all(&dir).map_err(|source| io("write", source))?;
        let bytes = match fs::read(&path) {
            Ok(bytes) => Some(bytes),
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => None,
            Err(source) => return Err(io("read", source)),
        };
        let replayed = bytes.as_deref().map(|b| replay(&path, b)).transpose()?;
        let Some(Replay { state, lines, len }) = replayed.flatten() else {
            // No journal yet (or not even its header made it to disk): start
            // one from the legacy file, if any, written whole at once.
            let state = read_legacy(&dir.join(LEGACY_FILE))?;
            let file = write_snapshot(&dir, &path, &state).map_err(|source| io("write", source))?;
            remove_legacy(&dir);
            let lines = state.records();
            let journal = JournalFile::new(dir, path, file, lines, compact_after)?;
            return Ok((
                Self {
                    file: Some(journal),
                },
                state,
            ));
        };
        let file = OpenOptions::new()
            .append(true)
            .open(&path)
            .map_err(|source| io("write", source))?;
        if bytes.as_ref().is_some_and(|b| b.len() as u64 > len) {
            warn!(path = %path.display(), "the journal's last line was cut short by a crash; ignoring it");
            file.set_len(len)
                .and_then(|()| file.sync_data())
                .map_err(|source| io("write", source))?;
        }
        let journal = JournalFile::new(dir, path, file, lines, compact_after)?;
        Ok((
            Self {
                file: Some(journal),
            },
            state,
        ))
    }

    /// Appends `change` and fsyncs it; the caller applies it only then.
    ///
    /// # Errors
    /// [`MarketError::State`] when the line cannot be written (nothing of it
    /// stays in the journal then, unless the journal is broken for good).
    pub fn append(&mut self, change: &Change) -> Result<(), MarketError> {
        let Some(journal) = &mut self.file else {
            return Ok(());
        };
        let mut line = serde_json::to_vec(change).map_err(|source| MarketError::CorruptState {
            path: journal.path.clone(),
            source,
        })?;
        line.push(b'\n');
        journal.append(&line).map_err(|source| MarketError::State {
            action: "write",
            path: journal.path.clone(),
            source,
        })
    }

    /// Compacts the journal into a snapshot of `state` when it is due. A
    /// failure is logged and retried after as many appends again: the
    /// changes are safe in the journal either way.
    pub fn compact_if_due(&mut self, state: &MarketState) {
        let Some(journal) = &mut self.file else {
            return;
        };
        if journal.lines < journal.compact_at || journal.broken {
            return;
        }
        let before = journal.lines;
        match write_snapshot(&journal.dir, &journal.path, state).and_then(|file| {
            let len = file.metadata()?.len();
            Ok((file, len))
        }) {
            Ok((file, len)) => {
                journal.file = file;
                journal.len = len;
                journal.lines = state.records();
                info!(
                    before,
                    after = journal.lines,
                    "local market journal compacted"
                );
            }
            Err(err) => {
                warn!(path = %journal.path.display(), error = %err, "cannot compact the local market journal; retrying later");
            }
        }
        journal.compact_at = journal.lines + journal.lines.max(journal.compact_after);
    }

    /// Changes in the journal (0 without a state directory).
    #[cfg(test)]
    pub fn lines(&self) -> usize {
        self.file.as_ref().map_or(0, |journal| journal.lines)
    }
}

impl JournalFile {
    fn new(
        dir: PathBuf,
        path: PathBuf,
        file: File,
        lines: usize,
        compact_after: usize,
    ) -> Result<Self, MarketError> {
        let len = file
            .metadata()
            .map_err(|source| MarketError::State {
                action: "read",
                path: path.clone(),
                source,
            })?
            .len();
        Ok(Self {
            dir,
            path,
            file,
            len,
            lines,
            compact_at: lines + lines.max(compact_after),
            compact_after,
            broken: false,
        })
    }

    fn append(&mut self, line: &[u8]) -> std::io::Result<()> {
        if self.broken {
            return Err(std::io::Error::other(
                "an earlier write left a partial line in the journal; reopen the market",
            ));
        }
        let written = self
            .file
            .write_all(line)
            .and_then(|()| self.file.sync_data());
        if let Err(err) = written {
            // Cut off whatever part of the line made it, so the next line
            // does not continue it; if even that fails, stop appending.
            if self.file.set_len(self.len).is_err() {
                self.broken = true;
            }
            return Err(err);
        }
        self.len += line.len() as u64;
        self.lines += 1;
        Ok(())
    }
}

/// A replayed journal: its state, its changes, and the length of its
/// complete lines.
struct Replay {
    state: MarketState,
    lines: usize,
    len: u64,
}

/// Replays a journal's complete lines. `None` when not even its header is
/// complete.
fn replay(path: &Path, bytes: &[u8]) -> Result<Option<Replay>, MarketError> {
    let corrupt = |line: usize, source: serde_json::Error| MarketError::CorruptState {
        path: path.to_owned(),
        source: <serde_json::Error as serde::de::Error>::custom(format!(
            "line {}: {source}",
            line + 1
        )),
    };
    // Only lines ended by a newline were acknowledged.
    let complete = bytes
        .iter()
        .rposition(|b| *b == b'\n')
        .map_or(0, |last| last + 1);
    let mut lines = bytes[..complete].split(|b| *b == b'\n');
    let Some(header) = lines.next().filter(|_| complete > 0) else {
        return Ok(None);
    };
    let header: Header = serde_json::from_slice(header).map_err(|err| corrupt(0, err))?;
    if header.version != JOURNAL_VERSION {
        return Err(corrupt(
            0,
            <serde_json::Error as serde::de::Error>::custom(format!(
                "unsupported journal version {} (expected {JOURNAL_VERSION})",
                header.version
            )),
        ));
    }
    let mut state = MarketState::default();
    let mut changes = 0;
    // The split yields one empty piece after the last newline.
    for (index, line) in lines.enumerate().filter(|(_, line)| !line.is_empty()) {
        let change: Change = serde_json::from_slice(line).map_err(|err| corrupt(index + 1, err))?;
        state.apply(change);
        changes += 1;
    }
    Ok(Some(Replay {
        state,
        lines: changes,
        len: complete as u64,
    }))
}

/// Writes a journal holding `state`'s snapshot beside `path`, fsyncs it and
/// renames it over `path`; returns it open for appending.
fn write_snapshot(dir: &Path, path: &Path, state: &MarketState) -> std::io::Result<File> {
    let temporary = dir.join(format!("{JOURNAL_FILE}.tmp"));
    {
        let mut out = BufWriter::new(File::create(&temporary)?);
        serde_json::to_writer(
            &mut out,
            &Header {
                version: JOURNAL_VERSION,
            },
        )?;
        out.write_all(b"\n")?;
        for change in state.snapshot() {
            serde_json::to_writer(&mut out, &change)?;
            out.write_all(b"\n")?;
        }
        out.into_inner()
            .map_err(|err| err.into_error())?
            .sync_all()?;
    }
    fs::rename(&temporary, path)?;
    // Make the rename itself durable; not every platform can open a directory.
    if let Ok(directory) = File::open(dir) {
        directory.sync_all()?;
    }
    OpenOptions::new().append(true).open(path)
}

/// The legacy state file's document.
#[derive(Debug, Deserialize)]
struct LegacyState {
    version: u32,
    rfps: std::collections::BTreeMap<RfpId, RfpRecord>,
    guests: std::collections::BTreeMap<String, LegacyGuest>,
}

/// A legacy guest record: released ones stayed whole, with their time.
#[derive(Debug, Deserialize)]
struct LegacyGuest {
    #[serde(flatten)]
    record: GuestRecord,
    released_at_ms: Option<u64>,
}

/// The state of a legacy state file; empty when there is none.
fn read_legacy(path: &Path) -> Result<MarketState, MarketError> {
    let mut state = MarketState::default();
    let bytes = match fs::read(path) {
        Ok(bytes) => bytes,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(state),
        Err(source) => {
            return Err(MarketError::State {
                action: "read",
                path: path.to_owned(),
                source,
            });
        }
    };
    let corrupt = |source| MarketError::CorruptState {
        path: path.to_owned(),
        source,
    };
    let legacy: LegacyState = serde_json::from_slice(&bytes).map_err(corrupt)?;
    if legacy.version != LEGACY_VERSION {
        return Err(corrupt(<serde_json::Error as serde::de::Error>::custom(
            format!("unsupported state version {}", legacy.version),
        )));
    }
    for (rfp, record) in legacy.rfps {
        state.apply(Change::Published {
            rfp,
            request: record.request,
        });
    }
    let mut released = Vec::new();
    for (
        guest,
        LegacyGuest {
            record,
            released_at_ms,
        },
    ) in legacy.guests
    {
        if let Some(at_ms) = released_at_ms {
            released.push(Change::Released {
                guest: guest.clone(),
                at_ms,
            });
        }
        state.apply(Change::Accepted {
            guest,
            record: Box::new(record),
        });
    }
    for change in released {
        state.apply(change);
    }
    info!(path = %path.display(), "local market state file read into a journal");
    Ok(state)
}

/// Removes the legacy state file once the journal holds its state; one left
/// behind is harmless (the journal wins), so a failure is only logged.
fn remove_legacy(dir: &Path) {
    let path = dir.join(LEGACY_FILE);
    if let Err(err) = fs::remove_file(&path)
        && err.kind() != std::io::ErrorKind::NotFound
    {
        warn!(path = %path.display(), error = %err, "cannot remove the old local market state file");
    }
}

#[cfg(test)]
#[path = "journal_tests.rs"]
mod tests;
