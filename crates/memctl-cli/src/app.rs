//! One invocation: parse, resolve configuration, run the command, report errors with the exit
//! code of their kind (SPEC §9).

use crate::cli::Cli;
use crate::failure;
use crate::invocation::Context;
use crate::output;
use clap::{CommandFactory, FromArgMatches};
use memctl_core::{Error, ErrorKind};
use std::process::ExitCode;

pub fn main() -> ExitCode {
    // `--json` must shape even the errors of a command line that does not parse.
    let json = std::env::args_os().skip(1).take_while(|a| a != "--").any(|a| a == "--json");
    let cli = match parse() {
        Ok(cli) => cli,
        Err(err) => return usage_error(err, json),
    };
    let json = cli.global.json;
    failure::set_json_errors(json);
    let outcome =
        Context::new(&cli.global, cli.command.creates_database()).and_then(|ctx| crate::cli::run(cli, &ctx));
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            let error = classify(&err);
            failure::print_error(&error, json);
            ExitCode::from(failure::exit_code(error.kind()))
        }
    }
}

/// The command line, with an option's variable that is set but empty (`MEMCTL_DB=`) taken as
/// unset, as `MEMCTL_NOW` is: clap would take it as the option given with an empty value, and
/// refuse it as if `--db ''` had been typed.
fn parse() -> Result<Cli, clap::Error> {
    let command = Cli::command().mut_args(|arg| match arg.get_env() {
        Some(name) if std::env::var_os(name).is_some_and(|value| value.is_empty()) => arg.env(None),
        _ => arg,
    });
    Cli::from_arg_matches_mut(&mut command.try_get_matches()?).map_err(|e| e.format(&mut Cli::command()))
}

/// Help and version go to stdout (exit 0); a usage error becomes `Error: …` plus a hint with
/// the usage line, or the error JSON (exit 2).
fn usage_error(err: clap::Error, json: bool) -> ExitCode {
    use clap::error::ErrorKind as Clap;
    match err.kind() {
        Clap::DisplayHelp | Clap::DisplayVersion => {
            output::stdout(err.render().to_string().trim_end());
            return ExitCode::SUCCESS;
        }
        // `memctl core` alone: the group's help, as a usage error.
        Clap::DisplayHelpOnMissingArgumentOrSubcommand if !json => {
            failure::stderr(err.render().to_string().trim_end());
            return ExitCode::from(failure::exit_code(ErrorKind::Usage));
        }
        _ => {}
    }
    // clap renders: "error: <what>\n  <details>\n\nUsage: <line>\n\nFor more information, try '--help'."
    let rendered = err.render().to_string();
    let mut parts = rendered.split("\n\n");
    let first = parts.next().unwrap_or_default();
    let what = match err.kind() {
        Clap::DisplayHelpOnMissingArgumentOrSubcommand => "a subcommand is required",
        _ => first.trim_start_matches("error: "),
    };
    let message = what.split_whitespace().collect::<Vec<_>>().join(" ");
    let usage = parts.find_map(|p| p.trim().strip_prefix("Usage: ").map(without_env_options));
    let hint = match usage {
        Some(usage) => format!("usage: {usage} (see --help)"),
        None => "see memctl --help".to_string(),
    };
    failure::print_error(&Error::new(ErrorKind::Usage, message).with_hint(hint), json);
    ExitCode::from(failure::exit_code(ErrorKind::Usage))
}

/// A usage line without the options clap took from the environment (`MEMCTL_DB`) and lists as
/// if typed, where they read as required.
fn without_env_options(usage: &str) -> String {
    let typed: Vec<String> = std::env::args_os().map(|a| a.to_string_lossy().into_owned()).collect();
    let mut usage = usage.to_string();
    for arg in Cli::command().get_arguments() {
        let (Some(var), Some(long)) = (arg.get_env(), arg.get_long()) else { continue };
        let flag = format!("--{long}");
        let from_env = std::env::var_os(var).is_some_and(|v| !v.is_empty());
        if from_env && !typed.iter().any(|a| *a == flag || a.starts_with(&format!("{flag}="))) {
            let names = arg.get_value_names().unwrap_or_default();
            let shown: String = names.iter().map(|n| format!(" <{n}>")).collect();
            usage = usage.replace(&format!(" {flag}{shown}"), "");
        }
    }
    usage
}

/// The engine error inside `err`, or an internal error carrying its message.
fn classify(err: &anyhow::Error) -> Error {
    match err.chain().find_map(|e| e.downcast_ref::<Error>()) {
        Some(found) => {
            let outer = err.to_string();
            let message =
                if outer == found.message() { outer } else { format!("{outer}: {}", found.message()) };
            found.clone().with_message(message)
        }
        None => Error::internal(format!("{err:#}")),
    }
}
