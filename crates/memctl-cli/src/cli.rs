//! The command line: global options and the command tree. Each group's arguments live with the
//! code that runs them (one file per group); this file only assembles them.

use crate::invocation::GlobalArgs;
use crate::{
    apply, archival, branch, context, conversation, core_mem, diff, export, gc, import, init, log, man,
    migrate, path, pressure, promote, quickstart, read, recall, why,
};
use clap::{Parser, Subcommand};

const ABOUT: &str = "Branch-scoped MemGPT-style memory for tree-search agents, in one SQLite file";

const LONG_ABOUT: &str = "\
memctl gives LLM agents MemGPT-style memory — core facts, a recall timeline and archival
records — scoped to the branches of a tree search. A child branch sees its ancestors' memory as
it was when it was forked (copy-on-write); siblings never see each other.

Every command is one atomic transaction, safe to run from many processes at once. Add --json for
machine-readable output (one JSON object on stdout; errors as JSON on stderr).

Exit codes: 0 ok · 1 invalid input · 2 usage · 3 not found · 4 conflict · 5 busy ·
6 incompatible or corrupt database · 255 internal error.";

const EXAMPLES: &str = "\
Examples:
  memctl init
  memctl branch create root
  memctl fork root node-1
  memctl core set node-1 best_runtime_s 12.4 --importance 4
  memctl recall append node-1 --kind metric 'runtime 12.4 s with -O3' --tag phase:tune
  memctl archival search node-1 'stencil tiling' -k 5
  memctl --json read node-1
  memctl quickstart";

#[derive(Debug, Parser)]
#[command(name = "memctl", version, about = ABOUT, long_about = LONG_ABOUT, after_help = EXAMPLES)]
#[command(propagate_version = true, max_term_width = 100)]
pub struct Cli {
    #[command(flatten)]
    pub global: GlobalArgs,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
// `defer` (here and on every group's enum): clap builds a command's arguments only when that
// command runs or its help is asked for; building and dropping all of them cost a small call
// a tenth of its instructions.
#[command(defer = true)]
pub enum Command {
    /// Create (or upgrade) the database
    #[command(after_help = "Example:\n  memctl --db run/memory.sqlite init")]
    Init,

    /// Create, list and inspect branches
    #[command(
        subcommand,
        after_help = "Examples:\n  memctl branch create root\n  memctl branch list\n  memctl branch show node-7"
    )]
    Branch(branch::BranchCommand),

    /// Fork a branch: the child sees the parent's memory as of now
    #[command(after_help = branch::FORK_EXAMPLES)]
    Fork(branch::ForkArgs),

    /// Core memory: small key/value facts injected into every prompt
    #[command(
        subcommand,
        after_help = "Examples:\n  memctl core set node-1 best_runtime_s 12.4 --importance 4\n  memctl core get node-7 --explain"
    )]
    Core(core_mem::CoreCommand),

    /// Recall memory: the timeline of events
    #[command(
        subcommand,
        after_help = "Examples:\n  memctl recall append node-1 --kind metric 'runtime 12.4 s'\n  memctl recall list node-7 -n 50"
    )]
    Recall(recall::RecallCommand),

    /// Archival memory: long-term records, searched by words
    #[command(
        subcommand,
        after_help = "Examples:\n  memctl archival add node-1 'tiling 64x64 beat 32x32 by 18%' --tag result\n  memctl archival search node-7 'tiling' -k 5"
    )]
    Archival(archival::ArchivalCommand),

    /// Read a branch's view: core, recall window and newest archival records
    #[command(after_help = read::EXAMPLES)]
    Read(read::ReadArgs),

    /// Compare two branches' views: what each sees that the other does not, per layer
    #[command(after_help = diff::EXAMPLES)]
    Diff(diff::DiffArgs),

    /// Why a branch sees what it sees of a core key, archival record or event
    #[command(after_help = why::EXAMPLES)]
    Why(why::WhyArgs),

    /// The path root → branch, and what each node of it contributed to the branch's view
    #[command(after_help = path::EXAMPLES)]
    Path(path::PathArgs),

    /// Copy items of one branch's view into another branch (e.g. an ancestor)
    #[command(after_help = promote::EXAMPLES)]
    Promote(promote::PromoteArgs),

    /// Delete the branches a search is done with (dead or pruned), and every row only they see
    #[command(after_help = gc::EXAMPLES)]
    Gc(gc::GcArgs),

    /// Copy a whole run to another database (SQLite ⇄ PostgreSQL) and check every branch's view
    #[command(after_help = migrate::EXAMPLES)]
    Migrate(migrate::MigrateArgs),

    /// Conversation steps of the agent inside a node: system, task, user, planning, action, …
    #[command(subcommand, after_help = conversation::STEP_EXAMPLES)]
    Step(conversation::StepCommand),

    /// A branch's conversation as chat messages (OpenAI or Anthropic), within a token budget
    #[command(after_help = conversation::MESSAGES_EXAMPLES)]
    Messages(conversation::MessagesArgs),

    /// Drop old steps or cut old observations from a branch's conversation (copy-on-write)
    #[command(after_help = conversation::PRUNE_EXAMPLES)]
    Prune(conversation::PruneArgs),

    /// Summarize the agent's work between user messages to fit a token budget (copy-on-write)
    #[command(after_help = conversation::COMPACT_EXAMPLES)]
    Compact(conversation::CompactArgs),

    /// Start a branch's conversation again (core and archival stay, unless --all)
    #[command(after_help = conversation::RESET_EXAMPLES)]
    Reset(conversation::ResetArgs),

    /// The memory section for a prompt, within a budget of characters or tokens
    #[command(after_help = context::EXAMPLES)]
    Context(context::ContextArgs),

    /// Apply the <memory_update> block of an LLM's answer, in one transaction
    #[command(after_help = apply::APPLY_EXAMPLES)]
    Apply(apply::ApplyArgs),

    /// Print an LLM's answer without its <memory_update> and <memory_results> blocks
    #[command(after_help = apply::STRIP_EXAMPLES)]
    Strip(apply::StripArgs),

    /// How full a branch's memory is, and what would relieve it
    #[command(after_help = pressure::PRESSURE_EXAMPLES)]
    Pressure(pressure::BranchArg),

    /// Replace all but the newest events by per-kind summaries (copy-on-write)
    #[command(after_help = pressure::CONSOLIDATE_EXAMPLES)]
    Consolidate(pressure::BranchArg),

    /// The operation journal: every write, with its phase and actor
    #[command(after_help = log::EXAMPLES)]
    Log(log::LogArgs),

    /// Write the memory out: the paper memory, an HTML viewer, the journal as JSON lines
    #[command(subcommand, after_help = export::EXAMPLES)]
    Export(export::ExportCommand),

    /// Bring in memory written by other tools (the Python store)
    #[command(
        subcommand,
        after_help = "Example:\n  memctl --db run/memctl.sqlite import legacy run/memory/memory.sqlite"
    )]
    Import(import::ImportCommand),

    /// Print shell completions
    #[command(
        after_help = "Example:\n  memctl completions bash > ~/.local/share/bash-completion/completions/memctl"
    )]
    Completions {
        /// Shell to generate completions for
        shell: clap_complete::Shell,
    },

    /// Write a man page per command
    #[command(after_help = man::EXAMPLES)]
    Man(man::ManArgs),

    /// Build a small simulated tree search and show what memctl keeps
    #[command(after_help = quickstart::EXAMPLES)]
    Quickstart(quickstart::QuickstartArgs),
}

impl Command {
    /// Commands that may create the database file; every other one needs it to exist.
    pub fn creates_database(&self) -> bool {
        matches!(self, Command::Init | Command::Import(_))
    }
}

/// Dispatches a parsed command line.
pub fn run(cli: Cli, ctx: &crate::invocation::Context) -> anyhow::Result<()> {
    match cli.command {
        Command::Init => init::run(ctx),
        Command::Branch(command) => branch::run(ctx, command),
        Command::Fork(args) => branch::fork(ctx, args),
        Command::Core(command) => core_mem::run(ctx, command),
        Command::Recall(command) => recall::run(ctx, command),
        Command::Archival(command) => archival::run(ctx, command),
        Command::Read(args) => read::run(ctx, args),
        Command::Diff(args) => diff::run(ctx, args),
        Command::Why(args) => why::run(ctx, args),
        Command::Path(args) => path::run(ctx, args),
        Command::Promote(args) => promote::run(ctx, args),
        Command::Gc(args) => gc::run(ctx, args),
        Command::Migrate(args) => migrate::run(ctx, args),
        Command::Step(command) => conversation::step(ctx, command),
        Command::Messages(args) => conversation::messages(ctx, args),
        Command::Prune(args) => conversation::prune(ctx, args),
        Command::Compact(args) => conversation::compact(ctx, args),
        Command::Reset(args) => conversation::reset(ctx, args),
        Command::Log(args) => log::run(ctx, args),
        Command::Import(command) => import::run(ctx, command),
        Command::Export(command) => export::run(ctx, command),
        Command::Context(args) => context::run(ctx, args),
        Command::Apply(args) => apply::apply(ctx, args),
        Command::Strip(args) => apply::strip(ctx, args),
        Command::Pressure(args) => pressure::pressure(ctx, args),
        Command::Consolidate(args) => pressure::consolidate(ctx, args),
        Command::Completions { shell } => {
            let mut command = <Cli as clap::CommandFactory>::command();
            let mut script = Vec::new();
            clap_complete::generate(shell, &mut command, "memctl", &mut script);
            crate::output::stdout(String::from_utf8_lossy(&script).trim_end());
            Ok(())
        }
        Command::Man(args) => man::run(ctx, args, <Cli as clap::CommandFactory>::command()),
        Command::Quickstart(args) => quickstart::run(ctx, args),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    /// Help texts are laid out by hand: a line clap would wrap at `max_term_width` breaks an
    /// example in two (and a man page fills it into the prose).
    #[test]
    fn no_help_line_is_wrapped() {
        fn check(command: &clap::Command, path: &str, long: &mut Vec<String>) {
            let texts = [command.get_after_help(), command.get_after_long_help(), command.get_long_about()];
            for text in texts.into_iter().flatten() {
                for line in text.to_string().lines().filter(|line| line.chars().count() > 98) {
                    long.push(format!("{path}: {line}"));
                }
            }
            for sub in command.get_subcommands() {
                check(sub, &format!("{path} {}", sub.get_name()), long);
            }
        }
        let mut long = Vec::new();
        check(&Cli::command(), "memctl", &mut long);
        assert!(long.is_empty(), "lines clap would wrap:\n{}", long.join("\n"));
    }
}
