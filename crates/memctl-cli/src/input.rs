//! Text arguments: `-` (or nothing, when piped) reads standard input.

use memctl_core::{Error, ErrorKind, Result};
use std::io::{IsTerminal, Read};

/// The text given on the command line, or standard input for `-` or when omitted and piped.
pub fn text(arg: Option<&str>, what: &str) -> Result<String> {
    match arg {
        Some(text) if text != "-" => Ok(text.to_string()),
        _ => {
            let buffer = stdin(arg, what)?;
            // A trailing newline from `echo` or a heredoc is not part of the text.
            let trimmed = buffer.strip_suffix('\n').map(|t| t.strip_suffix('\r').unwrap_or(t));
            Ok(trimmed.map(str::to_string).unwrap_or(buffer))
        }
    }
}

/// Standard input as it is, for `-` or nothing (then only when piped): `apply` and `strip` read
/// an answer whole, as from a file.
pub fn stdin(arg: Option<&str>, what: &str) -> Result<String> {
    if arg.is_none() && std::io::stdin().is_terminal() {
        return Err(Error::new(ErrorKind::Usage, format!("missing {what}"))
            .with_hint(format!("give the {what} as an argument, or `-` to read it from stdin")));
    }
    let mut buffer = String::new();
    std::io::stdin()
        .read_to_string(&mut buffer)
        .map_err(|e| Error::invalid(format!("cannot read the {what} from stdin: {e}")))?;
    Ok(buffer)
}

/// A count that must be at least 1 (`-k`, `--oldest`, `log -n`), as `apply` takes `k`.
pub fn positive(text: &str) -> std::result::Result<usize, String> {
    match text.parse::<usize>() {
        Ok(0) => Err("must be at least 1".into()),
        Ok(n) => Ok(n),
        Err(e) => Err(e.to_string()),
    }
}

/// A record's or event's id: a seq, so at least 1 (`0` and `-1` are no id, not an unknown one).
pub fn id(text: &str) -> std::result::Result<i64, String> {
    match text.parse::<i64>() {
        Ok(id) if id < 1 => Err("an id is at least 1".into()),
        Ok(id) => Ok(id),
        Err(e) => Err(e.to_string()),
    }
}

/// A tokenizer's name (`--encoding`): an unknown one is a usage error, as clap's own checks are.
pub fn encoding(text: &str) -> std::result::Result<memctl_core::Encoding, String> {
    text.parse().map_err(|e: Error| e.to_string())
}

/// A directory to write files into (`export paper --out`): `-`, stdout elsewhere, is none.
pub fn directory(text: &str) -> std::result::Result<std::path::PathBuf, String> {
    match text {
        "-" => Err("is a directory for two files, not stdout (-)".into()),
        _ => Ok(text.into()),
    }
}

/// A whole text file: a missing one is not-found (exit 3), an unreadable one invalid input.
pub fn file(path: &std::path::Path) -> Result<String> {
    std::fs::read_to_string(path).map_err(|e| {
        let message = format!("cannot read {}: {e}", path.display());
        match e.kind() {
            std::io::ErrorKind::NotFound => Error::not_found(message),
            _ => Error::invalid(message),
        }
    })
}
