//! The reference of the files a run's probes and judge, `sopsim judge agreement` and
//! `sopsim tournament` write, generated from the types they are written from
//! (`docs/reference/measuring-files.md` is this, checked by a test).

use indexmap::IndexMap;
use sopsim::scenario::probes::ProbeLine;
use sopsim::scenario::reference::files_markdown;
use sopsim::simulation::Judgement;

use crate::judged_items::DimensionAgreement;
use crate::tournament::report::TournamentReport;
use crate::tournament::Roster;

/// The page, in Markdown.
pub fn markdown() -> String {
    let schema = |s: schemars::Schema| s.to_value();
    files_markdown(
        "Files of measuring",
        "Generated from the types these files are written from; every description is \
         their own documentation. The guide is `docs/guide/measuring.md`.",
        &[
            (
                "`probes.jsonl`",
                "In a run's folder: one answer to a probe a line, as it comes.",
                schema(schemars::schema_for!(ProbeLine)),
            ),
            (
                "`judgement.json`",
                "In a run's folder, after the run (its `judge` or `--judge FILE`) or \
                 `sopsim judge`; `--into NAME` writes it under another name.",
                schema(schemars::schema_for!(Judgement)),
            ),
            (
                "`sopsim judge agreement --format json`",
                "Printed, for each dimension of the exported items:",
                schema(schemars::schema_for!(IndexMap<String, DimensionAgreement>)),
            ),
            (
                "A tournament's roster (`--players ROSTER.json`)",
                "Read: the players and how they meet; another key is refused, naming it.",
                schema(schemars::schema_for!(Roster)),
            ),
            (
                "A tournament's `report.json`",
                "In a tournament's folder: the same games give the same bytes.",
                schema(schemars::schema_for!(TournamentReport)),
            ),
        ],
    )
}
