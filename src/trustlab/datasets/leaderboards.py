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
    model, in the same row order as ``scores``.
    """

    scores: np.ndarray
    models: tuple[str, ...]
    datasets: tuple[str, ...]
    name: str = "leaderboard"
    info: pd.DataFrame = field(default_factory=pd.DataFrame, repr=False, compare=False)

    def __post_init__(self) -> None:
        scores = np.asarray(self.scores, dtype=float)
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
        )

    def drop_datasets(self, datasets: Iterable[str], name: str | None = None) -> Leaderboard:
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
        arr = np.asarray(scores, dtype=float)
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

        ``model_column``: the column naming the models (default: the index if it is not a
        RangeIndex, else the first non-numeric column). ``dataset_columns``: the score columns
        (default: every numeric column that is not the model column). Other columns go to
        ``info``. ``higher_is_better``: True, or a mapping dataset → bool; columns with False are
        negated. ``duplicates``: "error", "first" or "last" for repeated model names.
        """
        if not isinstance(frame, pd.DataFrame):
            raise InputError(f"from_frame needs a pandas DataFrame. Got {type(frame).__name__}.")
        df = frame.copy()
        if model_column is None:
            if not isinstance(df.index, pd.RangeIndex):
                df = df.reset_index()
                model_column = str(df.columns[0])
            else:
                non_numeric = [
                    c for c in df.columns if not pd.api.types.is_numeric_dtype(df[c])
                ]
                if not non_numeric:
                    raise DataError(
                        "Cannot tell which column names the models: no non-numeric column. "
                        "Pass model_column=..."
                    )
                model_column = str(non_numeric[0])
        if model_column not in df.columns:
            raise DataError(f"Model column '{model_column}' is not in the table.")
        if dataset_columns is None:
            dataset_columns = [
                str(c)
                for c in df.columns
                if c != model_column and pd.api.types.is_numeric_dtype(df[c])
            ]
        else:
            missing = [c for c in dataset_columns if c not in df.columns]
            if missing:
                raise DataError(f"Dataset columns {missing} are not in the table.")
            dataset_columns = [str(c) for c in dataset_columns]
        if not dataset_columns:
            raise DataError("The table has no numeric score columns.")
        if duplicates not in ("error", "first", "last"):
            raise InputError(
                f"The 'duplicates' parameter must be 'error', 'first' or 'last'. Got '{duplicates}'."
            )
        names = df[model_column].astype(str)
        if names.duplicated().any():
            if duplicates == "error":
                dup = names[names.duplicated()].iloc[0]
                raise DataError(
                    f"Model '{dup}' appears more than once; pass duplicates='first' or 'last'."
                )
            df = df.loc[~names.duplicated(keep=duplicates)]
            names = df[model_column].astype(str)
        try:
            values = df[dataset_columns].apply(pd.to_numeric, errors="raise").to_numpy(float)
        except (ValueError, TypeError) as exc:
            raise DataError(f"Score columns must be numeric (or empty / '-' for missing): {exc}") from None
        if isinstance(higher_is_better, Mapping):
            unknown = set(higher_is_better) - set(dataset_columns)
            if unknown:
                raise InputError(f"higher_is_better names unknown datasets {sorted(unknown)}.")
            sign = np.array([1.0 if higher_is_better.get(c, True) else -1.0 for c in dataset_columns])
        else:
            sign = np.ones(len(dataset_columns)) if higher_is_better else -np.ones(len(dataset_columns))
        values = values * sign
        info_cols = [c for c in df.columns if c != model_column and str(c) not in dataset_columns]
        info = df[info_cols].copy()
        info.index = pd.Index(names.to_list(), name="model")
        return cls(values, tuple(names), tuple(dataset_columns), name=name, info=info)

    @classmethod
    def from_file(cls, path: str | os.PathLike[str], **kwargs: object) -> Leaderboard:
        """Read a CSV, TSV (``.tsv``/``.tab``) or parquet file; keyword arguments go to
        :meth:`from_frame`."""
        p = Path(path)
        if not p.is_file():
            raise DataError(f"Leaderboard file '{p}' does not exist.")
        frame = _read_table(p)
        kwargs.setdefault("name", p.stem)
        return cls.from_frame(frame, **kwargs)  # type: ignore[arg-type]


def _read_table(path: Path) -> pd.DataFrame:
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
        return pd.read_csv(
            path,
            sep=sep,
            engine="python",
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
