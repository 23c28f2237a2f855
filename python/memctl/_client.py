"""The client: one method per memctl command, each one `memctl --json` process."""

import json
import os
import shutil
import subprocess
import sys
from typing import Any, Dict, Iterable, List, Optional, Sequence

from ._types import ApplyResult, BranchInfo, CoreEntry, Event, ForkResult, Record


class MemctlError(Exception):
    """A memctl command failed: `kind` (docs/cli.md), the exit code, the message and a hint."""

    def __init__(self, kind: str, exit_code: int, message: str, hint: Optional[str] = None):
        super().__init__(f"{message} (exit {exit_code})" + (f"; {hint}" if hint else ""))
        self.kind = kind
        self.exit_code = exit_code
        self.message = message
        self.hint = hint


class InvalidInput(MemctlError):
    """Exit 1: bad JSON, an empty text, an oversize value, a wrong type…"""


class Usage(InvalidInput):
    """Exit 2: an unknown command or option, a missing argument."""


class NotFound(MemctlError):
    """Exit 3: an unknown branch, record or event, or no database."""


class Conflict(MemctlError):
    """Exit 4: the branch or node_uid exists already, the import target is in use."""


class Busy(MemctlError):
    """Exit 5: another process held the write lock past the configured timeout."""


class IncompatibleDatabase(MemctlError):
    """Exit 6: a database from a newer memctl, or not a memctl database."""


class Internal(MemctlError):
    """Exit 255: a bug in memctl."""


_ERRORS = {
    "invalid_input": InvalidInput,
    "usage": Usage,
    "not_found": NotFound,
    "conflict": Conflict,
    "busy": Busy,
    "incompatible_db": IncompatibleDatabase,
    "internal": Internal,
}


def _binary(explicit: Optional[str]) -> str:
    """The memctl binary: given, else `MEMCTL_BIN`, else the one installed beside this Python
    (the package's own), else `memctl` on PATH."""
    if explicit:
        return explicit
    if os.environ.get("MEMCTL_BIN"):
        return os.environ["MEMCTL_BIN"]
    beside = os.path.join(os.path.dirname(sys.executable), "memctl")
    if os.path.isfile(beside):
        return beside
    return shutil.which("memctl") or "memctl"


class _Group:
    def __init__(self, memory: "Memory"):
        self._m = memory


class Branches(_Group):
    """`memctl branch …`"""

    def create(self, branch: str, *, meta: Optional[Dict[str, Any]] = None) -> ForkResult:
        return self._m._run("branch", "create", *_meta(meta), "--", branch)

    def list(self, *, status: Optional[str] = None) -> List[BranchInfo]:
        return self._m._run("branch", "list", *_opt("--status", status))["branches"]

    def show(self, branch: str) -> Dict[str, Any]:
        return self._m._run("branch", "show", "--", branch)

    def mark(self, branch: str, status: str, *, note: Optional[str] = None, subtree: bool = False) -> List[str]:
        return self._m._run("branch", "mark", *_opt("--note", note), *_flag("--subtree", subtree), "--", branch, status)[
            "marked"
        ]

    def set_uid(self, branch: str, uid: str) -> Dict[str, Any]:
        return self._m._run("branch", "set-uid", "--", branch, uid)


class Core(_Group):
    """`memctl core …`: small key/value facts."""

    def set(self, branch: str, key: str, value: str, *, importance: Optional[int] = None, ttl: Optional[str] = None) -> Dict[str, Any]:
        args = ["core", "set", *_opt("--importance", importance), *_opt("--ttl", ttl), "--", branch, key, "-"]
        return self._m._run(*args, stdin=value)

    def get(self, branch: str, *keys: str, explain: bool = False) -> Dict[str, Any]:
        """key → value (None when not in the view); with `explain`, key → CoreEntry."""
        return self._m._run("core", "get", *_flag("--explain", explain), "--", branch, *keys)["core"]

    def delete(self, branch: str, *keys: str) -> List[str]:
        return self._m._run("core", "del", "--", branch, *keys)["deleted"]


class Recall(_Group):
    """`memctl recall …`: the timeline of events."""

    def append(self, branch: str, text: str, *, kind: str, tags: Iterable[str] = ()) -> Dict[str, Any]:
        return self._m._run("recall", "append", *_opt("--kind", kind), *_tags(tags), "--", branch, "-", stdin=text)

    def list(self, branch: str, *, limit: Optional[int] = None) -> Dict[str, List[Any]]:
        return self._m._run("recall", "list", *_opt("--limit", limit), "--", branch)

    def search(self, branch: str, query: str, *, k: Optional[int] = None) -> List[Event]:
        return self._m._run("recall", "search", *_opt("-k", k), "--", branch, query)["events"]

    def evict(self, branch: str, *, oldest: Optional[int] = None, kind: Optional[str] = None, ids: Sequence[int] = ()) -> Dict[str, Any]:
        args = [*_opt("--oldest", oldest), *_opt("--kind", kind)]
        for i in ids:
            args += _opt("--id", i)
        return self._m._run("recall", "evict", *args, "--", branch)


class Archival(_Group):
    """`memctl archival …`: long-term records, searched by words."""

    def add(self, branch: str, text: str, *, tags: Iterable[str] = ()) -> Dict[str, Any]:
        return self._m._run("archival", "add", *_tags(tags), "--", branch, "-", stdin=text)

    def get(self, branch: str, record: int) -> Record:
        return self._m._run("archival", "get", "--", branch, str(record))["record"]

    def update(self, branch: str, record: int, *, text: Optional[str] = None, tags: Optional[Iterable[str]] = None) -> Dict[str, Any]:
        args = ["archival", "update"]
        if text is not None:
            args += _opt("--text", "-")
        if tags is not None:
            tags = list(tags)
            args += _tags(tags) if tags else ["--clear-tags"]
        return self._m._run(*args, "--", branch, str(record), stdin=text)

    def delete(self, branch: str, record: int) -> Dict[str, Any]:
        return self._m._run("archival", "delete", "--", branch, str(record))

    def search(self, branch: str, query: str, *, k: Optional[int] = None, tags: Iterable[str] = ()) -> List[Record]:
        return self._m._run("archival", "search", *_opt("-k", k), *_tags(tags), "--", branch, query)["results"]


class Export(_Group):
    """`memctl export …`"""

    def paper(self, out: str, *, branch: Optional[str] = None, artifacts: Optional[str] = None) -> Dict[str, Any]:
        return self._m._run("export", "paper", *_opt("--out", out), *_opt("--branch", branch), *_opt("--artifacts", artifacts))

    def html(self, out: str) -> Any:
        """`{out, bytes, branches}`; with `out="-"`, the page itself (a str)."""
        return self._m._run("export", "html", *_opt("--out", out), parse=out != "-")

    def jsonl(self, out: str) -> Any:
        """`{out, lines}`; with `out="-"`, the lines themselves (a str)."""
        return self._m._run("export", "jsonl", *_opt("--out", out), parse=out != "-")


class Memory:
    """One memctl database: an SQLite file, or a PostgreSQL database as a `postgres://` URL.

    `config`: a memctl.toml; `binary`: the memctl to run (default: the one this package
    installed); `actor` and `phase`: recorded in the journal with every write.
    """

    def __init__(self, db: str, *, config: Optional[str] = None, binary: Optional[str] = None,
                 actor: Optional[str] = None, phase: Optional[str] = None):
        self.db = os.fspath(db)
        self.binary = _binary(binary)
        self._global = [*_opt("--db", self.db), "--json", *_opt("--config", config), *_opt("--actor", actor), *_opt("--phase", phase)]
        self.branch = Branches(self)
        self.core = Core(self)
        self.recall = Recall(self)
        self.archival = Archival(self)
        self.export = Export(self)

    def _run(self, *args: Any, stdin: Optional[str] = None, whole: bool = False, parse: bool = True) -> Any:
        argv = [self.binary, *self._global, *[str(a) for a in args]]
        if stdin is not None and not isinstance(stdin, str):
            raise InvalidInput("invalid_input", 1, f"a text must be a str, not {type(stdin).__name__}")
        # memctl drops one line break ending a text on its stdin (`echo`'s: "\n" or "\r\n"); one
        # more keeps the text whole, a "\r" at its end included. An answer to `apply` or `strip`
        # (`whole`) is read as it is.
        for arg in argv:
            if "\0" in arg:
                raise InvalidInput("invalid_input", 1, "an argument holds the NUL character (U+0000)")
            _utf8(arg)
        data = _utf8(stdin if whole else stdin + "\r\n") if stdin is not None else b""
        try:
            proc = subprocess.run(argv, input=data, capture_output=True)
        except OSError as e:
            raise MemctlError("internal", 127, f"cannot run {self.binary}: {e}",
                              "install memctl, or pass binary= or set MEMCTL_BIN") from None
        stdout, stderr = proc.stdout.decode("utf-8"), proc.stderr.decode("utf-8")
        if proc.returncode != 0:
            try:
                error = json.loads(stderr)["error"]
            except (ValueError, KeyError, TypeError):
                error = {"kind": "usage" if proc.returncode == 2 else "internal", "message": stderr.strip()}
            cls = _ERRORS.get(error.get("kind", ""), MemctlError)
            raise cls(error.get("kind", ""), proc.returncode, error.get("message", ""), error.get("hint"))
        if not parse:
            return stdout
        return json.loads(stdout) if stdout.strip() else None

    # ---- the database and the tree ---------------------------------------------------------
    def init(self) -> Dict[str, Any]:
        return self._run("init")

    def fork(self, parent: str, child: Optional[str] = None, *, meta: Optional[Dict[str, Any]] = None) -> ForkResult:
        return self._run("fork", *_meta(meta), "--", parent, *([child] if child is not None else []))

    # ---- reading ---------------------------------------------------------------------------
    def read(self, branch: str, *, all: bool = False, scope: Optional[str] = None) -> Dict[str, Any]:
        return self._run("read", *_flag("--all", all), *_opt("--scope", scope), "--", branch)

    def context(self, branch: str, *, query: Optional[str] = None, budget_chars: Optional[int] = None,
                budget_tokens: Optional[int] = None, encoding: str = "cl100k_base") -> Dict[str, Any]:
        """The rendered memory block; `encoding` counts `budget_tokens` (as for `messages`)."""
        args = ["context", *_opt("--query", query), *_opt("--budget-chars", budget_chars)]
        if budget_tokens is not None:
            args += [*_opt("--budget-tokens", budget_tokens), *_opt("--encoding", encoding)]
        return self._run(*args, "--", branch)

    def pressure(self, branch: str) -> Dict[str, Any]:
        return self._run("pressure", "--", branch)

    def consolidate(self, branch: str) -> Dict[str, Any]:
        return self._run("consolidate", "--", branch)

    def log(self, branch: Optional[str] = None, *, limit: Optional[int] = None) -> List[Dict[str, Any]]:
        return self._run("log", *_opt("--limit", limit), "--", *([branch] if branch else []))["ops"]

    # ---- the LLM protocol ------------------------------------------------------------------
    def apply(self, branch: str, text: str, *, lenient: bool = False, results_block: bool = False) -> ApplyResult:
        """Applies the `<memory_update>` block of an LLM's answer, in one transaction; with
        `results_block`, the result holds the `<memory_results>` text to feed back to the LLM."""
        flags = [*_flag("--lenient", lenient), *_flag("--results-block", results_block)]
        return self._run("apply", *flags, "--", branch, "-", stdin=text, whole=True)

    def strip(self, text: str) -> str:
        return self._run("strip", "--", "-", stdin=text, whole=True)["text"]

    # ---- inspection ------------------------------------------------------------------------
    def diff(self, a: str, b: str, *, layers: Iterable[str] = ()) -> Dict[str, Any]:
        return self._run("diff", *[x for layer in layers for x in _opt("--layer", layer)], "--", a, b)

    def why(self, branch: str, key: Optional[str] = None, *, record: Optional[int] = None, event: Optional[int] = None) -> Dict[str, Any]:
        return self._run("why", *_opt("--record", record), *_opt("--event", event), "--", branch, *([key] if key is not None else []))

    def path(self, branch: str) -> Dict[str, Any]:
        return self._run("path", "--", branch)

    # ---- the life of a search --------------------------------------------------------------
    def promote(self, src: str, dst: str, *, core: Iterable[str] = (), records: Iterable[int] = (),
                events: Iterable[int] = (), note: Optional[str] = None) -> Dict[str, Any]:
        args = [x for k in core for x in _opt("--core", k)] + [x for r in records for x in _opt("--record", r)]
        args += [x for e in events for x in _opt("--event", e)]
        return self._run("promote", *args, *_opt("--note", note), "--", src, dst)

    def gc(self, *, branches: Iterable[str] = (), subtree: bool = False, journal: bool = False,
           dry_run: bool = False, vacuum: bool = False) -> Dict[str, Any]:
        args = [x for b in branches for x in _opt("--branch", b)]
        return self._run("gc", *args, *_flag("--subtree", subtree), *_flag("--journal", journal),
                         *_flag("--dry-run", dry_run), *_flag("--vacuum", vacuum))

    # ---- conversation memory ---------------------------------------------------------------
    def step(self, branch: str, type: str, **fields: Any) -> Dict[str, Any]:
        """Adds one step: `type` and its fields (text, plan, answer; tool, thought, args, …)."""
        return self._run("step", "add", *_opt("--type", type), "--", branch, "-", stdin=json.dumps(fields))

    def messages(self, branch: str, *, format: str = "openai", summary_mode: bool = False,
                 budget_tokens: Optional[int] = None, encoding: str = "cl100k_base",
                 keep_last: Optional[int] = None, old_observations: Optional[int] = None,
                 max_chars: Optional[int] = None, retrieve: int = 0) -> Dict[str, Any]:
        """`{format, messages, system?, tokens?, dropped}`: the conversation as chat messages."""
        args = ["messages", *_opt("--format", format), *_flag("--summary-mode", summary_mode)]
        if budget_tokens is not None:
            args += [*_opt("--budget-tokens", budget_tokens), *_opt("--encoding", encoding)]
        args += [*_opt("--keep-last", keep_last), *_opt("--old-observations", old_observations), *_opt("--max-chars", max_chars)]
        if retrieve:
            args += _opt("--retrieve", retrieve)
        return self._run(*args, "--", branch)

    def prune(self, branch: str, *, keep_last: Optional[int] = None, old_observations: Optional[int] = None,
              max_chars: Optional[int] = None) -> Dict[str, Any]:
        return self._run("prune", *_opt("--keep-last", keep_last), *_opt("--old-observations", old_observations),
                         *_opt("--max-chars", max_chars), "--", branch)

    def compact(self, branch: str, budget_tokens: int, *, encoding: Optional[str] = None) -> Dict[str, Any]:
        return self._run("compact", *_opt("--budget-tokens", budget_tokens), *_opt("--encoding", encoding), "--", branch)

    def reset(self, branch: str, *, all: bool = False) -> Dict[str, Any]:
        return self._run("reset", *_flag("--all", all), "--", branch)


def _utf8(text: str) -> bytes:
    """The text as memctl takes it, or InvalidInput for one no UTF-8 holds (a lone surrogate).
    (A NUL character cannot be an argument; on stdin memctl stores it as U+FFFD.)"""
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as e:
        raise InvalidInput("invalid_input", 1, f"text is not valid Unicode: {e.reason} at {e.start}") from None


def _opt(flag: str, value: Any) -> List[str]:
    """An option and its value as one argument, so that a value starting with '-' stays a
    value (the positional arguments follow `--`, for the same reason)."""
    return [] if value is None else [f"{flag}={value}"]


def _flag(flag: str, on: bool) -> List[str]:
    return [flag] if on else []


def _tags(tags: Iterable[str]) -> List[str]:
    return [x for tag in tags for x in _opt("--tag", tag)]


def _meta(meta: Optional[Dict[str, Any]]) -> List[str]:
    return _opt("--meta", None if meta is None else json.dumps(meta))


__all__ = ["Memory", "MemctlError", "InvalidInput", "Usage", "NotFound", "Conflict", "Busy",
           "IncompatibleDatabase", "Internal", "CoreEntry"]
