//! One invocation: parse, resolve configuration, run the command, report errors with the exit
//! code of their kind (SPEC §9).

use crate::cli::Cli;
use crate::context::Context;
use crate::output;
use clap::Parser;
use memctl_core::{Error, ErrorKind};
use std::process::ExitCode;

pub fn main() -> ExitCode {
    // `--json` must shape even the errors of a command line that does not parse.
    let json = std::env::args().skip(1).take_while(|a| a != "--").any(|a| a == "--json");
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(err) => return usage_error(err, json),
    };
    let json = cli.global.json;
    let outcome =
        Context::new(&cli.global, cli.command.creates_database()).and_then(|ctx| crate::cli::run(cli, &ctx));
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            let error = classify(&err);
            output::print_error(&error, json);
            ExitCode::from(error.kind().exit_code())
        }
    }
}

fn usage_error(err: clap::Error, json: bool) -> ExitCode {
    use clap::error::ErrorKind as Clap;
    if matches!(err.kind(), Clap::DisplayHelp | Clap::DisplayVersion) || !json {
        // clap prints help to stdout (exit 0) and usage errors with their hint to stderr (exit 2).
        let _ = err.print();
        return ExitCode::from(if err.use_stderr() { ErrorKind::Usage.exit_code() } else { 0 });
    }
    // clap's text without its "error: " prefix and the usage block after the first blank line.
    let rendered = err.render().to_string();
    let message = rendered
        .split("\n\n")
        .next()
        .unwrap_or_default()
        .trim_start_matches("error: ")
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    output::print_error(&Error::new(ErrorKind::Usage, message), true);
    ExitCode::from(ErrorKind::Usage.exit_code())
}

/// The engine error inside `err`, or an internal error carrying its message.
fn classify(err: &anyhow::Error) -> Error {
    match err.chain().find_map(|e| e.downcast_ref::<Error>()) {
        Some(found) => {
            let outer = err.to_string();
            let message =
                if outer == found.message() { outer } else { format!("{outer}: {}", found.message()) };
            let error = Error::new(found.kind(), message);
            match found.hint() {
                Some(hint) => error.with_hint(hint),
                None => error,
            }
        }
        None => Error::internal(format!("{err:#}")),
    }
}
