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

/// A command's page, as clap_mangen renders it but for the text after the options (examples,
/// notes), which it would fill into running prose: here its lines stay as they are written.
fn render(page: clap::Command) -> std::io::Result<Vec<u8>> {
    let after = page.get_after_long_help().or_else(|| page.get_after_help()).map(|t| t.to_string());
    let has_version = page.get_version().is_some();
    let has_subcommands = page.get_subcommands().next().is_some();
    let man = clap_mangen::Man::new(page);
    let mut out = Vec::new();
    man.render_title(&mut out)?;
    man.render_name_section(&mut out)?;
    man.render_synopsis_section(&mut out)?;
    man.render_description_section(&mut out)?;
    man.render_options_section(&mut out)?;
    if has_subcommands {
        man.render_subcommands_section(&mut out)?;
    }
    if let Some(text) = after {
        out.extend_from_slice(b".SH EXAMPLES\n.nf\n");
        for line in text.lines() {
            out.extend_from_slice(roff_line(line).as_bytes());
            out.push(b'\n');
        }
        out.extend_from_slice(b".fi\n");
    }
    if has_version {
        man.render_version_section(&mut out)?;
    }
    Ok(out)
}

/// A line of text as roff shows it verbatim: backslashes escaped, and a line that starts with a
/// control character (`.`, `'`) kept from being read as a request.
fn roff_line(line: &str) -> String {
    let line = line.replace('\\', "\\e");
    match line.starts_with(['.', '\'']) {
        true => format!("\\&{line}"),
        false => line,
    }
}

/// The page of `command` (named `name`, e.g. `memctl-core-set`) and of each subcommand under it.
fn write_pages(
    command: &clap::Command,
    name: &str,
    out: &std::path::Path,
    written: &mut Vec<String>,
) -> anyhow::Result<()> {
    let page = command.clone().name(name.to_string()).bin_name(name.replace('-', " "));
    let buffer = render(page)?;
    let file = format!("{name}.1");
    crate::artifacts::write_file(&out.join(&file), &buffer)?;
    written.push(file);
    for sub in command.get_subcommands().filter(|s| s.get_name() != "help") {
        write_pages(sub, &format!("{name}-{}", sub.get_name()), out, written)?;
    }
    Ok(())
}
