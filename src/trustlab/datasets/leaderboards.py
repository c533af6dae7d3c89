"""Leaderboard score tables: models × datasets, higher is better in every column, NaN = missing.

A :class:`Leaderboard` is the substrate that benchmark-aggregation methods (e.g. ``bribery``) work on.
Build one from a CSV/TSV/parquet file, a pandas DataFrame, or by name from the bundled real tables:

    >>> from trustlab.datasets.leaderboards import load_leaderboard
    >>> lb = load_leaderboard("bbh24")
    >>> lb.scores.shape
    (107, 24)

Columns where lower is better are negated on load (``higher_is_better=``), which keeps every
ordinal comparison and turns the table into the "higher is better" convention.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

import numpy as np
import pandas as pd

from trustlab.core.errors import DataError, InputError, MissingDependencyError

__all__ = [
    "BUILTIN_LEADERBOARDS",
    "HELM_CLASSIC_CONTAMINATED",
    "Leaderboard",
    "bundled_path",
    "load_leaderboard",
]

MISSING_TOKENS = ("", "-", "--", "NA", "N/A", "n/a", "nan", "NaN", "None", "null")

#: Cells HELM classic flags as strongly contaminated and leaves out of its win rates.
#: Found as the unique subset of T0pp's 12 scored cells for which the published "Mean win rate"
#: column is consistent (to its rounding) for all 67 models; T0pp was trained on these sets (P3).
HELM_CLASSIC_CONTAMINATED: dict[str, tuple[str, ...]] = {
    "T0pp (11B)": ("BoolQ - EM", "CNN/DailyMail - ROUGE-2", "XSUM - ROUGE-2", "IMDB - EM"),
}

BBH_DROPPED_IN_V2 = ("Dyck Languages", "Multistep Arithmetic Two", "Word Sorting")


@dataclass(frozen=True)
class Leaderboard:
    """A score matrix of ``n_models`` × ``n_datasets``; higher is better, NaN marks a missing score.

    ``info`` holds the table's non-score columns (company, published aggregates, ...), indexed by
    model, in the same row order as ``scores``. ``notes`` says how a table was read: which
    column named the models, which columns were not taken as scores and why, which models were
    dropped (one line each, for the user to see).
    """

    scores: np.ndarray
    models: tuple[str, ...]
    datasets: tuple[str, ...]
    name: str = "leaderboard"
    info: pd.DataFrame = field(default_factory=pd.DataFrame, repr=False, compare=False)
    notes: tuple[str, ...] = field(default=(), repr=False, compare=False)

    def __post_init__(self) -> None:
        try:
            scores = np.asarray(self.scores, dtype=float)
        except (TypeError, ValueError) as exc:  # strings or ragged rows: numpy's own error
            raise InputError(f"Leaderboard scores must be numbers ({exc}).") from None
        if scores.ndim != 2:
            raise InputError(f"Leaderboard scores must be a 2-D array. Got {scores.ndim} dimensions.")
        if scores.shape != (len(self.models), len(self.datasets)):
            raise InputError(
                f"Leaderboard scores have shape {scores.shape} but there are {len(self.models)} "
                f"models and {len(self.datasets)} datasets."
            )
        if np.isinf(scores).any():
            raise InputError("Leaderboard scores must be finite or NaN (missing). Found inf.")
        if len(set(self.models)) != len(self.models):
            dup = pd.Series(self.models)[pd.Series(self.models).duplicated()].iloc[0]
            raise InputError(f"Leaderboard model names must be unique. '{dup}' appears twice.")
        if len(set(self.datasets)) != len(self.datasets):
            raise InputError("Leaderboard dataset names must be unique.")
        scores = scores.copy()
        scores.setflags(write=False)
        object.__setattr__(self, "scores", scores)
        object.__setattr__(self, "models", tuple(str(m) for m in self.models))
        object.__setattr__(self, "datasets", tuple(str(d) for d in self.datasets))

    # ---------------------------------------------------------------- basic views
    @property
    def n_models(self) -> int:
        return len(self.models)

    @property
    def n_datasets(self) -> int:
        return len(self.datasets)

    @property
    def shape(self) -> tuple[int, int]:
        return self.scores.shape

    @property
    def has_missing(self) -> bool:
        return bool(np.isnan(self.scores).any())

    def to_frame(self) -> pd.DataFrame:
        """The score matrix as a DataFrame (index: models, columns: datasets)."""
        return pd.DataFrame(self.scores, index=list(self.models), columns=list(self.datasets))

    def model_index(self, model: str | int) -> int:
        """Row index of ``model`` (a name or an index)."""
        if isinstance(model, bool | np.bool_):  # True used to mean model 1
            raise InputError(f"A model is a name or an index. Got {model!r}.")
        if isinstance(model, (int, np.integer)):
            if not 0 <= int(model) < self.n_models:
                raise InputError(
                    f"Model index {model} is out of range for a leaderboard of {self.n_models} models."
                )
            return int(model)
        try:
            return self.models.index(model)
        except ValueError:
            close = [m for m in self.models if str(model).lower() in m.lower()][:3]
            hint = f" Did you mean: {', '.join(close)}?" if close else ""
            raise InputError(f"Model '{model}' is not in leaderboard '{self.name}'.{hint}") from None

    def select(
        self,
        models: Iterable[str | int] | None = None,
        datasets: Iterable[str] | None = None,
        name: str | None = None,
    ) -> Leaderboard:
        """A sub-leaderboard with the given models (names or indices) and datasets, in that order."""
        for arg, value in (("models", models), ("datasets", datasets)):
            if isinstance(value, str):  # "mmlu" used to be read letter by letter
                raise InputError(f"The '{arg}' parameter of select is a list of names. Got "
                                 f"{value!r}.")
        rows = (
            list(range(self.n_models))
            if models is None
            else [self.model_index(m) for m in models]
        )
        if datasets is None:
            cols = list(range(self.n_datasets))
        else:
            cols = []
            for d in datasets:
                if d not in self.datasets:
                    raise InputError(f"Dataset '{d}' is not in leaderboard '{self.name}'.")
                cols.append(self.datasets.index(d))
        info = self.info.iloc[rows] if len(self.info) == self.n_models else self.info
        return Leaderboard(
            self.scores[np.ix_(rows, cols)],
            tuple(self.models[i] for i in rows),
            tuple(self.datasets[j] for j in cols),
            name=name or self.name,
            info=info,
            notes=self.notes,
        )

    def drop_datasets(self, datasets: Iterable[str], name: str | None = None) -> Leaderboard:
        if isinstance(datasets, str):
            raise InputError(f"The 'datasets' parameter of drop_datasets is a list of names. Got "
                             f"{datasets!r}.")
        drop = set(datasets)
        unknown = drop - set(self.datasets)
        if unknown:
            raise InputError(f"Cannot drop unknown datasets {sorted(unknown)} from '{self.name}'.")
        return self.select(datasets=[d for d in self.datasets if d not in drop], name=name)

    # ---------------------------------------------------------------- constructors
    @classmethod
    def from_array(
        cls,
        scores: np.ndarray | Sequence[Sequence[float]],
        models: Sequence[str] | None = None,
        datasets: Sequence[str] | None = None,
        name: str = "leaderboard",
    ) -> Leaderboard:
        try:
            arr = np.asarray(scores, dtype=float)
        except (TypeError, ValueError) as exc:
            raise InputError(f"Leaderboard scores must be numbers ({exc}).") from None
        if arr.ndim != 2:
            raise InputError(f"Leaderboard scores must be a 2-D array. Got shape {arr.shape}.")
        models = tuple(models) if models is not None else tuple(f"m{i}" for i in range(arr.shape[0]))
        datasets = (
            tuple(datasets) if datasets is not None else tuple(f"d{j}" for j in range(arr.shape[1]))
        )
        return cls(arr, models, datasets, name=name)

    @classmethod
    def from_frame(
        cls,
        frame: pd.DataFrame,
        *,
        model_column: str | None = None,
        dataset_columns: Sequence[str] | None = None,
        higher_is_better: bool | Mapping[str, bool] = True,
        duplicates: str = "error",
        name: str = "leaderboard",
    ) -> Leaderboard:
        """Build a leaderboard from a DataFrame with one row per model.

        ``model_column``: the column naming the models. Default: the index if it is not a
        RangeIndex, else the text column called like a model column (``model``, ``name``, ...),
        else the only text column whose values are unique; an ambiguous table is an error
        naming the candidates. ``dataset_columns``: the score columns. Default: every other
        column whose cells are numbers (percent cells such as ``50%`` are read as 50), except
        columns named like metadata (identifiers, ranks, parameter counts, dates, published
        averages); what was left out and why is in :attr:`notes`. A column that is mostly
        numeric with a few cells that are not numbers is an error naming those cells, never
        dropped. Models with no score at all are dropped (and named in :attr:`notes`): they
        can neither win nor be beaten. ``higher_is_better``: True, or a mapping dataset → bool;
        columns with False are negated. ``duplicates``: "error", "first" or "last" for repeated
        model names.
        """
        if not isinstance(frame, pd.DataFrame):
            raise InputError(f"from_frame needs a pandas DataFrame. Got {type(frame).__name__}.")
        if duplicates not in ("error", "first", "last"):
            raise InputError(
                f"The 'duplicates' parameter must be 'error', 'first' or 'last'. Got '{duplicates}'."
            )
        df = frame.copy()
        if not isinstance(df.index, pd.RangeIndex) and model_column is None:
            df = df.reset_index()
            model_column = str(df.columns[0])
        df.columns = [_clean_header(c) for c in df.columns]
        if len(set(df.columns)) != len(df.columns):
            dup = pd.Series(df.columns)[pd.Series(df.columns).duplicated()].iloc[0]
            raise DataError(f"The table has two columns named '{dup}'.")
        if df.empty:
            raise DataError("The table has no rows (one row per model is expected).")
        notes: list[str] = []
        model_column = _pick_model_column(df, model_column, notes)
        names = df[model_column].astype(str).str.strip()
        if names.duplicated().any():
            if duplicates == "error":
                dup = names[names.duplicated()].iloc[0]
                raise DataError(
                    f"Model '{dup}' appears more than once in column '{model_column}'; keep one "
                    "row per model (library: duplicates='first' or 'last'; CLI: --duplicates "
                    "first|last), or name the right column with model_column= (CLI: "
                    "--model-column)."
                )
            keep = ~names.duplicated(keep=duplicates)
            notes.append(
                f"kept the {duplicates} row of {int((~keep).sum())} repeated model name(s)"
            )
            df, names = df.loc[keep], names.loc[keep]
        others = [c for c in df.columns if c != model_column]
        if dataset_columns is None:
            values, dataset_columns = _score_columns(df, others, names, notes)
        else:
            if isinstance(dataset_columns, str):
                raise InputError(
                    "The 'dataset_columns' parameter must be a list of column names. "
                    f"Got the string {dataset_columns!r}."
                )
            dataset_columns = [_clean_header(c) for c in dataset_columns]
            missing = [c for c in dataset_columns if c not in df.columns]
            if missing:
                raise DataError(
                    f"Dataset columns {missing} are not in the table (its columns: "
                    f"{', '.join(map(str, df.columns))})."
                )
            if model_column in dataset_columns:
                raise DataError(f"The model column '{model_column}' cannot also be a dataset.")
            parsed = [_parse_column(df[c], c, names, notes) for c in dataset_columns]
            bad = [p for p in parsed if isinstance(p, str)]
            if bad:
                raise DataError(bad[0])
            values = np.column_stack(parsed) if parsed else np.zeros((len(df), 0))
        if not dataset_columns:
            raise DataError("The table has no score columns. " + " ".join(notes))
        if isinstance(higher_is_better, Mapping):
            unknown = set(higher_is_better) - set(dataset_columns)
            if unknown:
                raise InputError(f"higher_is_better names unknown datasets {sorted(unknown)}.")
            sign = np.array([1.0 if higher_is_better.get(c, True) else -1.0 for c in dataset_columns])
        else:
            sign = np.ones(len(dataset_columns)) if higher_is_better else -np.ones(len(dataset_columns))
        values = values * sign
        scored = ~np.isnan(values).all(axis=1)
        if not scored.all():
            gone = names[~scored].tolist()
            notes.append(
                f"dropped {len(gone)} model(s) without any score (they can neither win nor be "
                f"beaten): {_short_list(gone)}"
            )
            df, names, values = df.loc[scored], names[scored], values[scored]
        info_cols = [c for c in others if c not in dataset_columns]
        info = df[info_cols].copy()
        info.index = pd.Index(names.to_list(), name="model")
        notes.insert(0, f"model names from column '{model_column}'")
        return cls(values, tuple(names), tuple(dataset_columns), name=name, info=info,
                   notes=tuple(notes))

    def describe(self) -> str:
        """One paragraph saying what was read: shape, score columns, and :attr:`notes`."""
        head = (
            f"{self.name}: {self.n_models} models x {self.n_datasets} datasets "
            f"({_short_list(self.datasets, 8)})"
        )
        return "; ".join([head, *self.notes]) + "."

    @classmethod
    def from_file(
        cls, path: str | os.PathLike[str], *, decimal: str = ".", **kwargs: object
    ) -> Leaderboard:
        """Read a CSV, TSV (``.tsv``/``.tab``) or parquet file; other keyword arguments go to
        :meth:`from_frame`.

        The separator is detected (an Excel ``sep=;`` first line is honoured), a UTF-8 byte
        order mark is ignored, and ``decimal=","`` reads decimal commas (``0,5``).
        """
        p = Path(path)
        if p.is_dir():
            raise DataError(f"Leaderboard path '{p}' is a folder; give a CSV/TSV/parquet file.")
        if not p.is_file():
            raise DataError(f"Leaderboard file '{p}' does not exist.")
        if decimal not in (".", ","):
            raise InputError(f"The 'decimal' parameter must be '.' or ','. Got {decimal!r}.")
        frame = _read_table(p, decimal)
        kwargs.setdefault("name", p.stem)
        return cls.from_frame(frame, **kwargs)  # type: ignore[arg-type]


# -------------------------------------------------------------------- reading a table
_MODEL_NAME = re.compile(r"(^|[^a-z])(model|models|name|llm|system|checkpoint)([^a-z]|$)", re.I)
#: Numeric columns that describe a model rather than score it, by name (reason, pattern).
_METADATA = (
    ("an identifier or rank", r"^(id|ids|idx|index|rank|ranking|no|#|row|unnamed:?\s*\d*)$|(^|[_\s])id$"),
    ("a model size", r"param|^size$|^n_?params|billion|^#\s*params|flops|tokens"),
    ("a date", r"date|year|release|updated|time"),
    (
        "a published aggregate of the other columns",
        r"^(average|avg|mean|overall|total|mean win rate|win rate|average_score)$|^avg[_\s]|[_\s]avg$",
    ),
    ("a cost or licence field", r"price|cost|licen[cs]e|hub|likes|downloads"),
)
_DECIMAL_COMMA = re.compile(r"^[+-]?\d+,\d+$")
_NUMBER = re.compile(r"^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$")


def _clean_header(col: object) -> str:
    """A column name without a byte order mark or surrounding spaces."""
    return str(col).replace("\ufeff", "").strip()


def _short_list(items: Sequence[object], limit: int = 5) -> str:
    items = [str(i) for i in items]
    more = f" and {len(items) - limit} more" if len(items) > limit else ""
    return ", ".join(items[:limit]) + more


def _pick_model_column(df: pd.DataFrame, model_column: str | None, notes: list[str]) -> str:
    if model_column is not None:
        col = _clean_header(model_column)
        if col not in df.columns:
            raise DataError(
                f"Model column '{col}' is not in the table (its columns: "
                f"{_short_list(list(df.columns), 12)})."
            )
        return col
    text = [c for c in df.columns if not pd.api.types.is_numeric_dtype(df[c])]
    text = [c for c in text if _numeric_share(df[c]) < 0.5]
    if not text:
        raise DataError(
            "Cannot tell which column names the models: the table has no text column. "
            "Pass model_column=... (CLI: --model-column)."
        )
    named = [c for c in text if _MODEL_NAME.search(c)]
    unique = [c for c in text if df[c].astype(str).str.strip().is_unique]
    for pool in (named, unique if len(unique) == 1 else [], text if len(text) == 1 else []):
        if len(pool) == 1:
            return pool[0]
    if len(named) > 1:
        unique_named = [c for c in named if c in unique]
        if len(unique_named) == 1:
            return unique_named[0]
    raise DataError(
        f"Cannot tell which column names the models: {_short_list(text)} are all text columns. "
        "Pass model_column=... (CLI: --model-column)."
    )


def _numeric_share(col: pd.Series) -> float:
    cells = col.dropna().astype(str).str.strip()
    cells = cells[~cells.isin(MISSING_TOKENS)]
    if cells.empty:
        return 0.0
    ok = cells.str.match(_NUMBER.pattern) | cells.str.rstrip("%").str.strip().str.match(
        _NUMBER.pattern
    )
    return float(ok.mean())


def _metadata_reason(col: str) -> str | None:
    for reason, pattern in _METADATA:
        if re.search(pattern, col, re.I):
            return reason
    return None


def _score_columns(
    df: pd.DataFrame, columns: list[str], names: pd.Series, notes: list[str]
) -> tuple[np.ndarray, list[str]]:
    """Pick and parse the score columns; every column left out gets a note with the reason."""
    kept: list[str] = []
    values: list[np.ndarray] = []
    left_out: list[str] = []
    for c in columns:
        reason = _metadata_reason(c)
        if reason is not None:
            left_out.append(f"{c} ({reason})")
            continue
        parsed = _parse_column(df[c], c, names, notes)
        if isinstance(parsed, str):  # a column that is not numbers at all
            left_out.append(f"{c} ({parsed})")
            continue
        if _is_row_number(parsed):
            left_out.append(f"{c} (consecutive whole numbers: an identifier)")
            continue
        kept.append(c)
        values.append(parsed)
    if left_out:
        notes.append("not taken as scores: " + "; ".join(left_out))
    arr = np.column_stack(values) if values else np.zeros((len(df), 0))
    return arr, kept


def _is_row_number(values: np.ndarray) -> bool:
    v = values[~np.isnan(values)]
    if v.size < 3 or v.size < values.size or np.any(v != np.round(v)):
        return False
    srt = np.sort(v)
    return bool(np.all(np.diff(srt) == 1) and srt[0] in (0, 1))


def _parse_column(col: pd.Series, name: str, models: pd.Series, notes: list[str]) -> np.ndarray | str:
    """A score column as floats (NaN = missing), or the reason it is not a score column.

    Raises DataError for a column that is mostly numbers with a few cells that are not, and
    for decimal commas; both name the cause and the cells.
    """
    if pd.api.types.is_bool_dtype(col):
        return "true/false values"
    if pd.api.types.is_numeric_dtype(col):
        out = col.to_numpy(dtype=float)
        if np.isinf(out).any():
            row = int(np.flatnonzero(np.isinf(out))[0])
            raise DataError(
                f"Column '{name}' has an infinite score at row {row + 1} (model "
                f"'{models.iloc[row]}'); scores must be finite or missing."
            )
        return out
    cells = col.astype(object).where(col.notna(), None)
    text = [None if v is None else str(v).strip() for v in cells]
    missing = [t is None or t in MISSING_TOKENS for t in text]
    present = [i for i, m in enumerate(missing) if not m]
    if not present:
        return "no values"
    plain = [i for i in present if _NUMBER.match(text[i])]
    pct = [i for i in present if text[i].endswith("%") and _NUMBER.match(text[i][:-1].strip())]
    comma = [i for i in present if _DECIMAL_COMMA.match(text[i].rstrip("%").strip())]
    if comma and len(comma) + len(plain) + len(pct) >= len(present) and len(comma) >= len(plain):
        ex = text[comma[0]]
        raise DataError(
            f"Column '{name}' uses decimal commas (e.g. '{ex}' at row {comma[0] + 1}); read the "
            "file with decimal=',' (CLI: --decimal ,) or convert the cells to '0.5'."
        )
    numeric = len(plain) + len(pct)
    bad = [i for i in present if i not in set(plain) | set(pct)]
    if numeric == 0:
        return "text"
    if pct and plain:
        raise DataError(
            f"Column '{name}' mixes percent cells (e.g. '{text[pct[0]]}' at row {pct[0] + 1}) "
            f"and plain numbers (e.g. '{text[plain[0]]}' at row {plain[0] + 1}); use one unit."
        )
    if bad:
        if numeric < len(bad):  # mostly text: a label column with a few numbers
            return "text"
        shown = ", ".join(
            f"row {i + 1} (model '{models.iloc[i]}'): {text[i]!r}" for i in bad[:5]
        )
        more = f" and {len(bad) - 5} more" if len(bad) > 5 else ""
        raise DataError(
            f"Column '{name}' is mostly numbers but {len(bad)} cell(s) are not: {shown}{more}. "
            f"Fix them or leave them empty (missing: '', '-', 'NA')."
        )
    out = np.full(len(text), np.nan)
    if pct:
        for i in pct:
            out[i] = float(text[i][:-1])
        notes.append(f"column '{name}' read as percentages ('{text[pct[0]]}' -> {out[pct[0]]:g})")
    else:
        for i in plain:
            out[i] = float(text[i])
    return out


def _read_table(path: Path, decimal: str = ".") -> pd.DataFrame:
    suffix = path.suffix.lower()
    try:
        if suffix in (".parquet", ".pq"):
            try:
                return pd.read_parquet(path)
            except ImportError:
                raise MissingDependencyError(
                    "Reading parquet leaderboards needs the package 'pyarrow'. "
                    "Install it with: pip install pyarrow"
                ) from None
        sep = "\t" if suffix in (".tsv", ".tab") else None
        skip = 0
        with open(path, encoding="utf-8-sig", errors="replace") as fh:
            first = fh.readline().strip()
        declared = re.fullmatch(r'"?sep=(.)"?', first)
        if declared:  # Excel's explicit separator line
            sep, skip = declared.group(1), 1
        return pd.read_csv(
            path,
            sep=sep,
            engine="python",
            encoding="utf-8-sig",
            skiprows=skip,
            decimal=decimal,
            na_values=list(MISSING_TOKENS),
            keep_default_na=True,
        )
    except (MissingDependencyError, DataError):
        raise
    except Exception as exc:  # pandas raises many types for malformed files
        raise DataError(f"Cannot read leaderboard file '{path}': {exc}") from None


# -------------------------------------------------------------------- built-in tables
def bundled_path(filename: str) -> Path:
    """Path of a bundled leaderboard file."""
    root = resources.files("trustlab.datasets") / "bundled" / "leaderboards"
    if (not isinstance(filename, str) or not filename.strip() or Path(filename).is_absolute()
            or ".." in Path(filename).parts):
        # "../x" used to point outside the bundled folder
        raise InputError(f"The 'filename' parameter of bundled_path is a file name. Got "
                         f"{filename!r}.")
    return Path(str(root / filename))


def _load_bbh(drop_v2: bool) -> Leaderboard:
    df = pd.read_csv(bundled_path("benchbench_bbh_27tasks.tsv"), sep="\t", na_values=["N/A"])
    meta = ["Rank", "Model", "Company", "Release", "Parameters", "Average"]
    tasks = [c for c in df.columns if c not in meta]
    if drop_v2:
        tasks = [t for t in tasks if t not in BBH_DROPPED_IN_V2]
    return Leaderboard.from_frame(
        df, model_column="Model", dataset_columns=tasks, name="bbh24" if drop_v2 else "bbh27"
    )


def _load_mmlu57() -> Leaderboard:
    df = pd.read_csv(bundled_path("benchbench_mmlu57_openllm_v1_top.tsv"), sep="\t", index_col=0)
    df = df.sort_values(["model_name", "split_name"])
    subjects = [c for c in df.columns if c.startswith("harness|hendrycksTest-")]
    renamed = {c: c.removeprefix("harness|hendrycksTest-").split("|")[0] for c in subjects}
    df = df.rename(columns=renamed)
    df["model_name"] = df["model_name"].str.removeprefix("details_").str.replace("__", "/", n=1)
    lb = Leaderboard.from_frame(
        df,
        model_column="model_name",
        dataset_columns=list(renamed.values()),
        duplicates="last",
        name="mmlu57",
    )
    order = np.argsort(-lb.info["average_score"].to_numpy(), kind="stable")
    return lb.select(models=order.tolist())


def _load_helm_classic_accuracy(mask_contaminated: bool = True) -> Leaderboard:
    df = pd.read_csv(
        bundled_path("helm_classic/accuracy.tsv"), sep="\t", na_values=["-"], keep_default_na=True
    )
    cols = [c for c in df.columns if c not in ("Model/adapter", "Mean win rate")]
    if mask_contaminated:
        for model, datasets in HELM_CLASSIC_CONTAMINATED.items():
            df.loc[df["Model/adapter"] == model, list(datasets)] = np.nan
    return Leaderboard.from_frame(
        df, model_column="Model/adapter", dataset_columns=cols, name="helm_classic_accuracy"
    )


def _load_openllm_v1() -> Leaderboard:
    df = pd.read_csv(bundled_path("benchbench_openllm_v1_6tasks.tsv"), sep="\t")
    cols = ["ARC", "HellaSwag", "MMLU", "TruthfulQA", "Winogrande", "GSM8K"]
    return Leaderboard.from_frame(
        df, model_column="Model", dataset_columns=cols, duplicates="first", name="openllm_v1"
    )


def _load_openllm_v2() -> Leaderboard:
    df = pd.read_csv(bundled_path("ibm_bat_hf_open_llm_v2_240829.csv"))
    cols = ["HFV2_IFEval", "HFV2_BBH", "HFV2_MATH_Lvl_5", "HFV2_GPQA", "HFV2_MUSR", "HFV2_MMLU-PRO"]
    df = df.rename(columns={c: c.removeprefix("HFV2_") for c in cols})
    return Leaderboard.from_frame(
        df,
        model_column="model",
        dataset_columns=[c.removeprefix("HFV2_") for c in cols],
        duplicates="first",
        name="openllm_v2",
    )


BUILTIN_LEADERBOARDS = {
    "bbh24": lambda: _load_bbh(drop_v2=True),
    "bbh27": lambda: _load_bbh(drop_v2=False),
    "mmlu57": _load_mmlu57,
    "helm_classic_accuracy": _load_helm_classic_accuracy,
    "helm_classic_accuracy_raw": lambda: _load_helm_classic_accuracy(mask_contaminated=False),
    "openllm_v1": _load_openllm_v1,
    "openllm_v2": _load_openllm_v2,
}
"""Named real tables. ``helm_classic_accuracy`` masks the cells HELM excludes as contaminated
(:data:`HELM_CLASSIC_CONTAMINATED`); ``helm_classic_accuracy_raw`` keeps them."""


def load_leaderboard(name_or_path: str | os.PathLike[str] | pd.DataFrame, **kwargs: object) -> Leaderboard:
    """Load a built-in leaderboard by name, a score file by path, or wrap a DataFrame."""
    if isinstance(name_or_path, pd.DataFrame):
        return Leaderboard.from_frame(name_or_path, **kwargs)  # type: ignore[arg-type]
    if not isinstance(name_or_path, str | os.PathLike):
        raise InputError(f"load_leaderboard takes a built-in name, a path or a DataFrame. Got "
                         f"{type(name_or_path).__name__}.")
    key = str(name_or_path)
    if key in BUILTIN_LEADERBOARDS:
        if kwargs:
            raise InputError(f"Built-in leaderboard '{key}' takes no options. Got {sorted(kwargs)}.")
        return BUILTIN_LEADERBOARDS[key]()
    path = Path(key)
    if path.suffix or path.exists():
        return Leaderboard.from_file(path, **kwargs)
    raise DataError(
        f"Unknown leaderboard '{key}'. Built-ins: {', '.join(BUILTIN_LEADERBOARDS)}; "
        "or pass a path to a CSV/TSV/parquet file."
    )
