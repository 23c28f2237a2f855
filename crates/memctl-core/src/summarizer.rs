//! The optional LLM summarizer (SPEC §6): a configured shell command that reads one JSON request
//! on stdin and answers on stdout, within a timeout. Answers are cached in `llm_cache` by the
//! blake3 of the request (and command), so every process shares them. Callers fall back to a
//! deterministic method whenever there is no answer; a failure is reported, never fatal.

use crate::db::params;
use crate::error::Result;
use crate::store::Store;
use serde::Serialize;
use serde_json::Value;
use std::io::{Read, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// What the summarizer is asked to do; each has an editable template in `config/prompts/`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Task {
    Compress,
    Consolidate,
    Conversation,
    Importance,
    PaperSection,
}

impl Task {
    /// The prompt template, with `{name}` placeholders.
    fn template(self) -> &'static str {
        match self {
            Task::Compress => include_str!("../../../config/prompts/compress.md"),
            Task::Consolidate => include_str!("../../../config/prompts/consolidate.md"),
            Task::Conversation => include_str!("../../../config/prompts/conversation.md"),
            Task::Importance => include_str!("../../../config/prompts/importance.md"),
            Task::PaperSection => include_str!("../../../config/prompts/paper_section.md"),
        }
    }
}

/// One request, exactly as written to the command's stdin.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Request {
    pub task: Task,
    pub prompt: String,
    pub text: String,
    pub max_chars: usize,
    pub context: Value,
}

impl Request {
    /// A request whose prompt is `task`'s template with `vars` filled in (`max_chars` included).
    pub fn new(
        task: Task,
        text: String,
        max_chars: usize,
        vars: &[(&str, String)],
        context: Value,
    ) -> Request {
        let mut prompt = task.template().trim_end().replace("{max_chars}", &max_chars.to_string());
        for (name, value) in vars {
            prompt = prompt.replace(&format!("{{{name}}}"), value);
        }
        Request { task, prompt, text, max_chars, context }
    }
}

/// Whether a missing answer may be asked of the command now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    /// Run the command on a cache miss (never inside a write transaction: it can take minutes).
    Call,
    /// Use only the cache.
    CacheOnly,
}

/// What asking gave.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Answer {
    Text(String),
    /// No summarizer configured, or not cached in [`Mode::CacheOnly`].
    None,
    /// The command failed: the reason, for a warning.
    Failed(String),
}

impl Store {
    /// The configured summarizer command, if any.
    pub(crate) fn summarizer(&self) -> Option<&str> {
        self.config.summarizer.command.as_deref().filter(|c| !c.trim().is_empty())
    }

    /// The summarizer's answer to `request`: cached, or (in [`Mode::Call`]) fresh and then cached.
    pub(crate) fn ask_summarizer(&self, request: &Request, mode: Mode) -> Result<Answer> {
        let Some(command) = self.summarizer().map(str::to_string) else {
            return Ok(Answer::None);
        };
        let body = serde_json::to_string(request)?;
        let key = blake3::hash(format!("{command}\0{body}").as_bytes());
        let cached: Option<String> =
            self.conn
                .query_opt("SELECT output FROM llm_cache WHERE key = ?1", [key.as_bytes()], |r| r.get(0))?;
        if let Some(output) = cached {
            return Ok(Answer::Text(output));
        }
        if mode == Mode::CacheOnly {
            return Ok(Answer::None);
        }
        let timeout = Duration::from_secs(self.config.summarizer.timeout_s);
        match run(&command, &body, timeout) {
            Ok(output) => {
                let output: String = output.trim().chars().take(request.max_chars.max(1)).collect();
                self.conn
                    .execute(
                        "INSERT INTO llm_cache(key, output, created_at) VALUES (?1, ?2, ?3)
                     ON CONFLICT(key) DO UPDATE SET output = excluded.output, created_at = excluded.created_at",
                    params![key.as_bytes(), &output, self.clock.now()])?;
                Ok(Answer::Text(output))
            }
            Err(reason) => {
                Ok(Answer::Failed(format!("summarizer `{command}` {reason}; used a deterministic summary")))
            }
        }
    }
}

/// Runs `sh -c command` with `input` on stdin; its trimmed, non-empty stdout, or why not.
fn run(command: &str, input: &str, timeout: Duration) -> std::result::Result<String, String> {
    let mut child = Command::new("sh")
        .arg("-c")
        .arg(command)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("could not start: {e}"))?;
    let mut stdin = child.stdin.take().expect("piped stdin");
    let input = input.to_string();
    // Writer and readers on their own threads, so a command that does not read its input or
    // fills a pipe cannot block the timeout.
    let writer = std::thread::spawn(move || {
        let _ = stdin.write_all(input.as_bytes());
    });
    let mut stdout = child.stdout.take().expect("piped stdout");
    let reader = std::thread::spawn(move || {
        let mut out = String::new();
        let _ = stdout.read_to_string(&mut out);
        out
    });
    let mut stderr = child.stderr.take().expect("piped stderr");
    let err_reader = std::thread::spawn(move || {
        let mut err = String::new();
        let _ = stderr.read_to_string(&mut err);
        err
    });
    let started = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if started.elapsed() >= timeout => {
                // Processes the shell started may outlive it and hold the pipes: the reader
                // threads are not waited for.
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!("timed out after {} s", timeout.as_secs()));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(5)),
            Err(e) => return Err(format!("could not be waited for: {e}")),
        }
    };
    let _ = writer.join();
    let output = reader.join().unwrap_or_default();
    let errors = err_reader.join().unwrap_or_default();
    if !status.success() {
        let detail = errors.lines().last().unwrap_or("").trim().to_string();
        return Err(format!(
            "failed ({status}){}",
            if detail.is_empty() { String::new() } else { format!(": {detail}") }
        ));
    }
    if output.trim().is_empty() {
        return Err("answered nothing".into());
    }
    Ok(output)
}
