"""LiSA benchmark: decision latency with memory vs the base alone, and service throughput.

    python benchmarks/lisa.py [--quick] [--skip-service]

Prints
(1) the memory's own cost: p50/p95 per-decision latency of the base alone and of LiSA with
    10,000 memory entries, exact attribute values (no embedder), probes whose values were all
    reported, base scores cached, so the difference is the memory lookup (target: < 2 ms added
    at p50);
(2) the deployed configuration, as the service and the experiment run it: a MiniLM +
    logistic-regression base and MiniLM value clustering, memory built from reports on the
    three default suites, probes that were never reported (their unseen attribute values are
    embedded and clustered at decision time), timed cold (empty embedding caches: every text
    is embedded at decision time) and warm (the same probes again, embeddings in memory), each
    next to the base alone under the same condition;
(3) requests/s of POST /v1/check and /v1/report on a local uvicorn server under a bounded load,
    as a ratio to GET /healthz.
Torch runs on one thread; every figure is a median over the probes of one run (p95 beside it).
"""

from __future__ import annotations

import argparse
import socket
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from trustlab.core.runtime import torch_runtime
from trustlab.methods.lisa import (
    SUITES,
    BaseOnly,
    Case,
    EmbeddingGuardrail,
    HashingEmbedder,
    Lisa,
    MemoBase,
    MiniLMEmbedder,
    build_suite,
    generic_seed_set,
)
from trustlab.methods.lisa.memory import case_attributes


def _flow(i: int, rng: np.random.Generator) -> Case:
    return Case.flow(f"data type {rng.integers(50)}", f"person {i}", "the agent",
                     f"recipient {i % 5000}", f"principle {i // 5000}", action="share")


def _times_ms(guardrail, probes, before=None) -> np.ndarray:
    out = []
    for c in probes:
        if before is not None:
            before()
        t = time.perf_counter()
        guardrail.check(c)
        out.append(time.perf_counter() - t)
    return np.array(out) * 1e3


def _line(name: str, ms: np.ndarray, base: np.ndarray | None = None) -> str:
    ratio = f"  ({np.median(ms) / np.median(base):.2f}x base)" if base is not None else ""
    return f"  {name:<22} p50 {np.median(ms):8.3f} ms  p95 {np.percentile(ms, 95):8.3f} ms{ratio}"


def deployed_latency(n_reports: int, n_probes: int) -> None:
    """MiniLM base + MiniLM value clustering, reports from the default suites, unseen probes."""
    rng = np.random.default_rng(3)
    emb = MiniLMEmbedder(None)  # in-memory cache only: cold means cold
    seed_cases, seed_labels = generic_seed_set(400, np.random.default_rng(0))
    model = EmbeddingGuardrail(emb).fit(seed_cases, seed_labels)
    reports, probes = [], []
    for name in SUITES:
        suite = build_suite(name)
        idx = rng.permutation(len(suite.cases))
        k = n_reports // len(SUITES)
        reports += [(suite.cases[i], int(suite.labels[i])) for i in idx[:k]]
        probes += [suite.cases[i] for i in idx[k : k + n_probes // len(SUITES)]]
    lisa = Lisa(model, embedder=emb, value_similarity=0.8)
    for case, label in reports:
        lisa.report(case, label)
    seen = {(a, v) for c, _ in reports for a, v in case_attributes(c).items()}
    values = [(a, v) for c in probes for a, v in case_attributes(c).items()]
    unseen = np.mean([pair not in seen for pair in values])
    only = BaseOnly(model)

    def cold() -> None:  # nothing cached: the base and the memory embed every text anew
        emb._memo.clear()
        lisa._base._cache.clear()
        only.base._cache.clear()
        for misses in lisa.memory_.index_._miss.values():
            misses.clear()

    base_cold = _times_ms(only, probes, cold)
    lisa_cold = _times_ms(lisa, probes, cold)
    lisa._base._cache.clear()
    only.base._cache.clear()
    emb.encode([c.text() for c in probes] + sorted({v for _, v in values}))  # prime the memo
    base_warm = _times_ms(only, probes)
    lisa_warm = _times_ms(lisa, probes)
    print(f"deployed: MiniLM base + MiniLM value clustering (similarity 0.8), "
          f"{lisa.memory_size()} memory entries from {len(reports)} reports on "
          f"{', '.join(SUITES)}; {len(probes)} probes never reported, {unseen:.0%} of their "
          "attribute values never reported")
    print("  cold (every text embedded at decision time):")
    print(_line("base alone", base_cold))
    print(_line("LiSA", lisa_cold, base_cold))
    print(f"  {'LiSA adds':<22} p50 {np.median(lisa_cold) - np.median(base_cold):8.3f} ms")
    print("  warm (embeddings cached, base scores not):")
    print(_line("base alone", base_warm))
    print(_line("LiSA", lisa_warm, base_warm))
    print(f"  {'LiSA adds':<22} p50 {np.median(lisa_warm) - np.median(base_warm):8.3f} ms")


def memory_latency(n_entries: int, n_checks: int) -> None:
    emb = HashingEmbedder(256)
    seed_cases, seed_labels = generic_seed_set(150, np.random.default_rng(0))
    base = MemoBase(EmbeddingGuardrail(emb).fit(seed_cases, seed_labels))
    rng = np.random.default_rng(1)
    lisa = Lisa(base, embedder=None)  # exact attribute values: the index is a dict lookup
    reports = [_flow(i, rng) for i in range(n_entries)]
    base.score(reports)
    for i, c in enumerate(reports):
        lisa.report(c, i % 2)
    probes = [_flow(int(i), rng) for i in rng.integers(0, n_entries, n_checks)]
    base.score(probes)
    only = BaseOnly(base)
    out = {}
    for name, g in (("base", only), ("lisa", lisa)):
        times = []
        for c in probes:
            t = time.perf_counter()
            g.check(c)
            times.append(time.perf_counter() - t)
        out[name] = np.array(times) * 1e3
    p50b, p50l = np.median(out["base"]), np.median(out["lisa"])
    print(f"memory only: exact values (no embedder), {lisa.memory_size()} memory entries (from "
          f"{n_entries} reports), probes whose values were all reported, base scores cached")
    print(f"  base alone   p50 {p50b:.4f} ms  p95 {np.percentile(out['base'], 95):.4f} ms")
    print(f"  LiSA         p50 {p50l:.4f} ms  p95 {np.percentile(out['lisa'], 95):.4f} ms")
    print(f"  memory adds  p50 {p50l - p50b:.4f} ms (target < 2 ms); ratio LiSA/base p50 "
          f"{p50l / max(p50b, 1e-9):.2f}x; throughput {1e3 / out['lisa'].mean():.0f} decisions/s")


def service_throughput(n_requests: int) -> None:
    import httpx
    import uvicorn

    from trustlab.methods.lisa.service import create_app

    emb = HashingEmbedder(256)
    cases, labels = generic_seed_set(150, np.random.default_rng(0))
    base = EmbeddingGuardrail(emb).fit(cases, labels)
    with tempfile.TemporaryDirectory() as tmp, socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        s.close()
        server = uvicorn.Server(uvicorn.Config(create_app(f"{tmp}/bench.db", token="t", base=base),
                                               host="127.0.0.1", port=port, log_level="warning"))
        th = threading.Thread(target=server.run, daemon=True)
        th.start()
        url = f"http://127.0.0.1:{port}"
        for _ in range(300):
            try:
                httpx.get(f"{url}/healthz", timeout=1)
                break
            except httpx.HTTPError:
                time.sleep(0.1)
        rng = np.random.default_rng(2)
        client = httpx.Client(timeout=30, limits=httpx.Limits(max_connections=8))

        def body(i: int) -> dict:
            return {"case": _flow(i, rng).to_dict(), "label": "block", "report_id": f"b{i}"}

        def run(kind: str) -> float:
            def one(i: int) -> None:
                if kind == "healthz":
                    client.get(f"{url}/healthz")
                elif kind == "check":
                    client.post(f"{url}/v1/check", json={"case": body(i)["case"]})
                else:
                    client.post(f"{url}/v1/report", json=body(i),
                                headers={"Authorization": "Bearer t"})

            t = time.perf_counter()
            with ThreadPoolExecutor(8) as pool:
                list(pool.map(one, range(n_requests)))
            return n_requests / (time.perf_counter() - t)

        h = run("healthz")
        c = run("check")
        r = run("report")
        client.close()
        server.should_exit = True
        th.join(timeout=10)
    print(f"service ({n_requests} requests each, 8 clients): healthz {h:.0f} req/s; "
          f"check {c:.0f} req/s ({c / h:.2f}x healthz); report {r:.0f} req/s ({r / h:.2f}x)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--quick", action="store_true", help="Small sizes (seconds).")
    ap.add_argument("--skip-service", action="store_true", help="Latency only, no server.")
    args = ap.parse_args()
    with torch_runtime(threads=1):
        memory_latency(2000 if args.quick else 10000, 300 if args.quick else 2000)
        deployed_latency(150 if args.quick else 600, 60 if args.quick else 300)
    if not args.skip_service:
        service_throughput(60 if args.quick else 400)


if __name__ == "__main__":
    main()
