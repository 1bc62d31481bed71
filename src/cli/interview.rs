//! `sopsim interview`: a question put to a finished run's agent, answered on the
//! terminal; the run's folder is only read.

use std::sync::Arc;

use super::args::InterviewArgs;
use super::failure::Failure;
use super::progress::FetchProgress;
use super::terminal::printable;

pub(super) fn interview(args: InterviewArgs) -> Result<(), Failure> {
    let opts = sopsim::InterviewOptions {
        folder: args.run,
        agent: args.agent,
        question: args.question,
        at: args.at,
        scenario: args.scenario,
        models: args.models.options(Arc::new(FetchProgress::default())),
    };
    let answered = sopsim::interview(&opts)?;
    if answered.model != answered.run_model {
        super::note(&format!(
            "{} answers; the run was made with {}",
            answered.model, answered.run_model
        ));
    }
    println!("{}: {}", answered.agent, printable(&answered.answer));
    Ok(())
}
