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
pub(crate) enum Reply {
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
    /// A stream of nothing but keep-alive comments, one each interval, until the
    /// client goes away.
    KeepAlive(Duration),
    /// A stream of pieces of a reply that never ends, one each interval, until the
    /// client goes away.
    Endless(Duration),
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

pub(crate) fn ok(pieces: &[&str]) -> Reply {
    Reply::Stream {
        pieces: pieces.iter().map(|s| s.to_string()).collect(),
        usage: true,
        done: true,
    }
}

pub(crate) struct Server {
    pub base: String,
    pub requests: Arc<Mutex<Vec<(String, Value)>>>,
}

/// How the server behaves beyond its scripted replies.
#[derive(Clone, Default)]
pub(crate) struct Behaviour {
    /// Answer every request with `response_format` with HTTP 400, as servers without
    /// structured outputs do.
    pub refuse_structured: bool,
    /// End a reply where the first of the request's `stop` sequences occurs, and name
    /// it in `stop_reason` (vLLM's field), streamed or not.
    pub honour_stops: bool,
    /// What to answer once the scripted replies are used up (`ok(["Fine, thank you."])` if unset).
    pub otherwise: Option<Reply>,
    /// Answer every request carrying llama.cpp's extra sampling fields with HTTP 400,
    /// as OpenAI's own API does with fields it does not know.
    pub refuse_extra_fields: bool,
    /// Answer this many `GET /v1/models` with 503 "Loading model" first, as llama.cpp's
    /// `llama-server` does until its model is loaded.
    pub loading_for: usize,
    /// After answering this many requests the server dies: it closes every connection
    /// without a word, as a crashed server's port does.
    pub dies_after: Option<usize>,
}

impl Server {
    /// Serves `replies` in order, then `ok(["Fine, thank you."])` forever.
    pub(crate) fn start(replies: Vec<Reply>) -> Self {
        Self::start_with(replies, Behaviour::default())
    }

    /// Serves `replies` in order, behaving as `behaviour` says.
    pub(crate) fn start_with(replies: Vec<Reply>, behaviour: Behaviour) -> Self {
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

    pub(crate) fn requests(&self) -> Vec<(String, Value)> {
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
    {
        let mut answered = requests.lock().unwrap();
        if behaviour.dies_after.is_some_and(|n| answered.len() >= n) {
            return;
        }
        answered.push((head.clone(), body.clone()));
    }
    if head.starts_with("GET /v1/models") {
        let asked = requests
            .lock()
            .unwrap()
            .iter()
            .filter(|(h, _)| h.starts_with("GET /v1/models"))
            .count();
        if asked <= behaviour.loading_for {
            let b = r#"{"error": {"code": 503, "message": "Loading model", "type": "unavailable_error"}}"#;
            let _ = conn.write_all(format!("HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nRetry-After: 0\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{b}", b.len()).as_bytes());
            return;
        }
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
    if behaviour.refuse_extra_fields
        && ["repeat_penalty", "min_p", "dry_multiplier"]
            .iter()
            .any(|f| body.get(*f).is_some())
    {
        let b = r#"{"error": {"message": "Unrecognized request argument supplied: dry_multiplier", "type": "invalid_request_error"}}"#;
        let _ = conn.write_all(format!("HTTP/1.1 400 Bad Request\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{b}", b.len()).as_bytes());
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
        .unwrap_or_else(|| ok(&["Fine, thank you."]));
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
        Reply::KeepAlive(every) => {
            let mut sent = conn.write_all(sse_head.as_bytes());
            while sent.is_ok() {
                std::thread::sleep(every);
                sent = conn.write_all(b": keep-alive\n\n");
            }
            sent
        }
        Reply::Endless(every) => {
            let mut sent = conn.write_all(sse_head.as_bytes());
            while sent.is_ok() {
                std::thread::sleep(every);
                sent = conn.write_all(chunk("and more ").as_bytes());
            }
            sent
        }
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
/// them one after another in the order of the roles they were made for (`order`; a
/// request's role is read from its system prompt, "…play the role of ROLE."), each with
/// a reply that marks the request it answers. Requests with no role (summaries) are
/// answered at once, outside any group. If a group does not fill within two seconds,
/// its requests are answered anyway and `lonely` counts them, so a test of
/// simultaneity fails instead of hanging. `completed` lists the roles in the order
/// their replies were sent. Replies stream when the request asks.
pub(crate) struct GatedServer {
    pub base: String,
    pub requests: Arc<Mutex<Vec<Value>>>,
    pub lonely: Arc<Mutex<usize>>,
    pub completed: Arc<Mutex<Vec<String>>>,
}

/// The groups of held requests.
#[derive(Default)]
struct Gate {
    /// (request number, its role's place in the order) of every held request.
    arrived: Vec<(u64, usize)>,
    /// Replies sent so far, by group.
    answered: Vec<usize>,
}

struct Gated {
    group: usize,
    order: Vec<String>,
    requests: Arc<Mutex<Vec<Value>>>,
    lonely: Arc<Mutex<usize>>,
    completed: Arc<Mutex<Vec<String>>>,
    gate: Mutex<Gate>,
    cv: std::sync::Condvar,
}

impl GatedServer {
    pub(crate) fn start(group: usize, order: &[&str]) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let shared = Arc::new(Gated {
            group,
            order: order.iter().map(|r| r.to_string()).collect(),
            requests: Arc::default(),
            lonely: Arc::default(),
            completed: Arc::default(),
            gate: Mutex::default(),
            cv: std::sync::Condvar::new(),
        });
        let server = Self {
            base,
            requests: shared.requests.clone(),
            lonely: shared.lonely.clone(),
            completed: shared.completed.clone(),
        };
        std::thread::spawn(move || {
            for (n, conn) in listener.incoming().flatten().enumerate() {
                let shared = shared.clone();
                std::thread::spawn(move || gated(conn, n as u64, &shared));
            }
        });
        server
    }
}

/// The mark a reply carries: the request's messages, hashed.
pub(crate) fn mark_of(body: &Value) -> String {
    let text = body["messages"].to_string();
    let h = text.bytes().fold(0xcbf29ce484222325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x100000001b3)
    });
    format!("M{:08x}", h as u32)
}

/// The role a request was made for, from its system prompt.
pub(crate) fn role_of(body: &Value) -> Option<String> {
    let system = body["messages"][0]["content"].as_str()?;
    let rest = system.split("play the role of ").nth(1)?;
    Some(rest.split('.').next()?.to_string())
}

fn gated(mut conn: TcpStream, n: u64, s: &Gated) {
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
    s.requests.lock().unwrap().push(body.clone());
    let role = role_of(&body);
    let content = match (
        &role,
        body["response_format"]["json_schema"]["schema"]["properties"]["choice"]["enum"].as_array(),
    ) {
        // A closed choice: one of the options, picked by the request's mark.
        (_, Some(options)) => {
            let pick = mark_of(&body).bytes().map(u64::from).sum::<u64>() as usize % options.len();
            json!({ "choice": options[pick] }).to_string()
        }
        (Some(role), None) => format!("{role} says {}.", mark_of(&body)),
        (None, None) => format!("Summary {}.", mark_of(&body)),
    };
    let reply = if body["stream"].as_bool().unwrap_or(false) {
        let event = |v: Value| format!("data: {v}\n\n");
        format!(
            "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n{}{}{}data: [DONE]\n\n",
            event(json!({"choices": [{"index": 0, "delta": {"content": content}, "finish_reason": null}]})),
            event(json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})),
            event(json!({"choices": [], "usage": {"prompt_tokens": 10, "completion_tokens": 3}})),
        )
    } else {
        let b = json!({"choices": [{"message": {"role": "assistant", "content": content}, "finish_reason": "stop"}], "usage": {"prompt_tokens": 10, "completion_tokens": 3}}).to_string();
        format!("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{b}", b.len())
    };
    let send = |conn: &mut TcpStream| {
        let _ = conn.write_all(reply.as_bytes());
        let _ = conn.flush();
    };
    let Some(role) = role else {
        return send(&mut conn);
    };
    let place = s
        .order
        .iter()
        .position(|r| *r == role)
        .unwrap_or(s.order.len());
    // Wait for the group to fill.
    let mut gate = s.gate.lock().unwrap();
    let index = gate.arrived.len();
    gate.arrived.push((n, place));
    s.cv.notify_all();
    let batch = index / s.group;
    let deadline = std::time::Instant::now() + Duration::from_secs(2);
    while gate.arrived.len() < (batch + 1) * s.group && std::time::Instant::now() < deadline {
        gate =
            s.cv.wait_timeout(gate, Duration::from_millis(20))
                .unwrap()
                .0;
    }
    let end = gate.arrived.len().min((batch + 1) * s.group);
    let members = gate.arrived[batch * s.group..end].to_vec();
    if members.len() < s.group {
        *s.lonely.lock().unwrap() += 1;
    }
    // Then answer in the order of the roles, one reply at a time.
    let rank = members
        .iter()
        .filter(|(m, p)| (*p, *m) < (place, n))
        .count();
    if gate.answered.len() <= batch {
        gate.answered.resize(batch + 1, 0);
    }
    while gate.answered[batch] < rank
        && std::time::Instant::now() < deadline + Duration::from_secs(2)
    {
        gate =
            s.cv.wait_timeout(gate, Duration::from_millis(20))
                .unwrap()
                .0;
    }
    drop(gate);
    // Noted before it goes out, so a run that ends on this reply finds it listed.
    s.completed.lock().unwrap().push(role);
    send(&mut conn);
    // Give the client time to take the reply in before the next one goes out.
    std::thread::sleep(Duration::from_millis(40));
    let mut gate = s.gate.lock().unwrap();
    gate.answered[batch] += 1;
    s.cv.notify_all();
}
