//! `memctl`: the command-line face of memctl-core. Parsing, output and exit codes live here;
//! everything about memory lives in the engine.

mod app;
mod apply;
mod archival;
mod artifacts;
mod branch;
mod cli;
mod config;
mod context;
mod conversation;
mod core_mem;
mod diff;
mod export;
mod failure;
mod gc;
mod import;
mod init;
mod input;
mod invocation;
mod log;
mod man;
mod migrate;
mod output;
mod path;
mod pressure;
mod promote;
mod quickstart;
mod read;
mod recall;
mod why;

fn main() -> std::process::ExitCode {
    app::main()
}
