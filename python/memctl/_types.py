"""The shapes of memctl's JSON results (docs/cli.md), for type checkers."""

from typing import Any, Dict, List, Optional, TypedDict, Union


class BranchInfo(TypedDict):
    id: str
    node_uid: Optional[str]
    parent: Optional[str]
    depth: int
    fork_seq: int
    ts: float
    meta: Dict[str, Any]
    status: str
    status_note: Optional[str]


class ForkResult(TypedDict):
    branch: str
    parent: Optional[str]
    depth: int
    fork_seq: int
    created: bool


class CoreEntry(TypedDict):
    value: str
    branch: str
    seq: int
    importance: int
    ttl: Optional[float]
    ts: float
    promoted_from: Optional[Dict[str, Any]]


class Event(TypedDict):
    id: int
    branch: str
    kind: str
    text: str
    tags: List[str]
    ts: float


class Summary(TypedDict):
    id: int
    branch: str
    kind: str
    text: str
    event_ids: List[int]
    ts: float


class Record(TypedDict, total=False):
    id: int
    branch: str
    text: str
    tags: List[str]
    ts: float
    seq: int
    score: float


class Skipped(TypedDict):
    op: str
    item: Union[str, int, None]
    reason: str


class _ApplyResult(TypedDict):
    results: Dict[str, Any]
    applied: int
    skipped: List[Skipped]
    read_only: bool
    ignored_blocks: int


class ApplyResult(_ApplyResult, total=False):
    """What `Memory.apply` did; `results_block` only when asked for."""

    results_block: str
