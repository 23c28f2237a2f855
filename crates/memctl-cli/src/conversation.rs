//! Conversation memory: `memctl step add`, `messages`, `prune`, `compact` and `reset`.

use crate::input;
use crate::invocation::Context;
use crate::output::{count, stdout};
use clap::{Args, Subcommand, ValueEnum};
use memctl_core::{Encoding, Error, MessageFormat, ReadOptions, ResetScope, Step, StepType};
use serde_json::{json, Map, Value};

pub const STEP_EXAMPLES: &str = "\
Examples:
  memctl step add node-7 --type system --text 'You are a performance engineer.'
  memctl step add node-7 --type task --text 'Tune the 3D stencil'
  memctl step add node-7 --type action --thought 'measure first' --tool run \\
      --args '{\"cmd\": \"make bench\"}' --observation 'runtime 12.4 s' --duration 13.1
  echo '{\"tool\": \"run\", \"args\": {\"cmd\": \"make\"}, \"error\": \"exit 2\"}' |
      memctl step add node-7 --type action -

Types and their fields: system, task, user, assistant (--text); planning (--plan); final
(--answer); action (--tool, and --thought, --args JSON, --observation, --error, --duration).
A child branch continues its parent's conversation as of the fork; siblings diverge.";

pub const MESSAGES_EXAMPLES: &str = "\
Examples:
  memctl messages node-7                                   # OpenAI chat messages, a JSON array
  memctl messages node-7 --format anthropic                # {\"system\": …, \"messages\": […]}
  memctl messages node-7 --budget-tokens 4000 --encoding o200k_base --retrieve 3
  memctl messages node-7 --summary-mode --old-observations 5 --max-chars 200

Mapping: system → system; task and user → user; planning, assistant, final and compaction
summaries → assistant; an action → an assistant tool call plus its tool result (the error, if
any). --summary-mode leaves out observations (an action is then one assistant line). A budget
keeps system and task, then the newest user messages, then the newest other steps that fit,
counting 4 tokens per message plus its text.";

pub const PRUNE_EXAMPLES: &str = "\
Examples:
  memctl prune node-7 --keep-last 20                       # older steps leave node-7's view
  memctl prune node-7 --old-observations 5 --max-chars 200 # cut old tool results, keep the calls

Copy-on-write: exclusions and shortened copies are written in the branch only; its ancestors and
siblings keep every step, and the full texts stay searchable in archival.";

pub const COMPACT_EXAMPLES: &str = "\
Examples:
  memctl compact node-7 --budget-tokens 8000
  memctl --json compact node-7 --budget-tokens 8000 --encoding o200k_base

Over the budget, system, task and every user message stay verbatim; each run of agent steps
between two user messages, but the newest, becomes one summary (the summarizer's, with the
config/prompts/conversation.md prompt, else an extract). [conversation] auto_compact_tokens
compacts on every step add.";

pub const RESET_EXAMPLES: &str = "\
Examples:
  memctl reset node-7         # the conversation leaves node-7's view; core and archival stay
  memctl reset node-7 --all   # core and archival too (ancestors and siblings keep theirs)";

#[derive(Debug, Subcommand)]
#[command(defer = true)]
pub enum StepCommand {
    /// Add a step to a branch's conversation
    #[command(after_help = STEP_EXAMPLES)]
    Add(StepArgs),
}

#[derive(Debug, Args)]
pub struct StepArgs {
    /// Branch id or node_uid
    pub branch: String,
    /// system, task, user, planning, action, assistant or final
    #[arg(long = "type", value_name = "TYPE")]
    pub step_type: String,
    /// The step's fields as one JSON object (instead of the field flags), or `-` to read it
    /// from stdin
    #[arg(conflicts_with_all = ["text", "plan", "answer", "tool", "thought", "args", "observation", "error", "duration"])]
    pub payload: Option<String>,
    #[arg(long)]
    pub text: Option<String>,
    #[arg(long)]
    pub plan: Option<String>,
    #[arg(long)]
    pub answer: Option<String>,
    #[arg(long)]
    pub tool: Option<String>,
    #[arg(long)]
    pub thought: Option<String>,
    /// The tool's arguments, as JSON
    #[arg(long, value_name = "JSON")]
    pub args: Option<String>,
    #[arg(long)]
    pub observation: Option<String>,
    #[arg(long)]
    pub error: Option<String>,
    /// Seconds the action took
    #[arg(long, value_name = "SECONDS")]
    pub duration: Option<f64>,
}

#[derive(Debug, Args)]
pub struct MessagesArgs {
    /// Branch id or node_uid
    pub branch: String,
    #[arg(long, value_enum, default_value_t = FormatArg::Openai)]
    pub format: FormatArg,
    /// Leave out observations, keep plans
    #[arg(long)]
    pub summary_mode: bool,
    /// Only the newest messages that fit this many tokens (system and task always)
    #[arg(long, value_name = "N")]
    pub budget_tokens: Option<usize>,
    /// Tokenizer for --budget-tokens: cl100k_base or o200k_base [default: [conversation] encoding]
    #[arg(long, value_name = "NAME", requires = "budget_tokens", value_parser = crate::input::encoding)]
    pub encoding: Option<Encoding>,
    /// Only the last N steps (besides system and task)
    #[arg(long, value_name = "N")]
    pub keep_last: Option<usize>,
    /// Cut the observations (and errors) of actions older than the last N steps
    #[arg(long, value_name = "N")]
    pub old_observations: Option<usize>,
    /// With --old-observations: characters kept of each
    #[arg(long, value_name = "C", default_value_t = 200, requires = "old_observations")]
    pub max_chars: usize,
    /// Start with a system message holding the top K archival records for the newest user message
    #[arg(long, value_name = "K", default_value_t = 0)]
    pub retrieve: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum FormatArg {
    Openai,
    Anthropic,
}

#[derive(Debug, Args)]
pub struct PruneArgs {
    /// Branch id or node_uid
    pub branch: String,
    /// Keep only the last N steps (system and task stay)
    #[arg(long, value_name = "N")]
    pub keep_last: Option<usize>,
    /// Cut the observations (and errors) of actions older than the last N steps
    #[arg(long, value_name = "N")]
    pub old_observations: Option<usize>,
    /// With --old-observations: characters kept of each
    #[arg(long, value_name = "C", default_value_t = 200, requires = "old_observations")]
    pub max_chars: usize,
}

#[derive(Debug, Args)]
pub struct CompactArgs {
    /// Branch id or node_uid
    pub branch: String,
    /// Compact when the messages exceed this many tokens
    #[arg(long, value_name = "N")]
    pub budget_tokens: usize,
    /// Tokenizer: cl100k_base or o200k_base [default: [conversation] encoding]
    #[arg(long, value_name = "NAME", value_parser = crate::input::encoding)]
    pub encoding: Option<Encoding>,
}

#[derive(Debug, Args)]
pub struct ResetArgs {
    /// Branch id or node_uid
    pub branch: String,
    /// Only the conversation (the default)
    #[arg(long, conflicts_with = "all")]
    pub conversation: bool,
    /// The conversation, core and archival
    #[arg(long)]
    pub all: bool,
}

pub fn step(ctx: &Context, command: StepCommand) -> anyhow::Result<()> {
    let StepCommand::Add(args) = command;
    let step_type = StepType::parse(&args.step_type)?;
    let payload = match args.payload.as_deref() {
        Some(_) => {
            let text = input::text(args.payload.as_deref(), "step payload")?;
            serde_json::from_str(&text)
                .map_err(|e| Error::invalid(format!("the step payload is not valid JSON: {e}")))?
        }
        None => flags(&args)?,
    };
    let step = Step::new(step_type, payload)?;
    let outcome = ctx.open()?.step_add(&args.branch, &step)?;
    ctx.emit(json!({"id": outcome.id, "type": step_type}), || {
        format!("Added {} step {} to {}", step_type.as_str(), outcome.id, args.branch)
    });
    Ok(())
}

/// The payload given as flags.
fn flags(args: &StepArgs) -> memctl_core::Result<Value> {
    let mut payload = Map::new();
    let texts = [
        ("text", &args.text),
        ("plan", &args.plan),
        ("answer", &args.answer),
        ("tool", &args.tool),
        ("thought", &args.thought),
        ("observation", &args.observation),
        ("error", &args.error),
    ];
    for (name, value) in texts {
        if let Some(value) = value {
            payload.insert(name.into(), Value::String(value.clone()));
        }
    }
    if let Some(args_json) = &args.args {
        let value: Value = serde_json::from_str(args_json)
            .map_err(|e| Error::invalid(format!("--args is not valid JSON: {e}")))?;
        payload.insert("args".into(), value);
    }
    if let Some(duration) = args.duration {
        // JSON has no NaN or infinity: serde_json would store null, and the step drop it.
        if !duration.is_finite() {
            return Err(Error::invalid(format!("--duration must be a number of seconds, not {duration}")));
        }
        payload.insert("duration".into(), json!(duration));
    }
    Ok(Value::Object(payload))
}

pub fn messages(ctx: &Context, args: MessagesArgs) -> anyhow::Result<()> {
    let budget = match (args.budget_tokens, args.encoding) {
        (Some(limit), Some(encoding)) => Some((limit, encoding)),
        (Some(limit), None) => Some((limit, ctx.config.conversation.encoding.parse()?)),
        (None, _) => None,
    };
    let options = ReadOptions {
        format: match args.format {
            FormatArg::Openai => MessageFormat::Openai,
            FormatArg::Anthropic => MessageFormat::Anthropic,
        },
        summary_mode: args.summary_mode,
        budget,
        keep_last: args.keep_last,
        old_observations: args.old_observations.map(|n| (n, args.max_chars)),
        retrieve: args.retrieve,
    };
    let messages = ctx.open()?.messages(&args.branch, &options)?;
    if ctx.json {
        stdout(&serde_json::to_string(&messages)?);
    } else {
        stdout(&serde_json::to_string_pretty(&messages.payload())?);
    }
    Ok(())
}

pub fn prune(ctx: &Context, args: PruneArgs) -> anyhow::Result<()> {
    let old = args.old_observations.map(|n| (n, args.max_chars));
    let outcome = ctx.open()?.prune(&args.branch, args.keep_last, old)?;
    ctx.emit_serialized(&outcome, || {
        let archived = outcome.archived.map_or(String::new(), |id| format!("; full texts in archival #{id}"));
        format!(
            "Pruned {}: {} and {} out of its view, {} shortened{archived}",
            args.branch,
            count(outcome.removed.len() - outcome.shortened.len(), "step", "steps"),
            count(outcome.summaries.len(), "compaction summary", "compaction summaries"),
            count(outcome.shortened.len(), "action's result", "actions' results"),
        )
    })
}

pub fn compact(ctx: &Context, args: CompactArgs) -> anyhow::Result<()> {
    let encoding = match args.encoding {
        Some(encoding) => encoding,
        None => ctx.config.conversation.encoding.parse()?,
    };
    let outcome = ctx.open()?.compact(&args.branch, args.budget_tokens, encoding)?;
    ctx.emit_serialized(&outcome, || {
        let (branch, budget) = (&args.branch, args.budget_tokens);
        if outcome.tokens_before <= budget {
            return format!(
                "{branch} is within {budget} tokens ({}): nothing to compact",
                outcome.tokens_before
            );
        }
        if outcome.summaries.is_empty() {
            return format!(
                "{branch} is over {budget} tokens ({}), but no run of agent steps between user messages \
                 summarizes shorter",
                outcome.tokens_before
            );
        }
        let over = if outcome.tokens_after > budget { " (still over the budget)" } else { "" };
        let archived = outcome.archived.map_or(String::new(), |id| format!("; full texts in archival #{id}"));
        format!(
            "Compacted {branch}: {} into {}, {} → {} tokens{over}{archived}",
            count(outcome.steps, "step", "steps"),
            count(outcome.summaries.len(), "summary", "summaries"),
            outcome.tokens_before,
            outcome.tokens_after
        )
    })
}

pub fn reset(ctx: &Context, args: ResetArgs) -> anyhow::Result<()> {
    let scope = if args.all { ResetScope::All } else { ResetScope::Conversation };
    let outcome = ctx.open()?.reset(&args.branch, scope)?;
    ctx.emit_serialized(&outcome, || match scope {
        ResetScope::Conversation => {
            format!(
                "Reset {}'s conversation ({} out of its view)",
                args.branch,
                count(outcome.steps, "step", "steps")
            )
        }
        ResetScope::All => format!(
            "Reset {}: {}, {} and {} out of its view",
            args.branch,
            count(outcome.steps, "step", "steps"),
            count(outcome.core.len(), "core key", "core keys"),
            count(outcome.records, "archival record", "archival records")
        ),
    })
}
