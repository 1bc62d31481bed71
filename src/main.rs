//! The `sopsim` binary: the command line in [`cli`] over the `sopsim` library.

mod cli;

fn main() -> std::process::ExitCode {
    cli::main()
}
