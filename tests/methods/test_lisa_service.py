"""The LiSA service: auth on writes, 422 naming the field, restart and kill durability,
200 concurrent reports stored exactly once. Servers bind 127.0.0.1 only."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import numpy as np
import pytest
from fastapi.testclient import TestClient

from trustlab.methods.lisa import Case, EmbeddingGuardrail, HashingEmbedder, generic_seed_set
from trustlab.methods.lisa.service import ReportLog, create_app

TOKEN = "test-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


@pytest.fixture(scope="module")
def base():
    emb = HashingEmbedder(256)
    cases, labels = generic_seed_set(150, np.random.default_rng(0))
    return EmbeddingGuardrail(emb).fit(cases, labels)


def case(dt="health records", rec="the workplace", tp="for employee programs", subject="Alex"):
    return {"data_type": dt, "data_subject": subject, "sender": "an app", "recipient": rec,
            "transmission_principle": tp, "action": "share"}


def test_writes_need_the_token_and_reads_do_not(tmp_path, base):
    client = TestClient(create_app(tmp_path / "a.db", token=TOKEN, base=base))
    body = {"case": case(), "label": "allow"}
    assert client.post("/v1/report", json=body).status_code == 401
    bad = {"Authorization": "Bearer wrong"}
    assert client.post("/v1/report", json=body, headers=bad).status_code == 401
    assert client.get("/v1/memory").json()["reports"] == 0  # nothing was stored
    assert client.post("/v1/check", json={"case": case()}).status_code == 200
    assert client.post("/v1/report", json=body, headers=AUTH).status_code == 200
    assert client.get("/healthz").json()["reports"] == 1


def test_bad_input_gets_422_naming_the_field(tmp_path, base):
    client = TestClient(create_app(tmp_path / "b.db", token=TOKEN, base=base))
    c = case()
    del c["recipient"]
    r = client.post("/v1/check", json={"case": c})
    assert r.status_code == 422 and r.json()["detail"][0]["loc"][-1] == "recipient"
    r = client.post("/v1/report", json={"case": case(), "label": "maybe"}, headers=AUTH)
    assert r.status_code == 422 and r.json()["detail"][0]["loc"][-1] == "label"
    r = client.post("/v1/check", json={"case": {"instruction": "hi"}})
    assert r.status_code == 422 and r.json()["detail"][0]["loc"][-1] == "action"
    r = client.post("/v1/check", json={"case": {"action": "x", "colour": "red"}})
    assert r.status_code == 422 and "colour" in r.json()["detail"][0]["loc"]


def test_memory_survives_restart_and_explains_decisions(tmp_path, base):
    db = tmp_path / "c.db"
    app = create_app(db, token=TOKEN, base=base, base_prior_strength=0.5)
    client = TestClient(app)
    for s in ("A", "B", "C"):
        client.post("/v1/report", json={"case": case(subject=s), "label": "allow"}, headers=AUTH)
    probe = {"case": case(subject="unseen")}
    before = client.post("/v1/check", json=probe).json()
    mem_before = client.get("/v1/memory").json()
    assert before["fired"] and mem_before["entries"][0]["evidence"]["reports"] == 3
    client2 = TestClient(create_app(db, token=TOKEN, base=base, base_prior_strength=0.5))
    assert client2.get("/v1/memory").json() == mem_before
    assert client2.post("/v1/check", json=probe).json() == before
    assert before["decision"] == "allow" and before["fired"][0]["effect"] == "override"


def test_traffic_is_persisted_and_shown_with_the_evidence(tmp_path, base):
    """Base-decided checks calibrate the gate, so the service stores them (interleaved with
    the reports) and a restart rebuilds the same calibration; /v1/memory shows it."""
    db = tmp_path / "t.db"
    client = TestClient(create_app(db, token=TOKEN, base=base))
    for s in ("A", "B"):
        client.post("/v1/check", json={"case": case(rec="a data broker", subject=s)})
    client.post("/v1/report", json={"case": case(), "label": "allow"}, headers=AUTH)
    for s in ("C", "D", "E"):
        client.post("/v1/check", json={"case": case(rec="a data broker", subject=s)})
    mem = client.get("/v1/memory").json()
    t = mem["traffic"]
    assert t["base_decided_checks"] == 5 and t["reports_contradicting_base"] == 1
    # the persisted traffic is exactly the base's confidence on the five checked cases
    checked = [Case.from_dict(case(rec="a data broker", subject=x)) for x in "ABCDE"]
    conf = np.maximum(base.score(checked), 1 - base.score(checked))
    assert t["base_mean_confidence"] == pytest.approx(float(conf.mean()), rel=1e-9)
    assert t["calibration"] == pytest.approx(
        min(t["base_accuracy_estimate"] / t["base_mean_confidence"], 1.0))
    stored = ReportLog(db).traffic()  # 2 checks before report 1, 3 after it
    assert sorted(stored) == [0, 1] and (stored[0][0], stored[1][0]) == (2, 3)
    client2 = TestClient(create_app(db, token=TOKEN, base=base))
    assert client2.get("/v1/memory").json() == mem


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_up(url: str, timeout: float = 60.0) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            if httpx.get(f"{url}/healthz", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            time.sleep(0.2)
    raise TimeoutError(f"server at {url} did not come up")


def test_200_concurrent_reports_are_stored_exactly_once(tmp_path, base):
    import uvicorn

    db = tmp_path / "d.db"
    port = _free_port()
    server = uvicorn.Server(uvicorn.Config(create_app(db, token=TOKEN, base=base),
                                           host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_up(url)

        def post(i: int) -> int:
            body = {"case": case(subject=f"s{i}", rec=f"recipient {i % 7}"),
                    "label": "allow" if i % 2 else "block", "report_id": f"r{i}"}
            with httpx.Client(timeout=30) as c:
                r = c.post(f"{url}/v1/report", json=body, headers=AUTH)
                r2 = c.post(f"{url}/v1/report", json=body, headers=AUTH) if i % 10 == 0 else r
            assert r.status_code == 200 and r2.status_code == 200
            assert r2.json()["id"] == r.json()["id"]
            return r.json()["id"]

        with ThreadPoolExecutor(16) as pool:
            ids = list(pool.map(post, range(200)))
        assert len(set(ids)) == 200
        assert httpx.get(f"{url}/healthz", timeout=10).json()["reports"] == 200
        mem = httpx.get(f"{url}/v1/memory", timeout=10).json()
        assert sum(e["evidence"]["reports"] for e in mem["entries"] if e["id"].count(".") == 0) == 200
    finally:
        server.should_exit = True
        thread.join(timeout=10)
    assert ReportLog(db).count() == 200


SERVER = textwrap.dedent(
    """
    import sys, numpy as np, uvicorn
    from trustlab.methods.lisa import Case, EmbeddingGuardrail, HashingEmbedder, generic_seed_set
    from trustlab.methods.lisa.service import create_app
    cases, labels = generic_seed_set(150, np.random.default_rng(0))
    base = EmbeddingGuardrail(HashingEmbedder(256)).fit(cases, labels)
    uvicorn.run(create_app(sys.argv[1], token="test-token", base=base),
                host="127.0.0.1", port=int(sys.argv[2]), log_level="warning")
    """
)


def test_a_killed_server_loses_no_acknowledged_report(tmp_path):
    script = tmp_path / "server.py"
    script.write_text(SERVER)
    db, port = tmp_path / "e.db", _free_port()
    url = f"http://127.0.0.1:{port}"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2] / "src")}
    proc = subprocess.Popen([sys.executable, str(script), str(db), str(port)], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    acked: list[int] = []
    try:
        _wait_up(url)

        def post(i: int) -> None:
            body = {"case": case(subject=f"k{i}"), "label": "allow", "report_id": f"k{i}"}
            try:
                r = httpx.post(f"{url}/v1/report", json=body, headers=AUTH, timeout=10)
                if r.status_code == 200:
                    acked.append(r.json()["id"])
            except httpx.HTTPError:
                pass

        with ThreadPoolExecutor(8) as pool:
            futures = [pool.submit(post, i) for i in range(120)]
            while len(acked) < 40 and not all(f.done() for f in futures):
                time.sleep(0.01)
            proc.send_signal(signal.SIGKILL)  # mid-stream, no shutdown hooks
    finally:
        proc.kill()
        proc.wait(timeout=10)
    assert len(acked) >= 40
    stored = {i for i, _, _ in ReportLog(db).replay()}
    assert set(acked) <= stored


def test_a_report_log_that_is_not_one_is_named_not_overwritten_or_created(tmp_path):
    """Issue 38 (service): a directory, a non-SQLite file, another program's database or a
    damaged row give one DataError/InputError naming the path; `lisa check --db` with a typo
    exits 2 instead of creating an empty log and deciding without memory."""
    from trustlab.core.errors import DataError, InputError

    with pytest.raises(InputError, match="directory"):
        ReportLog(tmp_path)
    text = tmp_path / "notes.db"
    text.write_text("not a database\n" * 200)
    with pytest.raises(DataError, match="not a LiSA report log"):
        ReportLog(text)
    assert text.read_text().startswith("not a database")  # untouched
    import sqlite3

    other = tmp_path / "other.db"
    with sqlite3.connect(other) as con:
        con.execute("CREATE TABLE users (name TEXT)")
    with pytest.raises(DataError, match=r"something else.*users"):
        ReportLog(other)
    with pytest.raises(InputError, match="No report log"):
        ReportLog(tmp_path / "typo.db", must_exist=True)
    assert not (tmp_path / "typo.db").exists()

    log = ReportLog(tmp_path / "ok.db")
    log.append(Case.from_dict(case()), 1, None)
    with sqlite3.connect(tmp_path / "ok.db") as con:
        con.execute("INSERT INTO reports (case_json, label, created) VALUES ('{}', 7, 0)")
    with pytest.raises(DataError, match=r"Report 2 .* damaged"):
        ReportLog(tmp_path / "ok.db").replay()

    proc = subprocess.run([sys.executable, "-m", "trustlab.cli", "lisa", "check",
                           '{"action": "x"}', "--db", str(tmp_path / "typo.db")],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    assert "Traceback" not in proc.stderr and "No report log" in proc.stderr
    assert not (tmp_path / "typo.db").exists()
