//! The programs a scenario would start (its `mcp` tools' servers), and the user's
//! consent to start them. Scenario files are shared like documents, so a file alone
//! never runs a program: the person running it allows each program, or every MCP
//! server, when they start the run.

use super::{FieldPath, Scenario, ToolSettings};

/// A program a scenario would start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StartedProgram {
    /// The field that names it: `tools.NAME.config.command`.
    pub field: FieldPath,
    /// The program to run, as `config.command` names it.
    pub program: String,
    /// The arguments passed to the program.
    pub args: Vec<String>,
}

impl StartedProgram {
    /// The command line, each word quoted where the shell would need it.
    pub fn command_line(&self) -> String {
        std::iter::once(&self.program)
            .chain(&self.args)
            .map(|w| shell_quote(w))
            .collect::<Vec<_>>()
            .join(" ")
    }
}

fn shell_quote(word: &str) -> String {
    let plain = !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./=:,+@%".contains(c));
    if plain {
        word.to_string()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}

/// Every program the scenario's tools would start, in the order of its tools.
pub fn started_programs(scenario: &Scenario) -> Vec<StartedProgram> {
    scenario
        .tools
        .iter()
        .filter_map(|(name, spec)| {
            let (ToolSettings::Mcp(settings), _) =
                ToolSettings::read(spec.kind, &spec.config).ok()?
            else {
                return None;
            };
            let command = settings.command().ok()?;
            Some(StartedProgram {
                field: FieldPath::root()
                    .key("tools")
                    .key(name)
                    .key("config")
                    .key("command"),
                program: command.program,
                args: command.args,
            })
        })
        .collect()
}

/// Which programs a run may start.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum CommandConsent {
    /// None: a scenario that would start one is refused before anything runs.
    #[default]
    Nothing,
    /// These programs, as the scenario names them (`config.command`, compared exactly).
    Programs(Vec<String>),
    /// Any MCP server the scenario names.
    AnyMcpServer,
}

/// A program the scenario would start without the user's consent.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}: the scenario would start `{}`, which was not allowed", .0.field, .0.command_line())]
pub struct NotAllowed(pub StartedProgram);

impl CommandConsent {
    /// Whether this consent lets a run start `program` (compared exactly).
    pub fn allows(&self, program: &str) -> bool {
        match self {
            CommandConsent::Nothing => false,
            CommandConsent::Programs(allowed) => allowed.iter().any(|p| p == program),
            CommandConsent::AnyMcpServer => true,
        }
    }

    /// The first program the scenario would start that this consent does not cover.
    pub fn check(&self, scenario: &Scenario) -> Result<(), NotAllowed> {
        match started_programs(scenario)
            .into_iter()
            .find(|p| !self.allows(&p.program))
        {
            Some(p) => Err(NotAllowed(p)),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scenario() -> Scenario {
        let doc = serde_json::json!({
            "name": "t",
            "agents": {"Ada": {"roles": {"s": "R"}}},
            "tools": {
                "calc": {"kind": "calculator"},
                "search": {"kind": "mcp", "config": {
                    "command": "sh", "args": ["-c", "echo 'hi'; rm -rf x"], "tool": "find"}},
                "files": {"kind": "mcp", "config": {"command": "/usr/bin/mcp-files", "tool": "ls"}}
            },
            "sop": {"start": "s", "states": {"s": {"roles": ["R"],
                "components": {"R": {"tools": ["calc", "search", "files"]}},
                "transition": {"max_turns": 1}, "next": ["end"]}}}
        });
        super::super::from_document(std::path::Path::new("t.json"), doc).unwrap()
    }

    #[test]
    fn every_started_program_is_listed_with_its_field_and_command_line() {
        let listed = started_programs(&scenario());
        let lines: Vec<String> = listed
            .iter()
            .map(|p| format!("{}: {}", p.field, p.command_line()))
            .collect();
        assert_eq!(
            lines,
            [
                r#"tools.search.config.command: sh -c 'echo '\''hi'\''; rm -rf x'"#,
                "tools.files.config.command: /usr/bin/mcp-files",
            ]
        );
    }

    #[test]
    fn a_program_runs_only_with_consent() {
        let s = scenario();
        let refused = CommandConsent::Nothing.check(&s).unwrap_err();
        assert_eq!(refused.0.field.to_string(), "tools.search.config.command");
        let some = CommandConsent::Programs(vec!["sh".into()]);
        assert_eq!(
            some.check(&s).unwrap_err().0.program,
            "/usr/bin/mcp-files",
            "compared exactly, not by file name"
        );
        let both = CommandConsent::Programs(vec!["sh".into(), "/usr/bin/mcp-files".into()]);
        assert_eq!(both.check(&s), Ok(()));
        assert_eq!(CommandConsent::AnyMcpServer.check(&s), Ok(()));
    }
}
