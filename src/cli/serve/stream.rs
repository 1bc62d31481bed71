//! Files of a served folder sent as they are read: a run's `events.jsonl` and
//! `probes.jsonl` as JSON arrays, and JSON documents (`report.json`, `summary.json`,
//! `network.json`, `judgement.json`) as they stand, each checked first without being held. A response holds a few chunks at a
//! time, whatever the file's size; reading and checking run on a blocking thread, off
//! the server's one thread, and stop when the browser goes away. At most
//! [`MAX_FILE_RESPONSES`] are sent at once; more are told to come back (503), as the
//! event stream's browsers are.

use std::fs::File;
use std::io::{BufRead, BufReader, Read, Seek};
use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use tokio::sync::{mpsc, OwnedSemaphorePermit, Semaphore};

/// Files sent at once, all requests together.
pub(super) const MAX_FILE_RESPONSES: usize = 8;

/// The size of each piece sent, and the pieces a response holds ahead of the browser.
const CHUNK_BYTES: usize = 64 * 1024;
const CHUNKS_AHEAD: usize = 4;

/// The most memory the file responses hold at once: their pieces ahead, the piece
/// being filled and a read buffer each, whatever the files' sizes (3 MiB).
const MAX_BUFFERED_BYTES: usize = MAX_FILE_RESPONSES * (CHUNKS_AHEAD + 2) * CHUNK_BYTES;
const _: () = assert!(MAX_BUFFERED_BYTES <= 4 << 20);

/// The slots for file responses.
#[derive(Clone)]
pub(super) struct FileSlots(Arc<Semaphore>);

impl Default for FileSlots {
    fn default() -> Self {
        Self(Arc::new(Semaphore::new(MAX_FILE_RESPONSES)))
    }
}

impl FileSlots {
    /// A slot, if one is free.
    pub(super) fn take(&self) -> Option<OwnedSemaphorePermit> {
        self.0.clone().try_acquire_owned().ok()
    }
}

/// The answer when every slot is taken: come back shortly.
pub(super) fn busy() -> Response {
    (
        StatusCode::SERVICE_UNAVAILABLE,
        [(header::RETRY_AFTER, "2")],
        format!("{MAX_FILE_RESPONSES} files are being sent, the most at once; try again"),
    )
        .into_response()
}

/// How the pieces of a response reach the browser: bounded, so a slow browser slows
/// the reading instead of filling memory.
struct Pieces {
    tx: mpsc::Sender<Bytes>,
    piece: Vec<u8>,
}

impl Pieces {
    /// Adds `bytes`; `false` once the browser has gone.
    fn put(&mut self, bytes: &[u8]) -> bool {
        self.piece.extend_from_slice(bytes);
        if self.piece.len() < CHUNK_BYTES {
            return true;
        }
        self.flush()
    }

    fn flush(&mut self) -> bool {
        if self.piece.is_empty() {
            return true;
        }
        let piece = std::mem::replace(&mut self.piece, Vec::with_capacity(CHUNK_BYTES));
        self.tx.blocking_send(Bytes::from(piece)).is_ok()
    }
}

/// A 200 JSON response whose body `fill` writes on a blocking thread, holding `slot`
/// until it is sent.
fn streamed(
    slot: OwnedSemaphorePermit,
    fill: impl FnOnce(&mut Pieces) + Send + 'static,
) -> Response {
    let (tx, mut rx) = mpsc::channel::<Bytes>(CHUNKS_AHEAD);
    tokio::task::spawn_blocking(move || {
        let _slot = slot;
        let mut pieces = Pieces {
            tx,
            piece: Vec::with_capacity(CHUNK_BYTES),
        };
        fill(&mut pieces);
        pieces.flush();
    });
    let body = futures::stream::poll_fn(move |cx| {
        rx.poll_recv(cx).map(|p| p.map(Ok::<_, std::io::Error>))
    });
    (
        [(header::CONTENT_TYPE, "application/json")],
        Body::from_stream(body),
    )
        .into_response()
}

/// A run's JSON lines (`events.jsonl`, `probes.jsonl`) as one JSON array, a line an
/// element; lines that are not JSON (a line a killed run left torn) are left out.
pub(super) fn json_lines_array(slot: OwnedSemaphorePermit, file: File) -> Response {
    streamed(slot, move |out| {
        let mut reader = BufReader::with_capacity(CHUNK_BYTES, file);
        let mut line = Vec::new();
        let mut first = true;
        if !out.put(b"[") {
            return;
        }
        loop {
            line.clear();
            match reader.read_until(b'\n', &mut line) {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            }
            let text = line.trim_ascii();
            if text.is_empty() || serde_json::from_slice::<serde::de::IgnoredAny>(text).is_err() {
                continue;
            }
            let sep: &[u8] = if first { b"" } else { b"," };
            first = false;
            if !(out.put(sep) && out.put(text)) {
                return;
            }
        }
        out.put(b"]");
    })
}

/// A JSON document as it stands, between `before` and `after` (to place it in an
/// object of the response's own), or `null` in its place when it is not JSON.
pub(super) fn json_document(
    slot: OwnedSemaphorePermit,
    file: File,
    before: String,
    after: String,
) -> Response {
    streamed(slot, move |out| {
        let mut file = file;
        let valid = is_json(&mut file) && file.rewind().is_ok();
        if !out.put(before.as_bytes()) {
            return;
        }
        if valid {
            let mut buf = vec![0; CHUNK_BYTES];
            loop {
                match file.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) if !out.put(&buf[..n]) => return,
                    Ok(_) => {}
                }
            }
        } else if !out.put(b"null") {
            return;
        }
        out.put(after.as_bytes());
    })
}

/// Whether `file` holds one JSON value, read through without keeping it.
fn is_json(file: &mut File) -> bool {
    use serde::Deserialize;
    let reader = BufReader::with_capacity(CHUNK_BYTES, &*file);
    let mut de = serde_json::Deserializer::from_reader(reader);
    serde::de::IgnoredAny::deserialize(&mut de).is_ok() && de.end().is_ok()
}
