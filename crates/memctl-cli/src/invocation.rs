//! What every command needs: the resolved configuration, the database path, the output mode and
//! the journal context.

use crate::cli::GlobalArgs;
use crate::config;
use crate::output;
use memctl_core::{Clock, Config, Error, OpContext, Result, Store};
use std::path::PathBuf;

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
            op: OpContext { phase: global.phase.clone(), actor: global.actor.clone() },
            creates,
        })
    }

    /// Opens the database. Only `init` creates one (and its directory): elsewhere a missing or
    /// empty file is an error, so a mistyped path never silently starts an empty run.
    pub fn open(&self) -> Result<Store> {
        let mut store = if self.creates {
            if let Some(dir) = self.db.parent().filter(|d| !d.as_os_str().is_empty()) {
                std::fs::create_dir_all(dir)
                    .map_err(|e| Error::invalid(format!("cannot create directory {}: {e}", dir.display())))?;
            }
            Store::open(&self.db, self.config.clone(), self.clock)?
        } else {
            Store::open_existing(&self.db, self.config.clone(), self.clock)?
        };
        store.set_context(self.op.clone());
        Ok(store)
    }

    /// Prints a command's result: `json` with `--json`, else the text `text` renders.
    pub fn emit(&self, json: serde_json::Value, text: impl FnOnce() -> String) {
        if self.json {
            output::stdout(&json.to_string());
        } else {
            let text = text();
            if !text.is_empty() {
                output::stdout(text.trim_end_matches('\n'));
            }
        }
    }

    /// A warning on stderr (JSON output too has it, as a message): silent only with `--quiet`.
    pub fn warn(&self, message: &str) {
        if !self.quiet {
            eprintln!("warning: {message}");
        }
    }

    /// A message for people, on stderr: silent with `--quiet` or `--json`.
    pub fn note(&self, message: &str) {
        if !self.quiet && !self.json {
            eprintln!("{message}");
        }
    }
}
