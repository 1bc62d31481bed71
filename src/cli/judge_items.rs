//! `sopsim judge export` and `sopsim judge agreement`: the command line over
//! `sopsim_bench::judged_items`.

use std::path::Path;

use super::args::Format;
use super::failure::Failure;
use sopsim_bench::judged_items::{self, ItemsError};
use sopsim_bench::stats::Estimate;

fn failure(e: ItemsError) -> Failure {
    Failure::BadInput(sopsim::error::chain(&e))
}

pub(super) fn export(folder: &Path, out: &Path, judgement: &str, seed: u64) -> Result<(), Failure> {
    let key = judged_items::export(folder, out, judgement, seed).map_err(failure)?;
    println!(
        "{} item(s) for people to rate: {} and {}; the key is {} (keep it from the raters)",
        key.items.len(),
        out.join("items.csv").display(),
        out.join("form.html").display(),
        out.join("key.json").display()
    );
    Ok(())
}

pub(super) fn agreement(
    items: &Path,
    ratings: Option<&Path>,
    judgement: &str,
    second: Option<&str>,
    format: Format,
) -> Result<(), Failure> {
    if ratings.is_none() && second.is_none() {
        return Err(Failure::BadInput(
            "--ratings or --second: agreement needs people's ratings or a second judge".into(),
        ));
    }
    let key = judged_items::read_key(items).map_err(failure)?;
    let rated = match ratings {
        Some(path) => judged_items::read_ratings(path, &key).map_err(failure)?,
        None => Vec::new(),
    };
    let by_dimension = judged_items::agreement(&key, &rated, judgement, second).map_err(failure)?;
    if format == Format::Json {
        let json = serde_json::to_string_pretty(&by_dimension)
            .map_err(|e| Failure::Runtime(e.to_string()))?;
        println!("{json}");
        return Ok(());
    }
    let shown = |e: &Option<Estimate>| match e {
        Some(Estimate {
            value,
            ci95: Some([lo, hi]),
        }) => format!("{value:.3} [{lo:.3}, {hi:.3}]"),
        Some(Estimate { value, ci95: None }) => format!("{value:.3}"),
        None => "-".into(),
    };
    println!(
        "dimension  items  raters  people alpha  judge alpha  judge rho  judges alpha  judges rho"
    );
    for (d, a) in &by_dimension {
        println!(
            "{d}  {}  {}  {}  {}  {}  {}  {}",
            a.items,
            a.raters,
            shown(&a.people_alpha),
            shown(&a.judge_alpha),
            shown(&a.judge_rho),
            shown(&a.judges_alpha),
            shown(&a.judges_rho)
        );
    }
    Ok(())
}
