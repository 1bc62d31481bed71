//! Judged items for people to rate, and the agreement their ratings show
//! (`sopsim judge export` and `sopsim judge agreement`).
//!
//! Export writes each scored item of a run's or a benchmark's judgements blinded: the
//! transcript with every agent's name replaced by a label drawn for its run from the
//! seed, as `items.csv` and a self-contained `form.html` whose answers download as a
//! ratings file; which label is whom is in `key.json` apart. Agreement reads people's
//! ratings back (`rater,item,score`), refusing an item the key does not hold or a score
//! off its scale, and reports, per dimension: Krippendorff's alpha (interval) among the
//! people, and the judge against their mean (alpha and Spearman's rho), or a second
//! judge against the first, each with a bootstrap interval over the items.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use indexmap::IndexMap;
use rand::seq::SliceRandom;
use rand::SeedableRng;
use serde::{Deserialize, Serialize};
use sopsim::runner::OutputFolder;
use sopsim::simulation::{Judgement, Message};

use crate::agreement::{bootstrap_interval, krippendorff_alpha, spearman, Level};
use crate::stats::Estimate;

/// Why items could not be exported or agreement measured.
#[derive(Debug, thiserror::Error)]
pub enum ItemsError {
    /// A file could not be read, parsed or written.
    #[error("{path}: {why}")]
    File {
        /// The file.
        path: PathBuf,
        /// What went wrong.
        why: String,
    },
    /// A line of a ratings file is not a rating of a known item on its scale.
    #[error("{path}, line {line}: {why}")]
    Ratings {
        /// The ratings file.
        path: PathBuf,
        /// The line, from 1 (the header's).
        line: usize,
        /// What is wrong with it.
        why: String,
    },
    /// The folder has no run with a judgement to export.
    #[error("{0}: no judged run (run `sopsim judge` on it first)")]
    NothingJudged(PathBuf),
}

/// One exported item, as `key.json` keeps it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct KeyItem {
    /// The run's folder.
    pub run: PathBuf,
    /// Whom the item scores: an agent, or `episode` for the conversation as a whole.
    pub subject: String,
    /// The rubric dimension it is scored on.
    pub dimension: String,
    /// The scale's lowest point.
    pub min: i32,
    /// The scale's highest point.
    pub max: i32,
    /// Label → agent.
    pub labels: BTreeMap<String, String>,
}

/// `key.json`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Key {
    /// The seed the labels were drawn from.
    pub seed: u64,
    /// The judgement file the items were read from, in each run's folder.
    pub judgement: String,
    /// The items by id (`item-0001`, …), in the order exported.
    pub items: IndexMap<String, KeyItem>,
}

const MAX_FILE_BYTES: u64 = 256 << 20;

/// The run folders under `folder`: the runs of a benchmark, or the run itself.
fn run_folders(folder: &Path) -> Result<Vec<PathBuf>, ItemsError> {
    if !folder.join("bench.json").is_file() {
        return Ok(vec![folder.to_path_buf()]);
    }
    let jobs = crate::plan::read_jobs(folder).map_err(|e| ItemsError::File {
        path: folder.join("manifest.jsonl"),
        why: sopsim::error::chain(&e),
    })?;
    Ok(jobs.iter().map(|j| folder.join(j.rel_dir())).collect())
}

/// Exports the items of `folder`'s judgements (`judgement`, in each run) into `out`.
pub fn export(folder: &Path, out: &Path, judgement: &str, seed: u64) -> Result<Key, ItemsError> {
    let mut key = Key {
        seed,
        judgement: judgement.to_string(),
        items: IndexMap::new(),
    };
    let mut rows: Vec<[String; 7]> = Vec::new();
    for run in run_folders(folder)? {
        let files = OutputFolder::new(&run);
        let judged = match files.read_json::<Judgement>(judgement, MAX_FILE_BYTES) {
            Ok(j) => j,
            Err(e) if e.is_missing() => continue,
            Err(e) => {
                return Err(ItemsError::File {
                    path: run.join(judgement),
                    why: sopsim::error::chain(&e),
                })
            }
        };
        let log: Vec<Message> = files
            .read_json_lines("transcript.jsonl", MAX_FILE_BYTES)
            .map_err(|e| ItemsError::File {
                path: run.join("transcript.jsonl"),
                why: sopsim::error::chain(&e),
            })?;
        let labels = labels_for(&log, seed, &run);
        let blinded = blinded_transcript(&log, &labels);
        let by_agent: BTreeMap<String, String> =
            labels.iter().map(|(a, l)| (l.clone(), a.clone())).collect();
        for (subject, dims) in &judged.scores {
            for (dimension, scored) in dims {
                let id = format!("item-{:04}", key.items.len() + 1);
                let [min, max] = judged.scales.get(dimension).copied().unwrap_or([
                    scored.samples.iter().copied().fold(f64::INFINITY, f64::min) as i32,
                    scored
                        .samples
                        .iter()
                        .copied()
                        .fold(f64::NEG_INFINITY, f64::max) as i32,
                ]);
                let who = labels
                    .get(subject)
                    .cloned()
                    .unwrap_or_else(|| "the conversation".into());
                rows.push([
                    id.clone(),
                    dimension.clone(),
                    who,
                    min.to_string(),
                    max.to_string(),
                    String::new(),
                    blinded.clone(),
                ]);
                key.items.insert(
                    id,
                    KeyItem {
                        run: run.clone(),
                        subject: subject.clone(),
                        dimension: dimension.clone(),
                        min,
                        max,
                        labels: by_agent.clone(),
                    },
                );
            }
        }
    }
    if key.items.is_empty() {
        return Err(ItemsError::NothingJudged(folder.to_path_buf()));
    }
    let write = |name: &str, bytes: &[u8]| {
        std::fs::create_dir_all(out)
            .and_then(|_| std::fs::write(out.join(name), bytes))
            .map_err(|e| ItemsError::File {
                path: out.join(name),
                why: e.to_string(),
            })
    };
    let mut csv = csv::Writer::from_writer(Vec::new());
    let io = |e: csv::Error| ItemsError::File {
        path: out.join("items.csv"),
        why: e.to_string(),
    };
    csv.write_record([
        "item",
        "dimension",
        "rate",
        "min",
        "max",
        "score",
        "transcript",
    ])
    .map_err(io)?;
    for row in &rows {
        csv.write_record(row).map_err(io)?;
    }
    let csv = csv.into_inner().map_err(|e| ItemsError::File {
        path: out.join("items.csv"),
        why: e.to_string(),
    })?;
    write("items.csv", &csv)?;
    write("form.html", form_html(&rows).as_bytes())?;
    let key_json = serde_json::to_vec_pretty(&key).map_err(|e| ItemsError::File {
        path: out.join("key.json"),
        why: e.to_string(),
    })?;
    write("key.json", &key_json)?;
    Ok(key)
}

/// Each speaker's label in one run: `Participant A`, `B`… in an order drawn from the
/// seed and the run.
fn labels_for(log: &[Message], seed: u64, run: &Path) -> BTreeMap<String, String> {
    let mut names: Vec<String> = Vec::new();
    for m in log {
        if !names.contains(&m.name) {
            names.push(m.name.clone());
        }
    }
    let mut hasher = xxhash_rust::xxh3::Xxh3::with_seed(seed);
    hasher.update(run.to_string_lossy().as_bytes());
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(hasher.digest());
    let mut order: Vec<usize> = (0..names.len()).collect();
    order.shuffle(&mut rng);
    names
        .iter()
        .zip(order)
        .map(|(n, i)| (n.clone(), format!("Participant {}", label(i))))
        .collect()
}

fn label(i: usize) -> String {
    let letters = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ";
    match i {
        i if i < 26 => (letters[i] as char).to_string(),
        i => format!("{}{}", letters[i / 26 - 1] as char, letters[i % 26] as char),
    }
}

/// The transcript with every speaker's name, wherever it appears, replaced by its
/// label (longest names first, so a name inside another is not cut).
fn blinded_transcript(log: &[Message], labels: &BTreeMap<String, String>) -> String {
    let mut names: Vec<(&String, &String)> = labels.iter().collect();
    names.sort_by_key(|(n, _)| std::cmp::Reverse(n.len()));
    let blind = |text: &str| {
        names.iter().fold(text.to_string(), |t, (name, label)| {
            t.replace(name.as_str(), label)
        })
    };
    log.iter()
        .filter(|m| !m.kind.is_tool())
        .map(|m| format!("{}: {}", blind(&m.name), blind(m.content.trim())))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The form people rate the items in: every item with its transcript and a score, and
/// a button that downloads the ratings as `rater,item,score`. Self-contained: no
/// script or style is fetched.
fn form_html(rows: &[[String; 7]]) -> String {
    let items: Vec<serde_json::Value> = rows
        .iter()
        .map(|r| {
            serde_json::json!({"item": r[0], "dimension": r[1], "rate": r[2],
                               "min": r[3], "max": r[4], "transcript": r[6]})
        })
        .collect();
    // Embedded as JSON inside a script, with `<` escaped so no text closes the tag.
    let data = serde_json::Value::Array(items)
        .to_string()
        .replace('<', "\\u003c");
    FORM.replace("/*ITEMS*/[]", &data)
}

const FORM: &str = r#"<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Rate the conversations</title>
<style>body{font-family:sans-serif;max-width:52rem;margin:2rem auto;padding:0 1rem}
pre{white-space:pre-wrap;background:#f4f4f4;padding:.75rem}section{border-bottom:1px solid #ccc;padding:1rem 0}</style>
</head><body>
<h1>Rate the conversations</h1>
<p>Read each conversation, then give the participant named a score on the scale shown. Names are
replaced by labels. When you are done, download your ratings and send the file back.</p>
<p><label>Your name or initials: <input id="rater"></label></p>
<div id="items"></div>
<p><button id="save">Download ratings</button></p>
<script>
const items = /*ITEMS*/[];
const host = document.getElementById("items");
for (const it of items) {
  const s = document.createElement("section");
  const h = document.createElement("h2");
  h.textContent = `${it.item}: ${it.rate}, ${it.dimension} (${it.min} to ${it.max})`;
  const pre = document.createElement("pre");
  pre.textContent = it.transcript;
  const input = document.createElement("input");
  input.type = "number"; input.min = it.min; input.max = it.max; input.step = 1;
  input.dataset.item = it.item;
  s.append(h, pre, input);
  host.append(s);
}
document.getElementById("save").onclick = () => {
  const rater = (document.getElementById("rater").value || "rater").replace(/[",\n]/g, " ");
  const lines = ["rater,item,score"];
  for (const input of host.querySelectorAll("input")) {
    if (input.value !== "") lines.push(`${rater},${input.dataset.item},${input.value}`);
  }
  const a = document.createElement("a");
  a.href = URL.createObjectURL(new Blob([lines.join("\n") + "\n"], {type: "text/csv"}));
  a.download = `ratings-${rater}.csv`;
  a.click();
};
</script>
</body></html>
"#;

/// One rater's score of one item.
#[derive(Debug, Clone, PartialEq)]
pub struct Rating {
    /// The rater's name, as the file gives it.
    pub rater: String,
    /// The item's id.
    pub item: String,
    /// The score, on the item's scale.
    pub score: f64,
}

/// Reads a ratings file against `key`: every line a known item and a score on its
/// scale, each error naming the line.
pub fn read_ratings(path: &Path, key: &Key) -> Result<Vec<Rating>, ItemsError> {
    let text = sopsim_core::files::read_text_bounded(path, MAX_FILE_BYTES).map_err(|e| {
        ItemsError::File {
            path: path.to_path_buf(),
            why: e.to_string(),
        }
    })?;
    let mut reader = csv::ReaderBuilder::new()
        .trim(csv::Trim::All)
        .from_reader(text.as_bytes());
    let bad = |line: usize, why: String| ItemsError::Ratings {
        path: path.to_path_buf(),
        line,
        why,
    };
    let headers = reader.headers().map_err(|e| bad(1, e.to_string()))?.clone();
    let column = |name: &str| {
        headers.iter().position(|h| h == name).ok_or_else(|| {
            bad(
                1,
                format!("no {name} column (the columns are rater,item,score)"),
            )
        })
    };
    let (rater, item, score) = (column("rater")?, column("item")?, column("score")?);
    let mut out = Vec::new();
    for (i, record) in reader.records().enumerate() {
        let line = i + 2;
        let record = record.map_err(|e| bad(line, e.to_string()))?;
        let field = |at: usize| record.get(at).unwrap_or("").to_string();
        let id = field(item);
        let Some(k) = key.items.get(&id) else {
            return Err(bad(line, format!("{id:?} is no item of the key")));
        };
        let value: f64 = field(score)
            .parse()
            .map_err(|_| bad(line, format!("{:?} is not a number", field(score))))?;
        if !(f64::from(k.min)..=f64::from(k.max)).contains(&value) {
            return Err(bad(
                line,
                format!("{value} is off {id}'s scale ({} to {})", k.min, k.max),
            ));
        }
        out.push(Rating {
            rater: field(rater),
            item: id,
            score: value,
        });
    }
    Ok(out)
}

/// One dimension's agreement.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct DimensionAgreement {
    /// Items of the dimension in the key.
    pub items: usize,
    /// People who rated at least one of them.
    pub raters: usize,
    /// Krippendorff's alpha (interval) among the people.
    pub people_alpha: Option<Estimate>,
    /// Krippendorff's alpha (interval) between the judge and the people's mean.
    pub judge_alpha: Option<Estimate>,
    /// Spearman's rho between the judge and the people's mean.
    pub judge_rho: Option<Estimate>,
    /// Krippendorff's alpha (interval) between a second judge and the first.
    pub judges_alpha: Option<Estimate>,
    /// Spearman's rho between the two judges.
    pub judges_rho: Option<Estimate>,
}

/// Bootstrap resamples of an interval.
const RESAMPLES: usize = 2000;

/// The agreement of `ratings` (people's) and the judgements named, per dimension.
pub fn agreement(
    key: &Key,
    ratings: &[Rating],
    judgement: &str,
    second: Option<&str>,
) -> Result<IndexMap<String, DimensionAgreement>, ItemsError> {
    let judged = |name: &str| -> Result<BTreeMap<String, f64>, ItemsError> {
        let mut cache: BTreeMap<PathBuf, Judgement> = BTreeMap::new();
        let mut out = BTreeMap::new();
        for (id, k) in &key.items {
            if !cache.contains_key(&k.run) {
                let j = OutputFolder::new(&k.run)
                    .read_json::<Judgement>(name, MAX_FILE_BYTES)
                    .map_err(|e| ItemsError::File {
                        path: k.run.join(name),
                        why: sopsim::error::chain(&e),
                    })?;
                cache.insert(k.run.clone(), j);
            }
            if let Some(s) = cache[&k.run]
                .scores
                .get(&k.subject)
                .and_then(|d| d.get(&k.dimension))
            {
                out.insert(id.clone(), s.score);
            }
        }
        Ok(out)
    };
    let first = judged(judgement)?;
    let other = second.map(judged).transpose()?;
    let raters: Vec<&str> = {
        let mut r: Vec<&str> = ratings.iter().map(|r| r.rater.as_str()).collect();
        r.sort_unstable();
        r.dedup();
        r
    };
    let mut out = IndexMap::new();
    let mut dimensions: Vec<&str> = key.items.values().map(|k| k.dimension.as_str()).collect();
    dimensions.dedup();
    let mut seen = Vec::new();
    for d in dimensions {
        if seen.contains(&d) {
            continue;
        }
        seen.push(d);
        let ids: Vec<&String> = key
            .items
            .iter()
            .filter(|(_, k)| k.dimension == d)
            .map(|(id, _)| id)
            .collect();
        let matrix: Vec<Vec<Option<f64>>> = raters
            .iter()
            .map(|r| {
                ids.iter()
                    .map(|id| {
                        ratings
                            .iter()
                            .find(|x| x.rater == *r && &x.item == *id)
                            .map(|x| x.score)
                    })
                    .collect()
            })
            .collect();
        let people_mean: Vec<Option<f64>> = (0..ids.len())
            .map(|i| {
                let v: Vec<f64> = matrix.iter().filter_map(|row| row[i]).collect();
                (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
            })
            .collect();
        let judge: Vec<Option<f64>> = ids.iter().map(|id| first.get(*id).copied()).collect();
        let people_alpha = (raters.len() >= 2)
            .then(|| estimate(&matrix, Stat::Alpha))
            .flatten();
        let with_people = vec![judge.clone(), people_mean];
        let judge_alpha = (!raters.is_empty())
            .then(|| estimate(&with_people, Stat::Alpha))
            .flatten();
        let judge_rho = (!raters.is_empty())
            .then(|| estimate(&with_people, Stat::Rho))
            .flatten();
        let (judges_alpha, judges_rho) = match &other {
            Some(o) => {
                let two = vec![
                    judge.clone(),
                    ids.iter().map(|id| o.get(*id).copied()).collect(),
                ];
                (estimate(&two, Stat::Alpha), estimate(&two, Stat::Rho))
            }
            None => (None, None),
        };
        out.insert(
            d.to_string(),
            DimensionAgreement {
                items: ids.len(),
                raters: raters.len(),
                people_alpha,
                judge_alpha,
                judge_rho,
                judges_alpha,
                judges_rho,
            },
        );
    }
    Ok(out)
}

#[derive(Clone, Copy)]
enum Stat {
    Alpha,
    Rho,
}

/// `stat` over the raters × items `matrix`, and its bootstrap interval over the items.
fn estimate(matrix: &[Vec<Option<f64>>], stat: Stat) -> Option<Estimate> {
    let items = matrix.first().map_or(0, Vec::len);
    let of = |picked: &[usize]| -> Option<f64> {
        let sub: Vec<Vec<Option<f64>>> = matrix
            .iter()
            .map(|row| picked.iter().map(|&i| row[i]).collect())
            .collect();
        match stat {
            Stat::Alpha => krippendorff_alpha(&sub, Level::Interval),
            Stat::Rho => {
                let pairs: Vec<(f64, f64)> = (0..picked.len())
                    .filter_map(|i| Some((sub[0][i]?, sub.get(1)?[i]?)))
                    .collect();
                let (x, y): (Vec<f64>, Vec<f64>) = pairs.into_iter().unzip();
                spearman(&x, &y)
            }
        }
    };
    let all: Vec<usize> = (0..items).collect();
    let value = of(&all)?;
    Some(Estimate {
        value,
        ci95: bootstrap_interval(items, &of, RESAMPLES, 0, 0.95).map(|(lo, hi)| [lo, hi]),
    })
}

/// Reads `key.json` from the folder `export` wrote.
pub fn read_key(items: &Path) -> Result<Key, ItemsError> {
    let path = items.join("key.json");
    let text = sopsim_core::files::read_text_bounded(&path, MAX_FILE_BYTES).map_err(|e| {
        ItemsError::File {
            path: path.clone(),
            why: e.to_string(),
        }
    })?;
    serde_json::from_str(&text).map_err(|e| ItemsError::File {
        path,
        why: e.to_string(),
    })
}

/// A `--judge` file: its spec, checked (each problem named by its field), and the
/// folder its rubric file is read from.
pub fn read_judge_file(
    path: &Path,
) -> Result<(sopsim::scenario::judge::JudgeSpec, PathBuf), ItemsError> {
    let bad = |why: String| ItemsError::File {
        path: path.to_path_buf(),
        why,
    };
    let text =
        sopsim_core::files::read_text_bounded(path, 1 << 20).map_err(|e| bad(e.to_string()))?;
    let value = sopsim_core::user_json::parse(&text).map_err(|e| bad(e.to_string()))?;
    let spec: sopsim::scenario::judge::JudgeSpec =
        serde_path_to_error::deserialize(value).map_err(|e| bad(e.to_string()))?;
    let folder = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let problems =
        sopsim::scenario::judge::check(&spec, &folder, sopsim::scenario::FieldPath::root());
    if !problems.is_empty() {
        let said: Vec<String> = problems.iter().map(|(p, m)| format!("{p}: {m}")).collect();
        return Err(bad(said.join("; ")));
    }
    Ok((spec, folder))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Raters × items of the reference matrix (`krippendorff` 0.9.0 gives it an interval
    /// alpha of 0.9465511014806789), scored 0 to 10, with gaps.
    const PEOPLE: [[Option<f64>; 12]; 4] = {
        const N: Option<f64> = None;
        const fn s(v: f64) -> Option<f64> {
            Some(v)
        }
        [
            [
                s(7.),
                s(3.),
                s(9.),
                s(5.),
                s(2.),
                s(8.),
                N,
                s(6.),
                s(10.),
                s(4.),
                s(1.),
                s(7.),
            ],
            [
                s(8.),
                s(3.),
                s(9.),
                s(4.),
                s(2.),
                s(7.),
                s(5.),
                s(6.),
                s(9.),
                N,
                s(0.),
                N,
            ],
            [
                s(7.),
                s(4.),
                s(10.),
                s(5.),
                s(3.),
                s(8.),
                s(5.),
                N,
                s(9.),
                s(4.),
                s(1.),
                N,
            ],
            [
                N,
                s(2.),
                s(9.),
                s(6.),
                s(2.),
                s(9.),
                s(6.),
                s(7.),
                N,
                s(5.),
                N,
                N,
            ],
        ]
    };
    const JUDGE: [f64; 12] = [7., 3., 8., 5., 3., 8., 6., 6., 9., 4., 2., 6.];

    /// Twelve items in three runs' judgements, and the people's ratings of them.
    fn rated() -> (tempfile::TempDir, Key, Vec<Rating>) {
        let dir = tempfile::tempdir().unwrap();
        let mut key = Key {
            seed: 0,
            judgement: "judgement.json".into(),
            items: IndexMap::new(),
        };
        for run in 0..3 {
            let folder = dir.path().join(format!("run-{run}"));
            std::fs::create_dir(&folder).unwrap();
            let mut scores = IndexMap::new();
            for agent in 0..4 {
                let i = run * 4 + agent;
                let subject = format!("A{agent}");
                let score = sopsim_core::judging::ItemScore {
                    score: JUDGE[i],
                    sd: None,
                    expected: None,
                    samples: vec![JUDGE[i]],
                    raw: vec![JUDGE[i].to_string()],
                };
                scores.insert(
                    subject.clone(),
                    IndexMap::from([("goal".to_string(), score)]),
                );
                key.items.insert(
                    format!("item-{i:02}"),
                    KeyItem {
                        run: folder.clone(),
                        subject,
                        dimension: "goal".into(),
                        min: 0,
                        max: 10,
                        labels: BTreeMap::new(),
                    },
                );
            }
            let judgement = Judgement {
                rubric: "test".into(),
                source: None,
                judge: "judge".into(),
                run_models: Vec::new(),
                shares_a_model: false,
                samples: 1,
                scales: IndexMap::from([("goal".to_string(), [0, 10])]),
                scores,
                failed: Vec::new(),
                calls: 4,
                prompt_tokens: 0,
                completion_tokens: 0,
            };
            std::fs::write(
                folder.join("judgement.json"),
                serde_json::to_vec(&judgement).unwrap(),
            )
            .unwrap();
        }
        let mut ratings = Vec::new();
        for (r, row) in PEOPLE.iter().enumerate() {
            for (i, v) in row.iter().enumerate() {
                if let Some(v) = v {
                    ratings.push(Rating {
                        rater: format!("p{r}"),
                        item: format!("item-{i:02}"),
                        score: *v,
                    });
                }
            }
        }
        (dir, key, ratings)
    }

    #[test]
    fn agreement_matches_the_reference_implementation() {
        let (_dir, key, ratings) = rated();
        let a = agreement(&key, &ratings, "judgement.json", Some("judgement.json")).unwrap();
        let goal = &a["goal"];
        assert_eq!((goal.items, goal.raters), (12, 4));
        // krippendorff 0.9.0 and scipy 1.17.1 on the same numbers.
        let close = |e: &Option<Estimate>, x: f64| (e.unwrap().value - x).abs() < 1e-9;
        assert!(close(&goal.people_alpha, 0.9465511014806789), "{goal:?}");
        assert!(close(&goal.judge_alpha, 0.9597189439819909), "{goal:?}");
        assert!(close(&goal.judge_rho, 0.9894548898363074), "{goal:?}");
        assert!(close(&goal.judges_alpha, 1.0), "a judge agrees with itself");
        let [lo, hi] = goal.people_alpha.unwrap().ci95.unwrap();
        assert!(lo <= 0.9465511014806789 && 0.9465511014806789 <= hi);
    }

    #[test]
    fn a_ratings_file_with_unknown_items_or_scores_off_the_scale_is_refused_by_line() {
        let (dir, key, _) = rated();
        let file = dir.path().join("ratings.csv");
        for (text, says) in [
            (
                "rater,item,score\np1,item-00,7\np1,item-99,3\n",
                "line 3: \"item-99\" is no item",
            ),
            (
                "rater,item,score\np1,item-00,11\n",
                "line 2: 11 is off item-00's scale (0 to 10)",
            ),
            (
                "rater,item,score\np1,item-00,seven\n",
                "line 2: \"seven\" is not a number",
            ),
            ("who,item,score\np1,item-00,7\n", "line 1: no rater column"),
        ] {
            std::fs::write(&file, text).unwrap();
            let e = read_ratings(&file, &key).unwrap_err().to_string();
            assert!(e.contains(says), "{e}");
        }
        std::fs::write(&file, "rater,item,score\np1, item-00 ,7\n").unwrap();
        assert_eq!(read_ratings(&file, &key).unwrap().len(), 1);
    }
}
