"""memctl for Python: branch-scoped agent memory for tree searches.

A typed client for the ``memctl`` command line (installed with this package). Every method runs
one ``memctl --json`` command — one transaction — and returns its JSON result as plain dicts and
lists (the shapes of docs/cli.md, with TypedDicts below for the common ones). Texts go through
stdin, never argv. Failures raise a :class:`MemctlError` subclass per error kind.

    from memctl import Memory
    mem = Memory("run/memory.sqlite")
    mem.init()
    mem.branch.create("root")
    child = mem.fork("root", "node-1")["branch"]
    mem.recall.append(child, "runtime 12.4 s", kind="metric")
"""

from ._client import (
    Busy,
    Conflict,
    IncompatibleDatabase,
    Internal,
    InvalidInput,
    Memory,
    MemctlError,
    NotFound,
    Usage,
)
from ._types import ApplyResult, BranchInfo, CoreEntry, Event, ForkResult, Record, Skipped, Summary
from .steps import StepRecorder

__all__ = [
    "Memory",
    "MemctlError",
    "InvalidInput",
    "Usage",
    "NotFound",
    "Conflict",
    "Busy",
    "IncompatibleDatabase",
    "Internal",
    "ApplyResult",
    "BranchInfo",
    "CoreEntry",
    "Event",
    "ForkResult",
    "Record",
    "Skipped",
    "Summary",
    "StepRecorder",
]
