"""A small best-first tree search over tile sizes, with memctl as its memory.

Worker processes expand nodes concurrently: each forks a branch from its parent, asks a fake
(deterministic) LLM for an answer with a `<memory_update>` block, applies the block, records the
measured runtime, and marks the branch. At the end the best branch is marked best and its memory
exported: final_memory_for_paper.md/.json and an HTML viewer of the whole tree.

    python examples/tree_search.py --db run/memory.sqlite --out run --workers 4 --nodes 24
"""

import argparse
import json
import multiprocessing
import os

from memctl import Memory


def runtime_of(tile: int) -> float:
    """The 'experiment': the best tile is 48."""
    return round(abs(tile - 48) / 4 + 9.0, 2)


def fake_llm(context: str, tile: int) -> str:
    """Stands in for a model: a short answer and a memory update, from the prompt alone."""
    runtime = runtime_of(tile)
    seen_before = "overflow" in context
    update = {
        "core": {"last_tile": str(tile)},
        "recall": [{"kind": "metric", "content": f"tile {tile}: runtime {runtime} s"}],
    }
    if tile > 64 and not seen_before:
        update["archival"] = [{"text": f"tiles above 64 overflow the L2 cache (tile {tile})", "tags": ["lesson"]}]
    return f"Tried tile {tile}.\n<memory_update>{json.dumps(update)}</memory_update>"


def expand(job):
    """One node: fork, prompt, apply, score (runs in a worker process)."""
    db, parent, node, tile = job
    mem = Memory(db, actor=f"worker-{os.getpid()}", phase="search")
    branch = mem.fork(parent, node, meta={"tile": tile})["branch"]
    context = mem.context(branch, budget_chars=2000)["text"]
    answer = fake_llm(context, tile)
    mem.apply(branch, answer)
    runtime = runtime_of(tile)
    mem.recall.append(branch, f"node_id={node} metric={runtime} is_buggy=False", kind="node_result")
    mem.branch.mark(branch, "alive" if runtime < 14 else "pruned", note=f"{runtime} s")
    return node, tile, runtime


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--db", default="tree_search.sqlite")
    parser.add_argument("--out", default="tree_search_out")
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--nodes", type=int, default=24)
    args = parser.parse_args()

    mem = Memory(args.db)
    mem.init()
    mem.branch.create("root")
    mem.core.set("root", "task", "find the fastest tile size for the 3D stencil", importance=5)

    scores = {"root": 99.0}
    frontier = [("root", 8), ("root", 96)]
    done = 0
    with multiprocessing.Pool(args.workers) as pool:
        while frontier and done < args.nodes:
            frontier.sort(key=lambda item: scores[item[0]])
            batch, frontier = frontier[: args.workers], frontier[args.workers :]
            jobs = [(args.db, parent, f"n{done + i}", tile) for i, (parent, tile) in enumerate(batch)]
            for node, tile, runtime in pool.map(expand, jobs):
                scores[node] = runtime
                frontier += [(node, tile + 8), (node, max(8, tile - 8))]
            done += len(jobs)

    best = min((n for n in scores if n != "root"), key=scores.get)
    mem.branch.mark(best, "best", note=f"{scores[best]} s")
    os.makedirs(args.out, exist_ok=True)
    paper = mem.export.paper(args.out)  # the branch marked best
    viewer = mem.export.html(os.path.join(args.out, "memory_database.html"))
    print(json.dumps({"best": best, "runtime": scores[best], "nodes": done,
                      "paper": paper["markdown"], "viewer": viewer["out"]}))


if __name__ == "__main__":
    main()
