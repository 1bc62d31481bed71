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

fn to_json(value: &serde_json::Value) -> Result<String, Failure> {
    serde_json::to_string_pretty(value).map_err(|e| Failure::runtime(&e))
}

pub fn validate(
    path: &Path,
    format: Format,
    allowed: &[std::path::PathBuf],
) -> Result<(), Failure> {
    // Populations this machine could not run are refused before their members are
    // made, and a scenario whose styles would not fit either is not valid here.
    let loaded = match sopsim::setup::load(path, allowed) {
        Ok(loaded) => Ok(loaded),
        Err(sopsim::setup::SetupError::Scenario(e)) => Err(e),
        Err(e) => return Err(Failure::BadInput(sopsim::error::chain(&e))),
    };
    let too_big = loaded
        .as_ref()
        .ok()
        .and_then(|(s, _)| sopsim::setup::check_memory(path, s, 1).err());
    if format == Format::Json {
        let verdict = match (&loaded, &too_big) {
            (Ok(_), Some(e)) => {
                json!({"file": path.display().to_string(), "valid": false, "problems": [{"path": "populations", "message": sopsim::error::chain(e)}], "notes": [], "starts": []})
            }
            (Ok((s, _)), None) => json!({
                "file": path.display().to_string(),
                "valid": true,
                "states": s.sop.states.len(),
                "agents": s.agents.len(),
                "problems": [],
                "notes": scenario::advice(s).iter().map(|n| json!({"path": n.path.to_string(), "message": n.message})).collect::<Vec<_>>(),
                "starts": scenario::started_programs(s).iter().map(|p| json!({"path": p.field.to_string(), "program": p.program, "args": p.args})).collect::<Vec<_>>(),
            }),
            (Err(e), _) => {
                let problems: Vec<_> = match e {
                    ScenarioError::Invalid { problems, .. } => problems
                        .iter()
                        .map(|p| json!({"path": p.path.to_string(), "message": p.message}))
                        .collect(),
                    other => vec![json!({"path": "", "message": sopsim::error::chain(other)})],
                };
                json!({"file": path.display().to_string(), "valid": false, "problems": problems, "notes": [], "starts": []})
            }
        };
        say(&to_json(&verdict)?);
        if let Some(e) = too_big {
            return Err(Failure::BadInput(sopsim::error::chain(&e)));
        }
        return loaded.map(|_| ()).map_err(bad);
    }
    let (s, _) = loaded.map_err(bad)?;
    if let Some(e) = too_big {
        return Err(Failure::BadInput(sopsim::error::chain(&e)));
    }
    for note in scenario::advice(&s) {
        super::note(&note.to_string());
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

pub fn schema(format: SchemaFormat) -> Result<(), Failure> {
    match format {
        SchemaFormat::Json => say(&to_json(scenario::schema())?),
        SchemaFormat::Markdown => say(scenario::reference::markdown().trim_end()),
    }
    Ok(())
}

pub fn import_aiwaves(config: &Path) -> Result<(), Failure> {
    let text = scenario::read_text(config).map_err(bad)?;
    let doc = scenario::parse_json(config, &text).map_err(bad)?;
    if !scenario::aiwaves::is_aiwaves(&doc) {
        return Err(Failure::BadInput(format!(
            "{}: not an aiwaves config (it has no root, relations and states)",
            config.display()
        )));
    }
    let (native, imported) = scenario::import_aiwaves(config, &doc).map_err(bad)?;
    scenario::from_document(config, native.clone()).map_err(bad)?;
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
