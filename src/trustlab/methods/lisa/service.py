"""LiSA as a service: FastAPI over an SQLite (WAL) report log.

    app = create_app("lisa.db", token="s3cret")        # or trustlab serve lisa --db lisa.db
    POST /v1/check   {"case": {...}}                    -> decision, score, fired entries
    POST /v1/report  {"case": {...}, "label": "block"}  -> stored, folded into memory
    GET  /v1/memory                                     -> entries with their evidence
    GET  /healthz

The report log is the source of truth: a report is committed to SQLite before it is
acknowledged, and on start the memory is rebuilt by replaying the log in order (the memory is
a deterministic function of it), so a crash or kill loses no acknowledged report. Checks the
base decided are traffic that calibrates the gate; they are counted per gap between reports
(table ``traffic``, keyed by the last report id) and replayed interleaved with the reports. An
optional ``report_id`` makes retries idempotent (stored exactly once). Writes need
``Authorization: Bearer <token>`` whenever a token is configured (memory poisoning is the
threat); reads stay open.
"""

from __future__ import annotations

import hmac
import json
import os
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from trustlab.core.errors import DataError, InputError
from trustlab.methods.lisa.cases import (
    FLOW_FIELDS,
    Case,
    as_label,
    label_from_str,
    label_to_str,
)

__all__ = ["CaseIn", "CheckIn", "ReportIn", "ReportLog", "create_app", "default_base"]

TOKEN_ENV = "TRUSTLAB_LISA_TOKEN"


class CaseIn(BaseModel):
    """A case as JSON: the five flow fields (+ action), or action/tool/arguments/instruction."""

    model_config = ConfigDict(extra="forbid")
    data_type: str | None = None
    data_subject: str | None = None
    sender: str | None = None
    recipient: str | None = None
    transmission_principle: str | None = None
    action: str | None = Field(None, max_length=20000)
    tool: str | None = None
    arguments: dict[str, Any] | None = None
    instruction: str | None = None

class CheckIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    case: CaseIn

class ReportIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    case: CaseIn
    label: Literal["allow", "block"]
    report_id: str | None = Field(None, min_length=1, max_length=200)



class ReportLog:
    """Append-only report log in SQLite (WAL). Thread-safe; one connection per thread."""

    def __init__(self, path: str | Path, *, must_exist: bool = False) -> None:
        self.path = Path(path)
        if self.path.is_dir():
            raise InputError(f"The report log '{self.path}' is a directory; give a file path.")
        if must_exist and not self.path.is_file():
            raise InputError(f"No report log at '{self.path}'.")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._local = threading.local()
        try:
            self._create_tables()
        except sqlite3.DatabaseError as exc:
            raise DataError(f"'{self.path}' is not a LiSA report log (SQLite: {exc}).") from exc

    def _create_tables(self) -> None:
        con = self._con()
        tables = {r[0] for r in con.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'")}
        if tables and not {"reports", "traffic"} <= tables:
            raise DataError(f"'{self.path}' is an SQLite database of something else (tables: "
                            f"{', '.join(sorted(tables))}), not a LiSA report log.")
        with con:
            con.execute(
                "CREATE TABLE IF NOT EXISTS reports (id INTEGER PRIMARY KEY AUTOINCREMENT, "
                "report_id TEXT UNIQUE, case_json TEXT NOT NULL, label INTEGER NOT NULL, "
                "created REAL NOT NULL)"
            )
            # base-decided checks (traffic) between reports: ``after_report`` is the id of the
            # last report before them (0: none), so a replay interleaves them exactly
            con.execute(
                "CREATE TABLE IF NOT EXISTS traffic (after_report INTEGER PRIMARY KEY, "
                "checks INTEGER NOT NULL, conf_sum REAL NOT NULL)"
            )

    def _con(self) -> sqlite3.Connection:
        con = getattr(self._local, "con", None)
        if con is None:
            con = sqlite3.connect(self.path, timeout=30, isolation_level=None)
            con.execute("PRAGMA journal_mode=WAL")
            con.execute("PRAGMA synchronous=FULL")
            self._local.con = con
        return con

    def append(self, case: Case, label: int, report_id: str | None) -> tuple[int, bool]:
        """Commit a report; returns (row id, created). A known ``report_id`` is not re-stored."""
        con = self._con()
        con.execute("BEGIN IMMEDIATE")
        try:
            if report_id is not None:
                row = con.execute(
                    "SELECT id FROM reports WHERE report_id = ?", (report_id,)
                ).fetchone()
                if row is not None:
                    con.execute("COMMIT")
                    return int(row[0]), False
            cur = con.execute(
                "INSERT INTO reports (report_id, case_json, label, created) VALUES (?, ?, ?, ?)",
                (report_id, json.dumps(case.to_dict(), sort_keys=True), int(label), time.time()),
            )
            con.execute("COMMIT")
            return int(cur.lastrowid), True
        except BaseException:
            con.execute("ROLLBACK")
            raise

    def replay(self) -> list[tuple[int, Case, int]]:
        """Every report in commit order; a damaged row is a DataError naming it."""
        try:
            rows = self._con().execute(
                "SELECT id, case_json, label FROM reports ORDER BY id").fetchall()
        except sqlite3.DatabaseError as exc:
            raise DataError(f"The report log '{self.path}' cannot be read: {exc}.") from exc
        out = []
        for i, c, lab in rows:
            try:
                out.append((int(i), Case.from_dict(json.loads(c)), as_label(lab)))
            except (InputError, TypeError, ValueError) as exc:
                raise DataError(f"Report {i} of the log '{self.path}' is damaged: {exc}") from exc
        return out

    def add_check(self, after_report: int, conf: float) -> None:
        """Count one base-decided check after report ``after_report`` (one upsert)."""
        con = self._con()
        with con:
            con.execute(
                "INSERT INTO traffic (after_report, checks, conf_sum) VALUES (?, 1, ?) "
                "ON CONFLICT(after_report) DO UPDATE SET checks = checks + 1, "
                "conf_sum = conf_sum + excluded.conf_sum",
                (int(after_report), float(conf)),
            )

    def traffic(self) -> dict[int, tuple[int, float]]:
        rows = self._con().execute("SELECT after_report, checks, conf_sum FROM traffic")
        return {int(a): (int(n), float(c)) for a, n, c in rows}

    def last_id(self) -> int:
        row = self._con().execute("SELECT MAX(id) FROM reports").fetchone()
        return int(row[0] or 0)

    def count(self) -> int:
        return int(self._con().execute("SELECT COUNT(*) FROM reports").fetchone()[0])


def default_base(embedder: Any | None = None, seed: int = 0) -> Any:
    """The embedded default base guardrail: MiniLM + logistic regression on the seed set."""
    import numpy as np

    from trustlab.embed import MiniLMEmbedder, default_cache_path
    from trustlab.methods.lisa.base import EmbeddingGuardrail
    from trustlab.methods.lisa.suites import generic_seed_set

    emb = embedder or MiniLMEmbedder(default_cache_path())
    cases, labels = generic_seed_set(400, np.random.default_rng(seed))
    return EmbeddingGuardrail(emb).fit(cases, labels)


def create_app(
    db: str | Path,
    *,
    token: str | None = None,
    base: Any | None = None,
    embedder: Any | None = None,
    **memory: Any,
) -> Any:
    """The FastAPI app. ``base`` defaults to :func:`default_base`; ``token`` to the
    ``TRUSTLAB_LISA_TOKEN`` environment variable (empty or unset: writes are open)."""
    from fastapi import Depends, FastAPI, Header, HTTPException
    from fastapi.exceptions import RequestValidationError

    from trustlab.methods.lisa.guardrail import Lisa

    if token is None:
        token = os.environ.get(TOKEN_ENV) or None
    if base is None:
        base = default_base(embedder)
    if embedder is None:
        embedder = getattr(base, "embedder", None)
    log = ReportLog(db)
    lisa = Lisa(base, embedder=embedder, **memory)
    lock = threading.Lock()
    traffic = log.traffic()
    mem = lisa.memory_
    mem.add_traffic(*traffic.get(0, (0, 0.0)))
    for rid, case, label in log.replay():
        lisa.report(case, label)
        mem.add_traffic(*traffic.get(rid, (0, 0.0)))
    last_report = [log.last_id()]

    def to_case(c: CaseIn) -> Case:
        data = c.model_dump(exclude_none=True)
        if any(str(data.get(f) or "").strip() for f in FLOW_FIELDS):
            for f in FLOW_FIELDS:
                if not str(data.get(f) or "").strip():
                    raise RequestValidationError(
                        [{"loc": ("body", "case", f), "msg": f"Field required: '{f}' "
                          "(a structured case needs all five contextual-integrity fields).",
                          "type": "missing"}]
                    )
        elif not str(data.get("action") or "").strip() and not str(data.get("tool") or "").strip():
            raise RequestValidationError(
                [{"loc": ("body", "case", "action"),
                  "msg": "Field required: 'action' (a free-text case needs an action or a tool).",
                  "type": "missing"}]
            )
        try:
            return Case.from_dict(data)
        except InputError as exc:
            raise RequestValidationError(
                [{"loc": ("body", "case"), "msg": str(exc), "type": "value_error"}]
            ) from exc

    def require_token(authorization: str | None = Header(None)) -> None:
        if token is None:
            return
        scheme, _, given = (authorization or "").partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(given.strip(), token):
            raise HTTPException(
                status_code=401,
                detail="Writing needs 'Authorization: Bearer <token>' (TRUSTLAB_LISA_TOKEN).",
                headers={"WWW-Authenticate": "Bearer"},
            )

    app = FastAPI(title="LiSA guardrail", version="1")
    app.state.lisa = lisa
    app.state.log = log

    def decision_json(case: Case) -> dict[str, Any]:
        with lock:  # a deployed check is traffic: counted in memory and persisted
            d = lisa.check(case)
            if d.source == "base":
                log.add_check(last_report[0], max(d.base_score, 1.0 - d.base_score))
        return {
            "decision": "block" if d.block else "allow",
            "score": d.score,
            "source": d.source,
            "base_score": d.base_score,
            "fired": [
                {"entry": f.entry_id, "label": label_to_str(f.label), "effect": f.effect,
                 "lower_bound": f.lower_bound, "base_reliability": f.base_reliability}
                for f in d.fired
            ],
        }

    @app.get("/healthz")
    def healthz() -> dict[str, Any]:
        return {"status": "ok", "reports": log.count(), "memory_entries": lisa.memory_size()}

    @app.post("/v1/check")
    def check(body: CheckIn) -> dict[str, Any]:
        return decision_json(to_case(body.case))

    @app.post("/v1/report", dependencies=[Depends(require_token)])
    def report(body: ReportIn) -> dict[str, Any]:
        case = to_case(body.case)
        label = label_from_str(body.label)
        with lock:  # commit and fold in one order, so a replay rebuilds the same memory
            row, created = log.append(case, label, body.report_id)
            entry = lisa.report(case, label) if created else None
            if created:
                last_report[0] = row
        return {"stored": created, "id": row, "entry": entry}

    @app.get("/v1/memory")
    def memory() -> dict[str, Any]:
        with lock:
            mem = lisa.memory_
            entries = [
                e.to_dict(mem.lower_bound(e) if e.n_reports else None) for e in mem.entries()
            ]
            acc, c_bar = mem.base_accuracy()
            traffic_ev = {
                "base_decided_checks": mem.base_checks_,
                "reports_contradicting_base": mem.base_wrong_,
                "base_mean_confidence": c_bar if mem.base_checks_ else None,
                "base_accuracy_estimate": acc if mem.base_checks_ else None,
                "report_share": mem.report_share,
                "calibration": min(acc / c_bar, 1.0) if mem.calibrate else 1.0,
            }
        return {"reports": log.count(), "traffic": traffic_ev, "entries": entries}

    return app
