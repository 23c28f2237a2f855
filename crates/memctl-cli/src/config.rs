//! Configuration resolution (SPEC §9.2): `--config`/`MEMCTL_CONFIG`, else `./memctl.toml`, else
//! the built-in defaults; then `MEMCTL_<KEY>` environment overrides (`__` for nested tables).

use memctl_core::{Config, Error, ErrorKind, Result};
use std::path::{Path, PathBuf};

/// Variables that are options, not configuration keys (`MEMCTL_BIN` is the Python client's: which
/// binary it runs; `MEMCTL_BENCH_LEGACY` the bench's: where the large legacy database is).
const NOT_KEYS: &[&str] =
    &["MEMCTL_DB", "MEMCTL_CONFIG", "MEMCTL_NOW", "MEMCTL_ACTOR", "MEMCTL_BIN", "MEMCTL_BENCH_LEGACY"];

pub fn load(explicit: Option<&Path>) -> Result<Config> {
    let path = explicit.map(Path::to_path_buf).or_else(|| {
        let local = PathBuf::from("memctl.toml");
        local.is_file().then_some(local)
    });
    let (mut table, file_config) = match &path {
        Some(path) => read_file(path)?,
        None => (toml::Table::new(), Config::default()),
    };
    let overrides = env_overrides()?;
    if overrides.is_empty() {
        return Ok(file_config);
    }
    let names: Vec<String> = overrides.iter().map(|(name, _, _)| name.clone()).collect();
    for (_, key_path, value) in overrides {
        insert(&mut table, &key_path, value);
    }
    parse(table, || format!("environment override ({})", names.join(", ")))
}

/// A configuration file as a table (for the environment's overrides to go into) and as the
/// configuration it gives, checked. Its errors name the line they are on.
fn read_file(path: &Path) -> Result<(toml::Table, Config)> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        let kind = if e.kind() == std::io::ErrorKind::NotFound {
            ErrorKind::NotFound
        } else {
            ErrorKind::InvalidInput
        };
        Error::new(kind, format!("cannot read config file {}: {e}", path.display()))
    })?;
    let table: toml::Table = toml::from_str(&text).map_err(|e| {
        Error::invalid(format!("config file {} is not valid TOML: {}", path.display(), located(&text, &e)))
    })?;
    // A value of the wrong type: the text is read again (rarely) for the line it is on.
    let config = table.clone().try_into::<Config>().map_err(|e| {
        let problem = toml::from_str::<Config>(&text)
            .err()
            .map_or_else(|| e.message().trim().to_string(), |e| located(&text, &e));
        Error::invalid(format!("config file {}: {problem}", path.display())).with_hint(HINT)
    })?;
    config.check().map_err(|problem| {
        Error::invalid(format!("config file {}: {problem}", path.display())).with_hint(HINT)
    })?;
    Ok((table, config))
}

/// A TOML error with the line it is on (`line 2, fts_batch = "x": invalid type: …`).
fn located(text: &str, error: &toml::de::Error) -> String {
    let message = error.message().trim();
    let Some(span) = error.span() else { return message.to_string() };
    let start = span.start.min(text.len());
    let number = text[..start].matches('\n').count() + 1;
    let line = text.lines().nth(number - 1).unwrap_or_default().trim();
    format!("line {number}, `{line}`: {message}")
}

const HINT: &str = "config/memctl.toml in the memctl repository lists every key with its default";

fn parse(table: toml::Table, origin: impl Fn() -> String) -> Result<Config> {
    let config = table
        .try_into::<Config>()
        .map_err(|e| Error::invalid(format!("{}: {}", origin(), e.message().trim())).with_hint(HINT))?;
    config.check().map_err(|problem| Error::invalid(format!("{}: {problem}", origin())).with_hint(HINT))?;
    Ok(config)
}

/// `(variable, key path, value)` of every `MEMCTL_*` configuration override.
fn env_overrides() -> Result<Vec<(String, Vec<String>, toml::Value)>> {
    let mut found = Vec::new();
    // `vars()` would panic on any variable that is not UTF-8, memctl's or not.
    for (name, raw) in std::env::vars_os() {
        let Some(key) = name.to_str().and_then(|name| name.strip_prefix("MEMCTL_")) else {
            continue;
        };
        let name = format!("MEMCTL_{key}");
        // Set but empty counts as unset, as for the options' variables.
        if NOT_KEYS.contains(&name.as_str()) || raw.is_empty() {
            continue;
        }
        let Some(raw) = raw.to_str() else {
            return Err(Error::invalid(format!("{name} is not valid UTF-8")));
        };
        let key_path: Vec<String> = key.to_ascii_lowercase().split("__").map(str::to_string).collect();
        if key_path.iter().any(String::is_empty) {
            return Err(Error::invalid(format!("malformed configuration variable {name}")));
        }
        found.push((name, key_path, scalar(raw)));
    }
    found.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(found)
}

/// An environment value as TOML: a number or boolean when it reads as one, else a string.
fn scalar(raw: &str) -> toml::Value {
    let trimmed = raw.trim();
    if let Ok(int) = trimmed.parse::<i64>() {
        return toml::Value::Integer(int);
    }
    if let Ok(float) = trimmed.parse::<f64>() {
        return toml::Value::Float(float);
    }
    match trimmed {
        "true" => toml::Value::Boolean(true),
        "false" => toml::Value::Boolean(false),
        _ => toml::Value::String(raw.to_string()),
    }
}

fn insert(table: &mut toml::Table, key_path: &[String], value: toml::Value) {
    let (last, parents) = key_path.split_last().expect("key paths are non-empty");
    let mut current = table;
    for key in parents {
        let entry = current.entry(key.clone()).or_insert_with(|| toml::Value::Table(toml::Table::new()));
        if !entry.is_table() {
            *entry = toml::Value::Table(toml::Table::new());
        }
        current = entry.as_table_mut().expect("just made a table");
    }
    current.insert(last.clone(), value);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_file_equals_built_in_defaults() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../config/memctl.toml");
        let (table, from_file) = read_file(&path).unwrap();
        assert_eq!(from_file, Config::default());
        assert_eq!(parse(table, || "config/memctl.toml".into()).unwrap(), from_file);
    }

    #[test]
    fn every_default_key_is_written_out() {
        let text =
            std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../config/memctl.toml"))
                .unwrap();
        let defaults = toml::Table::try_from(Config::default()).unwrap();
        fn keys(table: &toml::Table, prefix: &str, out: &mut Vec<String>) {
            for (key, value) in table {
                match value {
                    toml::Value::Table(inner) => keys(inner, &format!("{prefix}{key}."), out),
                    _ => out.push(format!("{prefix}{key}")),
                }
            }
        }
        let mut all = Vec::new();
        keys(&defaults, "", &mut all);
        // Optional keys without a default (db_path, summarizer.command) appear commented out.
        for key in all {
            let leaf = key.rsplit('.').next().unwrap();
            assert!(text.contains(&format!("{leaf} =")), "config/memctl.toml does not mention {key}");
        }
        for unset in ["db_path", "command"] {
            assert!(
                text.contains(&format!("# {unset} =")),
                "config/memctl.toml should show {unset} commented out"
            );
        }
    }

    #[test]
    fn scalars_from_the_environment() {
        assert_eq!(scalar("100"), toml::Value::Integer(100));
        assert_eq!(scalar("1.5"), toml::Value::Float(1.5));
        assert_eq!(scalar("false"), toml::Value::Boolean(false));
        assert_eq!(scalar("off"), toml::Value::String("off".into()));
    }

    #[test]
    fn unknown_keys_are_named() {
        let table: toml::Table = toml::from_str("core_max_charz = 5").unwrap();
        let err = parse(table, || "test".into()).unwrap_err();
        assert!(err.message().contains("core_max_charz"), "{}", err.message());
        let table: toml::Table = toml::from_str("[search]\nfts = \"sometimes\"").unwrap();
        assert!(parse(table, || "test".into()).is_err());
    }
}
