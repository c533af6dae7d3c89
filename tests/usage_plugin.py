"""``pytest -p tests.usage_plugin``: what each test costs in CPU seconds and memory.

For sizing the suites on a shared machine, where wall times say more about the load than about
the tests. Per test (setup + call + teardown), one JSON line appended to the file named by
``$TRUSTLAB_TEST_USAGE`` (default ``test-usage.jsonl``), from each xdist worker:

- ``cpu_s``: user + system CPU seconds of the test process and of the child processes it
  reaped meanwhile (CLI subprocesses; not Ray's long-lived workers, which are sampled below);
- ``peak_rss_mb``: the largest resident memory of the test process *and all its descendants*
  together (Ray's raylet and workers, CLI subprocesses), sampled every 0.25 s;
- ``wall_s``, ``worker``.

Summarise with ``python -m tests.usage_plugin FILE`` (the largest by CPU and by memory).
"""

from __future__ import annotations

import json
import os
import resource
import sys
import threading
import time
from pathlib import Path

import pytest


def _tree_rss_mb() -> float:
    import psutil

    me = psutil.Process()
    total = 0
    for proc in [me, *me.children(recursive=True)]:
        try:
            total += proc.memory_info().rss
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return total / 2**20


class _Sampler(threading.Thread):
    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.peak = 0.0
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            self.peak = max(self.peak, _tree_rss_mb())
            self.stop.wait(0.25)


def _cpu() -> float:
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(
        resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None):
    sampler = _Sampler()
    sampler.start()
    cpu, wall = _cpu(), time.perf_counter()
    yield
    cpu, wall = _cpu() - cpu, time.perf_counter() - wall
    sampler.stop.set()
    sampler.join()
    record = {"nodeid": item.nodeid, "cpu_s": round(cpu, 2), "wall_s": round(wall, 2),
              "peak_rss_mb": round(max(sampler.peak, _tree_rss_mb())),
              "worker": os.environ.get("PYTEST_XDIST_WORKER", "main")}
    path = Path(os.environ.get("TRUSTLAB_TEST_USAGE", "test-usage.jsonl"))
    with path.open("a", encoding="utf-8") as fh:  # one short line per write: no interleaving
        fh.write(json.dumps(record) + "\n")


def _summary(path: str, top: int = 15) -> None:
    rows = [json.loads(line) for line in Path(path).read_text(encoding="utf-8").splitlines()]
    print(f"{len(rows)} tests, {sum(r['cpu_s'] for r in rows):.0f} CPU-s in all")
    for key in ("cpu_s", "peak_rss_mb"):
        print(f"largest {key}:")
        for r in sorted(rows, key=lambda r: -r[key])[:top]:
            print(f"  {r[key]:>8} {r['worker']:>5} {r['nodeid']}")


if __name__ == "__main__":
    _summary(sys.argv[1])
