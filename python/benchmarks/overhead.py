"""What the client adds to a call: `Memory.core.get` against a bare `subprocess.run` of the same
command, alternating, medians of N calls each.

    python python/benchmarks/overhead.py [N]
"""

import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from memctl import Memory


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 300
    with tempfile.TemporaryDirectory() as tmp:
        db = str(Path(tmp) / "bench.sqlite")
        mem = Memory(db)
        mem.init()
        mem.branch.create("root")
        mem.core.set("root", "task", "tune the stencil")
        bare_args = [mem.binary, "--db", db, "--json", "core", "get", "root", "task"]
        client, bare = [], []
        for _ in range(n):
            t = time.perf_counter()
            mem.core.get("root", "task")
            client.append(time.perf_counter() - t)
            t = time.perf_counter()
            subprocess.run(bare_args, capture_output=True, text=True, input="")
            bare.append(time.perf_counter() - t)
        c, b = statistics.median(client) * 1e3, statistics.median(bare) * 1e3
        print(f"client {c:.3f} ms, bare subprocess.run {b:.3f} ms, overhead {c - b:+.3f} ms (medians of {n})")


if __name__ == "__main__":
    main()
