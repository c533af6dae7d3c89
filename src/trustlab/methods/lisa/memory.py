"""LiSA's structured memory: policy abstractions, conflict-aware local rules, evidence gating.

A user report (a case and the reporter's label, which may be wrong) is *lifted* into a
policy abstraction: a rule over the case's abstraction attributes. For flows these are the
recipient and the transmission principle (the context of a contextual-integrity norm), with
the recipient expressed relative to the subject (a flow back to the person it is about has
recipient ``"the data subject"``, whoever that is). For tool actions they are the tool and
the wildcard patterns of its identifier-like arguments (``value_pattern``: an address's
domain, a URL's host, a number's order of magnitude, a host name's first segment such as
``prod-*``), the granularity at which organisations write tool policies; the instruction
text is a surface form and stays out of the abstraction (it remains a split candidate).
Attribute values are grouped by an online leader clustering of their embeddings (cosine >=
``value_similarity``), so "a close friend" and "close friend" land in the same abstraction
and one report covers unseen cases of its kind.

When an abstraction gathers reports with both labels it is split, on the remaining attribute
that best separates them (data type, sender, subject, instruction, a tool argument or its
pattern), into more specific **local rules**, once at least ``min_split_support`` (default 2)
minority-label reports share a value of that attribute; a split abstraction no longer fires
by itself, so mixed evidence never becomes a blanket override.

Every entry keeps its evidence. The entry's correctness ``theta`` has a Beta(a, b) prior
(default a = b = 1, uniform); after k agreeing of n reports the posterior is
Beta(a + k, b + n - k) and its ``gate_alpha`` quantile is the lower bound ``LB``. The entry
overrides the base guardrail on a case only when ``LB`` exceeds the base guardrail's own
estimated reliability there,

    r = (m * c_hat(x) + k_base) / (m + n),

where ``k_base`` counts the entry's reports on which the base's decision matched the
reported label, ``m`` (``base_prior_strength``) weighs the base's confidence as
pseudo-reports, and ``c_hat(x)`` is the base's confidence on the case, ``c(x) = max(s, 1 - s)``
for its score ``s``, *calibrated on the deployment's traffic*: the memory counts every
deployed check the base decided (N, with mean confidence ``c_bar``) and the reports that
contradict the base (B). A user reports a share ``rho`` (``report_share``) of mistakes, so
B ~ Binomial(N, rho * (1 - A)) for the base's accuracy A on its traffic; with the prior
A ~ Beta(m * c_bar, m * (1 - c_bar)) (the base's own claim) the posterior mean ``A_hat``
(grid posterior) gives ``c_hat(x) = c(x) * min(1, A_hat / c_bar)``: a base that is as
accurate as it claims keeps its confidence, an over-confident one (near chance yet sure) is
discounted. The factor is capped at 1 because the gate is consulted only where reports
landed: a surplus of accuracy on the whole traffic comes from unreported regions and must
not make the gate trust the base more than it claims there.
``calibrate=False`` is the uncalibrated gate (``c_hat = c``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from trustlab.core.errors import InputError
from trustlab.core.validation import check_open_unit, check_scalar
from trustlab.embed import Embedder
from trustlab.methods.lisa.cases import (
    ALLOW,
    BLOCK,
    Case,
    Decision,
    FiredEntry,
    as_case,
    as_label,
)
from trustlab.stats import beta_posterior_quantile

#: Grid over the base's accuracy A for its posterior (midpoints of 400 bins of [0, 1]).
_GRID = (np.arange(400) + 0.5) / 400
_LOG_A = np.log(_GRID)
_LOG_1MA = np.log1p(-_GRID)

__all__ = [
    "DEFAULT_ABSTRACTION",
    "MemoryEntry",
    "PolicyMemory",
    "ValueIndex",
    "abstraction_names",
    "case_attributes",
]

#: In an abstraction, stands for every argument pattern (``arg.x~``) the case has.
PATTERNS = "arg~"

#: Attributes a report is lifted over, per case kind (the rest are candidates for local rules).
DEFAULT_ABSTRACTION: dict[str, tuple[str, ...]] = {
    "flow": ("recipient", "transmission_principle"),
    "action": ("tool", PATTERNS),
}


_DIGITS = re.compile(r"^\d+(\.\d+)?$")
_URL = re.compile(r"^[a-z][a-z0-9+.-]*://([^/?#]+)")
_SEGMENTED = re.compile(r"^([a-z][a-z]*)[-_][^\s]+$")


def value_pattern(value: str) -> str | None:
    """The wildcard pattern an identifier-like value generalises to, or None.

    Organisations write tool policies over patterns, not single values, so a tool argument
    also yields a derived attribute (``arg.<name>~``) that local rules can split on: an email
    address -> its domain (``*@partner.example``), a URL -> its host, a number -> its order
    of magnitude (``~10^4``), a one-token name segmented by ``-``/``_`` -> its first segment
    (``prod-*``). Free text (anything with a space) has no pattern; it is grouped by
    embedding similarity instead.
    """
    v = value.strip().lower()
    if not v or " " in v:
        return None
    if "@" in v:
        return "*@" + v.rsplit("@", 1)[1]
    m = _URL.match(v)
    if m:
        return m.group(1) + "/*"
    if _DIGITS.match(v):
        return f"~10^{len(v.split('.')[0].lstrip('0') or '0') - 1}"
    m = _SEGMENTED.match(v)
    if m and "." not in v:  # not file names: their stems are free-form
        return m.group(1) + "-*"
    return None


#: The recipient value of a flow that goes back to the person the information is about.
SUBJECT_RECIPIENT = "the data subject"


def case_attributes(case: Case) -> dict[str, str]:
    """A case's attributes as memory rules see them: a flow's recipient is expressed relative
    to its subject (a flow back to the data subject has recipient ``"the data subject"``, one
    contextual-integrity role whoever the subject is), and a tool action gains the wildcard
    patterns of its arguments (``arg.x~``)."""
    attrs = case.attributes()
    if case.kind == "flow" and attrs["recipient"] and attrs["recipient"] == attrs["data_subject"]:
        attrs["recipient"] = SUBJECT_RECIPIENT
    if case.kind == "action":
        for key in [k for k in attrs if k.startswith("arg.")]:
            pat = value_pattern(attrs[key])
            if pat is not None:
                attrs[key + "~"] = pat
    return attrs


def abstraction_names(
    kind: str, attrs: dict[str, str], abstraction: dict[str, tuple[str, ...]] | None = None
) -> tuple[str, ...]:
    """The attributes a case of ``kind`` is lifted over (``abstraction``, default
    :data:`DEFAULT_ABSTRACTION`); ``"arg~"`` expands to the case's argument patterns
    (``arg.x~`` in ``attrs``, see :func:`case_attributes`), so a tool report is scoped to its
    tool and argument patterns."""
    table = abstraction or DEFAULT_ABSTRACTION
    if kind not in table:
        raise InputError(f"LiSA has no abstraction attributes for case kind '{kind}'.")
    out: list[str] = []
    for a in table[kind]:
        if a == PATTERNS:
            out += sorted(k for k in attrs if k.endswith("~"))
        else:
            out.append(a)
    return tuple(out)


def _check_score(score: object, where: str) -> float:
    return check_scalar(score, "base_score", where, lo=0.0, hi=1.0)


class ValueIndex:
    """Online leader clustering of attribute values, one cluster list per attribute.

    With ``embedder=None`` (or ``similarity >= 1``) values only match exactly (after
    normalisation). Clusters are created only by reports; lookups at decision time never
    change the index, so decisions are a pure function of the report history.
    """

    def __init__(self, embedder: Embedder | None, similarity: float) -> None:
        if embedder is not None and not isinstance(embedder, Embedder):
            raise InputError("The 'embedder' parameter of ValueIndex must be an Embedder or None. "
                             f"Got {type(embedder).__name__}.")
        self.embedder = embedder
        self.similarity = check_scalar(similarity, "similarity", "ValueIndex", lo=0.0, hi=1.0,
                                       closed="right")
        self._exact: dict[str, dict[str, int]] = {}
        self._leaders: dict[str, list[str]] = {}
        self._vectors: dict[str, np.ndarray] = {}
        self._miss: dict[str, set[str]] = {}

    def leader(self, attr: str, cid: int) -> str:
        leaders = self._leaders.get(attr, [])
        if isinstance(cid, bool) or not isinstance(cid, int) or not 0 <= cid < len(leaders):
            raise InputError(f"ValueIndex has no cluster {cid!r} for '{attr}' "
                             f"({len(leaders)} cluster(s)).")
        return leaders[cid]

    def n_clusters(self, attr: str) -> int:
        return len(self._leaders.get(attr, ()))

    def lookup(self, attr: str, value: str, *, create: bool) -> int:
        """Cluster id of ``value`` for ``attr``; -1 when absent and ``create`` is false."""
        if not isinstance(attr, str) or not isinstance(value, str) or not isinstance(create, bool):
            raise InputError("ValueIndex.lookup needs an attribute name, a value (strings) and "
                             f"create=True/False. Got {attr!r}, {value!r}, {create!r}.")
        exact = self._exact.setdefault(attr, {})
        if value in exact:
            return exact[value]
        misses = self._miss.setdefault(attr, set())
        if not create and value in misses:
            return -1
        cid = -1
        leaders = self._leaders.setdefault(attr, [])
        use_vectors = self.embedder is not None and self.similarity < 1.0 and value != ""
        vec = None
        if use_vectors and leaders:
            vec = self.embedder.encode([value])[0]  # type: ignore[union-attr]
            mat = self._vectors.get(attr)
            if mat is not None and len(mat):
                sims = mat @ vec
                best = int(np.argmax(sims))
                if sims[best] >= self.similarity:
                    cid = best
        if cid < 0 and create:
            cid = len(leaders)
            leaders.append(value)
            if use_vectors:
                if vec is None:
                    vec = self.embedder.encode([value])[0]  # type: ignore[union-attr]
                mat = self._vectors.get(attr)
                self._vectors[attr] = vec[None, :] if mat is None else np.vstack([mat, vec])
            else:
                self._vectors.setdefault(attr, np.zeros((0, 1), dtype=np.float32))
            misses.clear()  # a new cluster may now match values that missed before
        if cid >= 0:
            exact[value] = cid
        else:
            misses.add(value)
        return cid


@dataclass
class _Report:
    label: int
    base_label: int
    cids: dict[str, int]


@dataclass
class MemoryEntry:
    """A policy abstraction (``depth == 0``) or a local rule inside one (``depth > 0``).

    ``conditions`` are ``(attribute, value)`` pairs (the cluster leaders' values); evidence is
    ``n_block``/``n_allow`` reports, ``confirmations`` (reports that agreed with what this
    entry had decided) and ``base_agreements`` (reports on which the base was already right).
    """

    entry_id: str
    kind: str
    conditions: tuple[tuple[str, str], ...]
    depth: int = 0
    n_block: int = 0
    n_allow: int = 0
    confirmations: int = 0
    base_agreements: int = 0
    split_attribute: str | None = None
    children: dict[int, MemoryEntry] = field(default_factory=dict)
    reports: list[_Report] = field(default_factory=list, repr=False)
    _lb: float | None = field(default=None, repr=False)

    @property
    def n_reports(self) -> int:
        return self.n_block + self.n_allow

    @property
    def label(self) -> int:
        """Majority label of the reports; ties go to block (fail closed)."""
        return BLOCK if self.n_block >= self.n_allow else ALLOW

    @property
    def agree(self) -> int:
        return max(self.n_block, self.n_allow)

    @property
    def is_leaf(self) -> bool:
        return self.split_attribute is None

    def to_dict(self, lower_bound: float | None = None) -> dict[str, Any]:
        return {
            "id": self.entry_id,
            "kind": self.kind,
            "conditions": dict(self.conditions),
            "label": "block" if self.label == BLOCK else "allow",
            "is_local_rule": self.depth > 0,
            "split_on": self.split_attribute,
            "evidence": {
                "reports": self.n_reports,
                "block": self.n_block,
                "allow": self.n_allow,
                "agreeing": self.agree,
                "disagreeing": self.n_reports - self.agree,
                "confirmations": self.confirmations,
                "base_was_right": self.base_agreements,
            },
            "lower_bound": lower_bound,
        }


class PolicyMemory:
    """LiSA's memory. ``fold`` adds a report; ``consult`` combines it with a base decision.

    Parameters (paper symbols in brackets where it names them):
      embedder: groups attribute values by embedding similarity (None: exact values only).
      value_similarity: cosine threshold of the attribute-value clustering.
      gate_alpha: quantile of the correctness posterior used as its lower bound.
      prior: (a, b) of the Beta prior on an entry's correctness; (1, 1) is uniform.
      base_prior_strength: m, the pseudo-report weight of the base's own confidence.
      gating: False switches the posterior gate off (ablation: majority label always fires).
      local_rules: False keeps mixed abstractions whole (ablation: no conflict splits).
      abstraction: attributes to lift reports over, per case kind.
      min_split_support: reports of the minority label that must share a value of an
        attribute before the abstraction is split on it.
      report_share: rho, the assumed share of the base's mistakes that users report (the
        deployment's documented 5-10%; default 0.1), used to calibrate the base on traffic.
      calibrate: False switches traffic calibration off (ablation: c_hat = c).
    """

    #: The options LiSA passes on (``Lisa(base, **options)``).
    OPTIONS: tuple[str, ...] = (
        "value_similarity", "gate_alpha", "prior", "base_prior_strength", "gating",
        "local_rules", "abstraction", "min_split_support", "report_share", "calibrate",
    )

    def __init__(
        self,
        *,
        embedder: Embedder | None = None,
        value_similarity: float = 0.85,
        gate_alpha: float = 0.2,
        prior: tuple[float, float] = (1.0, 1.0),
        base_prior_strength: float = 2.0,
        gating: bool = True,
        local_rules: bool = True,
        abstraction: dict[str, tuple[str, ...]] | None = None,
        min_split_support: int = 2,
        report_share: float = 0.1,
        calibrate: bool = True,
    ) -> None:
        self.embedder = embedder
        self.report_share = report_share
        self.calibrate = calibrate
        self.min_split_support = min_split_support
        self.value_similarity = value_similarity
        self.gate_alpha = gate_alpha
        self.prior = prior
        self.base_prior_strength = base_prior_strength
        self.gating = gating
        self.local_rules = local_rules
        self.abstraction = abstraction

    # -- state --------------------------------------------------------------------------
    def check(self) -> PolicyMemory:
        """Validate every option (run before the first report or check)."""
        where = "LiSA"
        check_open_unit(self.gate_alpha, "gate_alpha", where)
        check_scalar(self.value_similarity, "value_similarity", where, lo=0.0, hi=1.0,
                     closed="right")
        check_scalar(self.base_prior_strength, "base_prior_strength", where, lo=0.0)
        check_scalar(self.report_share, "report_share", where, lo=0.0, hi=1.0, closed="right")
        check_scalar(self.min_split_support, "min_split_support", where, kind=int, lo=1)
        if isinstance(self.prior, str) or not isinstance(self.prior, Sequence) \
                or len(self.prior) != 2:
            raise InputError(f"The 'prior' parameter of {where} must be a pair (a, b). "
                             f"Got {self.prior!r}.")
        for value in self.prior:
            check_scalar(value, "prior", where, lo=0.0, closed="neither")
        for name in ("gating", "local_rules", "calibrate"):
            if not isinstance(getattr(self, name), bool):
                raise InputError(f"The '{name}' parameter of {where} must be True or False. "
                                 f"Got {getattr(self, name)!r}.")
        if self.embedder is not None and not isinstance(self.embedder, Embedder):
            raise InputError(f"The 'embedder' parameter of {where} must be an Embedder or None. "
                             f"Got {type(self.embedder).__name__}.")
        if self.abstraction is not None:
            ok = isinstance(self.abstraction, dict) and all(
                kind in ("flow", "action") and isinstance(attrs, tuple | list) and attrs
                and all(isinstance(a, str) and a for a in attrs)
                for kind, attrs in self.abstraction.items()
            )
            if not ok:
                raise InputError(f"The 'abstraction' parameter of {where} must map 'flow' and/or "
                                 "'action' to non-empty tuples of attribute names. "
                                 f"Got {self.abstraction!r}.")
        return self

    def _state(self) -> None:
        if hasattr(self, "roots_"):
            return
        self.check()
        self.index_ = ValueIndex(self.embedder, self.value_similarity)
        self.base_checks_ = 0  # deployed checks the base decided
        self.base_conf_sum_ = 0.0  # sum of the base's confidence over them
        self.base_wrong_ = 0  # reports whose label contradicts the base's decision
        self._accuracy: tuple[tuple[int, int, float], float] | None = None
        self.roots_: dict[tuple[str, tuple[tuple[str, int], ...]], MemoryEntry] = {}
        self.n_reports_ = 0
        self._next_id = 0

    def _abstraction(self, kind: str, attrs: dict[str, str] | None = None) -> tuple[str, ...]:
        return abstraction_names(kind, attrs or {}, self.abstraction)

    def _new_id(self, prefix: str) -> str:
        self._next_id += 1
        return f"{prefix}{self._next_id}"

    # -- folding reports ----------------------------------------------------------------
    def fold(self, case: Case, label: int, base_score: float, decided_by: Sequence[str] = ()) -> str:
        """Store a report and return the id of the entry (leaf) it landed in."""
        self._state()
        where = "PolicyMemory.fold"
        case = as_case(case, "case", where)
        label = as_label(label, "label", where)
        base_score = _check_score(base_score, where)
        if isinstance(decided_by, str) or not all(isinstance(e, str) for e in decided_by):
            raise InputError(f"The 'decided_by' parameter of {where} must be a list of entry ids.")
        attrs = case_attributes(case)
        abstr = self._abstraction(case.kind, attrs)
        cids = {a: self.index_.lookup(a, attrs.get(a, ""), create=True) for a in sorted(attrs)}
        for a in abstr:
            cids.setdefault(a, self.index_.lookup(a, "", create=True))
        key = (case.kind, tuple((a, cids[a]) for a in abstr))
        root = self.roots_.get(key)
        if root is None:
            conds = tuple((a, self.index_.leader(a, cids[a])) for a in abstr)
            root = MemoryEntry(self._new_id("A"), case.kind, conds)
            self.roots_[key] = root
        base_label = BLOCK if base_score >= 0.5 else ALLOW
        if base_label != label:
            self.base_wrong_ += 1
        record = _Report(int(label), base_label, cids)
        node = root
        while True:
            if node.entry_id in decided_by and node.label == label:
                node.confirmations += 1
            self._add(node, record)
            if node.is_leaf:
                break
            cid = cids.get(node.split_attribute, -1)  # type: ignore[arg-type]
            child = node.children.get(cid)
            if child is None:
                child = self._child(node, node.split_attribute, cid)  # type: ignore[arg-type]
            node = child
        if self.local_rules:
            self._maybe_split(node, abstr)
            while not node.is_leaf:
                node = node.children[cids.get(node.split_attribute, -1)]  # type: ignore[arg-type]
        self.n_reports_ += 1
        return node.entry_id

    @staticmethod
    def _add(node: MemoryEntry, record: _Report) -> None:
        node.reports.append(record)
        if record.label == BLOCK:
            node.n_block += 1
        else:
            node.n_allow += 1
        if record.base_label == record.label:
            node.base_agreements += 1
        node._lb = None

    def _child(self, node: MemoryEntry, attr: str, cid: int) -> MemoryEntry:
        value = self.index_.leader(attr, cid) if cid >= 0 else ""
        child = MemoryEntry(
            f"{node.entry_id}.{self._new_id('L')}",
            node.kind,
            (*node.conditions, (attr, value)),
            depth=node.depth + 1,
        )
        node.children[cid] = child
        return child

    def _maybe_split(self, node: MemoryEntry, abstr: tuple[str, ...]) -> None:
        """Split a mixed-label leaf on the attribute whose values best separate its labels."""
        if node.n_block == 0 or node.n_allow == 0:
            return
        used = set(abstr) | {a for a, _ in node.conditions}
        candidates = sorted({a for r in node.reports for a in r.cids} - used)
        minority = 1 - node.label
        best_attr, best_key = None, (node.agree, 0)
        for attr in candidates:
            groups: dict[int, list[int]] = {}
            for r in node.reports:
                groups.setdefault(r.cids.get(attr, -1), [0, 0])[r.label] += 1
            if len(groups) < 2:
                continue
            # a local rule needs support: some value whose reports mostly carry the minority
            # label, at least ``min_split_support`` of them (one flipped report never splits)
            if not any(
                g[minority] >= self.min_split_support and g[minority] > g[1 - minority]
                for g in groups.values()
            ):
                continue
            key = (sum(max(g) for g in groups.values()), -len(groups))
            if key > best_key:
                best_attr, best_key = attr, key
        if best_attr is None:
            return  # no attribute separates the labels: keep the mixed evidence (noise)
        node.split_attribute = best_attr
        for r in node.reports:
            cid = r.cids.get(best_attr, -1)
            child = node.children.get(cid) or self._child(node, best_attr, cid)
            self._add(child, r)
        for child in node.children.values():
            self._maybe_split(child, abstr)

    # -- consulting ---------------------------------------------------------------------
    def match(self, case: Case) -> MemoryEntry | None:
        """The leaf entry whose conditions the case meets, or None (no abstraction, or a split
        abstraction whose local rules do not cover the case)."""
        case = as_case(case, "case", "PolicyMemory.match")
        if not hasattr(self, "roots_"):
            return None
        attrs = case_attributes(case)
        abstr = self._abstraction(case.kind, attrs)
        key = (case.kind,
               tuple((a, self.index_.lookup(a, attrs.get(a, ""), create=False)) for a in abstr))
        if any(cid < 0 for _, cid in key[1]):
            return None
        node = self.roots_.get(key)
        while node is not None and not node.is_leaf:
            attr = node.split_attribute
            cid = self.index_.lookup(attr, attrs.get(attr, ""), create=False)  # type: ignore[arg-type]
            node = node.children.get(cid)
        return node

    def lower_bound(self, entry: MemoryEntry) -> float:
        """The ``gate_alpha`` quantile of the entry's Beta correctness posterior."""
        if entry._lb is None:
            entry._lb = float(
                beta_posterior_quantile(
                    entry.agree + entry.confirmations,
                    entry.n_reports + entry.confirmations,
                    self.gate_alpha,
                    prior=tuple(self.prior),
                )
            )
        return entry._lb

    # -- traffic calibration ------------------------------------------------------------
    def observe(self, decision: Decision) -> None:
        """Count a deployed check: traffic the base decided is what its mistakes (and so
        the reports contradicting it) come from."""
        if not isinstance(decision, Decision):
            raise InputError("The 'decision' parameter of PolicyMemory.observe must be a Decision. "
                             f"Got {type(decision).__name__}.")
        if decision.source == "base":
            self.add_traffic(1, max(decision.base_score, 1.0 - decision.base_score))

    def add_traffic(self, checks: int, conf_sum: float) -> None:
        """Add ``checks`` base-decided checks with summed confidence ``conf_sum`` (the
        service replays its persisted traffic counts through this)."""
        self._state()
        where = "PolicyMemory.add_traffic"
        checks = check_scalar(checks, "checks", where, kind=int, lo=0)
        slack = 1e-9 * (checks + 1)  # a sum of confidences, each in [0.5, 1], up to rounding
        conf_sum = check_scalar(conf_sum, "conf_sum", where, lo=0.5 * checks - slack,
                                hi=checks + slack)
        self.base_checks_ += checks
        self.base_conf_sum_ += conf_sum

    def base_accuracy(self) -> tuple[float, float]:
        """(A_hat, c_bar): posterior mean of the base's accuracy on its traffic, and its
        mean claimed confidence there; (1, 1) before any traffic."""
        self._state()
        n, wrong = self.base_checks_, self.base_wrong_
        if n == 0:
            return 1.0, 1.0
        c_bar = min(self.base_conf_sum_ / n, 1.0 - 1e-9)
        key = (n, wrong, c_bar)
        if self._accuracy is None or self._accuracy[0] != key:
            m = max(self.base_prior_strength, 1e-3)
            a, b = max(m * c_bar, 1e-3), max(m * (1.0 - c_bar), 1e-3)
            q = self.report_share * (1.0 - _GRID)  # P(a check yields a contradicting report)
            logp = (a - 1) * _LOG_A + (b - 1) * _LOG_1MA
            logp = logp + wrong * np.log(q) + (max(n, wrong) - wrong) * np.log1p(-q)
            p = np.exp(logp - logp.max())
            self._accuracy = (key, float((_GRID * p).sum() / p.sum()))
        return self._accuracy[1], c_bar

    def calibrated_confidence(self, base_score: float) -> float:
        """c_hat(x) = c(x) * min(1, A_hat / c_bar) (c(x) itself with ``calibrate=False``)."""
        base_score = _check_score(base_score, "PolicyMemory.calibrated_confidence")
        conf = max(base_score, 1.0 - base_score)
        if not self.calibrate or not hasattr(self, "roots_"):
            return conf
        acc, c_bar = self.base_accuracy()
        return conf * min(acc / c_bar, 1.0)

    def base_reliability(self, entry: MemoryEntry, base_score: float) -> float:
        conf = self.calibrated_confidence(base_score)
        m = self.base_prior_strength
        return (m * conf + entry.base_agreements) / (m + entry.n_reports)

    def consult(self, case: Case, base_score: float) -> Decision:
        """The decision for ``case`` given the base's P(block) ``base_score``."""
        case = as_case(case, "case", "PolicyMemory.consult")
        base_score = _check_score(base_score, "PolicyMemory.consult")
        base = Decision(bool(base_score >= 0.5), float(base_score), "base", float(base_score))
        entry = self.match(case)
        if entry is None or entry.n_reports == 0:
            return base
        lb = self.lower_bound(entry)
        rel = self.base_reliability(entry, base_score)
        if entry.label == base.label:
            fired = FiredEntry(entry.entry_id, entry.label, lb, rel, "agree")
            return Decision(base.block, base.score, "base", base.score, (fired,))
        tie = entry.n_block == entry.n_allow
        if (self.gating and lb > rel) or (not self.gating and not tie):
            fired = FiredEntry(entry.entry_id, entry.label, lb, rel, "override")
            score = lb if entry.label == BLOCK else 1.0 - lb
            if not self.gating:
                frac = entry.agree / entry.n_reports
                score = frac if entry.label == BLOCK else 1.0 - frac
            return Decision(entry.label == BLOCK, float(score), "memory", base.score, (fired,))
        fired = FiredEntry(entry.entry_id, entry.label, lb, rel, "gated")
        return Decision(base.block, base.score, "base", base.score, (fired,))

    # -- inspection ---------------------------------------------------------------------
    def entries(self, *, leaves_only: bool = False) -> list[MemoryEntry]:
        if not hasattr(self, "roots_"):
            return []
        out: list[MemoryEntry] = []
        stack = list(reversed(list(self.roots_.values())))
        while stack:
            node = stack.pop()
            if node.is_leaf or not leaves_only:
                out.append(node)
            stack.extend(reversed(list(node.children.values())))
        return out

    def size(self) -> int:
        """Number of rules that can fire (leaf entries)."""
        return len(self.entries(leaves_only=True))
