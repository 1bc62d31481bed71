//! `sopsim._sopsim`: the Rust side of the Python package. Thin: each function takes
//! its options as JSON text, calls the library with the GIL released, and hands back
//! JSON text that the pure-Python side (`python/sopsim/`) turns into objects. Errors
//! become the package's exception classes, defined in Python (`sopsim._errors`).
//!
//! Layout: `options.rs` reads the options Python sends; `sink.rs` passes a run's events
//! to a Python callable; this file is the module and its functions.

mod options;
mod sink;

use std::sync::Arc;
use std::time::Duration;

use pyo3::exceptions::PyKeyboardInterrupt;
use pyo3::prelude::*;
use serde_json::{json, Value};
use sopsim::error::chain;
use sopsim::error::CancelToken;
use sopsim::runner::FolderFileError;
use sopsim::runner::{self, RunError, RunIo};
use sopsim::scenario::ScenarioError;

use sink::PythonSink;

// The allocator the command line uses, so that a run costs the same from Python.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// How often a waiting call lets Python handle a signal (Ctrl-C).
const SIGNAL_POLL: Duration = Duration::from_millis(50);

/// The package's exception `name` (from `sopsim._errors`) with `args`.
fn python_error<'py, A>(py: Python<'py>, name: &str, args: A) -> PyErr
where
    A: pyo3::call::PyCallArgs<'py>,
{
    let made = py
        .import("sopsim._errors")
        .and_then(|m| m.getattr(name))
        .and_then(|class| class.call1(args));
    match made {
        Ok(instance) => PyErr::from_value(instance),
        Err(e) => e,
    }
}

/// A scenario that does not load: `ScenarioError(message, problems)`.
fn scenario_error(py: Python<'_>, e: &ScenarioError) -> PyErr {
    let problems: Vec<(String, String)> = match e {
        ScenarioError::Invalid { problems, .. } => problems
            .iter()
            .map(|p| (p.path.to_string(), p.message.clone()))
            .collect(),
        other => vec![(String::new(), other.to_string())],
    };
    python_error(py, "ScenarioError", (chain(e), problems))
}

/// A run or setup error: bad input is `ScenarioError` (a scenario) or `ValueError`,
/// the rest `RunError`; the message carries the chain of causes.
fn run_error(py: Python<'_>, e: &RunError) -> PyErr {
    if let RunError::Setup(setup) = e {
        if let sopsim::setup::SetupError::Scenario(s) = &**setup {
            return scenario_error(py, s);
        }
    }
    if e.is_bad_input() {
        return pyo3::exceptions::PyValueError::new_err(chain(e));
    }
    python_error(py, "RunError", (chain(e),))
}

/// Runs `work` on a thread of its own with the GIL released, letting Python handle
/// signals meanwhile: on KeyboardInterrupt (or any error a signal handler raises)
/// `cancel` is cancelled, the work stops at once (what it waits on is abandoned), and the error is
/// raised.
fn wait_for<T: Send + 'static>(
    py: Python<'_>,
    cancel: CancelToken,
    work: impl FnOnce() -> T + Send + 'static,
) -> PyResult<T> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::Builder::new()
        .name("sopsim-run".into())
        .spawn(move || {
            // The receiver outlives the work unless the interpreter is going away.
            let _ = tx.send(work());
        })
        .map_err(|e| python_error(py, "RunError", (format!("cannot start a thread: {e}"),)))?;
    let mut interrupted = None;
    let mut rx = rx;
    loop {
        // The receiver goes into the GIL-free wait and comes back out of it.
        let (received, back) = py.detach(move || (rx.recv_timeout(SIGNAL_POLL), rx));
        rx = back;
        match received {
            Ok(done) => {
                return match interrupted {
                    Some(e) => Err(e),
                    None => Ok(done),
                }
            }
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                return Err(python_error(
                    py,
                    "RunError",
                    ("the run panicked (a bug in sopsim)",),
                ))
            }
        }
        if interrupted.is_none() {
            if let Err(e) = py.check_signals() {
                cancel.cancel();
                interrupted = Some(e);
            }
        }
    }
}

/// Checks a scenario file (or, with `document`, a scenario as JSON text whose files are
/// looked up beside `path`); returns what it is as JSON text, or raises
/// `ScenarioError` with every problem.
#[pyfunction]
#[pyo3(signature = (path, document=None))]
fn load_scenario(py: Python<'_>, path: String, document: Option<String>) -> PyResult<String> {
    let path = std::path::PathBuf::from(path);
    let source = match document {
        // The text of a dict, which `json.dumps` wrote.
        Some(text) => sopsim::ScenarioSource::Document {
            document: serde_json::from_str(&text).map_err(|e| {
                python_error(
                    py,
                    "ScenarioError",
                    (
                        format!("{}: not valid JSON: {e}", path.display()),
                        Vec::<(String, String)>::new(),
                    ),
                )
            })?,
            origin: path,
        },
        None => sopsim::ScenarioSource::File(path),
    };
    let loaded = py.detach(|| sopsim::load(source, &[]));
    let sopsim::Loaded { scenario, .. } = loaded.map_err(|e| match &e {
        sopsim::setup::SetupError::Scenario(s) => scenario_error(py, s),
        other => python_error(
            py,
            "ScenarioError",
            (chain(other), Vec::<(String, String)>::new()),
        ),
    })?;
    let members: usize = scenario.populations.values().map(|p| p.count).sum();
    Ok(json!({
        "name": scenario.name,
        "mode": scenario.environment.mode.as_str(),
        "agents": scenario.agents.len() - members,
        "members": members,
        "states": scenario.sop.states.keys().collect::<Vec<_>>(),
        "outcomes": scenario.outcomes.is_some(),
    })
    .to_string())
}

/// A handle that stops a run started with it at once, from any
/// thread (`run_async` cancels its run with one).
#[pyclass(frozen)]
struct Stop(CancelToken);

#[pymethods]
impl Stop {
    #[new]
    fn new() -> Self {
        Stop(CancelToken::new())
    }

    fn stop(&self) {
        self.0.cancel();
    }
}

/// Runs a scenario (`options`: JSON text, see `sopsim/_run.py`); `on_event` gets each
/// event's payload as JSON text; `stop` stops it from elsewhere. Returns the
/// transcript, summary, environment and events as JSON text.
#[pyfunction]
#[pyo3(signature = (options, on_event=None, stop=None))]
fn run(
    py: Python<'_>,
    options: String,
    on_event: Option<Py<PyAny>>,
    stop: Option<Py<Stop>>,
) -> PyResult<String> {
    let opts = options::run_options(&options).map_err(pyo3::exceptions::PyValueError::new_err)?;
    let (name, mode) =
        options::identity(&options).map_err(pyo3::exceptions::PyValueError::new_err)?;
    let conversation = runner::conversation_id(&name, opts.mode.unwrap_or(mode), opts.seed);
    let sink = Arc::new(PythonSink::new(on_event, conversation, opts.seed));
    let cancel = stop.map_or_else(CancelToken::new, |s| s.get().0.clone());
    let io = RunIo {
        sinks: vec![sink.clone()],
        cancel: cancel.clone(),
        ..RunIo::default()
    };
    sink.cancel_with(cancel.clone());
    let outcome = wait_for(py, cancel.clone(), move || {
        runner::run(&opts, io).map_err(Box::new)
    })?;
    // A callback's own exception stops the run and is raised as it was.
    if let Some(e) = sink.take_error() {
        return Err(e);
    }
    let outcome = outcome.map_err(|e| run_error(py, &e))?;
    if cancel.is_cancelled() {
        return Err(PyKeyboardInterrupt::new_err("the run was stopped"));
    }
    let events: Vec<Value> = sink
        .take_events()
        .iter()
        .filter_map(|e| serde_json::from_str(e).ok())
        .collect();
    Ok(json!({
        "transcript": outcome.transcript,
        "summary": outcome.summary,
        "environment": outcome.environment,
        "network": outcome.network,
        "events": events,
        "probes": outcome.probes,
        "judgement": outcome.judgement,
    })
    .to_string())
}

/// Runs a benchmark (`options`: JSON text, see `sopsim/_bench.py`) into its folder;
/// `progress(done, total)` is called as runs end. Returns the folder.
#[pyfunction(name = "bench")]
#[pyo3(signature = (options, progress=None))]
fn run_bench(py: Python<'_>, options: String, progress: Option<Py<PyAny>>) -> PyResult<String> {
    let opts = options::bench_options(&options).map_err(pyo3::exceptions::PyValueError::new_err)?;
    let out = opts.out.display().to_string();
    let cancel = CancelToken::new();
    let observer = Arc::new(sink::Progress::new(progress, cancel.clone()));
    let (token, watched) = (cancel.clone(), observer.clone());
    let result = wait_for(py, cancel.clone(), move || {
        sopsim_bench::run(&opts, watched.as_ref(), token).map(|_| ())
    })?;
    if let Some(e) = observer.take_error() {
        return Err(e);
    }
    result.map_err(|e| {
        if let sopsim_bench::BenchError::Setup(sopsim::setup::SetupError::Scenario(s)) = &e {
            return scenario_error(py, s);
        }
        if e.is_bad_input() {
            pyo3::exceptions::PyValueError::new_err(chain(&e))
        } else {
            python_error(py, "RunError", (chain(&e),))
        }
    })?;
    if cancel.is_cancelled() {
        return Err(PyKeyboardInterrupt::new_err("the benchmark was stopped"));
    }
    Ok(out)
}

/// A folder's file that is not there: `FileNotFoundError` saying what the folder is
/// not; any other failure: `FolderError` naming the file.
fn folder_error(py: Python<'_>, e: &FolderFileError, not_a: &str) -> PyErr {
    if e.is_missing() {
        return pyo3::exceptions::PyFileNotFoundError::new_err(format!(
            "{}: not there: {not_a}",
            e.path().display()
        ));
    }
    python_error(py, "FolderError", (chain(e),))
}

/// The run the command line wrote into `folder`, as JSON text: transcript, summary,
/// events, environment and network.
#[pyfunction]
fn load_run(py: Python<'_>, folder: String) -> PyResult<String> {
    let files = py.detach(|| sopsim::runner::read_run_files(std::path::Path::new(&folder)));
    let files = files.map_err(|e| folder_error(py, &e, "not a run's folder"))?;
    serde_json::to_string(&files).map_err(|e| python_error(py, "FolderError", (e.to_string(),)))
}

/// The benchmark the command line wrote into `folder`, as JSON text: its report and
/// how each run ended.
#[pyfunction]
fn load_bench(py: Python<'_>, folder: String) -> PyResult<String> {
    let files =
        py.detach(|| sopsim_bench::read_back::read_bench_files(std::path::Path::new(&folder)));
    let files = files.map_err(|e| match &e {
        sopsim_bench::read_back::BenchFilesError::File(f) => {
            folder_error(py, f, "not a benchmark's folder")
        }
        other => python_error(py, "FolderError", (chain(other),)),
    })?;
    serde_json::to_string(&files).map_err(|e| python_error(py, "FolderError", (e.to_string(),)))
}

/// The tournament the command line wrote into `folder`, as its `report.json`'s text.
#[pyfunction]
fn load_tournament(py: Python<'_>, folder: String) -> PyResult<String> {
    let report =
        py.detach(|| sopsim_bench::tournament::report::read(std::path::Path::new(&folder)));
    let report = report.map_err(|e| folder_error(py, &e, "not a tournament's folder"))?;
    serde_json::to_string(&report).map_err(|e| python_error(py, "FolderError", (e.to_string(),)))
}

/// The models sopsim knows, as JSON text: name, status, folder, bytes, description.
#[pyfunction]
fn models_list(py: Python<'_>) -> PyResult<String> {
    let (root, _) = options::models_place();
    let listed = py.detach(|| sopsim::models::listing(&root));
    let listed = listed.map_err(|e| python_error(py, "RunError", (chain(&e),)))?;
    Ok(Value::Array(listed).to_string())
}

/// Fetches the models named (all the default ones when none are named).
#[pyfunction]
fn models_fetch(py: Python<'_>, names: Vec<String>) -> PyResult<()> {
    let (root, pip) = options::models_place();
    let specs = sopsim::models::named(&names)
        .map_err(|e| pyo3::exceptions::PyValueError::new_err(chain(&e)))?;
    for spec in specs {
        py.detach(|| spec.ensure(&root, &pip, &sopsim::models::Quiet))
            .map_err(|e| python_error(py, "RunError", (chain(&e),)))?;
    }
    Ok(())
}

/// Panics, for the test that a Rust panic reaches Python as an exception.
#[pyfunction]
fn _panic_for_test() {
    panic!("a panic raised on purpose by a test");
}

#[pymodule]
fn _sopsim(m: &Bound<'_, PyModule>) -> PyResult<()> {
    options::compute_settings();
    m.add_class::<Stop>()?;
    m.add_function(wrap_pyfunction!(load_scenario, m)?)?;
    m.add_function(wrap_pyfunction!(run, m)?)?;
    m.add_function(wrap_pyfunction!(run_bench, m)?)?;
    m.add_function(wrap_pyfunction!(load_run, m)?)?;
    m.add_function(wrap_pyfunction!(load_bench, m)?)?;
    m.add_function(wrap_pyfunction!(load_tournament, m)?)?;
    m.add_function(wrap_pyfunction!(models_list, m)?)?;
    m.add_function(wrap_pyfunction!(models_fetch, m)?)?;
    m.add_function(wrap_pyfunction!(_panic_for_test, m)?)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
