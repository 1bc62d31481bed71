//! Commands that read files and print: `validate`, `schema`, `import`.

use std::path::Path;

use serde_json::json;

use sopsim::scenario::{self, ScenarioError};

use super::args::{Format, SchemaFormat};
use super::failure::Failure;
use super::say;

fn bad(e: ScenarioError) -> Failure {
    Failure::BadInput(sopsim::error::chain(&e))
}

/// Why `validate` finds a file not valid.
enum Refused {
    Invalid(ScenarioError),
    /// Its populations need more memory than this machine has free.
    TooBig(sopsim::setup::SetupError),
}

impl Refused {
    /// The problems `validate --format json` lists, each with the field at fault.
    fn problems(&self) -> Vec<serde_json::Value> {
        match self {
            Refused::Invalid(ScenarioError::Invalid { problems, .. }) => problems
                .iter()
                .map(|p| json!({"path": p.path.to_string(), "message": p.message}))
                .collect(),
            Refused::Invalid(other) => {
                vec![json!({"path": "", "message": sopsim::error::chain(other)})]
            }
            Refused::TooBig(e) => {
                vec![json!({"path": "populations", "message": sopsim::error::chain(e)})]
            }
        }
    }

    fn failure(self) -> Failure {
        match self {
            Refused::Invalid(e) => bad(e),
            Refused::TooBig(e) => Failure::BadInput(sopsim::error::chain(&e)),
        }
    }
}

fn to_json(value: &serde_json::Value) -> Result<String, Failure> {
    serde_json::to_string_pretty(value).map_err(|e| Failure::runtime(&e))
}

pub(super) fn validate(
    path: &Path,
    format: Format,
    allowed: &[std::path::PathBuf],
) -> Result<(), Failure> {
    // Populations this machine could not run are refused before their members are
    // made, and a scenario whose styles would not fit either is not valid here.
    let loaded = match sopsim::load(path, allowed) {
        Ok(loaded) => Ok(loaded.scenario),
        Err(sopsim::setup::SetupError::Scenario(e)) => Err(Refused::Invalid(e)),
        Err(e @ sopsim::setup::SetupError::TooBig { .. }) => Err(Refused::TooBig(e)),
        Err(e) => return Err(Failure::BadInput(sopsim::error::chain(&e))),
    };
    if format == Format::Json {
        let file = path.display().to_string();
        let verdict = match &loaded {
            Ok(s) => json!({
                "file": file,
                "valid": true,
                "states": s.sop.states.len(),
                "agents": s.agents.len(),
                "problems": [],
                "notes": scenario::advice(s).iter().map(|n| json!({"path": n.path.to_string(), "message": n.message}))
                    .chain(sopsim::setup::missing_model_files(s).iter().map(|m| json!({"path": m.field.to_string(), "message": format!("{} is not there yet: a run refuses it unless it is there by then", m.path.display())})))
                    .collect::<Vec<_>>(),
                "starts": scenario::started_programs(s).iter().map(|p| json!({"path": p.field.to_string(), "program": p.program, "args": p.args})).collect::<Vec<_>>(),
            }),
            Err(refused) => {
                json!({"file": file, "valid": false, "problems": refused.problems(), "notes": [], "starts": []})
            }
        };
        say(&to_json(&verdict)?);
        return loaded.map(|_| ()).map_err(Refused::failure);
    }
    let s = loaded.map_err(Refused::failure)?;
    for note in scenario::advice(&s) {
        super::note(&note.to_string());
    }
    for missing in sopsim::setup::missing_model_files(&s) {
        super::note(&format!(
            "{}: {} is not there yet: a run refuses it unless it is there by then",
            missing.field,
            missing.path.display()
        ));
    }
    say(&format!(
        "{}: valid ({} states, {} agents)",
        path.display(),
        s.sop.states.len(),
        s.agents.len()
    ));
    let programs = scenario::started_programs(&s);
    if !programs.is_empty() {
        say("it starts these programs, each only with --allow-command PROGRAM or --allow-mcp:");
        for p in programs {
            say(&format!(
                "  {}: {}",
                p.field,
                super::terminal::printable(&p.command_line())
            ));
        }
    }
    Ok(())
}

pub(super) fn schema(format: SchemaFormat) -> Result<(), Failure> {
    match format {
        SchemaFormat::Json => say(&to_json(scenario::schema())?),
        SchemaFormat::Markdown => say(scenario::reference::markdown().trim_end()),
    }
    Ok(())
}

pub(super) fn import_aiwaves(config: &Path) -> Result<(), Failure> {
    let (native, imported) = scenario::translate_aiwaves(config).map_err(bad)?;
    for note in &imported.notes {
        super::note(&note.to_string());
    }
    if let Some(base) = &imported.base_url {
        super::note(&format!(
            "the config's API_BASE is {base}; pass --base-url {base} when running the native file"
        ));
    }
    let folder = config.parent().unwrap_or(Path::new("."));
    for file in files_named(&native) {
        if Path::new(&file).is_relative() && folder.join(&file).is_file() {
            super::note(&format!(
                "{file} is named relative to {}: save the native file there, or copy {file} beside it",
                folder.display()
            ));
        }
    }
    say(&to_json(&native)?);
    Ok(())
}

/// The files a native scenario names (knowledge bases and tools' data: `path` and
/// `file` settings), in the order they appear.
fn files_named(doc: &serde_json::Value) -> Vec<String> {
    let mut found = Vec::new();
    let mut stack = vec![doc];
    while let Some(v) = stack.pop() {
        match v {
            serde_json::Value::Object(map) => {
                for (key, value) in map.iter().rev() {
                    match (key.as_str(), value.as_str()) {
                        ("path" | "file", Some(name)) if !found.iter().any(|f| f == name) => {
                            found.push(name.to_string())
                        }
                        _ => stack.push(value),
                    }
                }
            }
            serde_json::Value::Array(items) => stack.extend(items.iter().rev()),
            _ => {}
        }
    }
    found
}
