//! Ctrl-C: the first press cancels the run's token (it stops at the next turn
//! boundary and keeps every finished turn); a second press exits at once with 130.

use sopsim::error::CancelToken;

/// Watches for Ctrl-C on a thread of its own and cancels `token`; `notice` is printed
/// on the first press.
pub fn cancel_on_ctrl_c(token: CancelToken, notice: &'static str) {
    let watcher = std::thread::Builder::new()
        .name("sopsim-ctrl-c".into())
        .spawn(move || {
            let Ok(runtime) = tokio::runtime::Builder::new_current_thread()
                .enable_io()
                .build()
            else {
                return;
            };
            runtime.block_on(async {
                if tokio::signal::ctrl_c().await.is_err() {
                    return;
                }
                eprintln!("\n{notice} (press Ctrl-C again to quit now)");
                token.cancel();
                if tokio::signal::ctrl_c().await.is_ok() {
                    // A person may be typing a hidden move: give the terminal its echo back.
                    super::stdin::restore_terminal();
                    std::process::exit(130);
                }
            });
        });
    if let Err(e) = watcher {
        tracing::warn!("Ctrl-C will end the process at once: {e}");
    }
}
