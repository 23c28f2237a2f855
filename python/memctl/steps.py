"""An adapter for step-based agents (smolagents' style): typed steps that render themselves as
chat messages, recorded on a branch so that forks continue the conversation and memctl prunes,
compacts and resets it copy-on-write."""

from dataclasses import asdict, dataclass, field
from typing import Any, Dict, List, Optional


@dataclass
class SystemStep:
    text: str
    type = "system"


@dataclass
class TaskStep:
    text: str
    type = "task"


@dataclass
class UserStep:
    text: str
    type = "user"


@dataclass
class PlanningStep:
    plan: str
    type = "planning"


@dataclass
class ActionStep:
    tool: str
    args: Dict[str, Any] = field(default_factory=dict)
    thought: Optional[str] = None
    observation: Optional[str] = None
    error: Optional[str] = None
    duration: Optional[float] = None
    type = "action"


@dataclass
class AssistantStep:
    text: str
    type = "assistant"


@dataclass
class FinalAnswerStep:
    answer: str
    type = "final"


class StepRecorder:
    """Records an agent's steps on one branch of a :class:`memctl.Memory`, and reads them back
    as the chat messages of the next model call."""

    def __init__(self, memory, branch: str):
        self.memory = memory
        self.branch = branch

    def record(self, step) -> int:
        """Stores `step` (one of the dataclasses above); returns its id."""
        fields = {k: v for k, v in asdict(step).items() if v is not None}
        return self.memory.step(self.branch, step.type, **fields)["id"]

    def to_messages(self, *, budget_tokens: Optional[int] = None, summary_mode: bool = False,
                    format: str = "openai", retrieve: int = 0) -> List[Dict[str, Any]]:
        """The branch's conversation as chat messages (see `memctl messages`)."""
        out = self.memory.messages(self.branch, budget_tokens=budget_tokens, summary_mode=summary_mode,
                                   format=format, retrieve=retrieve)
        return out["messages"]

    def fork(self, child: Optional[str] = None) -> "StepRecorder":
        """A recorder on a new child branch, which continues this conversation."""
        return StepRecorder(self.memory, self.memory.fork(self.branch, child)["branch"])
