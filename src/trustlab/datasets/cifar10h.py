"""CIFAR-10H: human label counts and CNN softmax outputs on the 10,000 CIFAR-10 test images.

Reads the Kerrigan et al. (NeurIPS 2021) CSVs kept in ``../shared/data/cifar10h`` (or a path
you give). The data are CC BY-NC-SA 4.0 (Peterson et al., ICCV 2019): they are read in
place and never bundled with trustlab.

CSV layout (no header, 10,000 rows): column 0 the true label (0-9), columns 1-10 human label
counts, columns 11-20 the model's softmax. ``human_model_truth_cifar10h.csv`` (model
``"resnet-low-acc"``, a deliberately weak ResNet) has another layout: columns 0-9 counts,
10-19 softmax, 20 the true label **1-indexed**; it is converted to 0-indexed on load.

:func:`sample_human_labels` draws one simulated annotator per image from the counts (the
"human" of a human-AI team).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
from numpy.typing import NDArray
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from trustlab.core.errors import DataError, InputError
from trustlab.core.paths import shared_data_dir
from trustlab.core.validation import as_float_array

__all__ = [
    "CIFAR10H_MODELS",
    "CIFAR10_CLASSES",
    "Cifar10H",
    "Cifar10HModel",
    "Cifar10HSource",
    "default_cifar10h_dir",
    "load_cifar10h",
    "sample_human_labels",
]

#: The CNNs whose CIFAR-10H softmax outputs Kerrigan et al. published (one file each).
Cifar10HModel = Literal["resnet-110", "preresnet-110", "densenet-bc-190", "resnet-low-acc"]

CIFAR10_CLASSES = (
    "airplane",
    "automobile",
    "bird",
    "cat",
    "deer",
    "dog",
    "frog",
    "horse",
    "ship",
    "truck",
)
CIFAR10H_MODELS = {
    "resnet-110": "kerrigan_resnet-110.csv.xz",
    "preresnet-110": "kerrigan_preresnet-110.csv.xz",
    "densenet-bc-190": "kerrigan_densenet-bc-L190-k40.csv.xz",
    "resnet-low-acc": "kerrigan_human_model_truth_cifar10h.csv.xz",
}
_ONE_INDEXED_LAST = {"resnet-low-acc"}  # layout: counts, probs, 1-indexed label last


@dataclass(frozen=True)
class Cifar10H:
    """Model probabilities, true labels and human label counts, rows in CIFAR-10 test order."""

    probs: NDArray[np.float64]  # (10000, 10) softmax of the model
    labels: NDArray[np.int64]  # (10000,) true class, 0-indexed
    human_counts: NDArray[np.float64]  # (10000, 10) annotator votes
    model: str
    classes: tuple[str, ...] = CIFAR10_CLASSES


class Cifar10HSource(BaseModel):
    """Where an experiment reads CIFAR-10H from, and which CNN's outputs (a config section).

    The same section (``cifar10h.enabled``, ``cifar10h.model``, ``cifar10h.dir``) in every
    experiment that uses CIFAR-10H. ``cifar10h=false`` is short for ``cifar10h.enabled=false``.
    A folder given in ``dir`` must exist (a typo is a config error, not a silent skip); the
    default folder may be absent, and then the experiment notes that it ran without CIFAR-10H.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    enabled: bool = Field(
        True, description="Use CIFAR-10H when its files are there (false: never)."
    )
    model: Cifar10HModel = Field(
        "resnet-110", description="Which CNN's softmax outputs are the model's probabilities."
    )
    dir: str | None = Field(
        None,
        description="Folder with the Kerrigan CIFAR-10H CSVs (default ../shared/data/cifar10h, "
        "or $TRUSTLAB_SHARED_DATA/cifar10h); a folder given here must exist.",
    )

    @model_validator(mode="before")
    @classmethod
    def _bool_shorthand(cls, value: Any) -> Any:
        return {"enabled": value} if isinstance(value, bool) else value

    @field_validator("dir")
    @classmethod
    def _dir_exists(cls, value: str | None) -> str | None:
        if value is not None and not Path(value).expanduser().is_dir():
            raise ValueError(f"the CIFAR-10H folder {value!r} does not exist")
        return value

    @property
    def root(self) -> Path:
        """The folder the files are read from."""
        return Path(self.dir).expanduser() if self.dir else default_cifar10h_dir()

    def load(self) -> Cifar10H | None:
        """The data, or None when switched off or when the default folder is absent.

        A folder named in ``dir`` that lacks the file raises :class:`DataError`.
        """
        if not self.enabled:
            return None
        if self.dir is None and not (self.root / CIFAR10H_MODELS[self.model]).is_file():
            return None
        return load_cifar10h(self.model, self.root)

    def absent_note(self) -> str:
        """Why :meth:`load` returned None, for the report."""
        if not self.enabled:
            return "CIFAR-10H was switched off in the config (cifar10h.enabled=false)."
        return (
            f"CIFAR-10H was not evaluated: {self.root / CIFAR10H_MODELS[self.model]} is absent "
            "(the data are CC BY-NC-SA and never bundled; set cifar10h.dir to their folder)."
        )


def default_cifar10h_dir() -> Path:
    """``$TRUSTLAB_SHARED_DATA/cifar10h``, else ``<repo>/../shared/data/cifar10h``."""
    return shared_data_dir("cifar10h")


def load_cifar10h(model: str = "resnet-110", root: str | Path | None = None) -> Cifar10H:
    """Load one model's CIFAR-10H outputs; ``root`` defaults to :func:`default_cifar10h_dir`."""
    if model not in CIFAR10H_MODELS:
        raise InputError(
            f"The 'model' parameter of load_cifar10h must be one of {sorted(CIFAR10H_MODELS)}. "
            f"Got {model!r}."
        )
    if root is not None and not isinstance(root, str | os.PathLike):
        raise InputError(f"The 'root' parameter of load_cifar10h is a path. Got {type(root).__name__}.")
    folder = Path(root) if root is not None else default_cifar10h_dir()
    path = folder / CIFAR10H_MODELS[model]
    if not path.is_file():
        raise DataError(
            f"CIFAR-10H file not found: {path}. Pass root= the folder holding the Kerrigan CSVs."
        )
    import pandas as pd

    try:
        table = pd.read_csv(path, header=None).to_numpy(dtype=np.float64)
    except Exception as exc:  # pandas raises many types for a bad file
        raise DataError(f"Cannot read {path} as a CSV: {exc}.") from exc
    if table.shape[1] != 21 or table.shape[0] == 0:
        raise DataError(
            f"{path} should have 21 columns (label, 10 counts, 10 probs); got {table.shape}."
        )
    if model in _ONE_INDEXED_LAST:
        labels = table[:, 20] - 1.0
        counts, probs = table[:, 0:10], table[:, 10:20]
    else:
        labels, counts, probs = table[:, 0], table[:, 1:11], table[:, 11:21]
    if labels.min() < 0 or labels.max() > 9 or not np.all(labels == np.round(labels)):
        raise DataError(f"{path}: the label column should hold labels 0-9 (1-10 if 1-indexed).")
    probs = probs / probs.sum(axis=1, keepdims=True)
    return Cifar10H(probs, labels.astype(np.int64), counts, model)


def sample_human_labels(
    human_counts: NDArray[np.float64], rng: np.random.Generator | int | None = 0
) -> NDArray[np.int64]:
    """One simulated annotator per image: a label drawn with probability ``count / total``.

    CIFAR-10H has about 50 annotators per image; drawing one of their votes at random is a
    human whose accuracy on image ``i`` is the share of votes for the true label.
    """
    from trustlab.stats import check_random_state

    where = "sample_human_labels"
    # finite numbers only: a NaN row used to give label 0 silently, strings numpy's ValueError
    counts = as_float_array(human_counts, "human_counts", where, ndim=2)
    if counts.ndim != 2 or counts.shape[0] == 0 or np.any(counts < 0):
        raise InputError(
            "The 'human_counts' parameter of sample_human_labels must be a non-negative (n, K) "
            f"array. Got shape {counts.shape}."
        )
    totals = counts.sum(axis=1)
    if np.any(totals <= 0):
        raise InputError("Every row of 'human_counts' in sample_human_labels needs a vote.")
    gen = check_random_state(rng, "rng", where)
    cdf = np.cumsum(counts / totals[:, None], axis=1)
    u = gen.uniform(size=(counts.shape[0], 1))
    return np.minimum((u > cdf).sum(axis=1), counts.shape[1] - 1).astype(np.int64)
