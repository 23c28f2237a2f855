//! What every command needs: the resolved configuration, the database path, the output mode and
//! the journal context.

use crate::config;
use crate::failure;
use crate::output;
use clap::Args;
use memctl_core::{AppendOutcome, Clock, Config, OpContext, Progress, Result, Store};
use serde_json::json;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};

#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Global options")]
pub struct GlobalArgs {
    /// SQLite database file, or PostgreSQL URL (postgres://user@host/dbname) [default: config
    /// db_path, else ./memory.sqlite]
    #[arg(long, global = true, env = "MEMCTL_DB", hide_env_values = true, value_name = "PATH|URL")]
    pub db: Option<PathBuf>,

    /// Configuration file [default: ./memctl.toml if present, else built-in defaults]
    #[arg(long, global = true, env = "MEMCTL_CONFIG", hide_env_values = true, value_name = "PATH")]
    pub config: Option<PathBuf>,

    /// Print one JSON object on stdout (errors as JSON on stderr)
    #[arg(long, global = true)]
    pub json: bool,

    /// Phase recorded in the operation journal (e.g. draft, debug, improve)
    #[arg(long, global = true, value_name = "NAME")]
    pub phase: Option<String>,

    /// Actor recorded in the operation journal (e.g. worker-3)
    #[arg(long, global = true, env = "MEMCTL_ACTOR", hide_env_values = true, value_name = "NAME")]
    pub actor: Option<String>,

    /// No messages on stderr (data on stdout is unchanged)
    #[arg(long, short, global = true)]
    pub quiet: bool,
}

pub struct Context {
    pub config: Config,
    pub db: PathBuf,
    pub json: bool,
    pub quiet: bool,
    pub clock: Clock,
    op: OpContext,
    /// Whether the command may create the database file.
    creates: bool,
}

/// A name the journal records (`--phase`, `--actor`): trimmed, none if blank, one line (the
/// journal's table shows it in a column).
fn journal_name(option: &str, name: Option<&str>) -> Result<Option<String>> {
    let Some(name) = name.map(str::trim).filter(|n| !n.is_empty()) else { return Ok(None) };
    if name.chars().any(char::is_control) {
        return Err(memctl_core::Error::invalid(format!("{option} must be one line of text, not {name:?}")));
    }
    Ok(Some(name.to_string()))
}

impl Context {
    pub fn new(global: &GlobalArgs, creates: bool) -> anyhow::Result<Context> {
        let config = config::load(global.config.as_deref())?;
        let db = global
            .db
            .clone()
            .or_else(|| config.db_path.as_ref().map(PathBuf::from))
            .unwrap_or_else(|| PathBuf::from("memory.sqlite"));
        Ok(Context {
            config,
            db,
            json: global.json,
            quiet: global.quiet,
            clock: Clock::from_env()?,
            op: OpContext {
                phase: journal_name("--phase", global.phase.as_deref())?,
                actor: journal_name("--actor", global.actor.as_deref())?,
            },
            creates,
        })
    }

    /// Opens the database. Only `init` creates one (and its directory): elsewhere a missing or
    /// empty file is an error, so a mistyped path never silently starts an empty run.
    pub fn open(&self) -> Result<Store> {
        self.open_at(&self.db, self.creates)
    }

    /// Opens the database at `location` (a file or a URL), creating it (and a file's directory)
    /// only when `creates`.
    pub fn open_at(&self, location: &Path, creates: bool) -> Result<Store> {
        let mut store = if creates {
            Store::check_location(location)?;
            let file = Store::url(location).is_none();
            if let Some(dir) = location.parent().filter(|d| file && !d.as_os_str().is_empty()) {
                crate::artifacts::make_dir(dir)?;
            }
            Store::open(location, self.config.clone(), self.clock)?
        } else {
            Store::open_existing(location, self.config.clone(), self.clock)?
        };
        store.set_context(self.op.clone());
        if !self.quiet && !self.json && std::io::stderr().is_terminal() {
            store.set_progress(Box::new(TerminalProgress::default()));
        }
        Ok(store)
    }

    /// The database as it may be shown: its path, or its URL without the password.
    pub fn db_label(&self) -> String {
        Store::display_location(&self.db)
    }

    /// Prints a command's result: `json` with `--json`, else the text `text` renders.
    pub fn emit(&self, json: serde_json::Value, text: impl FnOnce() -> String) {
        // A Value lists its keys sorted.
        self.emit_sorted(&json, text);
    }

    /// [`Context::emit`] for a result that serializes itself, converted only with `--json` (a
    /// large result's text output then never builds its JSON).
    pub fn emit_serialized<T: serde::Serialize>(
        &self,
        result: &T,
        text: impl FnOnce() -> String,
    ) -> anyhow::Result<()> {
        if self.json {
            self.emit(serde_json::to_value(result)?, String::new);
        } else {
            self.print_text(text);
        }
        Ok(())
    }

    /// [`Context::emit_serialized`] for a result whose type lists its JSON keys in sorted order
    /// itself (its fields declared so, or its `Serialize` written so; each type held to it by a
    /// test): written straight to stdout, without building a `Value` first — a whole view, path,
    /// diff or history runs to megabytes.
    pub fn emit_sorted<T: serde::Serialize>(&self, result: &T, text: impl FnOnce() -> String) {
        if self.json {
            output::stdout_json(result);
        } else {
            self.print_text(text);
        }
    }

    /// [`Context::emit_sorted`] for a result whose text is written as it is made, whole lines
    /// each ending in a line break (`output::stdout_lines`): a whole view or history runs to
    /// megabytes.
    pub fn emit_sorted_lines<T: serde::Serialize>(
        &self,
        result: &T,
        lines: impl FnOnce(&mut dyn std::fmt::Write) -> std::fmt::Result,
    ) {
        if self.json {
            output::stdout_json(result);
        } else {
            output::stdout_lines(lines);
        }
    }

    /// The text a result renders, on stdout without trailing line breaks (nothing if empty).
    fn print_text(&self, text: impl FnOnce() -> String) {
        let text = text();
        if !text.is_empty() {
            output::stdout(text.trim_end_matches('\n'));
        }
    }

    /// A warning on stderr (JSON output too has it, as a message): silent only with `--quiet`.
    pub fn warn(&self, message: &str) {
        if !self.quiet {
            failure::stderr(&format!("warning: {message}"));
        }
    }

    /// A message for people, on stderr: silent with `--quiet` or `--json`.
    pub fn note(&self, message: &str) {
        if !self.quiet && !self.json {
            failure::stderr(message);
        }
    }

    /// Reports an append: the new id, or the id of the identical row that made it a no-op.
    pub fn report_added(&self, branch: &str, outcome: AppendOutcome, thing: &str) {
        self.emit(json!({"id": outcome.id, "skipped": outcome.skipped}), || {
            if outcome.skipped {
                format!("Skipped: {branch} already has this {thing} (id {})", outcome.id)
            } else {
                format!("Added {thing} {} to {branch}", outcome.id)
            }
        });
    }
}

/// Progress bars on a terminal's stderr (indicatif), one per stage of a long operation.
#[derive(Default)]
struct TerminalProgress {
    bar: std::cell::RefCell<Option<indicatif::ProgressBar>>,
}

impl Progress for TerminalProgress {
    fn start(&self, what: &str, total: u64) {
        let bar = indicatif::ProgressBar::new(total).with_message(what.to_string());
        if let Ok(style) =
            indicatif::ProgressStyle::with_template("{msg:<28} {wide_bar} {pos}/{len} {elapsed}")
        {
            bar.set_style(style);
        }
        if let Some(old) = self.bar.replace(Some(bar)) {
            old.finish_and_clear();
        }
    }

    fn advance(&self, n: u64) {
        if let Some(bar) = self.bar.borrow().as_ref() {
            bar.inc(n);
        }
    }

    fn finish(&self) {
        if let Some(bar) = self.bar.take() {
            bar.finish_and_clear();
        }
    }
}
