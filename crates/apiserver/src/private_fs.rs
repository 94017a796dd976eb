//! Files and directories only the server's own user may read: the data directory
//! (mode 0700), the write-ahead log, snapshots, the CA key, the token file and the
//! kubeconfig (0600). The data holds Secrets and the token grants everything, so on a
//! shared machine another local user must not read any of it.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::Path;

#[cfg(unix)]
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};

/// Mode of private directories.
pub const DIR_MODE: u32 = 0o700;
/// Mode of private files.
pub const FILE_MODE: u32 = 0o600;

/// Creates `dir` (and missing parents) as 0700; an existing directory that others can
/// read or enter is tightened to 0700, with a warning.
///
/// # Errors
/// I/O errors.
pub fn create_dir(dir: &Path) -> std::io::Result<()> {
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    builder.mode(DIR_MODE);
    builder.create(dir)?;
    tighten(dir, DIR_MODE)
}

/// Opens `path` for appending, creating it as 0600; an existing file that others can
/// read is tightened to 0600.
///
/// # Errors
/// I/O errors.
pub fn open_append(path: &Path) -> std::io::Result<File> {
    let mut options = OpenOptions::new();
    options.create(true).append(true);
    #[cfg(unix)]
    options.mode(FILE_MODE);
    let file = options.open(path)?;
    tighten(path, FILE_MODE)?;
    Ok(file)
}

/// Creates (or truncates) `path` as a 0600 file for writing.
///
/// # Errors
/// I/O errors.
pub fn create_file(path: &Path) -> std::io::Result<File> {
    let mut options = OpenOptions::new();
    options.create(true).write(true).truncate(true);
    #[cfg(unix)]
    options.mode(FILE_MODE);
    let file = options.open(path)?;
    tighten(path, FILE_MODE)?;
    Ok(file)
}

/// Writes `contents` to `path` as a 0600 file, through a temporary file renamed over
/// it, so a reader never sees half a file and the old mode never carries over.
///
/// # Errors
/// I/O errors.
pub fn write(path: &Path, contents: &[u8]) -> std::io::Result<()> {
    let mut tmp_name = path.file_name().unwrap_or_default().to_os_string();
    tmp_name.push(".tmp");
    let tmp = path.with_file_name(tmp_name);
    {
        let mut file = create_file(&tmp)?;
        file.write_all(contents)?;
        file.sync_all()?;
    }
    std::fs::rename(&tmp, path)
}

/// Removes group and other permissions from an existing file (0600) written by an older
/// version that did not.
///
/// # Errors
/// I/O errors.
pub fn restrict(path: &Path) -> std::io::Result<()> {
    tighten(path, FILE_MODE)
}

/// Removes group and other permissions from `path` when it has any.
#[cfg(unix)]
fn tighten(path: &Path, mode: u32) -> std::io::Result<()> {
    let current = std::fs::metadata(path)?.permissions().mode() & 0o777;
    if current & 0o077 != 0 {
        tracing::warn!(
            path = %path.display(),
            mode = format!("{current:o}"),
            "others could read this; tightening it to {mode:o}"
        );
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))?;
    }
    Ok(())
}

#[cfg(not(unix))]
#[allow(clippy::unnecessary_wraps)] // the same signature as on unix
fn tighten(_path: &Path, _mode: u32) -> std::io::Result<()> {
    Ok(())
}

#[cfg(all(test, unix))]
#[allow(clippy::unwrap_used)] // tests fail loudly
mod tests {
    use super::*;

    fn mode(path: &Path) -> u32 {
        std::fs::metadata(path).unwrap().permissions().mode() & 0o777
    }

    #[test]
    fn new_directories_and_files_are_private() {
        let base = tempfile::tempdir().unwrap();
        let dir = base.path().join("a/b");
        create_dir(&dir).unwrap();
        assert_eq!(mode(&dir), 0o700);
        assert_eq!(mode(&base.path().join("a")), 0o700);
        let file = dir.join("f");
        write(&file, b"x").unwrap();
        assert_eq!(mode(&file), 0o600);
        let log = dir.join("log");
        drop(open_append(&log).unwrap());
        assert_eq!(mode(&log), 0o600);
    }

    #[test]
    fn existing_open_directories_and_files_are_tightened() {
        let base = tempfile::tempdir().unwrap();
        let dir = base.path().join("open");
        std::fs::create_dir(&dir).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        let log = dir.join("wal.log");
        std::fs::write(&log, b"").unwrap();
        std::fs::set_permissions(&log, std::fs::Permissions::from_mode(0o644)).unwrap();
        create_dir(&dir).unwrap();
        drop(open_append(&log).unwrap());
        assert_eq!(mode(&dir), 0o700);
        assert_eq!(mode(&log), 0o600);
    }
}
