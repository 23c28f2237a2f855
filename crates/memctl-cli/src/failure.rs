//! How a failure reaches the user (SPEC §9): the exit code of its kind, and `Error: …` plus a
//! hint on stderr, or `{"error":{kind, message, hint}}` with `--json`. Advice about memctl's own
//! commands and flags is worded here, from the engine error's topic.

use memctl_core::{Error, ErrorKind, Topic};
use serde_json::json;
use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};

/// Whether errors go out as JSON (`--json`), for the ones met outside a command's result (a
/// failed write to stdout): set once the command line is parsed.
static JSON_ERRORS: AtomicBool = AtomicBool::new(false);

pub fn set_json_errors(json: bool) {
    JSON_ERRORS.store(json, Ordering::Relaxed);
}

/// Reports `error` as the command line asked, and ends the process with its exit code.
pub fn exit_with(error: &Error) -> ! {
    print_error(error, JSON_ERRORS.load(Ordering::Relaxed));
    std::process::exit(i32::from(exit_code(error.kind())))
}

/// The process exit code of each error kind, as documented in `memctl --help` and SPEC §9.
pub fn exit_code(kind: ErrorKind) -> u8 {
    match kind {
        ErrorKind::InvalidInput => 1,
        ErrorKind::Usage => 2,
        ErrorKind::NotFound => 3,
        ErrorKind::Conflict => 4,
        ErrorKind::Busy => 5,
        ErrorKind::IncompatibleDb => 6,
        ErrorKind::Internal => 255,
    }
}

/// What to do about an error: the CLI's advice for its topic, else the engine's own hint.
pub fn hint(error: &Error) -> Option<String> {
    let advice = match error.topic() {
        Some(Topic::UnknownBranch) => {
            "`memctl branch list` shows the branches; create one with `memctl fork`".to_string()
        }
        Some(Topic::NoDatabase) => "create it with `memctl init` (or pass --db / set MEMCTL_DB)".to_string(),
        Some(Topic::NotMemctlDatabase) => match error.hint() {
            Some(hint) => format!("{hint}; point --db at one, or create one with `memctl init`"),
            None => "create the database with `memctl init`".to_string(),
        },
        Some(Topic::ImportTargetInUse) => {
            "import into a new database: memctl --db NEW.sqlite import legacy …".to_string()
        }
        Some(Topic::LegacyDirectory(inside)) => {
            format!("import the database in it: memctl import legacy {}", inside.display())
        }
        Some(Topic::RejectedUpdate) => "fix the block, or apply what is valid with --lenient".to_string(),
        _ => return error.hint().map(str::to_string),
    };
    Some(advice)
}

/// Writes one message line to stderr. A stderr that cannot be written (closed, a full disk)
/// loses the message but not the command's outcome: its exit code still says how it ended.
pub fn stderr(text: &str) {
    let _ = writeln!(std::io::stderr().lock(), "{text}");
}

pub fn print_error(error: &Error, json: bool) {
    let hint = hint(error);
    if json {
        let mut body = json!({"kind": error.kind().as_str(), "message": error.message()});
        if let Some(hint) = hint {
            body["hint"] = json!(hint);
        }
        stderr(&json!({ "error": body }).to_string());
    } else {
        stderr(&format!("Error: {}", error.message()));
        if let Some(hint) = hint {
            stderr(&format!("hint: {hint}"));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_codes_are_distinct_and_documented() {
        let codes: Vec<u8> = ErrorKind::ALL.iter().map(|&k| exit_code(k)).collect();
        assert_eq!(codes, vec![1, 2, 3, 4, 5, 6, 255]);
    }
}
