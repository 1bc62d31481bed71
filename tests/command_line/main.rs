//! The `sopsim` command as a user meets it: runs, benchmarks and shards, the viewer in a browser, aiwaves configs, choices. One test binary: each file is a module.

#[path = "../common/mod.rs"]
mod common;

mod aiwaves;
mod bench;
mod bounds;
mod choices;
mod cli;
#[cfg(unix)]
mod hostile;
mod judging;
#[cfg(unix)]
mod limits;
mod people;
mod populations;
mod resume;
mod shards;
#[cfg(unix)]
mod stop;
mod tournament;
// chromedriver runs in a process group of its own (Unix).
#[cfg(unix)]
mod viewer;
mod world;
