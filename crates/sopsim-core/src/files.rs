//! Reading the files users give sopsim and writing the ones it keeps: a user's file is
//! read only if it is a regular file (not a device, a pipe or a folder, even behind a
//! symlink) and only up to a limit, so `/dev/zero` is refused rather than read for
//! ever; a kept file is written whole or not at all.

use std::fs::File;
use std::io::{ErrorKind, Read, Write};
use std::path::Path;

/// Why a user's file was not read (kept as the source of an [`std::io::Error`]).
#[derive(Debug, thiserror::Error)]
pub enum FileError {
    /// The path names a folder.
    #[error("is a folder, not a file")]
    Folder,
    /// The path names a device, a pipe or a socket.
    #[error("is not a regular file (a device, a pipe or a socket)")]
    NotRegular,
    /// The file is longer than the limit.
    #[error("is over the {limit}-byte limit")]
    TooLarge {
        /// The most bytes that would be read.
        limit: u64,
    },
}

fn refuse(kind: ErrorKind, e: FileError) -> std::io::Error {
    std::io::Error::new(kind, e)
}

/// The bytes of the regular file at `path`, at most `limit` of them.
pub fn read_bounded(path: &Path, limit: u64) -> std::io::Result<Vec<u8>> {
    // Checked before opening: opening a FIFO would wait for a writer.
    let meta = std::fs::metadata(path)?;
    if meta.is_dir() {
        return Err(refuse(ErrorKind::InvalidInput, FileError::Folder));
    }
    if !meta.is_file() {
        return Err(refuse(ErrorKind::InvalidInput, FileError::NotRegular));
    }
    if meta.len() > limit {
        return Err(refuse(
            ErrorKind::InvalidData,
            FileError::TooLarge { limit },
        ));
    }
    let mut bytes = Vec::new();
    File::open(path)?
        .take(limit.saturating_add(1))
        .read_to_end(&mut bytes)?;
    if bytes.len() as u64 > limit {
        return Err(refuse(
            ErrorKind::InvalidData,
            FileError::TooLarge { limit },
        ));
    }
    Ok(bytes)
}

/// [`read_bounded`] as UTF-8 text.
pub fn read_text_bounded(path: &Path, limit: u64) -> std::io::Result<String> {
    String::from_utf8(read_bounded(path, limit)?)
        .map_err(|e| std::io::Error::new(ErrorKind::InvalidData, e.utf8_error()))
}

/// `bytes` up to the end of its last whole line: what a file appended line by line
/// holds for sure after its writer was killed in the middle of a line.
pub fn whole_lines(bytes: &[u8]) -> &[u8] {
    let end = bytes.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1);
    &bytes[..end]
}

/// Writes `bytes` to `path` whole or not at all: into a uniquely named temporary file
/// beside it, then renamed into place. Unique names matter because parallel bench jobs
/// may record the same model call at once; on failure the temporary file is removed.
/// The file gets the mode a newly created one would (0666 less the umask), not the
/// temporary file's private 0600, so a shared folder's readers can read it.
pub fn replace_file(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    replace_file_with(path, |file| file.write_all(bytes))
}

/// [`replace_file`] with what `write` writes.
pub fn replace_file_with(
    path: &Path,
    write: impl FnOnce(&mut std::fs::File) -> std::io::Result<()>,
) -> std::io::Result<()> {
    let folder = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    let prefix = format!(".{name}.");
    let mut builder = tempfile::Builder::new();
    builder.prefix(&prefix).suffix(".tmp");
    #[cfg(unix)]
    builder.permissions(std::os::unix::fs::PermissionsExt::from_mode(0o666));
    let mut tmp = builder.tempfile_in(folder)?;
    write(tmp.as_file_mut())?;
    tmp.persist(path).map_err(|e| e.error)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn devices_folders_and_large_files_are_refused_without_reading_them() {
        for (path, what) in [("/dev/zero", "not a regular file"), ("/tmp", "folder")] {
            let e = read_bounded(Path::new(path), 10).unwrap_err();
            assert!(e.to_string().contains(what), "{path}: {e}");
        }
        let dir = tempfile::tempdir().unwrap();
        let big = dir.path().join("big");
        std::fs::write(&big, [b'x'; 11]).unwrap();
        assert!(read_bounded(&big, 10)
            .unwrap_err()
            .to_string()
            .contains("limit"));
        assert_eq!(read_bounded(&big, 11).unwrap().len(), 11);
        let link = dir.path().join("link");
        std::os::unix::fs::symlink("/dev/zero", &link).unwrap();
        assert!(read_bounded(&link, 10).is_err());
    }

    #[cfg(unix)]
    #[test]
    fn a_replaced_file_is_as_readable_as_a_created_one() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let created = dir.path().join("created");
        std::fs::write(&created, b"{}").unwrap();
        let replaced = dir.path().join("replaced");
        replace_file(&replaced, b"{}").unwrap();
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&replaced), mode(&created));
    }

    #[test]
    fn a_failed_replacement_leaves_no_temporary_file() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("sub");
        std::fs::create_dir(&target).unwrap();
        // Renaming a file over a folder fails after the temporary file was written.
        assert!(replace_file(&target, b"{}").is_err());
        let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(left.len(), 1, "{left:?}");
    }

    #[test]
    fn parallel_writers_of_one_file_all_succeed() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("same.json");
        std::thread::scope(|scope| {
            for i in 0..8 {
                let target = &target;
                scope.spawn(move || {
                    for _ in 0..50 {
                        replace_file(target, format!("{i}").as_bytes()).unwrap();
                    }
                });
            }
        });
        let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(left.len(), 1, "{left:?}");
    }
}
