"""Class hierarchies (trees whose leaves are the classes) and prediction sets made of their nodes.

A :class:`Hierarchy` is built from a parent map, a nested dict or a ``networkx.DiGraph`` and
compiled to flat arrays in breadth-first order, so that the children of every node are a
contiguous block and every depth level is a contiguous block. All tree passes below (sums of
leaf probabilities, the covering dynamic programme, lowest common ancestors) are then a loop
over depth levels with numpy operations across test points, never a loop over points.

A prediction set is an antichain of nodes (no node is an ancestor of another); it *covers*
the classes under its nodes. :class:`NodeSets` holds one set per point as a boolean
node-membership matrix.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from trustlab.core.errors import InputError
from trustlab.core.validation import as_float_array, check_labels, check_probs, check_scalar

__all__ = ["Hierarchy", "NodeSets", "min_cost_cover"]

_CHUNK = 8192  # points per chunk in tree passes: bounds memory at chunk x n_nodes floats
_TIE = 1e-9  # relative slack in cost comparisons; ties go to the coarser node


def _name(node: Hashable) -> str:
    return node if isinstance(node, str) else str(node)


@dataclass(frozen=True, eq=False)
class Hierarchy:
    """A rooted tree over the classes, compiled to arrays in breadth-first order.

    Build one with :meth:`from_parents`, :meth:`from_nested`, :meth:`from_networkx` or
    :meth:`build` (any of the three). ``classes`` fixes the column order of probability
    matrices. Without it the columns are the leaf labels **sorted** (numbers numerically,
    strings alphabetically): the order of scikit-learn's ``classes_`` for the same labels, and
    one that does not depend on how the tree was written down. Leaf labels that cannot be
    sorted (e.g. a mix of numbers and strings) need ``classes=``.
    """

    names: tuple[str, ...]
    parent: NDArray[np.int64]
    children: tuple[tuple[int, ...], ...]
    classes: tuple[str, ...]
    leaf_node: NDArray[np.int64]
    _index: dict[str, int] = field(repr=False)

    # -- construction ---------------------------------------------------------------
    @classmethod
    def build(cls, tree: Any, classes: Iterable[Hashable] | None = None) -> Hierarchy:
        """Build from a Hierarchy (returned as is), a networkx DiGraph, a parent map or a nested dict.

        A dict is read as a parent map when every value is a node name or ``None``
        (``{"cat": "mammal", "mammal": "animal", "animal": None}``), otherwise as a nested
        dict (``{"animal": {"mammal": ["cat", "dog"], "bird": None}}``). Either way the tree
        needs at least two classes (leaves), so a one-edge dict such as ``{"animals": "cat"}``
        is an error rather than a one-class tree.
        """
        if isinstance(tree, Hierarchy):
            if classes is not None and tuple(_name(c) for c in classes) != tree.classes:
                raise InputError(
                    "The 'classes' given differ from the hierarchy's classes "
                    f"{list(tree.classes)[:5]}...; build a new Hierarchy instead."
                )
            return tree
        try:
            import networkx as nx
        except ImportError:  # pragma: no cover - networkx is a core dependency
            nx = None
        if nx is not None and isinstance(tree, nx.DiGraph):
            return cls.from_networkx(tree, classes)
        if isinstance(tree, Mapping):
            if tree and all(v is None or isinstance(v, str | int) for v in tree.values()):
                leafy = [k for k, v in tree.items() if v is None]
                # {"a": None} alone is ambiguous; a parent map needs at least one real edge
                if len(leafy) < len(tree) or len(tree) == 1:
                    return cls.from_parents(tree, classes)
            return cls.from_nested(tree, classes)
        raise InputError(
            "A hierarchy must be a Hierarchy, a networkx.DiGraph, a parent map "
            f"{{child: parent}} or a nested dict. Got {type(tree).__name__}."
        )

    @classmethod
    def from_parents(
        cls,
        parents: Mapping[Hashable, Hashable | None],
        classes: Iterable[Hashable] | None = None,
    ) -> Hierarchy:
        """Build from ``{child: parent}``; the root maps to ``None`` or appears only as a parent."""
        if not isinstance(parents, Mapping) or not parents:
            raise InputError(
                "The parent map of a hierarchy must be a non-empty dict {child: parent}."
            )
        par: dict[str, str | None] = {}
        labels: dict[str, Hashable] = {}
        for child, p in parents.items():
            c = _name(child)
            if c in par:
                raise InputError(f"The node '{c}' appears twice in the parent map.")
            par[c] = None if p is None else _name(p)
            labels[c] = child
            if p is not None:
                labels.setdefault(_name(p), p)
        for p in list(par.values()):
            if p is not None and p not in par:
                par[p] = None
        for c, p in par.items():
            if p == c:
                raise InputError(f"The node '{c}' is its own parent; a hierarchy has no cycles.")
        kids: dict[str, list[str]] = {c: [] for c in par}
        for c, p in par.items():
            if p is not None:
                kids[p].append(c)
        return cls._from_children(kids, par, classes, labels, source="parent map")

    @classmethod
    def from_nested(
        cls, tree: Mapping[Hashable, Any], classes: Iterable[Hashable] | None = None
    ) -> Hierarchy:
        """Build from a nested dict; values are sub-dicts, lists of leaves, or None for a leaf.

        A top level with several keys gets an implicit root named ``"root"``.
        """
        if not isinstance(tree, Mapping) or not tree:
            raise InputError("A nested-dict hierarchy must be a non-empty dict.")
        if len(tree) > 1:
            tree = {"root": dict(tree)}
        par: dict[str, str | None] = {}
        labels: dict[str, Hashable] = {}

        def add(node: Hashable, parent: str | None, sub: Any) -> None:
            name = _name(node)
            if name in par:
                raise InputError(
                    f"The node '{name}' appears twice in the nested dict; node names must be unique."
                )
            par[name] = parent
            labels[name] = node
            if sub is None or (isinstance(sub, Mapping | list | tuple) and len(sub) == 0):
                return
            if isinstance(sub, Mapping):
                for k, v in sub.items():
                    add(k, name, v)
            elif isinstance(sub, list | tuple | set | frozenset):
                for leaf in sub:
                    if isinstance(leaf, Mapping):
                        for k, v in leaf.items():
                            add(k, name, v)
                    else:
                        add(leaf, name, None)
            else:
                add(sub, name, None)

        ((root, sub),) = tree.items()
        add(root, None, sub)
        kids: dict[str, list[str]] = {c: [] for c in par}
        for c, p in par.items():
            if p is not None:
                kids[p].append(c)
        return cls._from_children(kids, par, classes, labels, source="nested dict")

    @classmethod
    def from_networkx(cls, graph: Any, classes: Iterable[Hashable] | None = None) -> Hierarchy:
        """Build from a ``networkx.DiGraph`` with edges parent -> child."""
        import networkx as nx

        if not isinstance(graph, nx.DiGraph) or graph.number_of_nodes() == 0:
            raise InputError(
                "A graph hierarchy must be a non-empty networkx.DiGraph (parent -> child)."
            )
        names = {n: _name(n) for n in graph.nodes}
        if len(set(names.values())) != len(names):
            raise InputError(
                "Two graph nodes have the same string name; node names must be unique."
            )
        multi = [names[n] for n in graph.nodes if graph.in_degree(n) > 1]
        if multi:
            raise InputError(
                f"The node '{multi[0]}' has {graph.in_degree(_key(graph, multi[0]))} parents; "
                "a hierarchy must be a tree (one parent per node)."
            )
        if not nx.is_directed_acyclic_graph(graph):
            cycle = [names[u] for u, _ in nx.find_cycle(graph)]
            raise InputError(f"The hierarchy has a cycle: {' -> '.join(cycle)}; it must be a tree.")
        par: dict[str, str | None] = {names[n]: None for n in graph.nodes}
        kids: dict[str, list[str]] = {names[n]: [] for n in graph.nodes}
        for u, v in graph.edges:
            par[names[v]] = names[u]
            kids[names[u]].append(names[v])
        labels = {s: n for n, s in names.items()}
        return cls._from_children(kids, par, classes, labels, source="graph")

    @classmethod
    def _from_children(
        cls,
        kids: dict[str, list[str]],
        par: dict[str, str | None],
        classes: Iterable[Hashable] | None,
        labels: Mapping[str, Hashable] | None = None,
        source: str = "tree",
    ) -> Hierarchy:
        roots = [c for c, p in par.items() if p is None]
        if not roots:
            raise InputError("The hierarchy has no root (every node has a parent): it has a cycle.")
        if len(roots) > 1:
            shown = ", ".join(f"'{r}'" for r in roots[:5])
            raise InputError(
                f"The hierarchy has {len(roots)} roots ({shown}); give them one common parent."
            )
        # breadth-first order: children of a node are contiguous, depth levels are contiguous
        order = [roots[0]]
        seen = {roots[0]}
        head = 0
        while head < len(order):
            for k in kids[order[head]]:
                if k in seen:  # pragma: no cover - one parent per node makes this impossible
                    raise InputError(f"The node '{k}' is reached twice; the hierarchy has a cycle.")
                seen.add(k)
                order.append(k)
            head += 1
        if len(order) != len(par):
            lost = [c for c in par if c not in seen]
            raise InputError(
                f"The nodes {lost[:5]} are not reachable from the root '{roots[0]}': "
                "they sit on a cycle."
            )
        index = {n: i for i, n in enumerate(order)}
        parent = np.array([-1 if par[n] is None else index[par[n]] for n in order], dtype=np.int64)
        children = tuple(tuple(index[k] for k in kids[n]) for n in order)
        if len(order) == 1:
            raise InputError("The hierarchy has a single node; it needs at least two classes.")

        leaves = [n for n in order if not kids[n]]
        if len(leaves) < 2:
            reading = (
                f" It was read as a {source}; a parent map is {{child: parent}}, a nested "
                "dict is {parent: [children]}."
                if source in ("parent map", "nested dict")
                else ""
            )
            raise InputError(
                f"The hierarchy has a single class ('{leaves[0]}'); it needs at least two "
                f"leaves.{reading}"
            )
        if classes is None:
            cls_names = _sorted_leaves(leaves, labels or {})
        else:
            if isinstance(classes, str | bytes):
                raise InputError(
                    "The 'classes' parameter of Hierarchy must be a list of leaf names. "
                    f"Got the string {classes!r}."
                )
            cls_names = tuple(_name(c) for c in classes)
            if len(set(cls_names)) != len(cls_names):
                raise InputError("The 'classes' list has duplicates; each class is one leaf.")
            leaf_set = set(leaves)
            not_leaf = [c for c in cls_names if c not in leaf_set]
            if not_leaf:
                where = "an internal node" if not_leaf[0] in index else "not in the hierarchy"
                raise InputError(
                    f"The class '{not_leaf[0]}' is {where}; every class must be a leaf."
                )
            given = set(cls_names)
            missing = [c for c in leaves if c not in given]
            if missing:
                raise InputError(
                    f"The leaf '{missing[0]}' is not a class; every leaf must be one of the "
                    f"{len(cls_names)} classes (add it to 'classes' or remove it from the tree)."
                )
        leaf_node = np.array([index[c] for c in cls_names], dtype=np.int64)
        return cls(tuple(order), parent, children, cls_names, leaf_node, index)

    # -- structure --------------------------------------------------------------------
    @property
    def n_nodes(self) -> int:
        return len(self.names)

    @property
    def n_classes(self) -> int:
        return len(self.classes)

    @property
    def root(self) -> int:
        return 0

    def index(self, name: Hashable) -> int:
        """Index of the node called ``name``."""
        try:
            return self._index[_name(name)]
        except KeyError:
            raise InputError(f"The hierarchy has no node named '{_name(name)}'.") from None

    @cached_property
    def depth(self) -> NDArray[np.int64]:
        """Depth of each node (root 0)."""
        d = np.zeros(self.n_nodes, dtype=np.int64)
        for i in range(1, self.n_nodes):
            d[i] = d[self.parent[i]] + 1
        return d

    @cached_property
    def is_leaf(self) -> NDArray[np.bool_]:
        return np.array([len(c) == 0 for c in self.children])

    @cached_property
    def class_of_node(self) -> NDArray[np.int64]:
        """Class index of each leaf node, -1 for internal nodes."""
        out = np.full(self.n_nodes, -1, dtype=np.int64)
        out[self.leaf_node] = np.arange(self.n_classes)
        return out

    @cached_property
    def n_leaves(self) -> NDArray[np.int64]:
        """Number of classes under each node."""
        ones = np.zeros((1, self.n_nodes))
        ones[0, self.leaf_node] = 1.0
        return self._sum_up(ones)[0].astype(np.int64)

    @cached_property
    def membership(self) -> NDArray[np.bool_]:
        """``(n_nodes, n_classes)`` 0/1 matrix: class ``k`` lies under node ``v``."""
        m = np.zeros((self.n_nodes, self.n_classes), dtype=bool)
        m[self.leaf_node, np.arange(self.n_classes)] = True
        for i in range(self.n_nodes - 1, 0, -1):
            m[self.parent[i]] |= m[i]
        return m

    @cached_property
    def _levels(self) -> list[tuple[int, int, NDArray[np.int64], NDArray[np.int64]]]:
        """Per depth: (start, end, internal nodes, offsets of their child blocks in level d+1)."""
        depth = self.depth
        out = []
        max_d = int(depth.max())
        for d in range(max_d + 1):
            idx = np.flatnonzero(depth == d)
            start, end = int(idx[0]), int(idx[-1]) + 1
            internal = np.array([i for i in idx if self.children[i]], dtype=np.int64)
            if d < max_d and internal.size:
                nxt = int(np.flatnonzero(depth == d + 1)[0])
                offsets = np.array([self.children[i][0] - nxt for i in internal], dtype=np.int64)
            else:
                offsets = np.zeros(0, dtype=np.int64)
            out.append((start, end, internal, offsets))
        return out

    # -- tree passes (vectorised over points) ----------------------------------------
    def _sum_up(self, values: NDArray[np.float64]) -> NDArray[np.float64]:
        """Fill internal nodes of ``values`` (n, n_nodes) with the sum of their children, in place."""
        levels = self._levels
        for d in range(len(levels) - 2, -1, -1):
            _, _, internal, offsets = levels[d]
            if internal.size:
                nstart, nend = levels[d + 1][0], levels[d + 1][1]
                values[:, internal] = np.add.reduceat(values[:, nstart:nend], offsets, axis=1)
        return values

    def _sum_down(self, values: NDArray[np.float64]) -> NDArray[np.float64]:
        """Add to every node the values of its ancestors (n, n_nodes), in place."""
        for start, end, _, _ in self._levels[1:]:
            values[:, start:end] += values[:, self.parent[start:end]]
        return values

    def _or_down(self, flags: NDArray[np.bool_]) -> NDArray[np.bool_]:
        """Propagate ``flags`` (n, n_nodes) to descendants: a node is set when it or an ancestor is."""
        out = flags.copy()
        for start, end, _, _ in self._levels[1:]:
            out[:, start:end] |= out[:, self.parent[start:end]]
        return out

    def node_scores(self, probs: ArrayLike) -> NDArray[np.float64]:
        """``(n, n_nodes)`` node probabilities: the sum of the leaf probabilities under each node."""
        p = self.check_probs(probs, "probs", "Hierarchy.node_scores")
        out = np.zeros((p.shape[0], self.n_nodes))
        out[:, self.leaf_node] = p
        return self._sum_up(out)

    def lca(self, leaf_mask: ArrayLike) -> NDArray[np.int64]:
        """Lowest common ancestor of the classes set in each row of ``leaf_mask`` (-1 if none)."""
        mask = self.check_mask(leaf_mask, "leaf_mask", "Hierarchy.lca")
        out = np.empty(mask.shape[0], dtype=np.int64)
        depth = self.depth
        for s in range(0, mask.shape[0], _CHUNK):
            m = mask[s : s + _CHUNK]
            cnt = np.zeros((m.shape[0], self.n_nodes))
            cnt[:, self.leaf_node] = m
            self._sum_up(cnt)
            total = cnt[:, :1]
            full = (cnt == total) & (total > 0)
            deepest = np.argmax(np.where(full, depth, -1), axis=1)
            out[s : s + _CHUNK] = np.where(total[:, 0] > 0, deepest, -1)
        return out

    def check_probs(self, probs: ArrayLike, name: str, where: str) -> NDArray[np.float64]:
        """Validate an ``(n, n_classes)`` matrix of class probabilities (rows sum to 1).

        Columns follow :attr:`classes`. A pandas DataFrame whose columns are named is aligned
        by name instead (its columns must be exactly the classes, in any order); a DataFrame
        with default integer columns is read by position.
        """
        return check_probs(
            self._align_columns(probs, name, where), name, where, n_classes=self.n_classes
        )

    def check_mask(self, mask: ArrayLike, name: str, where: str) -> NDArray[np.bool_]:
        """Validate an ``(n, n_classes)`` boolean matrix of classes (0/1 integers are fine)."""
        arr = as_float_array(mask, name, where, ndim=2, allow_empty=True, allow_bool=True)
        if arr.shape[1] != self.n_classes:
            raise InputError(
                f"The '{name}' parameter of {where} must have shape (n, {self.n_classes}) "
                f"(one column per class). Got shape {arr.shape}."
            )
        if not np.all((arr == 0) | (arr == 1)):
            raise InputError(f"The '{name}' parameter of {where} must hold booleans (or 0/1).")
        return arr.astype(bool)

    def _align_columns(self, probs: Any, name: str, where: str) -> Any:
        """Reorder a DataFrame with named columns to :attr:`classes`; anything else unchanged."""
        try:
            import pandas as pd
        except ImportError:  # pragma: no cover - pandas is a core dependency
            return probs
        if not isinstance(probs, pd.DataFrame) or isinstance(probs.columns, pd.RangeIndex):
            return probs
        cols = [_name(c) for c in probs.columns]
        if len(set(cols)) != len(cols):
            raise InputError(f"The '{name}' parameter of {where} has duplicate column names.")
        if set(cols) != set(self.classes):
            extra = sorted(set(cols) - set(self.classes))[:3]
            missing = sorted(set(self.classes) - set(cols))[:3]
            raise InputError(
                f"The columns of the '{name}' DataFrame in {where} must be the hierarchy's "
                f"classes. Not classes: {extra}; classes without a column: {missing}."
            )
        pos = {c: i for i, c in enumerate(cols)}
        return probs.iloc[:, [pos[c] for c in self.classes]]

    def describe(self) -> str:
        """The tree as indented text (for reports and debugging)."""
        lines: list[str] = []
        stack = [(0, 0)]
        while stack:
            i, d = stack.pop()
            lines.append("  " * d + self.names[i])
            stack.extend((k, d + 1) for k in reversed(self.children[i]))
        return "\n".join(lines)


def _sorted_leaves(leaves: list[str], labels: Mapping[str, Hashable]) -> tuple[str, ...]:
    """The leaves sorted by their original labels (ints numerically, strings alphabetically).

    This is the default column order of probability matrices: the order scikit-learn gives
    ``classes_`` for the same labels, and one that does not depend on insertion order.
    """
    keys = [labels.get(n, n) for n in leaves]
    try:
        order = sorted(range(len(leaves)), key=lambda i: keys[i])
    except TypeError:
        kinds = sorted({type(k).__name__ for k in keys})
        raise InputError(
            f"The leaf labels of the hierarchy mix types that cannot be sorted ({', '.join(kinds)}), "
            "so the column order of the probabilities is ambiguous; pass classes=[...] in the "
            "order of the probability columns."
        ) from None
    return tuple(leaves[i] for i in order)


def _key(graph: Any, name: str) -> Any:
    for n in graph.nodes:
        if _name(n) == name:
            return n
    return name  # pragma: no cover


def min_cost_cover(
    hierarchy: Hierarchy, required: ArrayLike, node_penalty: float
) -> NDArray[np.bool_]:
    """Cheapest antichain covering the required classes of each row (a bottom-up tree DP).

    Cost of an antichain ``A``: ``sum_{v in A} (n_leaves(v) + node_penalty)``, i.e. the number
    of classes covered plus ``node_penalty`` per node. Rows with no required class get the empty
    set. Ties go to the coarser node, which makes the output the optimal antichain with the
    largest covered set (see docs/methods/hcc.md). Returns the ``(n, n_nodes)`` membership.
    """
    h = Hierarchy.build(hierarchy)
    req = h.check_mask(required, "required", "min_cost_cover")
    lam = check_scalar(node_penalty, "node_penalty", "min_cost_cover", lo=0.0)
    return _min_cost_cover(h, req, lam)


def _min_cost_cover(h: Hierarchy, req: NDArray[np.bool_], lam: float) -> NDArray[np.bool_]:
    size = h.n_leaves.astype(np.float64)
    levels = h._levels
    out = np.zeros((req.shape[0], h.n_nodes), dtype=bool)
    for s in range(0, req.shape[0], _CHUNK):
        r = req[s : s + _CHUNK]
        n = r.shape[0]
        cnt = np.zeros((n, h.n_nodes))
        cnt[:, h.leaf_node] = r
        h._sum_up(cnt)
        has = cnt > 0
        f = np.zeros((n, h.n_nodes))
        take = np.zeros((n, h.n_nodes), dtype=bool)
        f[:, h.leaf_node] = np.where(r, 1.0 + lam, 0.0)
        take[:, h.leaf_node] = r
        for d in range(len(levels) - 2, -1, -1):
            _, _, internal, offsets = levels[d]
            if not internal.size:
                continue
            nstart, nend = levels[d + 1][0], levels[d + 1][1]
            child_sum = np.add.reduceat(f[:, nstart:nend], offsets, axis=1)
            own = size[internal] + lam
            hv = has[:, internal]
            t = hv & (own <= child_sum + _TIE * (own + child_sum))
            take[:, internal] = t
            f[:, internal] = np.where(hv, np.minimum(own, child_sum), 0.0)
        blocked = np.zeros((n, h.n_nodes), dtype=bool)
        for start, end, _, _ in levels[1:]:
            par = h.parent[start:end]
            blocked[:, start:end] = blocked[:, par] | take[:, par]
        out[s : s + _CHUNK] = take & ~blocked
    return out


@dataclass(frozen=True, eq=False)
class NodeSets:
    """One prediction set per point: an antichain of hierarchy nodes.

    ``membership[i, v]`` is True when node ``v`` is in the set of point ``i``.
    """

    hierarchy: Hierarchy
    membership: NDArray[np.bool_]

    def __post_init__(self) -> None:
        if not isinstance(self.hierarchy, Hierarchy):
            raise InputError(
                "The 'hierarchy' parameter of NodeSets must be a Hierarchy. "
                f"Got {type(self.hierarchy).__name__}."
            )
        m = self.membership
        if (
            isinstance(m, np.ndarray)
            and m.dtype == bool
            and m.ndim == 2
            and m.shape[1] == self.hierarchy.n_nodes
        ):
            return  # what the models build: nothing to convert
        m = as_float_array(m, "membership", "NodeSets", ndim=2, allow_empty=True, allow_bool=True)
        if m.shape[1] != self.hierarchy.n_nodes or not np.all((m == 0) | (m == 1)):
            raise InputError(
                "The 'membership' parameter of NodeSets must be a boolean (n, "
                f"{self.hierarchy.n_nodes}) matrix (one column per node). Got shape {m.shape}."
            )
        object.__setattr__(self, "membership", m.astype(bool))

    def __len__(self) -> int:
        return int(self.membership.shape[0])

    @cached_property
    def covered(self) -> NDArray[np.bool_]:
        """``(n, n_classes)``: class ``k`` lies under some node of the set of point ``i``."""
        h = self.hierarchy
        out = np.empty((len(self), h.n_classes), dtype=bool)
        for s in range(0, len(self), _CHUNK):
            out[s : s + _CHUNK] = h._or_down(self.membership[s : s + _CHUNK])[:, h.leaf_node]
        return out

    @property
    def n_leaves(self) -> NDArray[np.int64]:
        """Number of classes each set covers."""
        return self.membership.astype(np.int64) @ self.hierarchy.n_leaves

    @property
    def n_nodes(self) -> NDArray[np.int64]:
        """Number of nodes in each set."""
        return self.membership.sum(axis=1)

    @property
    def depths(self) -> NDArray[np.float64]:
        """Mean depth of the nodes of each set (root 0); NaN for an empty set."""
        tot = self.membership.astype(np.float64) @ self.hierarchy.depth.astype(np.float64)
        k = self.n_nodes
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(k > 0, tot / np.maximum(k, 1), np.nan)

    def contains(self, y: ArrayLike) -> NDArray[np.bool_]:
        """Whether the set of point ``i`` covers class ``y[i]`` (an index or a class name)."""
        yy = check_labels(
            y, "y", "NodeSets.contains", n_samples=len(self), classes=self.hierarchy.classes
        )
        return self.covered[np.arange(len(self)), yy]

    def nodes(self, i: int) -> list[str]:
        """Names of the nodes in the set of point ``i``."""
        n = len(self)
        i = check_scalar(i, "i", "NodeSets.nodes", kind=int, lo=-n, hi=n - 1)
        return [self.hierarchy.names[v] for v in np.flatnonzero(self.membership[i])]

    def to_names(self) -> list[list[str]]:
        """Node names of every set."""
        return [self.nodes(i) for i in range(len(self))]

    # metrics
    def coverage(self, y: ArrayLike) -> float:
        """Fraction of points whose set covers the true class."""
        if len(self) == 0:
            raise InputError("NodeSets.coverage needs at least one set. Got none.")
        return float(self.contains(y).mean())

    def mean_leaves(self) -> float:
        """Mean number of classes covered per set (NaN when there are no sets)."""
        return float(self.n_leaves.mean()) if len(self) else float("nan")

    def mean_nodes(self) -> float:
        """Mean number of nodes per set (NaN when there are no sets)."""
        return float(self.n_nodes.mean()) if len(self) else float("nan")

    def mean_depth(self) -> float:
        """Mean over non-empty sets of the mean depth of their nodes (NaN if all are empty)."""
        d = self.depths
        return float(np.nanmean(d)) if np.isfinite(d).any() else float("nan")
