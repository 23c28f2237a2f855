//! `memctl man --out DIR`: one man page per command, from the clap definitions (what `cargo
//! xtask docs` installs under target/man).

use crate::invocation::Context;
use clap::Args;
use serde_json::json;
use std::path::PathBuf;

pub const EXAMPLES: &str = "\
Examples:
  memctl man --out target/man          # memctl.1, memctl-branch.1, memctl-branch-mark.1, …
  man -l target/man/memctl-why.1";

#[derive(Debug, Args)]
pub struct ManArgs {
    /// Directory to write the pages into (created if missing)
    #[arg(long, short, value_name = "DIR", default_value = "man")]
    pub out: PathBuf,
}

/// Writes the pages of `command`, the whole command line (passed in by cli.rs, which owns it).
pub fn run(ctx: &Context, args: ManArgs, mut command: clap::Command) -> anyhow::Result<()> {
    crate::artifacts::make_dir(&args.out)?;
    command.build();
    let mut written = Vec::new();
    write_pages(&command, "memctl", &args.out, &mut written)?;
    ctx.emit(json!({"out": args.out, "pages": written}), || {
        format!("Wrote {} man pages to {}", written.len(), args.out.display())
    });
    Ok(())
}

/// The page of `command` (named `name`, e.g. `memctl-core-set`) and of each subcommand under it.
fn write_pages(
    command: &clap::Command,
    name: &str,
    out: &std::path::Path,
    written: &mut Vec<String>,
) -> anyhow::Result<()> {
    let page = command.clone().name(name.to_string()).bin_name(name.replace('-', " "));
    let mut buffer = Vec::new();
    clap_mangen::Man::new(page).render(&mut buffer)?;
    let file = format!("{name}.1");
    crate::artifacts::write_file(&out.join(&file), &buffer)?;
    written.push(file);
    for sub in command.get_subcommands().filter(|s| s.get_name() != "help") {
        write_pages(sub, &format!("{name}-{}", sub.get_name()), out, written)?;
    }
    Ok(())
}
