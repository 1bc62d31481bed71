//! The `sopsim` binary: the command line in [`cli`] over the `sopsim` library.

mod cli;

// A run allocates many small, short-lived values per turn: mimalloc makes a scripted
// run's turns about a third cheaper than the system allocator (docs/performance.md).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    cli::main()
}
