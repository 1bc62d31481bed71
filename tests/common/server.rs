//! A server on 127.0.0.1 that speaks the OpenAI chat-completions protocol as real servers
//! do: SSE `data:` chunks ending in `[DONE]`, usage in the last chunk or absent,
//! `Retry-After`, server errors, cut-off streams, slow replies, malformed JSON. Replies
//! are scripted per test; embeddings requests get a small fixed vector. A [`Behaviour`]
//! makes it refuse structured output as some servers do, or end replies at the
//! request's stop sequences and say which, as vLLM does.

use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Value};

#[derive(Clone)]
pub enum Reply {
    /// Streamed pieces, then (optionally) usage, then (optionally) `[DONE]`.
    Stream {
        pieces: Vec<String>,
        usage: bool,
        done: bool,
    },
    /// The first pieces of a stream, then the connection drops.
    Cut,
    /// A JSON (or any) body with a status and extra headers.
    Plain {
        status: u16,
        body: String,
        headers: Vec<(String, String)>,
    },
    /// Wait, then answer normally.
    Slow(Duration),
    /// A stream whose event is not JSON.
    Garbage,
    /// Native tool calls `(name, arguments)`: streamed as `index`ed deltas (each
    /// call's arguments in two pieces) when the request streams, else whole.
    Calls(Vec<(String, String)>),
    /// A structured choice answer `{"choice": value}` (as text, so a test can send any),
    /// with log-probabilities of the value's first token when given.
    Choice {
        content: String,
        top: Vec<(String, f64)>,
    },
}

pub fn ok(pieces: &[&str]) -> Reply {
    Reply::Stream {
        pieces: pieces.iter().map(|s| s.to_string()).collect(),
        usage: true,
        done: true,
    }
}

pub struct Server {
    pub base: String,
    pub requests: Arc<Mutex<Vec<(String, Value)>>>,
}

/// How the server behaves beyond its scripted replies.
#[derive(Clone, Default)]
pub struct Behaviour {
    /// Answer every request with `response_format` with HTTP 400, as servers without
    /// structured outputs do.
    pub refuse_structured: bool,
    /// End a reply where the first of the request's `stop` sequences occurs, and name
    /// it in `stop_reason` (vLLM's field), streamed or not.
    pub honour_stops: bool,
    /// What to answer once the scripted replies are used up (`ok(["Fine."])` if unset).
    pub otherwise: Option<Reply>,
}

impl Server {
    /// Serves `replies` in order, then `ok(["Fine."])` forever.
    pub fn start(replies: Vec<Reply>) -> Self {
        Self::start_with(replies, Behaviour::default())
    }

    /// Serves `replies` in order, behaving as `behaviour` says.
    pub fn start_with(replies: Vec<Reply>, behaviour: Behaviour) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let requests = Arc::new(Mutex::new(Vec::new()));
        let queue = Arc::new(Mutex::new(VecDeque::from(replies)));
        let (r, q) = (requests.clone(), queue.clone());
        std::thread::spawn(move || {
            for conn in listener.incoming().flatten() {
                let (r, q, b) = (r.clone(), q.clone(), behaviour.clone());
                std::thread::spawn(move || handle(conn, &r, &q, &b));
            }
        });
        Self { base, requests }
    }

    pub fn requests(&self) -> Vec<(String, Value)> {
        self.requests.lock().unwrap().clone()
    }
}

/// Where the first of the request's stop sequences occurs in `text`, and which it is.
fn first_stop(text: &str, body: &Value) -> Option<(usize, String)> {
    body["stop"]
        .as_array()?
        .iter()
        .filter_map(|s| s.as_str())
        .filter(|s| !s.is_empty())
        .filter_map(|s| text.find(s).map(|at| (at, s.to_string())))
        .min()
}

fn handle(
    mut conn: TcpStream,
    requests: &Mutex<Vec<(String, Value)>>,
    replies: &Mutex<VecDeque<Reply>>,
    behaviour: &Behaviour,
) {
    let mut reader = BufReader::new(conn.try_clone().unwrap());
    let mut head = String::new();
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        if line == "\r\n" {
            break;
        }
        head.push_str(&line);
    }
    let len = head
        .lines()
        .find_map(|l| {
            l.to_ascii_lowercase()
                .strip_prefix("content-length:")
                .map(|v| v.trim().parse::<usize>().unwrap())
        })
        .unwrap_or(0);
    let mut body = vec![0; len];
    reader.read_exact(&mut body).unwrap();
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let stream = body["stream"].as_bool().unwrap_or(false);
    requests.lock().unwrap().push((head.clone(), body.clone()));
    if head.starts_with("GET /v1/models") {
        let b = json!({"object": "list", "data": [{"id": "served-model-a", "object": "model"}, {"id": "served-model-b", "object": "model"}]}).to_string();
        let _ = conn.write_all(format!("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{b}", b.len()).as_bytes());
        return;
    }
    if head.starts_with("POST /v1/embeddings") {
        let data: Vec<Value> = body["input"]
            .as_array()
            .unwrap()
            .iter()
            .enumerate()
            .map(|(i, t)| {
                let t = t.as_str().unwrap();
                json!({"index": i, "embedding": [t.len() as f64, t.matches('e').count() as f64, 1.0]})
            })
            .rev()
            .collect();
        let b = json!({"data": data, "model": body["model"]}).to_string();
        let _ = conn.write_all(format!("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{b}", b.len()).as_bytes());
        return;
    }
    if behaviour.refuse_structured && body.get("response_format").is_some() {
        let b = r#"{"error": {"message": "response_format is not supported", "type": "invalid_request_error"}}"#;
        let _ = conn.write_all(format!("HTTP/1.1 400 Bad Request\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{b}", b.len()).as_bytes());
        return;
    }
    let reply = replies
        .lock()
        .unwrap()
        .pop_front()
        .or_else(|| behaviour.otherwise.clone())
        .unwrap_or_else(|| ok(&["Fine."]));
    // A server that honours stop sequences sends the reply up to the first of them.
    let (reply, stop_reason) = match reply {
        Reply::Stream {
            pieces,
            usage,
            done,
        } if behaviour.honour_stops => match first_stop(&pieces.concat(), &body) {
            Some((at, stop)) => {
                let mut kept = Vec::new();
                let mut left = at;
                for p in pieces {
                    let take = p.len().min(left);
                    if take > 0 {
                        kept.push(p[..take].to_string());
                    }
                    left -= take;
                }
                let cut = Reply::Stream {
                    pieces: kept,
                    usage,
                    done,
                };
                (cut, Some(stop))
            }
            None => (
                Reply::Stream {
                    pieces,
                    usage,
                    done,
                },
                None,
            ),
        },
        other => (other, None),
    };
    let sse_head =
        "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n";
    let chunk = |text: &str| {
        format!(
            "data: {}\n\n",
            json!({"choices": [{"index": 0, "delta": {"content": text}, "finish_reason": null}]})
        )
    };
    let _ = match reply {
        Reply::Stream {
            pieces,
            usage,
            done,
        } if stream => {
            let mut out = String::from(sse_head);
            for p in &pieces {
                out.push_str(&chunk(p));
            }
            out.push_str(&format!(
                "data: {}\n\n",
                json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop", "stop_reason": stop_reason}]})
            ));
            if usage {
                out.push_str(&format!("data: {}\n\n", json!({"choices": [], "usage": {"prompt_tokens": 42, "completion_tokens": pieces.len()}})));
            }
            if done {
                out.push_str("data: [DONE]\n\n");
            }
            conn.write_all(out.as_bytes())
        }
        Reply::Stream { pieces, usage, .. } => {
            let mut v = json!({"choices": [{"message": {"role": "assistant", "content": pieces.concat()}, "finish_reason": "stop", "stop_reason": stop_reason}]});
            if usage {
                v["usage"] = json!({"prompt_tokens": 42, "completion_tokens": pieces.len()});
            }
            let b = v.to_string();
            conn.write_all(format!("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{b}", b.len()).as_bytes())
        }
        Reply::Cut => conn.write_all(
            format!(
                "{sse_head}{}data: {{\"choices\": [{{\"delta\": {{\"content\": \"and th",
                chunk("Half a reply ")
            )
            .as_bytes(),
        ),
        Reply::Plain {
            status,
            body,
            headers,
        } => {
            let extra: String = headers
                .iter()
                .map(|(k, v)| format!("{k}: {v}\r\n"))
                .collect();
            conn.write_all(format!("HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\n{extra}Connection: close\r\n\r\n{body}", body.len()).as_bytes())
        }
        Reply::Slow(d) => {
            std::thread::sleep(d);
            conn.write_all(format!("{sse_head}{}data: [DONE]\n\n", chunk("late")).as_bytes())
        }
        Reply::Garbage => conn.write_all(format!("{sse_head}data: {{not json\n\n").as_bytes()),
        Reply::Calls(calls) if stream => {
            let mut out = String::from(sse_head);
            let mut event = |delta: Value| {
                out.push_str(&format!(
                    "data: {}\n\n",
                    json!({"choices": [{"index": 0, "delta": delta, "finish_reason": null}]})
                ));
            };
            for (i, (name, args)) in calls.iter().enumerate() {
                let (a, b) = args.split_at(args.len() / 2);
                event(
                    json!({"tool_calls": [{"index": i, "id": format!("call_{i}"), "type": "function", "function": {"name": name, "arguments": a}}]}),
                );
                event(json!({"tool_calls": [{"index": i, "function": {"arguments": b}}]}));
            }
            out.push_str(&format!(
                "data: {}\n\n",
                json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]})
            ));
            out.push_str("data: [DONE]\n\n");
            conn.write_all(out.as_bytes())
        }
        Reply::Calls(calls) => {
            let tool_calls: Vec<Value> = calls
                .iter()
                .enumerate()
                .map(|(i, (name, args))| json!({"id": format!("call_{i}"), "type": "function", "function": {"name": name, "arguments": args}}))
                .collect();
            let b = json!({"choices": [{"message": {"role": "assistant", "content": null, "tool_calls": tool_calls}, "finish_reason": "tool_calls"}], "usage": {"prompt_tokens": 50, "completion_tokens": 9}}).to_string();
            conn.write_all(format!("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{b}", b.len()).as_bytes())
        }
        Reply::Choice { content, top } => {
            // Tokens: `{"choice": "`, then the value's first letters (where `top` applies),
            // then the rest.
            let cut = content.find(": \"").map_or(0, |i| i + 3);
            let (lead, rest) = content.split_at(cut);
            let (first, tail) = rest.split_at(rest.len().min(2));
            let top: Vec<Value> = top
                .iter()
                .map(|(t, lp)| json!({"token": t, "logprob": lp}))
                .collect();
            let logprobs = json!({"content": [
                {"token": lead, "logprob": 0.0, "top_logprobs": []},
                {"token": first, "logprob": -0.1, "top_logprobs": top},
                {"token": tail, "logprob": 0.0, "top_logprobs": []},
            ]});
            let b = json!({"choices": [{"message": {"role": "assistant", "content": content}, "finish_reason": "stop", "logprobs": logprobs}], "usage": {"prompt_tokens": 30, "completion_tokens": 5}}).to_string();
            conn.write_all(format!("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{b}", b.len()).as_bytes())
        }
    };
}

/// A server that holds chat requests until `group` of them are in flight, then answers
/// them all (in arrival order, or the reverse), each with a reply that marks the request
/// it answers. If a group does not fill within two seconds, its requests are answered
/// anyway and `lonely` counts them, so a test of simultaneity fails instead of hanging.
pub struct GatedServer {
    pub base: String,
    pub requests: Arc<Mutex<Vec<Value>>>,
    pub lonely: Arc<Mutex<usize>>,
}

impl GatedServer {
    pub fn start(group: usize, reverse: bool) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let requests = Arc::new(Mutex::new(Vec::new()));
        let lonely = Arc::new(Mutex::new(0));
        let gate: Arc<(Mutex<Vec<u64>>, std::sync::Condvar)> = Arc::default();
        let (r, l, g) = (requests.clone(), lonely.clone(), gate.clone());
        std::thread::spawn(move || {
            for (n, conn) in listener.incoming().flatten().enumerate() {
                let (r, l, g) = (r.clone(), l.clone(), g.clone());
                std::thread::spawn(move || gated(conn, n as u64, group, reverse, &r, &l, &g));
            }
        });
        Self {
            base,
            requests,
            lonely,
        }
    }
}

/// The mark a reply carries: the request's messages, hashed.
pub fn mark_of(body: &Value) -> String {
    let text = body["messages"].to_string();
    let h = text.bytes().fold(0xcbf29ce484222325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x100000001b3)
    });
    format!("M{:08x}", h as u32)
}

fn gated(
    mut conn: TcpStream,
    n: u64,
    group: usize,
    reverse: bool,
    requests: &Mutex<Vec<Value>>,
    lonely: &Mutex<usize>,
    gate: &(Mutex<Vec<u64>>, std::sync::Condvar),
) {
    let mut reader = BufReader::new(conn.try_clone().unwrap());
    let mut head = String::new();
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        if line == "\r\n" {
            break;
        }
        head.push_str(&line);
    }
    let len = head
        .lines()
        .find_map(|l| {
            l.to_ascii_lowercase()
                .strip_prefix("content-length:")
                .map(|v| v.trim().parse::<usize>().unwrap())
        })
        .unwrap_or(0);
    let mut body = vec![0; len];
    reader.read_exact(&mut body).unwrap();
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    requests.lock().unwrap().push(body.clone());
    // Wait for the group to fill; then take turns to answer in the chosen order.
    let (lock, cv) = gate;
    let mut pending = lock.lock().unwrap();
    pending.push(n);
    let deadline = std::time::Instant::now() + Duration::from_secs(2);
    while pending.len() % group != 0 && std::time::Instant::now() < deadline {
        pending = cv
            .wait_timeout(pending, Duration::from_millis(20))
            .unwrap()
            .0;
    }
    cv.notify_all();
    let batch_start = pending.len() - ((pending.len() - 1) % group + 1);
    let batch: Vec<u64> = pending[batch_start..].to_vec();
    if batch.len() < group {
        *lonely.lock().unwrap() += 1;
    }
    let position = batch.iter().position(|x| *x == n).unwrap_or(0);
    let rank = if reverse {
        batch.len() - 1 - position
    } else {
        position
    };
    drop(pending);
    std::thread::sleep(Duration::from_millis(60 * rank as u64));
    let content = format!(
        "{} says {}.",
        body["messages"][0]["content"]
            .as_str()
            .unwrap_or("")
            .split('.')
            .next()
            .unwrap_or(""),
        mark_of(&body)
    );
    let b = json!({"choices": [{"message": {"role": "assistant", "content": content}, "finish_reason": "stop"}], "usage": {"prompt_tokens": 10, "completion_tokens": 3}}).to_string();
    let _ = conn.write_all(format!("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{b}", b.len()).as_bytes());
}
