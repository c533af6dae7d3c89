"""LiSA benchmark: decision latency with memory vs the base alone, and service throughput.

    python benchmarks/lisa.py [--quick]

Prints (1) p50/p95 per-decision latency of the base guardrail alone and of LiSA with 10,000
memory entries (base scores cached, so the difference is the memory's cost; target: < 2 ms
added at p50), as a ratio to the base; (2) requests/s of POST /v1/check and /v1/report on a
local uvicorn server under a bounded load, as a ratio to GET /healthz.
"""

from __future__ import annotations

import argparse
import socket
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from trustlab.methods.lisa import (
    BaseOnly,
    Case,
    EmbeddingGuardrail,
    HashingEmbedder,
    Lisa,
    MemoBase,
    generic_seed_set,
)


def _flow(i: int, rng: np.random.Generator) -> Case:
    return Case.flow(f"data type {rng.integers(50)}", f"person {i}", "the agent",
                     f"recipient {i % 5000}", f"principle {i // 5000}", action="share")


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
    print(f"memory entries: {lisa.memory_size()} (from {n_entries} reports)")
    print(f"base alone   p50 {p50b:.4f} ms  p95 {np.percentile(out['base'], 95):.4f} ms")
    print(f"LiSA         p50 {p50l:.4f} ms  p95 {np.percentile(out['lisa'], 95):.4f} ms")
    print(f"memory adds  p50 {p50l - p50b:.4f} ms (target < 2 ms); ratio LiSA/base p50 "
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
                c = client
                if True:
                    if kind == "healthz":
                        c.get(f"{url}/healthz")
                    elif kind == "check":
                        c.post(f"{url}/v1/check", json={"case": body(i)["case"]})
                    else:
                        c.post(f"{url}/v1/report", json=body(i),
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
    args = ap.parse_args()
    memory_latency(2000 if args.quick else 10000, 300 if args.quick else 2000)
    service_throughput(60 if args.quick else 400)


if __name__ == "__main__":
    main()
