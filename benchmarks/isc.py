"""isc throughput: workflows/s per interaction setting, and the sandbox's overhead per
validator call against a plain subprocess, measured in the same run.

* **Validator calls** -- the same library validator on the same data, four ways: a plain
  ``subprocess.run([python, validator.py, data.json])`` in a temporary directory (the
  baseline: no isolation, no limits), :func:`run_validator` in the namespace sandbox (fresh
  mount/network/PID namespaces, read-only binds, limits), the same at the ``rlimits`` level
  (limits and a scrubbed environment only), and :func:`run_validators` (many validations in
  one sandboxed interpreter), per call. Printed: median and min-max per call, and each
  median's ratio to the plain subprocess.
* **Workflows/s per setting** -- :func:`run_setting` over the library's workflows on a scripted
  backend that fills every demanded field (so every validation runs and passes): single turn
  and in context validate all replies in one sandboxed batch; agentic runs one sandboxed
  validator per ``validate`` call (one per workflow here). The model costs nothing, so this is
  the harness's ceiling; a real model adds its generation time.

Costs are CPU seconds of this process plus its children (``getrusage``: the validators run in
child processes) and wall seconds; ``--repeats`` runs after a warm-up, median and min-max.
On a shared machine the wall clock measures the neighbours; say which one you quote.

    python benchmarks/isc.py [--quick] [--repeats 5] [--calls 10]
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from trustlab.lm import ScriptedChatModel, format_tool_call
from trustlab.methods import isc
from trustlab.sandbox import Sandbox, probe


def _cpu() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def measure(fn: Callable[[], object], repeats: int) -> tuple[list[float], list[float]]:
    """CPU and wall seconds of ``fn`` over ``repeats`` runs after one warm-up."""
    fn()
    cpu, wall = [], []
    for _ in range(repeats):
        c0, w0 = _cpu(), time.perf_counter()
        fn()
        cpu.append(_cpu() - c0)
        wall.append(time.perf_counter() - w0)
    return cpu, wall


def _fmt(xs: list[float], per: int = 1, unit: str = "ms") -> str:
    scale = 1000.0 if unit == "ms" else 1.0
    vals = [x / per * scale for x in xs]
    return f"{statistics.median(vals):8.1f} {unit} [{min(vals):.1f}, {max(vals):.1f}]"


def _fill(w: isc.Workflow) -> dict[str, object]:
    out: dict[str, object] = {}
    for f in w.fields:
        words = " ".join(["filled"] * f.min_words)
        out[f.name] = {"text": words, "list": [words] * f.items,
                       "sequence": "GATC" * (f.min_length // 4 + 1),
                       "smiles": "CCN" * (f.min_length // 3 + 1)}[f.form]  # fmt: skip
    return out


def _complier(flows: list[isc.Workflow]) -> ScriptedChatModel:
    by_id = {w.id: w for w in flows}

    def reply(conv: list[dict[str, str]]) -> str:
        first = next(m["content"] for m in conv if m["role"] == "user")
        wid = first.split("`")[1]
        if conv[0]["role"] == "system":  # agentic: one validate call with the filled data
            return format_tool_call("validate", {"data": _fill(by_id[wid])})
        wid = conv[-1]["content"].split("`")[1]
        return json.dumps(by_id[wid].with_data(_fill(by_id[wid])))

    return ScriptedChatModel(reply, name="complier")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="8 workflows, 3 repeats")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--calls", type=int, default=10, help="validator calls per repeat")
    args = parser.parse_args()
    repeats = 3 if args.quick else args.repeats
    report = probe()
    print(f"isolation here: {report.level} ({report.mode}) {report.reason}")
    with tempfile.TemporaryDirectory() as tmp:
        ids = isc.library_ids()[:: 7 if args.quick else 1]
        flows = isc.write_library(Path(tmp) / "lib", ids)
        w = flows[0]
        data = w.with_data(isc.standin_values(w))
        plain_dir = Path(tmp) / "plain"
        plain_dir.mkdir()
        for name in ("task.py", "validator.py"):
            (plain_dir / name).write_text((w.folder / name).read_text())
        (plain_dir / "data.json").write_text(json.dumps(data))
        ns, rl = Sandbox(isolation="auto"), Sandbox(isolation="rlimits")
        n = args.calls

        def plain() -> None:
            for _ in range(n):
                r = subprocess.run([sys.executable, "validator.py", "data.json"], cwd=plain_dir,
                                   capture_output=True, text=True, check=False)  # fmt: skip
                assert r.returncode == 0, r.stderr[-300:]

        def sandboxed(box: Sandbox) -> Callable[[], None]:
            def run() -> None:
                for _ in range(n):
                    assert isc.run_validator(w, data, box).passed

            return run

        def batch() -> None:
            assert all(v.passed for v in isc.run_validators([(w, data)] * n, ns))

        print(f"\nvalidator calls ({n} per repeat, {repeats} repeats): per call, CPU then wall")
        rows = {"plain subprocess": measure(plain, repeats)}
        rows[f"sandbox ({ns.level})"] = measure(sandboxed(ns), repeats)
        rows["sandbox (rlimits)"] = measure(sandboxed(rl), repeats)
        rows["sandbox batch (one interpreter)"] = measure(batch, repeats)
        base_cpu = statistics.median(rows["plain subprocess"][0])
        base_wall = statistics.median(rows["plain subprocess"][1])
        for name, (cpu, wall) in rows.items():
            print(f"  {name:33s} CPU {_fmt(cpu, n)}  wall {_fmt(wall, n)}  "
                  f"x plain: CPU {statistics.median(cpu) / base_cpu:5.2f}  "
                  f"wall {statistics.median(wall) / base_wall:5.2f}")  # fmt: skip

        model = _complier(flows)
        print(f"\nworkflows/s per setting ({len(flows)} workflows, scripted complier, {repeats} repeats)")
        for setting in isc.SETTINGS:
            def go(setting: str = setting) -> None:
                out = isc.run_setting(model, flows, setting, n_context=2)
                assert all(o.completed for o in out), [o.validator_errors for o in out][:2]

            cpu, wall = measure(go, repeats)
            rate = [len(flows) / t for t in wall]
            print(f"  {setting:8s} {statistics.median(rate):7.2f} workflows/s (wall) "
                  f"[{min(rate):.2f}, {max(rate):.2f}]  CPU per workflow {_fmt(cpu, len(flows))}")


if __name__ == "__main__":
    main()
