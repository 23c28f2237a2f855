"""The Python client against real databases: every method once, every error class from a real
failing call, the example runner end to end, and concurrent writers losing nothing."""

import json
import multiprocessing
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

import memctl
from memctl import Memory
from memctl.steps import ActionStep, FinalAnswerStep, StepRecorder, SystemStep, TaskStep, UserStep

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "tree_search.py"


@pytest.fixture
def mem(tmp_path, monkeypatch):
    monkeypatch.setenv("MEMCTL_NOW", "2026-01-02T03:04:05Z")
    m = Memory(str(tmp_path / "memory.sqlite"), actor="pytest", phase="test")
    m.init()
    m.branch.create("root", meta={"task": "stencil"})
    return m


def test_every_method_once(mem, tmp_path):
    assert mem.fork("root", "a")["branch"] == "a"
    assert mem.fork("root", "b", meta={"score": 1})["created"]
    assert [b["id"] for b in mem.branch.list()] == ["root", "a", "b"]
    assert mem.branch.show("a")["path"] == ["root", "a"]
    assert mem.branch.set_uid("a", "node-a")["node_uid"] == "node-a"

    assert mem.core.set("a", "goal", "tune\nthe stencil", importance=4)["key"] == "goal"
    assert mem.core.get("a", "goal") == {"goal": "tune\nthe stencil"}
    assert mem.core.get("a", "goal", explain=True)["goal"]["importance"] == 4
    assert mem.core.delete("a", "goal") == ["goal"]

    event = mem.recall.append("a", "runtime 12.4 s with -O3", kind="metric", tags=["phase:tune"])
    assert mem.recall.list("a")["events"][0]["id"] == event["id"]
    assert mem.recall.search("a", "runtime")[0]["text"].startswith("runtime")
    record = mem.archival.add("a", "tiling 64x64 beat 32x32 by 18%", tags=["result"])
    assert mem.archival.get("a", record["id"])["tags"] == ["result"]
    assert mem.archival.update("a", record["id"], text="tiling 64x64 beat 32x32 by 19%")["id"] == record["id"]
    assert mem.archival.search("a", "tiling", k=3)[0]["text"].endswith("19%")
    assert mem.recall.evict("a", ids=[event["id"]])["evicted"] == [event["id"]]

    assert "core" in mem.read("a") and mem.read("a", all=True, scope="archival")["archival"]
    assert mem.context("a", budget_chars=1000)["text"]
    assert mem.pressure("a")["level"]
    assert "consolidated" in mem.consolidate("a")
    applied = mem.apply("a", 'ok <memory_update>{"core": {"k": "v"}}</memory_update>')
    assert applied["applied"] == 1 and "results_block" not in applied
    read = mem.apply("a", '<memory_update>{"core_get": ["k"]}</memory_update>', results_block=True)
    assert read["read_only"]
    assert read["results_block"] == "<memory_results>\n**Core Memory Values:**\n- k: v\n</memory_results>"
    lenient = mem.apply("root", '{"core": {"k2": "v", "": "x"}}', lenient=True)
    assert lenient["skipped"] == [{"op": "core", "item": "", "reason": "core keys must not be empty"}]
    assert mem.strip("answer <memory_update>{}</memory_update>") == "answer"
    assert mem.strip("  code\n\n") == "  code\n\n", "an answer without blocks comes back unchanged"
    assert mem.log("a", limit=2)

    assert mem.diff("a", "b", layers=["core"])["core"]["only_a"][0]["key"] == "k"
    assert mem.why("a", "k")["verdict"] == "visible"
    assert mem.why("a", record=record["id"])["verdict"] == "visible"
    assert mem.why("a", event=event["id"])["verdict"] == "hidden"
    assert [n["branch"]["id"] for n in mem.path("a")["nodes"]] == ["root", "a"]
    assert mem.promote("a", "root", core=["k"], note="found in a")["promoted"][0]["layer"] == "core"
    assert mem.branch.mark("b", "dead", note="no") == ["b"]
    assert mem.gc(dry_run=True)["collected"] == ["b"]
    assert mem.gc(vacuum=True)["vacuum"]["mode"]
    assert mem.archival.delete("a", record["id"])["deleted"]

    assert mem.step("a", "system", text="You tune.")["type"] == "system"
    mem.step("a", "task", text="Tune the stencil.")
    mem.step("a", "action", tool="run", args={"tile": 64}, observation="12.4 s " * 50)
    mem.step("a", "user", text="again")
    assert [m["role"] for m in mem.messages("a")["messages"]] == ["system", "user", "assistant", "tool", "user"]
    assert mem.messages("a", format="anthropic")["system"] == "You tune."
    assert mem.messages("a", budget_tokens=60)["tokens"] <= 60
    assert mem.prune("a", old_observations=0, max_chars=10)["shortened"]
    assert mem.compact("a", 10_000)["summaries"] == []
    assert mem.reset("a")["steps"] == 4

    assert mem.export.paper(str(tmp_path / "paper"), branch="a")["branch"] == "a"
    assert mem.export.html(str(tmp_path / "page.html"))["branches"] == 2
    assert mem.export.jsonl(str(tmp_path / "log.jsonl"))["lines"] > 0


def test_step_recorder_adapter(mem):
    agent = StepRecorder(mem, "root")
    agent.record(SystemStep("You tune."))
    agent.record(TaskStep("Tune the stencil."))
    agent.record(ActionStep(tool="run", args={"tile": 64}, thought="measure", observation="12.4 s"))
    child = agent.fork("child")
    child.record(UserStep("Try 32."))
    child.record(FinalAnswerStep("32 is faster."))
    roles = [m["role"] for m in child.to_messages()]
    assert roles == ["system", "user", "assistant", "tool", "user", "assistant"]
    assert len(agent.to_messages()) == 4, "the parent's conversation is its own"


def test_every_error_class_from_a_real_failing_call(mem, tmp_path):
    with pytest.raises(memctl.InvalidInput) as error:
        mem.core.set("root", "", "value")
    assert error.value.exit_code == 1 and error.value.kind == "invalid_input"
    with pytest.raises(memctl.Usage) as error:
        mem._run("no-such-command")
    assert error.value.exit_code == 2
    with pytest.raises(memctl.NotFound) as error:
        mem.read("no-such-branch")
    assert error.value.exit_code == 3 and "no-such-branch" in error.value.message
    mem.fork("root", "x")
    mem.branch.create("other")
    with pytest.raises(memctl.Conflict) as error:
        mem.fork("other", "x")
    assert error.value.exit_code == 4
    # Busy: another connection holds the write lock past a short timeout.
    config = tmp_path / "memctl.toml"
    config.write_text("[sqlite]\nbusy_timeout_ms = 100\n")
    hurried = Memory(mem.db, config=str(config))
    holder = sqlite3.connect(mem.db, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        with pytest.raises(memctl.Busy) as error:
            hurried.recall.append("root", "blocked", kind="note")
        assert error.value.exit_code == 5
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    foreign = tmp_path / "foreign.sqlite"
    sqlite3.connect(foreign).execute("CREATE TABLE t(x)").connection.commit()
    with pytest.raises(memctl.IncompatibleDatabase) as error:
        Memory(str(foreign)).read("root")
    assert error.value.exit_code == 6
    # Internal (exit 255) is memctl's own bug: no call makes it on purpose; its class exists.
    assert issubclass(memctl.Internal, memctl.MemctlError)


def test_the_example_runner_end_to_end(tmp_path):
    out = tmp_path / "out"
    proc = subprocess.run(
        [sys.executable, str(EXAMPLE), "--db", str(tmp_path / "search.sqlite"), "--out", str(out),
         "--workers", "4", "--nodes", "24"],
        capture_output=True, text=True, timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["runtime"] == 9.0, "the search finds tile 48"
    assert (out / "final_memory_for_paper.md").read_text().startswith("# Final Memory For Paper")
    assert (out / "memory_database.html").stat().st_size > 1000
    mem = Memory(str(tmp_path / "search.sqlite"))
    assert [b["id"] for b in mem.branch.list(status="best")] == [result["best"]]


def _writer(args):
    db, worker, calls = args
    mem = Memory(db, actor=f"w{worker}")
    for call in range(calls):
        if call % 2:
            mem.core.set(f"c{worker % 2}", f"w{worker}_{call}", f"value {call}")
        else:
            mem.recall.append(f"c{worker % 2}", f"w{worker} c{call}", kind="note")
    return worker


def test_eight_processes_lose_nothing(tmp_path):
    db = str(tmp_path / "concurrent.sqlite")
    config = tmp_path / "memctl.toml"
    config.write_text("core_max_chars = 1000000\nauto_consolidate = false\n")
    mem = Memory(db, config=str(config))
    mem.init()
    mem.branch.create("root")
    mem.fork("root", "c0")
    mem.fork("root", "c1")
    workers, calls = 8, 200
    os.environ["MEMCTL_CONFIG"] = str(config)
    try:
        with multiprocessing.Pool(workers) as pool:
            assert sorted(pool.map(_writer, [(db, w, calls) for w in range(workers)])) == list(range(workers))
    finally:
        del os.environ["MEMCTL_CONFIG"]
    for branch in ("c0", "c1"):
        mine = [w for w in range(workers) if w % 2 == int(branch[1])]
        events = {e["text"] for e in mem.recall.list(branch, limit=10_000)["events"]}
        assert events == {f"w{w} c{c}" for w in mine for c in range(0, calls, 2)}
        keys = set(mem.core.get(branch))
        assert keys == {f"w{w}_{c}" for w in mine for c in range(1, calls, 2)}


def test_values_that_start_with_a_hyphen_stay_values(mem):
    """Keys, queries, tags, kinds, notes: any text, a leading '-' included, is passed as itself."""
    mem.fork("root", "a")
    mem.core.set("a", "-k", "-O3 helps")
    assert mem.core.get("a", "-k") == {"-k": "-O3 helps"}
    event = mem.recall.append("a", "tried -O3", kind="-flag", tags=["-t", "--tag"])["id"]
    assert [e["id"] for e in mem.recall.search("a", "-O3")] == [event]
    assert mem.recall.search("a", "-O3")[0]["tags"] == ["-t", "--tag"]
    record = mem.archival.add("a", "-O3 is 12% faster", tags=["--x"])["id"]
    assert [r["id"] for r in mem.archival.search("a", "-O3", tags=["--x"])] == [record]
    assert "-O3 helps" in mem.context("a", query="-O3")["text"]
    assert mem.why("a", "-k")["key"] == "-k"
    mem.promote("a", "root", core=["-k"], note="-12% runtime")
    mem.branch.mark("a", "dead", note="-12% slower")
    assert mem.branch.show("a")["branch"]["status_note"] == "-12% slower"
    assert mem.core.delete("a", "-k") == ["-k"]


def test_a_missing_binary_is_a_memctl_error(tmp_path):
    with pytest.raises(memctl.MemctlError) as error:
        Memory(str(tmp_path / "m.sqlite"), binary=str(tmp_path / "no-memctl")).init()
    assert "cannot run" in error.value.message and error.value.hint


def test_texts_arrive_whole_and_odd_inputs_are_memctl_errors(mem, tmp_path):
    """A text's line breaks arrive as given (stdin loses one, which the client adds); what memctl
    cannot take is an InvalidInput, before any process runs; exports to '-' return the text."""
    mem.core.set("root", "k", "value\n")
    assert mem.core.get("root", "k") == {"k": "value\n"}
    first = mem.recall.append("root", "x\n", kind="note")["id"]
    assert mem.recall.append("root", "x\n", kind="note") == {"id": first, "skipped": True}
    assert mem.recall.append("root", "x", kind="note")["skipped"] is False
    mem.core.set("root", "r", "x\r")
    assert mem.core.get("root", "r") == {"r": "x\r"}
    for bad in [lambda: mem.core.set("root", "n", 12.4), lambda: mem.recall.search("root", "a\x00b"),
                lambda: mem.archival.add("root", "lone \udcff")]:
        with pytest.raises(memctl.InvalidInput):
            bad()
    assert mem.core.get("root", "n") == {"n": None}
    mem.core.set("root", "n", "a\x00b")
    assert mem.core.get("root", "n") == {"n": "a\ufffdb"}
    with pytest.raises(memctl.InvalidInput):
        mem.fork("root", "")
    assert mem.context("root", budget_tokens=50)["tokens"] <= 50
    lines = mem.export.jsonl("-")
    assert isinstance(lines, str) and json.loads(lines.splitlines()[0])
    assert mem.export.html("-").lstrip().lower().startswith("<!doctype html")
