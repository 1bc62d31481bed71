//! The web viewer in a real browser (headless Chromium through chromedriver): what a
//! person watching a run sees, the controls, a person's turn typed in the page, a
//! reloaded page, model text shown as text, and a benchmark's page. Screenshots of each
//! view go to `target/viewer-*.png`. Also the server's answers to bad requests.
//!
//! The browser tests need `chromium` and `chromium-driver`; without them each says so in
//! a line and passes, unless `SOPSIM_REQUIRE_BROWSER` is set (as `.ci/run` sets it), when
//! it fails.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::{json, Value};

use crate::common::root;

/// A child process killed when dropped.
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// chromedriver, in a process group of its own with the browsers it starts: all are
/// killed when dropped, for a browser whose session a failed test never closed would
/// outlive chromedriver.
struct Driver(Child);

impl Drop for Driver {
    fn drop(&mut self) {
        // SAFETY: kill(2) on the group this child leads; no memory is involved.
        unsafe { libc::kill(-(self.0.id() as libc::pid_t), libc::SIGKILL) };
        let _ = self.0.wait();
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Whether `program` is an executable file on the `PATH`.
fn installed(program: &str) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::env::var_os("PATH").is_some_and(|path| {
        std::env::split_paths(&path).any(|dir| {
            std::fs::metadata(dir.join(program))
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
    })
}

/// Starts chromedriver and waits until it listens; `None`, after a line that says what
/// to install, where the browser is missing and `SOPSIM_REQUIRE_BROWSER` is not set.
fn chromedriver() -> Option<(Driver, String)> {
    use std::os::unix::process::CommandExt;
    if !(installed("chromedriver") && installed("chromium")) {
        let install = "apt-get install -y chromium chromium-driver";
        assert!(
            std::env::var_os("SOPSIM_REQUIRE_BROWSER").is_none(),
            "SOPSIM_REQUIRE_BROWSER is set and the browser is missing: {install}"
        );
        eprintln!("skipped: this viewer test needs a browser ({install})");
        return None;
    }
    let port = free_port();
    let child = Command::new("chromedriver")
        .arg(format!("--port={port}"))
        .process_group(0)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("chromedriver is not installed: apt-get install -y chromium chromium-driver");
    let child = Driver(child);
    let deadline = Instant::now() + Duration::from_secs(20);
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "chromedriver did not start");
        std::thread::sleep(Duration::from_millis(50));
    }
    Some((child, format!("http://127.0.0.1:{port}")))
}

async fn browser(driver: &str) -> Client {
    let mut caps = serde_json::Map::new();
    caps.insert(
        "goog:chromeOptions".into(),
        json!({ "args": ["--headless=new", "--no-sandbox", "--disable-gpu",
                          "--disable-dev-shm-usage", "--window-size=1280,900"] }),
    );
    // chromedriver is plain HTTP on loopback: no TLS stack needed.
    ClientBuilder::new(hyper_util::client::legacy::connect::HttpConnector::new())
        .capabilities(caps)
        .connect(driver)
        .await
        .expect("headless Chromium through chromedriver")
}

/// Starts sopsim with `args` and returns it with the URL it printed.
fn sopsim(args: &[&str]) -> (Killed, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_sopsim"))
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let child = Killed(child);
    let mut lines = BufReader::new(stdout).lines();
    let url = loop {
        let line = lines.next().expect("sopsim printed no URL").unwrap();
        if let Some(i) = line.find("http://") {
            break line[i..].split_whitespace().next().unwrap().to_string();
        }
    };
    // Keep reading so the child never blocks on a full pipe.
    std::thread::spawn(move || for _ in lines {});
    (child, url)
}

async fn eval(client: &Client, script: &str) -> Value {
    client.execute(script, vec![]).await.unwrap()
}

/// (speaker, text) of every finished message on the page, in order.
async fn messages(client: &Client) -> Vec<(String, String)> {
    let v = eval(
        client,
        "return [...document.querySelectorAll('#transcript .msg:not(.streaming)')]
            .map(m => [m.dataset.name, m.querySelector('.text').textContent]);",
    )
    .await;
    serde_json::from_value(v).unwrap()
}

async fn wait_for<F, Fut>(what: &str, mut ready: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + Duration::from_secs(30);
    while !ready().await {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn wait_for_messages(client: &Client, n: usize) {
    wait_for(&format!("{n} messages"), || async {
        messages(client).await.len() == n
    })
    .await;
}

async fn click(client: &Client, id: &str) {
    client
        .find(Locator::Id(id))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
}

/// Types `text` in `name`'s input box and sends it.
async fn type_in(client: &Client, name: &str, text: &str) {
    let form = format!("#human form[data-name='{name}']");
    client
        .find(Locator::Css(&format!("{form} textarea")))
        .await
        .unwrap()
        .send_keys(text)
        .await
        .unwrap();
    client
        .find(Locator::Css(&format!("{form} button")))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
}

async fn screenshot(client: &Client, name: &str) {
    let png = client.screenshot().await.unwrap();
    std::fs::write(
        root().join("target").join(format!("viewer-{name}.png")),
        png,
    )
    .unwrap();
}

/// (speaker, text) of the transcript's messages, as the page shows them: tool calls
/// and results appear as their own events instead.
fn transcript(dir: &Path) -> Vec<(String, String)> {
    std::fs::read_to_string(dir.join("transcript.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|v| !matches!(v["kind"].as_str(), Some("tool_call" | "tool_result")))
        .map(|v| {
            (
                v["name"].as_str().unwrap().to_string(),
                v["content"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

/// The debate, with one of Ben's replies written to break out of the page.
fn hostile_debate(dir: &Path) -> PathBuf {
    let mut doc: Value = serde_json::from_str(
        &std::fs::read_to_string(root().join("scenarios/debate.json")).unwrap(),
    )
    .unwrap();
    doc["script"]["agents"]["Ben"] = json!(["<script>alert(1)</script></script><b>bold</b>"]);
    let path = dir.join("debate.json");
    std::fs::write(&path, doc.to_string()).unwrap();
    path
}

async fn wait_for_population_panel(client: &Client) {
    wait_for("the population panel", || async {
        eval(
            client,
            "return !document.getElementById('population').hidden;",
        )
        .await
            == true
    })
    .await;
}

/// Pairs of the share chart's labels (ticks, axis title, legend) whose boxes overlap.
async fn overlapping_chart_labels(client: &Client) -> Value {
    eval(
        client,
        "const boxes = [...document.querySelectorAll('#shares text')].map(t => [t.textContent, t.getBBox()]);
         const out = [];
         for (let i = 0; i < boxes.length; i++) for (let j = i + 1; j < boxes.length; j++) {
           const [a, p] = boxes[i], [b, q] = boxes[j];
           if (p.x < q.x + q.width && q.x < p.x + p.width && p.y < q.y + q.height && q.y < p.y + p.height)
             out.push([a, b]);
         }
         return out;",
    )
    .await
}

#[tokio::test]
async fn a_hundred_citizens_choosing_among_eleven_amounts_get_a_chart_that_reads() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let scenario = root().join("scenarios/networked_public_goods.json");
    let status = Command::new(env!("CARGO_BIN_EXE_sopsim"))
        .args(["run", scenario.to_str().unwrap()])
        .args(["--llm", "scripted", "--quiet", "--out"])
        .arg(&out)
        .status()
        .unwrap();
    assert!(status.success());
    let Some((_driver, driver_url)) = chromedriver() else {
        return;
    };
    let client = browser(&driver_url).await;
    let (_server, url) = sopsim(&["serve", out.to_str().unwrap()]);
    client.goto(&url).await.unwrap();
    wait_for_messages(&client, 300).await;
    wait_for_population_panel(&client).await;
    let legend = eval(
        &client,
        "return [...document.querySelectorAll('#shares text.legend')].map(t => t.textContent);",
    )
    .await;
    let amounts: Vec<String> = serde_json::from_value(legend).unwrap();
    assert!(
        amounts.len() >= 2,
        "a legend entry per amount chosen: {amounts:?}"
    );
    let ticks = eval(
        &client,
        "return [...document.querySelectorAll('#shares text.tick')].map(t => t.textContent);",
    )
    .await;
    assert_eq!(
        ticks,
        json!(["0%", "50%", "100%", "1", "2", "3"]),
        "shares and rounds"
    );
    assert_eq!(overlapping_chart_labels(&client).await, json!([]));
    screenshot(&client, "population-100").await;
    client.close().await.unwrap();
}

#[tokio::test]
async fn a_population_run_shows_choice_shares_its_network_and_one_members_view() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let status = Command::new(env!("CARGO_BIN_EXE_sopsim"))
        .args([
            "run",
            root()
                .join("scenarios/spatial_dilemma.json")
                .to_str()
                .unwrap(),
        ])
        .args(["--llm", "scripted", "--quiet", "--seed", "3", "--out"])
        .arg(&out)
        .status()
        .unwrap();
    assert!(status.success());
    let network: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("network.json")).unwrap()).unwrap();
    let villagers = &network["populations"][0];
    let names: Vec<String> = serde_json::from_value(villagers["members"].clone()).unwrap();
    let mut expected: Vec<String> = villagers["links"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|l| match (l[0].as_u64().unwrap(), l[1].as_u64().unwrap()) {
            (0, b) => Some(names[b as usize].clone()),
            (a, 0) => Some(names[a as usize].clone()),
            _ => None,
        })
        .collect();
    expected.push("V1".into());
    expected.sort();
    assert_eq!(
        expected.len(),
        9,
        "V1 and its eight neighbours on the torus"
    );

    let Some((_driver, driver_url)) = chromedriver() else {
        return;
    };
    let client = browser(&driver_url).await;
    let (_server, url) = sopsim(&["serve", out.to_str().unwrap()]);
    client.goto(&url).await.unwrap();
    wait_for_messages(&client, 64 * 5).await;
    wait_for_population_panel(&client).await;
    let shares = eval(
        &client,
        "return [...document.querySelectorAll('#shares polyline.share')]
            .map(p => [p.dataset.choice, p.getAttribute('points').split(' ').length]);",
    )
    .await;
    assert_eq!(
        shares,
        json!([["COOPERATE", 5], ["DEFECT", 5]]),
        "a line per choice, a point per round"
    );
    assert_eq!(overlapping_chart_labels(&client).await, json!([]));
    let circles = eval(
        &client,
        "return document.querySelectorAll('#network circle').length;",
    )
    .await;
    assert_eq!(circles, 64);
    let v1 = client
        .find(Locator::Css("#network circle[data-name='V1']"))
        .await
        .unwrap();
    eval(
        &client,
        "document.querySelector(\"#network circle[data-name='V1']\").scrollIntoView({block: 'center'}); return true;",
    )
    .await;
    v1.click().await.unwrap();
    let seen = eval(
        &client,
        "return [...new Set([...document.querySelectorAll('#transcript .msg:not(.unseen)')]
            .map(m => m.dataset.name))].sort();",
    )
    .await;
    assert_eq!(
        seen,
        json!(expected),
        "V1 sees itself and its neighbours only"
    );
    screenshot(&client, "population").await;
    client.close().await.unwrap();
}

#[tokio::test]
async fn a_person_watches_pauses_steps_types_and_reloads_a_live_run() {
    let dir = tempfile::tempdir().unwrap();
    let scenario = hostile_debate(dir.path());
    let out = dir.path().join("out");
    let Some((_driver, driver_url)) = chromedriver() else {
        return;
    };
    let client = browser(&driver_url).await;
    let (_run, url) = sopsim(&[
        "run",
        scenario.to_str().unwrap(),
        "--llm",
        "scripted",
        "--embedder",
        "hash",
        "--serve",
        "--start-paused",
        "--quiet",
        "--out",
        out.to_str().unwrap(),
    ]);
    client.goto(&url).await.unwrap();
    wait_for("the paused badge", || async {
        eval(
            &client,
            "return document.getElementById('status').textContent;",
        )
        .await
            == "paused"
    })
    .await;
    assert!(
        messages(&client).await.is_empty(),
        "paused before the first turn"
    );

    // Step adds exactly one turn; a paused run adds none.
    click(&client, "step").await;
    wait_for_messages(&client, 1).await;
    click(&client, "step").await;
    wait_for_messages(&client, 2).await;
    tokio::time::sleep(Duration::from_millis(800)).await;
    let shown = messages(&client).await;
    assert_eq!(shown.len(), 2, "pause holds: {shown:?}");
    assert_eq!(
        eval(
            &client,
            "return document.querySelector('#graph .node.current').dataset.state;"
        )
        .await,
        "affirmative_prep"
    );

    // The hostile reply is text: no new script element, no alert, no bold element.
    assert_eq!(shown[1].0, "Ben");
    assert_eq!(shown[1].1, "<script>alert(1)</script></script><b>bold</b>");
    assert_eq!(eval(&client, "return document.scripts.length;").await, 1);
    assert_eq!(
        eval(
            &client,
            "return document.querySelectorAll('#transcript b').length;"
        )
        .await,
        0
    );
    assert!(client.get_alert_text().await.is_err(), "no alert opened");
    screenshot(&client, "live").await;

    // A reloaded page shows the run so far.
    client.refresh().await.unwrap();
    wait_for_messages(&client, 2).await;

    // Resume runs to the end; the page shows what transcript.jsonl holds, in order.
    click(&client, "resume").await;
    wait_for("the end", || async {
        eval(
            &client,
            "return document.getElementById('status').textContent;",
        )
        .await
        .as_str()
        .is_some_and(|s| s.starts_with("ended by"))
    })
    .await;
    assert_eq!(messages(&client).await, transcript(&out));
    let last_state = eval(
        &client,
        "return document.querySelector('#graph .node.current').dataset.state;",
    )
    .await;
    let summary: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    assert_eq!(last_state, summary["final_state"]);
    screenshot(&client, "ended").await;

    // A person's turn typed in the page.
    let human = root().join("scenarios/customer_service.json");
    let (_run, url) = sopsim(&[
        "run",
        human.to_str().unwrap(),
        "--llm",
        "scripted",
        "--embedder",
        "hash",
        "--serve",
        "--quiet",
    ]);
    client.goto(&url).await.unwrap();
    wait_for("the input box", || async {
        eval(&client, "return !document.getElementById('human').hidden;").await == true
    })
    .await;
    let before = messages(&client).await.len();
    type_in(&client, "Customer", "My order 1234 never arrived.").await;
    wait_for("the typed turn", || async {
        messages(&client)
            .await
            .iter()
            .skip(before)
            .any(|(name, t)| name == "Customer" && t == "My order 1234 never arrived.")
    })
    .await;
    screenshot(&client, "human").await;
    client.close().await.unwrap();
}

#[tokio::test]
async fn a_finished_run_and_a_benchmark_are_browsable() {
    let dir = tempfile::tempdir().unwrap();
    let bench = dir.path().join("bench");
    let status = Command::new(env!("CARGO_BIN_EXE_sopsim"))
        .args([
            "bench",
            root()
                .join("scenarios/prisoners_dilemma.json")
                .to_str()
                .unwrap(),
        ])
        .args([
            "--llm",
            "scripted",
            "--embedder",
            "hash",
            "--seeds",
            "2",
            "--quiet",
        ])
        .arg("--out")
        .arg(&bench)
        .stdout(Stdio::null())
        .status()
        .unwrap();
    assert!(status.success());
    let listing = |d: &Path| {
        let mut all: Vec<PathBuf> = walk(d);
        all.sort();
        all
    };
    let before = listing(&bench);
    let Some((_driver, driver_url)) = chromedriver() else {
        return;
    };
    let client = browser(&driver_url).await;
    let (server, url) = sopsim(&["serve", bench.to_str().unwrap()]);
    client.goto(&url).await.unwrap();
    wait_for("every run listed", || async {
        eval(
            &client,
            "return document.querySelectorAll('tr.run').length;",
        )
        .await
            == 4
    })
    .await;
    wait_for("the plots", || async {
        eval(
            &client,
            "const imgs = [...document.querySelectorAll('.plots img')];
             return imgs.length > 0 && imgs.every(i => i.complete && i.naturalWidth > 0);",
        )
        .await
            == true
    })
    .await;
    screenshot(&client, "bench").await;
    // The headline table shows each figure's paired difference with its interval.
    let report: Value =
        serde_json::from_str(&std::fs::read_to_string(bench.join("report.json")).unwrap()).unwrap();
    let headline = report["scenarios"][0]["headline"].as_array().unwrap().len();
    let differences = eval(
        &client,
        "return [...document.querySelectorAll('table.headline td.difference')].map(td => td.textContent);",
    )
    .await;
    let differences = differences.as_array().unwrap();
    assert_eq!(differences.len(), headline);
    assert!(
        differences
            .iter()
            .all(|d| d.as_str().unwrap().contains(" [")),
        "{differences:?}"
    );

    // Each run opens in the run view, replayed to its end.
    let run = "prisoners_dilemma/competitive/seed-1";
    client
        .find(Locator::Css(&format!("tr.run[data-id='{run}'] a")))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    let expected = transcript(&bench.join("runs").join(run));
    wait_for_messages(&client, expected.len()).await;
    assert_eq!(messages(&client).await, expected);
    // The game is played in simultaneous rounds: each is one block, and the slider
    // steps a round at a time.
    let blocks = eval(
        &client,
        "return [...document.querySelectorAll('#transcript .round')]
            .map(r => r.querySelectorAll('.msg').length);",
    )
    .await;
    assert_eq!(blocks, json!([2, 2, 2, 2, 2]), "five rounds of two moves");
    eval(
        &client,
        "const s = document.getElementById('slider'); s.value = '1';
         s.dispatchEvent(new Event('input')); return true;",
    )
    .await;
    wait_for_messages(&client, 2).await;
    assert_eq!(
        eval(
            &client,
            "return document.querySelectorAll('#transcript .round.done').length;"
        )
        .await,
        1,
        "the first round, whole"
    );
    screenshot(&client, "replay").await;
    drop(server);
    assert_eq!(
        listing(&bench),
        before,
        "serving never writes into the folder"
    );

    // A run folder replayed: its counters are the summary's, its agents those who
    // spoke, and its graph the states it went through, each with how often, joined by
    // the transitions it made.
    let run_dir = dir.path().join("debate");
    let status = Command::new(env!("CARGO_BIN_EXE_sopsim"))
        .args([
            "run",
            root().join("scenarios/debate.json").to_str().unwrap(),
        ])
        .args([
            "--llm",
            "scripted",
            "--embedder",
            "hash",
            "--quiet",
            "--out",
        ])
        .arg(&run_dir)
        .stdout(Stdio::null())
        .status()
        .unwrap();
    assert!(status.success());
    let summary: Value =
        serde_json::from_str(&std::fs::read_to_string(run_dir.join("summary.json")).unwrap())
            .unwrap();
    let (server, url) = sopsim(&["serve", run_dir.to_str().unwrap()]);
    client.goto(&url).await.unwrap();
    wait_for_messages(&client, transcript(&run_dir).len()).await;
    let counter = |name: &str| {
        format!(
            "const dt = [...document.querySelectorAll('#counters dt')].find(d => d.textContent === '{name}');
             return dt ? dt.nextElementSibling.textContent : null;"
        )
    };
    assert_eq!(
        eval(&client, &counter("prompt tokens")).await,
        json!(summary["prompt_tokens"].to_string())
    );
    assert_eq!(
        eval(&client, &counter("completion tokens")).await,
        json!(summary["completion_tokens"].to_string())
    );
    assert_eq!(
        eval(&client, &counter("speaker labels")).await,
        json!(format!("0 of {} (0%)", summary["reply_quality"]["replies"])),
    );
    assert_eq!(
        eval(&client, "return [...document.querySelectorAll('#agents .speaker')].map(a => a.textContent).sort();").await,
        json!(["Ada", "Ben", "Cleo", "Dan", "Mia"])
    );
    assert_eq!(
        eval(
            &client,
            "return [...document.querySelectorAll('#graph text')].map(t => t.textContent);"
        )
        .await,
        json!([
            "affirmative_prep · 1 visit",
            "negative_prep · 1 visit",
            "debate · 1 visit",
            "open_floor · 1 visit",
            "verdict · 1 visit"
        ])
    );
    assert_eq!(
        eval(
            &client,
            "return document.querySelectorAll('#graph line').length;"
        )
        .await,
        json!(4),
        "the four transitions the run made"
    );
    screenshot(&client, "run-replay").await;
    client.close().await.unwrap();
    drop(server);
}

#[tokio::test]
async fn tool_results_show_as_tables_beside_the_decisions() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("shop");
    let status = Command::new(env!("CARGO_BIN_EXE_sopsim"))
        .args([
            "run",
            root()
                .join("scenarios/shop_assistant.json")
                .to_str()
                .unwrap(),
        ])
        .args(["--llm", "scripted", "--out"])
        .arg(&out)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .status()
        .unwrap();
    assert!(status.success());
    let Some((_driver, driver_url)) = chromedriver() else {
        return;
    };
    let client = browser(&driver_url).await;
    let (_server, url) = sopsim(&["serve", out.to_str().unwrap()]);
    client.goto(&url).await.unwrap();
    let expected = transcript(&out);
    wait_for_messages(&client, expected.len()).await;
    assert_eq!(messages(&client).await, expected);
    let tables = eval(
        &client,
        "return [...document.querySelectorAll('.tool-result table')]
            .map(t => t.querySelector('tr:nth-child(2)').textContent);",
    )
    .await;
    let rows: Vec<String> = serde_json::from_value(tables).unwrap();
    assert_eq!(rows.len(), 5, "one table per result: {rows:?}");
    assert!(
        rows[0].contains("Summit Boot") && rows[0].contains("149"),
        "{rows:?}"
    );
    let decided = eval(
        &client,
        "return [...document.querySelectorAll('.status')]
            .filter(s => s.textContent.startsWith('Mia decided:')).length;",
    )
    .await;
    assert_eq!(decided, 6);
    screenshot(&client, "tools").await;
    client.close().await.unwrap();
}

/// The README's debate judged on goal by a scripted judge, with a number asked of both
/// debaters at the start and the end.
fn measured_debate(dir: &Path) -> PathBuf {
    let text = std::fs::read_to_string(root().join("scenarios/debate.json")).unwrap();
    let mut doc: Value = serde_json::from_str(&text).unwrap();
    doc["judge"] = json!({"rubric": "sotopia", "leave_out": ["believability", "relationship",
        "knowledge", "secret", "social_rules", "financial_and_material_benefits"]});
    doc["script"]["judge"] = json!(["7", "3", "9"]);
    doc["probes"] = json!({"sure": {"question": "How sure are you of your side, 0 to 10?",
        "ask": {"agents": ["Ada", "Ben"]}, "when": ["start", "end"],
        "answer": {"number": {"min": 0, "max": 10}}}});
    let path = dir.join("debate.json");
    std::fs::write(&path, doc.to_string()).unwrap();
    path
}

#[tokio::test]
async fn a_runs_probe_answers_and_judged_scores_are_shown() {
    let Some((_driver, driver_url)) = chromedriver() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let status = Command::new(env!("CARGO_BIN_EXE_sopsim"))
        .arg("run")
        .arg(measured_debate(dir.path()))
        .args([
            "--llm",
            "scripted",
            "--embedder",
            "hash",
            "--quiet",
            "--out",
        ])
        .arg(&out)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .status()
        .unwrap();
    assert!(status.success());
    let client = browser(&driver_url).await;
    let (_server, url) = sopsim(&["serve", out.to_str().unwrap()]);
    client.goto(&url).await.unwrap();
    wait_for("the probes and the judged scores", || async {
        eval(
            &client,
            "return !document.getElementById('probes').hidden
                && !document.getElementById('judged').hidden;",
        )
        .await
            == true
    })
    .await;
    // Each debater's row has its answer at the start and at the end, as written.
    let lines: Vec<Value> = std::fs::read_to_string(out.join("probes.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    for agent in ["Ada", "Ben"] {
        let cells = eval(
            &client,
            &format!(
                "return [...document.querySelectorAll('table.probe tr[data-agent=\"{agent}\"] td')]
                    .map(td => td.textContent);"
            ),
        )
        .await;
        let written: Vec<String> = lines
            .iter()
            .filter(|l| l["agent"] == agent)
            .map(|l| l["answer"].as_str().unwrap().to_string())
            .collect();
        let mut expected = vec![agent.to_string()];
        expected.extend(written);
        assert_eq!(cells, json!(expected), "{agent}");
    }
    // The judged table has a column per agent and the goal's scores as written.
    let judgement: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("judgement.json")).unwrap())
            .unwrap();
    let goal = eval(
        &client,
        "return [...document.querySelectorAll('table.judged tr[data-dimension=\"goal\"] td')]
            .map(td => td.textContent);",
    )
    .await;
    let goal: Vec<String> = serde_json::from_value(goal).unwrap();
    assert_eq!(goal[0], "goal (0 to 10)");
    let scores = judgement["scores"].as_object().unwrap();
    assert_eq!(goal.len(), scores.len() + 1);
    for (cell, (_, dims)) in goal[1..].iter().zip(scores) {
        let score = dims["goal"]["score"].as_f64().unwrap();
        assert!(
            cell.starts_with(&format!("{score}")),
            "{cell} against {score}"
        );
    }
    screenshot(&client, "measures").await;
    client.close().await.unwrap();
}

/// The prisoner's dilemma with both players typed by people, for one round.
fn two_people(out: &Path) -> Vec<String> {
    let pd = root().join("scenarios/prisoners_dilemma.json");
    [
        "run",
        pd.to_str().unwrap(),
        "--llm",
        "scripted",
        "--embedder",
        "hash",
        "--human",
        "Alice",
        "--human",
        "Bob",
        "--max-turns",
        "2",
        "--serve",
        "--quiet",
        "--out",
        out.to_str().unwrap(),
    ]
    .map(String::from)
    .to_vec()
}

#[tokio::test]
async fn two_people_of_a_round_each_get_a_box_and_the_round_shows_as_one_block() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let args = two_people(&out);
    let Some((_driver, driver_url)) = chromedriver() else {
        return;
    };
    let client = browser(&driver_url).await;
    let (_run, url) = sopsim(&args.iter().map(String::as_str).collect::<Vec<_>>());
    client.goto(&url).await.unwrap();
    wait_for("a box for each player", || async {
        eval(
            &client,
            "return [...document.querySelectorAll('#human form')].map(f => f.dataset.name).join();",
        )
        .await
            == "Alice,Bob"
    })
    .await;
    screenshot(&client, "round-input").await;
    // Bob answers first; Alice's box stays, and nothing of the round shows yet.
    type_in(&client, "Bob", "DEFECT").await;
    wait_for("Bob's box to go", || async {
        eval(
            &client,
            "return [...document.querySelectorAll('#human form')].map(f => f.dataset.name).join();",
        )
        .await
            == "Alice"
    })
    .await;
    assert!(
        messages(&client).await.is_empty(),
        "the round is not in yet"
    );
    type_in(&client, "Alice", "COOPERATE").await;
    wait_for_messages(&client, 2).await;
    let round = eval(
        &client,
        "const r = document.querySelector('#transcript .round');
         return [r.dataset.round, [...r.querySelectorAll('.msg')].map(m => m.dataset.name)];",
    )
    .await;
    assert_eq!(round, json!(["1", ["Alice", "Bob"]]));
    assert_eq!(
        eval(&client, "return document.getElementById('human').hidden;").await,
        true
    );
    screenshot(&client, "round").await;
    client.close().await.unwrap();
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}

/// A raw HTTP request (`Host: x` stands for the server's own address); returns the
/// status code and the body.
fn http(url: &str, request: &str) -> (u16, String) {
    let addr = url.trim_start_matches("http://").split('/').next().unwrap();
    let request = request.replace("Host: x\r\n", &format!("Host: {addr}\r\n"));
    let mut stream = TcpStream::connect(addr).unwrap();
    stream.write_all(request.as_bytes()).unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let status = response[9..12].parse().unwrap();
    let body = response.split("\r\n\r\n").nth(1).unwrap_or("").to_string();
    (status, body)
}

fn post(path: &str, body: &str) -> String {
    format!(
        "POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
}

#[test]
fn bad_requests_and_bad_addresses_get_clear_answers() {
    let debate = root().join("scenarios/debate.json");
    let debate = debate.to_str().unwrap();
    let scripted = ["--llm", "scripted", "--embedder", "hash", "--quiet"];
    let (_run, url) = sopsim(
        &[
            &["run", debate, "--serve", "--start-paused"][..],
            &scripted[..],
        ]
        .concat(),
    );
    let get = |path: &str| format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    assert_eq!(http(&url, &get("/nowhere")).0, 404);
    let (status, body) = http(&url, &post("/api/pause", "{not json"));
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("error"), "{body}");
    assert_eq!(http(&url, &post("/api/pause", "[1]")).0, 400);
    assert_eq!(
        http(&url, &get("/api/pause")).0,
        404,
        "controls are POST only"
    );
    assert_eq!(
        http(
            &url,
            &post("/api/input", r#"{"name": "Ada", "text": "hi"}"#)
        )
        .0,
        409
    );
    let (status, page) = http(&url, &get("/"));
    assert_eq!(status, 200);
    assert!(page.contains("/js/main.js"));

    // A port in use is bad input naming the address.
    let taken = url.trim_start_matches("http://").trim_end_matches('/');
    let out = Command::new(env!("CARGO_BIN_EXE_sopsim"))
        .args([&["run", debate, "--serve", taken][..], &scripted[..]].concat())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains(taken));

    // Beyond loopback, a token is required, and then every request must carry it.
    let out = Command::new(env!("CARGO_BIN_EXE_sopsim"))
        .args([&["run", debate, "--serve", "0.0.0.0:0"][..], &scripted[..]].concat())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--serve-token"));
    let (_run, url) = sopsim(
        &[
            &[
                "run",
                debate,
                "--serve",
                "127.0.0.1:0",
                "--serve-token",
                "auto",
                "--start-paused",
            ][..],
            &scripted[..],
        ]
        .concat(),
    );
    let (base, token) = url.split_once("?token=").unwrap();
    assert_eq!(http(base, &get("/api/state")).0, 401);
    assert_eq!(
        http(base, &get(&format!("/api/state?token={token}"))).0,
        200
    );
    let bearer = format!(
        "GET /api/state HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\nConnection: close\r\n\r\n"
    );
    assert_eq!(http(base, &bearer).0, 200);
}

/// A page of another site cannot read or drive the viewer: not by making its own name
/// resolve to 127.0.0.1 (DNS rebinding: the browser sends that name as Host), and not by
/// posting from its own origin, with or without a token.
#[test]
fn other_sites_can_neither_read_nor_drive_the_viewer() {
    let dir = tempfile::tempdir().unwrap();
    let debate = root().join("scenarios/debate.json");
    let debate = debate.to_str().unwrap();
    let scripted = ["--llm", "scripted", "--embedder", "hash", "--quiet"];
    let out = dir.path().join("run");
    let out = out.to_str().unwrap();
    let (_run, url) = sopsim(
        &[
            &["run", debate, "--serve", "--start-paused", "--out", out][..],
            &scripted[..],
        ]
        .concat(),
    );
    let addr = url.trim_start_matches("http://").trim_end_matches('/');
    let port = addr.rsplit_once(':').unwrap().1;
    let get = |host: &str| {
        format!("GET /api/state HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n")
    };
    let step = |host: &str, origin: &str| {
        format!(
            "POST /api/step HTTP/1.1\r\nHost: {host}\r\nOrigin: {origin}\r\nContent-Type: application/json\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{{}}"
        )
    };
    for host in ["evil.example", &format!("evil.example:{port}"), "127.0.0.1"] {
        assert_eq!(http(&url, &get(host)).0, 403, "Host {host}");
        assert_eq!(
            http(&url, &step(host, &format!("http://{host}"))).0,
            403,
            "Host {host}"
        );
    }
    for host in [
        format!("127.0.0.1:{port}"),
        format!("localhost:{port}"),
        format!("[::1]:{port}"),
    ] {
        assert_eq!(http(&url, &get(&host)).0, 200, "Host {host}");
    }
    let (status, _) = http(&url, &step(addr, "http://evil.example"));
    assert_eq!(status, 403, "a cross-site POST");
    assert!(
        !dir.path().join("run/transcript.jsonl").exists()
            || std::fs::read_to_string(dir.path().join("run/transcript.jsonl"))
                .unwrap()
                .is_empty(),
        "the refused step ran no turn"
    );
    assert_eq!(
        http(&url, &step(addr, &format!("http://{addr}"))).0,
        200,
        "the page's own POST"
    );

    // With a token, any Host may ask (the token guards it), but other origins still not.
    let (_run, url) = sopsim(
        &[
            &[
                "run",
                debate,
                "--serve",
                "--serve-token",
                "auto",
                "--start-paused",
            ][..],
            &scripted[..],
        ]
        .concat(),
    );
    let (base, token) = url.split_once("?token=").unwrap();
    let addr = base.trim_start_matches("http://").trim_end_matches('/');
    let with_token = |host: &str, origin: &str| {
        format!(
            "POST /api/step HTTP/1.1\r\nHost: {host}\r\nOrigin: {origin}\r\nAuthorization: Bearer {token}\r\nContent-Type: application/json\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{{}}"
        )
    };
    assert_eq!(
        http(base, &with_token("sim.lab.example", "http://evil.example")).0,
        403
    );
    assert_eq!(
        http(
            base,
            &with_token("sim.lab.example", "http://sim.lab.example")
        )
        .0,
        200
    );
    assert_eq!(
        http(base, &with_token(addr, &format!("http://{addr}"))).0,
        200
    );
}

/// `GET /api/state` as JSON.
fn state(url: &str) -> Value {
    let (status, body) = http(
        url,
        "GET /api/state HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    );
    assert_eq!(status, 200, "{body}");
    serde_json::from_str(&body).unwrap()
}

#[test]
fn two_people_of_a_round_wait_at_once_and_each_line_reaches_its_own_turn() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let args = two_people(&out);
    let (_run, url) = sopsim(&args.iter().map(String::as_str).collect::<Vec<_>>());
    let deadline = Instant::now() + Duration::from_secs(30);
    let waiting = |url: &str| -> Vec<String> {
        state(url)["live"]["waiting"]
            .as_array()
            .unwrap()
            .iter()
            .map(|w| w["name"].as_str().unwrap().to_string())
            .collect()
    };
    while waiting(&url).len() < 2 {
        assert!(Instant::now() < deadline, "the run never waited for both");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(waiting(&url), ["Alice", "Bob"]);
    assert_eq!(state(&url)["live"]["waiting_for"]["name"], "Alice");
    // The second player answers first: the line is Bob's, and Alice still waits.
    let (status, body) = http(
        &url,
        &post("/api/input", r#"{"name": "Bob", "text": "DEFECT"}"#),
    );
    assert_eq!(status, 200, "{body}");
    assert_eq!(waiting(&url), ["Alice"]);
    let (status, body) = http(
        &url,
        &post("/api/input", r#"{"name": "Bob", "text": "again"}"#),
    );
    assert_eq!(status, 409, "one line per turn: {body}");
    let (status, body) = http(
        &url,
        &post("/api/input", r#"{"name": "Alice", "text": "COOPERATE"}"#),
    );
    assert_eq!(status, 200, "{body}");
    while !out.join("summary.json").exists() {
        assert!(Instant::now() < deadline, "the run did not end");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(
        transcript(&out),
        [
            ("Alice".to_string(), "COOPERATE".to_string()),
            ("Bob".to_string(), "DEFECT".to_string())
        ]
    );
    // events.jsonl: the round's start and end carry it; each message says its round.
    let events: Vec<Value> = std::fs::read_to_string(out.join("events.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let rounds: Vec<&Value> = events
        .iter()
        .filter_map(|e| e["payload"]["metadata"].get("event"))
        .collect();
    assert_eq!(rounds, [&json!("round_start"), &json!("round_end")]);
    for e in events
        .iter()
        .filter(|e| e["payload"]["metadata"].get("event").is_some())
    {
        assert_eq!(e["type"], "status");
        assert_eq!(e["payload"]["metadata"]["round"], 1);
        assert_eq!(
            e["payload"]["metadata"]["roles"],
            json!(["Player A", "Player B"])
        );
    }
    let said: Vec<(&Value, &Value)> = events
        .iter()
        .filter(|e| e["type"] == "text")
        .map(|e| {
            (
                &e["payload"]["metadata"]["name"],
                &e["payload"]["metadata"]["round"],
            )
        })
        .collect();
    assert_eq!(
        said,
        [(&json!("Alice"), &json!(1)), (&json!("Bob"), &json!(1))]
    );
}

#[test]
fn a_browser_that_disconnects_mid_run_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let debate = root().join("scenarios/debate.json");
    let debate = debate.to_str().unwrap();
    let (served, plain) = (dir.path().join("served"), dir.path().join("plain"));
    let scripted = [
        "--llm",
        "scripted",
        "--embedder",
        "hash",
        "--quiet",
        "--out",
    ];
    let (_run, url) = sopsim(
        &[
            &["run", debate, "--serve", "--start-paused"][..],
            &scripted[..],
            &[served.to_str().unwrap()][..],
        ]
        .concat(),
    );
    let addr = url.trim_start_matches("http://").trim_end_matches('/');
    let mut stream = TcpStream::connect(addr).unwrap();
    stream
        .write_all(format!("GET /events HTTP/1.1\r\nHost: {addr}\r\n\r\n").as_bytes())
        .unwrap();
    for _ in 0..3 {
        http(&url, &post("/api/step", "{}"));
    }
    let mut first = [0u8; 512];
    let _ = stream.read(&mut first).unwrap();
    drop(stream);
    http(&url, &post("/api/resume", "{}"));
    let deadline = Instant::now() + Duration::from_secs(30);
    while !served.join("summary.json").exists() {
        assert!(Instant::now() < deadline, "the run did not end");
        std::thread::sleep(Duration::from_millis(50));
    }
    // The page stays up after the run, but there is nothing left to step.
    let (status, body) = http(&url, &post("/api/step", "{}"));
    assert_eq!(status, 409, "{body}");
    assert!(body.contains("the run has ended"), "{body}");
    let status = Command::new(env!("CARGO_BIN_EXE_sopsim"))
        .args(
            [
                &["run", debate][..],
                &scripted[..],
                &[plain.to_str().unwrap()][..],
            ]
            .concat(),
        )
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .status()
        .unwrap();
    assert!(status.success());
    let read = |d: &Path| std::fs::read_to_string(d.join("transcript.jsonl")).unwrap();
    assert_eq!(read(&served), read(&plain));
}

/// `serve DIR` serves only what lies inside DIR: a manifest line whose id is an
/// absolute path or climbs out, and a run folder that is a link to elsewhere, are not
/// served, while an honest run beside them still is.
#[cfg(unix)]
#[test]
fn a_served_folder_serves_nothing_outside_it() {
    let dir = tempfile::tempdir().unwrap();
    let bench = dir.path().join("bench");
    let status = Command::new(env!("CARGO_BIN_EXE_sopsim"))
        .arg("bench")
        .arg(root().join("scenarios/prisoners_dilemma.json"))
        .args(["--llm", "scripted", "--embedder", "hash", "--seeds", "2"])
        .args(["--modes", "cooperative", "-q", "--out"])
        .arg(&bench)
        .stdout(Stdio::null())
        .status()
        .unwrap();
    assert!(status.success());
    let secret = dir.path().join("secret");
    std::fs::create_dir_all(&secret).unwrap();
    std::fs::write(secret.join("events.jsonl"), "{\"secret\":1}\n").unwrap();
    std::fs::write(secret.join("summary.json"), "{\"secret\":1}").unwrap();
    // A forged line for each way out, and seed-1's folder swapped for a link.
    let manifest = bench.join("manifest.jsonl");
    let honest: serde_json::Value = serde_json::from_str(
        std::fs::read_to_string(&manifest)
            .unwrap()
            .lines()
            .next()
            .unwrap(),
    )
    .unwrap();
    let mut text = std::fs::read_to_string(&manifest).unwrap();
    let absolute = secret.display().to_string();
    for id in [absolute.as_str(), "../../secret"] {
        let mut forged = honest.clone();
        forged["id"] = id.into();
        text.push_str(&format!("{forged}\n"));
    }
    std::fs::write(&manifest, text).unwrap();
    let linked = bench.join("runs/prisoners_dilemma/cooperative/seed-1");
    std::fs::remove_dir_all(&linked).unwrap();
    std::os::unix::fs::symlink(&secret, &linked).unwrap();

    let (_server, url) = sopsim(&["serve", bench.to_str().unwrap()]);
    let get = |path: &str| {
        http(
            &url,
            &format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"),
        )
    };
    let (code, state) = get("/api/state");
    assert_eq!(code, 200);
    assert!(!state.contains("secret"), "forged ids listed: {state}");
    for id in [
        absolute.as_str(),
        "../../secret",
        "prisoners_dilemma/cooperative/seed-1",
    ] {
        for what in ["events", "summary"] {
            let (code, body) = get(&format!("/api/runs/{id}/{what}"));
            assert!(
                !body.contains("secret"),
                "{id} {what}: served from outside: {code} {body}"
            );
        }
    }
    let (code, body) = get("/api/runs/prisoners_dilemma/cooperative/seed-0/summary");
    assert_eq!(code, 200, "{body}");
    assert!(body.contains("ended_by"), "{body}");
}

/// A scripted debate's run folder, its events file grown to at least `bytes` by
/// repeating its lines.
fn run_folder_with_events(dir: &Path, bytes: usize) -> PathBuf {
    let run_dir = dir.join("debate");
    let status = Command::new(env!("CARGO_BIN_EXE_sopsim"))
        .args([
            "run",
            root().join("scenarios/debate.json").to_str().unwrap(),
        ])
        .args([
            "--llm",
            "scripted",
            "--embedder",
            "hash",
            "--quiet",
            "--out",
        ])
        .arg(&run_dir)
        .stdout(Stdio::null())
        .status()
        .unwrap();
    assert!(status.success());
    let events = std::fs::read_to_string(run_dir.join("events.jsonl")).unwrap();
    let mut grown = String::with_capacity(bytes + events.len());
    while grown.len() < bytes {
        grown.push_str(&events);
    }
    std::fs::write(run_dir.join("events.jsonl"), grown).unwrap();
    run_dir
}

/// The most memory the process `pid` has held (its `VmHWM`), in MiB.
fn peak_mib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kib: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap();
    kib >> 10
}

/// Six browsers reading a large events file at once each get all of it, while the
/// server holds a few pieces of it at a time, and a SIGTERM stops the server while they
/// read.
#[test]
fn a_large_events_file_is_streamed_to_many_browsers_and_a_sigterm_stops_the_server() {
    let dir = tempfile::tempdir().unwrap();
    let run_dir = run_folder_with_events(dir.path(), 64 << 20);
    let lines = std::fs::read_to_string(run_dir.join("events.jsonl"))
        .unwrap()
        .lines()
        .count();
    let (server, url) = sopsim(&["serve", run_dir.to_str().unwrap()]);
    let pid = server.0.id();
    let addr = url
        .trim_start_matches("http://")
        .trim_end_matches('/')
        .to_string();
    let readers: Vec<_> = (0..6)
        .map(|_| {
            let addr = addr.clone();
            std::thread::spawn(move || {
                let mut stream = TcpStream::connect(&addr).unwrap();
                let request = format!(
                    "GET /api/events HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
                );
                stream.write_all(request.as_bytes()).unwrap();
                let mut body = Vec::new();
                stream.read_to_end(&mut body).unwrap();
                body
            })
        })
        .collect();
    let bodies: Vec<Vec<u8>> = readers.into_iter().map(|r| r.join().unwrap()).collect();
    for body in &bodies {
        let text = String::from_utf8_lossy(body);
        let json = text.split("\r\n\r\n").nth(1).unwrap();
        // Chunked transfer: the events are the JSON array across the chunks.
        assert!(text.starts_with("HTTP/1.1 200"), "{}", &text[..200]);
        assert!(json.len() > 64 << 20 >> 1);
    }
    let peak = peak_mib(pid);
    assert!(
        peak < 300,
        "the server held {peak} MiB serving {lines} events six times"
    );

    // Slow readers of the same file, then SIGTERM: the server stops within the grace.
    let slow: Vec<TcpStream> = (0..6)
        .map(|_| {
            let mut stream = TcpStream::connect(&addr).unwrap();
            let request =
                format!("GET /api/events HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
            stream.write_all(request.as_bytes()).unwrap();
            let mut first = [0u8; 1024];
            let _ = stream.read(&mut first);
            stream
        })
        .collect();
    let signalled = Instant::now();
    let mut child = server;
    assert!(Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status()
        .unwrap()
        .success());
    let deadline = signalled + Duration::from_secs(10);
    while child.0.try_wait().unwrap().is_none() {
        assert!(Instant::now() < deadline, "the server did not stop");
        std::thread::sleep(Duration::from_millis(20));
    }
    drop(slow);
    drop(child);
}

/// The minor answers: a viewer on another loopback address answers there without a
/// token; the bearer scheme's name in any case; a header too large gets 431; a summary
/// that is a link is named, not followed.
#[test]
fn a_served_folder_answers_odd_requests_plainly() {
    let dir = tempfile::tempdir().unwrap();
    let run_dir = run_folder_with_events(dir.path(), 0);
    let get = |path: &str| format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    let (_server, url) = sopsim(&["serve", run_dir.to_str().unwrap(), "--addr", "127.0.0.2:0"]);
    assert!(url.starts_with("http://127.0.0.2:"), "{url}");
    assert_eq!(http(&url, &get("/api/state")).0, 200);

    let (_server, url) = sopsim(&[
        "serve",
        run_dir.to_str().unwrap(),
        "--serve-token",
        "0123456789abcdef0123",
    ]);
    let base = url.split_once("?token=").unwrap().0;
    let bearer = |scheme: &str| {
        format!("GET /api/state HTTP/1.1\r\nHost: x\r\nAuthorization: {scheme} 0123456789abcdef0123\r\nConnection: close\r\n\r\n")
    };
    assert_eq!(http(base, &bearer("bearer")).0, 200);
    assert_eq!(http(base, &bearer("BEARER")).0, 200);
    assert_eq!(http(base, &bearer("Basic")).0, 401);

    let (_server, url) = sopsim(&["serve", run_dir.to_str().unwrap()]);
    let huge = format!(
        "GET /api/state HTTP/1.1\r\nHost: x\r\nX-Big: {}\r\nConnection: close\r\n\r\n",
        "a".repeat(2 << 20)
    );
    assert_eq!(http(&url, &huge).0, 431);

    let elsewhere = dir.path().join("elsewhere.json");
    std::fs::write(&elsewhere, r#"{"secret": true}"#).unwrap();
    std::fs::remove_file(run_dir.join("summary.json")).unwrap();
    std::os::unix::fs::symlink(&elsewhere, run_dir.join("summary.json")).unwrap();
    let (_server, url) = sopsim(&["serve", run_dir.to_str().unwrap()]);
    // HTTP/1.0: the streamed answer comes whole, without chunks.
    let (status, state) = http(
        &url,
        "GET /api/state HTTP/1.0\r\nHost: x\r\nConnection: close\r\n\r\n",
    );
    assert_eq!(status, 200, "{state}");
    let state: Value = serde_json::from_str(&state).unwrap();
    assert_eq!(state["summary"], Value::Null);
    assert!(
        state["problem"].as_str().unwrap().contains("symbolic link"),
        "{state}"
    );
}

/// A run with a world shows its variables by round: one line a variable, a point a
/// round.
#[tokio::test]
async fn a_world_is_charted_by_round() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let status = Command::new(env!("CARGO_BIN_EXE_sopsim"))
        .args([
            "run",
            root()
                .join("scenarios/experiments/govsim_fishery.json")
                .to_str()
                .unwrap(),
        ])
        .args([
            "--llm",
            "scripted",
            "--embedder",
            "hash",
            "--quiet",
            "--seed",
            "1",
            "--out",
        ])
        .arg(&out)
        .status()
        .unwrap();
    assert!(status.success());
    let rounds = std::fs::read_to_string(out.join("world.jsonl"))
        .unwrap()
        .lines()
        .map(|l| {
            serde_json::from_str::<Value>(l).unwrap()["round"]
                .as_u64()
                .unwrap()
        })
        .max()
        .unwrap();
    let Some((_driver, driver_url)) = chromedriver() else {
        return;
    };
    let client = browser(&driver_url).await;
    let (_server, url) = sopsim(&["serve", out.to_str().unwrap()]);
    client.goto(&url).await.unwrap();
    let lines = || async {
        eval(
            &client,
            "return [...document.querySelectorAll('#world-chart polyline.world-line')]
                .map(p => [p.dataset.variable, p.getAttribute('points').split(' ').length]);",
        )
        .await
    };
    wait_for("the world's chart", || async {
        lines().await.as_array().is_some_and(|l| l.len() == 5)
    })
    .await;
    let n = rounds as usize;
    assert_eq!(
        lines().await,
        json!([
            ["fish", n],
            ["left", n],
            ["overused", n],
            ["catch", n],
            ["income", n]
        ]),
        "a line per variable, a point per round"
    );
    screenshot(&client, "world").await;
    client.close().await.unwrap();
}
