//! The one way sopsim opens the files of a run's or a benchmark's folder, to write them
//! or to read them back (resume, merge, reports, the viewer, `load_run`).
//!
//! A folder may come from elsewhere (shared, untarred, another user's), so its files
//! are opened by names relative to it, and only as regular files lying in it: no
//! `..`, no absolute names, no symbolic link at any step (a link is refused, never
//! followed), no FIFO or device (a FIFO is opened without waiting for a writer, then
//! refused). Every read has a limit, and errors name the file but never carry what it
//! holds: a JSON error says where, not what it found.

use std::fs::File;
use std::io::{Read, Write};
use std::path::{Component, Path, PathBuf};

/// Why a file of a folder was not opened or read.
#[derive(Debug, thiserror::Error)]
pub enum FolderFileError {
    /// The name is not a plain relative name (empty, absolute, or with `.` or `..` steps).
    #[error("{}: not a plain name inside the folder", .path.display())]
    NotInside {
        /// The name joined to the folder's path.
        path: PathBuf,
    },
    /// A step of the path, or the file itself, is a symbolic link.
    #[error("{}: is a symbolic link; only regular files inside the folder are opened", .path.display())]
    Link {
        /// The path up to and including the link.
        path: PathBuf,
    },
    /// The file is not a regular file (a folder, a device, a pipe or a socket), or a
    /// step on the way to it is not a folder.
    #[error("{}: is not a regular file (a folder, a device, a pipe or a socket)", .path.display())]
    NotRegular {
        /// The path up to and including the offending step.
        path: PathBuf,
    },
    /// The file holds more than a read allows.
    #[error("{}: is over the {limit}-byte limit", .path.display())]
    TooLarge {
        /// The file's path.
        path: PathBuf,
        /// The most bytes the read allows.
        limit: u64,
    },
    /// The file's JSON could not be read; says where, not what it found.
    #[error("{}: {what} at line {line}, column {column}", .path.display())]
    Json {
        /// The file's path.
        path: PathBuf,
        /// The kind of error (not valid JSON, cut short, of the wrong shape, unreadable).
        what: &'static str,
        /// The 1-based line of the error.
        line: usize,
        /// The 1-based column of the error.
        column: usize,
    },
    /// Opening, reading or writing the file failed.
    #[error("{}", .path.display())]
    Io {
        /// The file's path.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
}

impl FolderFileError {
    /// Whether the file is simply not there.
    pub fn is_missing(&self) -> bool {
        matches!(self, FolderFileError::Io { source, .. } if source.kind() == std::io::ErrorKind::NotFound)
    }

    /// The file the error is about.
    pub fn path(&self) -> &Path {
        match self {
            FolderFileError::NotInside { path }
            | FolderFileError::Link { path }
            | FolderFileError::NotRegular { path }
            | FolderFileError::TooLarge { path, .. }
            | FolderFileError::Json { path, .. }
            | FolderFileError::Io { path, .. } => path,
        }
    }

    /// The error as an [`std::io::Error`] of the right kind, for callers whose errors
    /// keep an I/O source.
    pub fn into_io(self) -> std::io::Error {
        use std::io::ErrorKind;
        match self {
            FolderFileError::Io { source, .. } => source,
            e @ FolderFileError::TooLarge { .. } => std::io::Error::new(ErrorKind::InvalidData, e),
            e @ FolderFileError::Json { .. } => std::io::Error::new(ErrorKind::InvalidData, e),
            e => std::io::Error::new(ErrorKind::InvalidInput, e),
        }
    }
}

impl FolderFileError {
    /// A JSON error of the file at `path` as where it is and what kind it is, without
    /// the text it quotes.
    pub fn json(path: PathBuf, e: &serde_json::Error) -> Self {
        use serde_json::error::Category;
        let what = match e.classify() {
            Category::Syntax => "not valid JSON",
            Category::Eof => "JSON cut short",
            Category::Data => "JSON of the wrong shape",
            Category::Io => "unreadable JSON",
        };
        FolderFileError::Json {
            path,
            what,
            line: e.line(),
            column: e.column(),
        }
    }
}

/// A run's or a benchmark's folder, whose files are opened only through it.
#[derive(Debug, Clone)]
pub struct OutputFolder {
    root: PathBuf,
}

impl OutputFolder {
    /// The folder at `root` (which may itself be reached through a link: the user
    /// named it).
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Self { root: root.into() }
    }

    /// The folder's own path.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The path of `name` in the folder (not checked: use it for messages).
    pub fn path(&self, name: &str) -> PathBuf {
        self.root.join(name)
    }

    /// The folder `name` within this one, as a folder of its own: its own files are
    /// checked from there on, the steps to it now.
    pub fn sub(&self, name: &str) -> Result<OutputFolder, FolderFileError> {
        let path = self.checked(name)?;
        match std::fs::symlink_metadata(&path) {
            Ok(m) if m.file_type().is_symlink() => Err(FolderFileError::Link { path }),
            Ok(m) if !m.is_dir() => Err(FolderFileError::NotRegular { path }),
            Ok(_) => Ok(OutputFolder { root: path }),
            Err(source) => Err(FolderFileError::Io { path, source }),
        }
    }

    /// `name` joined to the root, once every step of it is a plain name and every
    /// folder on the way is a real folder (not a link).
    fn checked(&self, name: &str) -> Result<PathBuf, FolderFileError> {
        let rel = Path::new(name);
        let plain = !name.is_empty() && rel.components().all(|c| matches!(c, Component::Normal(_)));
        if !plain {
            return Err(FolderFileError::NotInside {
                path: self.root.join(name),
            });
        }
        let mut at = self.root.clone();
        let mut steps = rel.components().peekable();
        while let Some(step) = steps.next() {
            at.push(step);
            if steps.peek().is_none() {
                break;
            }
            match std::fs::symlink_metadata(&at) {
                Ok(m) if m.file_type().is_symlink() => {
                    return Err(FolderFileError::Link { path: at })
                }
                Ok(m) if !m.is_dir() => return Err(FolderFileError::NotRegular { path: at }),
                // A missing folder is reported by the open that needs it.
                _ => {}
            }
        }
        Ok(at)
    }

    /// Opens `name` with `options`, never following a link at its last step and never
    /// waiting on a FIFO, and keeps it only if it is a regular file.
    fn open(
        &self,
        name: &str,
        options: &mut std::fs::OpenOptions,
    ) -> Result<File, FolderFileError> {
        let path = self.checked(name)?;
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt;
            options.custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK);
        }
        #[cfg(not(unix))]
        if std::fs::symlink_metadata(&path).is_ok_and(|m| m.file_type().is_symlink()) {
            return Err(FolderFileError::Link { path });
        }
        let file = match options.open(&path) {
            Ok(f) => f,
            Err(e) if is_link_refusal(&e) => return Err(FolderFileError::Link { path }),
            Err(source) => return Err(FolderFileError::Io { path, source }),
        };
        match file.metadata() {
            Ok(m) if m.is_file() => Ok(file),
            Ok(_) => Err(FolderFileError::NotRegular { path }),
            Err(source) => Err(FolderFileError::Io { path, source }),
        }
    }

    /// `name` opened to be read as it is sent (a served file too large to hold), with
    /// the same refusals as [`read`](Self::read).
    pub fn open_to_read(&self, name: &str) -> Result<File, FolderFileError> {
        self.open(name, std::fs::OpenOptions::new().read(true))
    }

    /// The bytes of `name`, at most `limit` of them.
    pub fn read(&self, name: &str, limit: u64) -> Result<Vec<u8>, FolderFileError> {
        let mut file = self.open(name, std::fs::OpenOptions::new().read(true))?;
        let too_large = || FolderFileError::TooLarge {
            path: self.path(name),
            limit,
        };
        let io = |source| FolderFileError::Io {
            path: self.path(name),
            source,
        };
        if file.metadata().map_err(io)?.len() > limit {
            return Err(too_large());
        }
        let mut bytes = Vec::new();
        (&mut file)
            .take(limit.saturating_add(1))
            .read_to_end(&mut bytes)
            .map_err(io)?;
        if bytes.len() as u64 > limit {
            return Err(too_large());
        }
        Ok(bytes)
    }

    /// [`read`](Self::read), or `None` when there is no such file.
    pub fn read_if_there(
        &self,
        name: &str,
        limit: u64,
    ) -> Result<Option<Vec<u8>>, FolderFileError> {
        match self.read(name, limit) {
            Ok(b) => Ok(Some(b)),
            Err(e) if e.is_missing() => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// `name` as JSON of type `T`.
    pub fn read_json<T: serde::de::DeserializeOwned>(
        &self,
        name: &str,
        limit: u64,
    ) -> Result<T, FolderFileError> {
        let bytes = self.read(name, limit)?;
        serde_json::from_slice(&bytes).map_err(|e| FolderFileError::json(self.path(name), &e))
    }

    /// `name`'s lines as JSON values of type `T` (blank lines skipped); the error names
    /// the line.
    pub fn read_json_lines<T: serde::de::DeserializeOwned>(
        &self,
        name: &str,
        limit: u64,
    ) -> Result<Vec<T>, FolderFileError> {
        let bytes = self.read(name, limit)?;
        let mut values = Vec::new();
        for (i, line) in bytes.split(|b| *b == b'\n').enumerate() {
            if line.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            let value = serde_json::from_slice(line).map_err(|e| {
                match FolderFileError::json(self.path(name), &e) {
                    FolderFileError::Json {
                        path, what, column, ..
                    } => FolderFileError::Json {
                        path,
                        what,
                        line: i + 1,
                        column,
                    },
                    other => other,
                }
            })?;
            values.push(value);
        }
        Ok(values)
    }

    /// A new, empty `name` to write (an older file there is emptied; a link there is
    /// refused, not followed).
    pub fn create(&self, name: &str) -> Result<File, FolderFileError> {
        self.open(
            name,
            std::fs::OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(true),
        )
    }

    /// `name` opened to be written further (created when missing); the caller decides
    /// where in it to write.
    pub fn reopen(&self, name: &str) -> Result<File, FolderFileError> {
        self.open(
            name,
            std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false),
        )
    }

    /// Writes `bytes` as `name`, whole or not at all (a link there is replaced by the
    /// file, never written through).
    pub fn replace(&self, name: &str, bytes: &[u8]) -> Result<(), FolderFileError> {
        let path = self.checked(name)?;
        sopsim_core::files::replace_file(&path, bytes)
            .map_err(|source| FolderFileError::Io { path, source })
    }

    /// Pretty JSON as `name`, whole or not at all, written as it is serialized (a
    /// population's files run to hundreds of megabytes).
    pub fn replace_json<T: serde::Serialize>(
        &self,
        name: &str,
        value: &T,
    ) -> Result<(), FolderFileError> {
        let path = self.checked(name)?;
        sopsim_core::files::replace_file_with(&path, |file| {
            let mut out = std::io::BufWriter::new(file);
            serde_json::to_writer_pretty(&mut out, value)?;
            out.write_all(b"\n")?;
            out.flush()
        })
        .map_err(|source| FolderFileError::Io { path, source })
    }

    /// What is at `name`: nothing, a regular file of so many bytes, or something else
    /// (a link, a folder, a device), without following a link.
    pub fn entry(&self, name: &str) -> Result<Entry, FolderFileError> {
        let path = self.checked(name)?;
        match std::fs::symlink_metadata(&path) {
            Ok(m) if m.is_file() => Ok(Entry::File(m.len())),
            Ok(_) => Ok(Entry::Other),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Entry::Nothing),
            Err(source) => Err(FolderFileError::Io { path, source }),
        }
    }

    /// Removes `name` (a link itself, not what it points at); nothing there is fine.
    pub fn remove(&self, name: &str) -> Result<(), FolderFileError> {
        let path = self.checked(name)?;
        match std::fs::remove_file(&path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                Err(FolderFileError::Io { path, source: e })
            }
            _ => Ok(()),
        }
    }

    /// Renames `from` to `to`, both inside the folder; a file at `to` is replaced (a
    /// link there is replaced itself, not what it points at).
    pub fn rename(&self, from: &str, to: &str) -> Result<(), FolderFileError> {
        let (from, to) = (self.checked(from)?, self.checked(to)?);
        std::fs::rename(&from, &to).map_err(|source| FolderFileError::Io { path: to, source })
    }

    /// Removes the folder `name` and all it holds (a link there is removed itself, not
    /// what it points at); nothing there is fine.
    pub fn remove_tree(&self, name: &str) -> Result<(), FolderFileError> {
        let path = self.checked(name)?;
        let removed = match std::fs::symlink_metadata(&path) {
            Ok(m) if m.is_dir() => std::fs::remove_dir_all(&path),
            Ok(_) => std::fs::remove_file(&path),
            Err(e) => Err(e),
        };
        match removed {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                Err(FolderFileError::Io { path, source: e })
            }
            _ => Ok(()),
        }
    }

    /// Creates the folder `name` and those on the way to it, refusing links.
    pub fn create_dirs(&self, name: &str) -> Result<OutputFolder, FolderFileError> {
        let path = self.checked(name)?;
        std::fs::create_dir_all(&path).map_err(|source| FolderFileError::Io {
            path: path.clone(),
            source,
        })?;
        self.sub(name)
    }
}

/// What is at a name in a folder.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Entry {
    /// Nothing is there.
    Nothing,
    /// A regular file and its length.
    File(u64),
    /// A link, a folder, a device, a FIFO or a socket.
    Other,
}

/// Whether an open failed because `O_NOFOLLOW` met a link.
fn is_link_refusal(e: &std::io::Error) -> bool {
    #[cfg(unix)]
    {
        e.raw_os_error() == Some(libc::ELOOP)
    }
    #[cfg(not(unix))]
    {
        let _ = e;
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    fn folder() -> (tempfile::TempDir, OutputFolder) {
        let tmp = tempfile::tempdir().unwrap();
        let f = OutputFolder::new(tmp.path().join("run"));
        std::fs::create_dir(f.root()).unwrap();
        (tmp, f)
    }

    #[test]
    fn a_link_is_neither_read_nor_written_through() {
        let (tmp, f) = folder();
        let outside = tmp.path().join("outside.txt");
        std::fs::write(&outside, "secret\n").unwrap();
        symlink(&outside, f.path("transcript.jsonl")).unwrap();
        assert!(matches!(
            f.read("transcript.jsonl", 100),
            Err(FolderFileError::Link { .. })
        ));
        assert!(matches!(
            f.create("transcript.jsonl"),
            Err(FolderFileError::Link { .. })
        ));
        assert!(matches!(
            f.reopen("transcript.jsonl"),
            Err(FolderFileError::Link { .. })
        ));
        f.replace("transcript.jsonl", b"mine\n").unwrap();
        assert_eq!(std::fs::read_to_string(&outside).unwrap(), "secret\n");
        assert_eq!(
            std::fs::read_to_string(f.path("transcript.jsonl")).unwrap(),
            "mine\n"
        );
    }

    #[test]
    fn a_linked_folder_on_the_way_is_refused() {
        let (tmp, f) = folder();
        let elsewhere = tmp.path().join("elsewhere");
        std::fs::create_dir(&elsewhere).unwrap();
        std::fs::write(elsewhere.join("summary.json"), "{}").unwrap();
        symlink(&elsewhere, f.path("runs")).unwrap();
        let e = f.read("runs/summary.json", 100).unwrap_err();
        assert!(matches!(e, FolderFileError::Link { .. }), "{e}");
        assert!(f.sub("runs").is_err());
    }

    #[test]
    fn names_that_leave_the_folder_are_refused() {
        let (_tmp, f) = folder();
        for name in ["../x", "/etc/passwd", "a/../../x", "", "./x"] {
            let e = f.read(name, 10).unwrap_err();
            assert!(
                matches!(e, FolderFileError::NotInside { .. }),
                "{name}: {e}"
            );
        }
    }

    #[test]
    fn fifos_and_devices_are_refused_without_waiting() {
        let (_tmp, f) = folder();
        let fifo = std::ffi::CString::new(f.path("events.jsonl").to_str().unwrap()).unwrap();
        assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
        assert!(matches!(
            f.read("events.jsonl", 10),
            Err(FolderFileError::NotRegular { .. })
        ));
        assert_eq!(f.entry("events.jsonl").unwrap(), Entry::Other);
        std::fs::create_dir(f.path("sub")).unwrap();
        assert!(matches!(
            f.read("sub", 10),
            Err(FolderFileError::NotRegular { .. })
        ));
    }

    #[test]
    fn reads_stop_at_their_limit() {
        let (_tmp, f) = folder();
        std::fs::write(f.path("big"), [b'x'; 11]).unwrap();
        assert!(matches!(
            f.read("big", 10),
            Err(FolderFileError::TooLarge { limit: 10, .. })
        ));
        assert_eq!(f.read("big", 11).unwrap().len(), 11);
    }

    #[test]
    fn a_json_error_says_where_but_not_what_the_file_holds() {
        let (_tmp, f) = folder();
        std::fs::write(f.path("summary.json"), "{\"turns\": \"hunter2-secret\"}").unwrap();
        #[derive(serde::Deserialize, Debug)]
        #[allow(dead_code)]
        struct Summary {
            turns: u64,
        }
        let e = f.read_json::<Summary>("summary.json", 100).unwrap_err();
        let text = sopsim_core::error_chain::chain(&e);
        assert!(
            text.contains("summary.json") && text.contains("line 1"),
            "{text}"
        );
        assert!(!text.contains("hunter2"), "{text}");
        std::fs::write(f.path("t.jsonl"), "{}\n\n{\"a\":\n").unwrap();
        let e = f
            .read_json_lines::<serde_json::Value>("t.jsonl", 100)
            .unwrap_err();
        assert!(matches!(e, FolderFileError::Json { line: 3, .. }), "{e}");
    }
}
