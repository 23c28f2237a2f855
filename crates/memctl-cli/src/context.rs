//! What every command needs: the resolved configuration, the database path, the output mode and
//! the journal context.

use crate::cli::GlobalArgs;
use crate::config;
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

    /// Opens the database. Only `init` creates one: elsewhere a missing file is an error, so a
    /// mistyped path never silently starts an empty run.
    pub fn open(&self) -> Result<Store> {
        if !self.creates && !self.db.exists() {
            return Err(Error::not_found(format!("no database at {}", self.db.display()))
                .with_hint("create it with `memctl init` (or pass --db / set MEMCTL_DB)"));
        }
        let mut store = Store::open(&self.db, self.config.clone(), self.clock)?;
        store.set_context(self.op.clone());
        Ok(store)
    }

    /// Prints a command's result: `json` with `--json`, else the text `text` renders.
    pub fn emit(&self, json: serde_json::Value, text: impl FnOnce() -> String) {
        if self.json {
            println!("{json}");
        } else {
            let text = text();
            if !text.is_empty() {
                println!("{}", text.trim_end_matches('\n'));
            }
        }
    }

    /// A message for people, on stderr: silent with `--quiet` or `--json`.
    pub fn note(&self, message: &str) {
        if !self.quiet && !self.json {
            eprintln!("{message}");
        }
    }
}
