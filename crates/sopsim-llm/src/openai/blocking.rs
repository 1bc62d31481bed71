//! One runtime for the HTTP calls blocking code makes: asking a server which model it
//! serves (before a run starts) and the embedding worker's calls. They use the async
//! client and the retries of the chat backend, run on this runtime's one thread, and
//! the caller's thread waits for the answer; a wait between attempts sleeps on the
//! runtime's timer rather than the caller's thread.

use std::future::Future;
use std::sync::OnceLock;

use tokio::runtime::Handle;

/// The runtime, started at the first blocking call of the process on a thread of its
/// own, which drives it for as long as the process lives.
fn runtime() -> Result<&'static Handle, String> {
    static RUNTIME: OnceLock<Result<Handle, String>> = OnceLock::new();
    RUNTIME
        .get_or_init(|| {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(|e| format!("starting the HTTP runtime: {e}"))?;
            let handle = runtime.handle().clone();
            std::thread::Builder::new()
                .name("sopsim-http".into())
                .spawn(move || runtime.block_on(std::future::pending::<()>()))
                .map_err(|e| format!("starting the HTTP runtime's thread: {e}"))?;
            Ok(handle)
        })
        .as_ref()
        .map_err(Clone::clone)
}

/// Runs `call` to its end on the HTTP runtime and waits for it here. Call it from
/// blocking code (a worker thread, before a run starts), never from async code, whose
/// thread it would hold.
pub fn wait_for<F>(call: F) -> Result<F::Output, String>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    let handle = runtime()?.spawn(call);
    futures::executor::block_on(handle).map_err(|e| format!("the HTTP call stopped: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_blocking_caller_gets_the_answer_and_waits_sleep_on_the_runtime() {
        let started = std::time::Instant::now();
        let answer = wait_for(async {
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            42
        })
        .unwrap();
        assert_eq!(answer, 42);
        assert!(started.elapsed() >= std::time::Duration::from_millis(20));
        // Callers on several threads at once share it.
        let threads: Vec<_> = (0..4)
            .map(|i| std::thread::spawn(move || wait_for(async move { i * 2 }).unwrap()))
            .collect();
        let got: Vec<i32> = threads.into_iter().map(|t| t.join().unwrap()).collect();
        assert_eq!(got, [0, 2, 4, 6]);
    }
}
