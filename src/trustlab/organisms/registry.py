"""Where organisms live, how they are built and cached, and how to load them.

An organism is a directory ``$TRUSTLAB_HOME/organisms/<name>`` (default home
``~/.cache/trustlab``) holding an HF ``save_pretrained`` model and tokenizer and a ``card.json``.
A build happens in a temporary sibling directory that is renamed into place only when complete,
so an interrupted build leaves no half organism; ``card.json`` is written last. A build holds a
file lock (``$TRUSTLAB_HOME/.locks/organism-<name>.lock``) so that processes building the same organism into the
same home (pytest-xdist workers, parallel CLI runs) train it once: the others wait, then reuse it.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from trustlab.core.errors import DataError, InputError
from trustlab.core.io import write_json_atomic
from trustlab.core.paths import cache_lock, trustlab_home
from trustlab.organisms.specs import SPECS, OrganismSpec, get_spec

__all__ = [
    "Progress",
    "build",
    "is_built",
    "list_organisms",
    "load",
    "organism_dir",
    "read_card",
    "trustlab_home",
]

log = logging.getLogger(__name__)

#: ``progress(description, completed, total)``: called as a build advances.
Progress = Callable[[str, int, int], None]


def organism_dir(name: str, home: str | os.PathLike[str] | None = None) -> Path:
    """The cache directory of organism ``name`` (whether or not it is built)."""
    get_spec(name)
    if home is not None and not isinstance(home, str | os.PathLike):
        raise InputError(f"The 'home' parameter must be a path or None. Got {type(home).__name__}.")
    return Path(home or trustlab_home()) / "organisms" / name


def is_built(name: str, home: str | os.PathLike[str] | None = None) -> bool:
    """Whether a complete build of ``name`` is cached."""
    return (organism_dir(name, home) / "card.json").is_file()


def read_card(name: str, home: str | os.PathLike[str] | None = None) -> dict[str, Any]:
    """The ``card.json`` of a built organism."""
    path = organism_dir(name, home) / "card.json"
    if not path.is_file():
        raise DataError(
            f"Organism {name!r} is not built (no {path}). Run: trustlab organisms build {name}"
        )
    try:
        card = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise DataError(
            f"The card {path} is not valid JSON ({exc}). Rebuild with --force."
        ) from exc
    if not isinstance(card, dict):  # list_organisms then failed on card.get
        raise DataError(f"The card {path} is not a JSON object. Rebuild with --force.")
    return card


def list_organisms(home: str | os.PathLike[str] | None = None) -> list[dict[str, Any]]:
    """One row per organism: name, description, built?, parameters and metrics when built."""
    rows = []
    for name, spec in SPECS.items():
        row: dict[str, Any] = {"name": name, "description": spec.description, "built": False}
        if is_built(name, home):
            card = read_card(name, home)
            row.update(built=True, n_params=card.get("n_params"), metrics=card.get("metrics", {}))
            row["build_seconds"] = card.get("build_seconds")
        rows.append(row)
    return rows


def build(
    name: str,
    *,
    force: bool = False,
    home: str | os.PathLike[str] | None = None,
    progress: Progress | None = None,
) -> Path:
    """Build organism ``name`` into the cache (unless cached and not ``force``); return its dir."""
    spec = get_spec(name)
    target = organism_dir(name, home)
    if is_built(name, home) and not force:
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with cache_lock(target, lock=build_lock_file(target)):
        # another process may have finished this build while we waited for the lock
        if is_built(name, home) and not force:
            return target
        return _build_locked(spec, target, progress)


def build_lock_file(target: Path) -> Path:
    """The lock file a build (and anything rewriting the build's card) holds for the organism at
    ``target``: ``<home>/.locks/organism-<name>.lock``, outside the folder of built organisms;
    it holds no state."""
    return target.parent.parent / ".locks" / f"organism-{target.name}.lock"


def _build_locked(spec: OrganismSpec, target: Path, progress: Progress | None) -> Path:
    name = spec.name
    tmp = Path(tempfile.mkdtemp(prefix=f".{name}.building.", dir=target.parent))
    try:
        start = time.perf_counter()
        cpu_start = time.process_time()
        card = _build_into(spec, tmp, progress)
        card["build_seconds"] = time.perf_counter() - start
        card["build_cpu_seconds"] = time.process_time() - cpu_start
        card["targets_met"] = _targets_met(spec, card["metrics"])
        write_json_atomic(tmp / "card.json", card)
        _swap_into_place(tmp, target)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    log.info("built organism %s in %.1f s", name, card["build_seconds"])
    return target


def load(
    name: str,
    *,
    home: str | os.PathLike[str] | None = None,
    build_missing: bool = True,
    progress: Progress | None = None,
    dtype: Any = None,
) -> tuple[Any, Any]:
    """(model, tokenizer) of organism ``name``, building it first when it is not cached.

    Without a ``progress`` callback, a build shows a rich progress bar when stderr is a terminal.
    """
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if get_spec(name).kind == "vision":
        raise InputError(f"Organism {name!r} is an image classifier: use load_vit({name!r}).")
    if not is_built(name, home):
        if not build_missing:
            raise DataError(f"Organism {name!r} is not built. Run: trustlab organisms build {name}")
        with _default_progress(progress) as callback:
            build(name, home=home, progress=callback)
    path = organism_dir(name, home)
    tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
    kwargs = {"dtype": dtype} if dtype is not None else {}
    model = AutoModelForCausalLM.from_pretrained(path, local_files_only=True, **kwargs)
    model.eval()
    return model, tokenizer


# ---------------------------------------------------------------------------------------------


def _targets_met(spec: OrganismSpec, metrics: dict[str, float]) -> dict[str, bool]:
    met = {}
    for metric, (op, threshold) in spec.targets.items():
        value = metrics.get(metric)
        if value is None:
            met[metric] = False
        else:
            met[metric] = value >= threshold if op == ">=" else value <= threshold
    return met


def _swap_into_place(tmp: Path, target: Path) -> None:
    """Rename a finished build over ``target``, moving any old build out of the way first."""
    old = None
    if target.exists():
        old = target.with_name(f".{target.name}.old.{os.getpid()}")
        os.replace(target, old)
    try:
        os.replace(tmp, target)
    except OSError:
        if old is not None and not target.exists():
            os.replace(old, target)
        raise
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def _build_into(spec: OrganismSpec, out: Path, progress: Progress | None) -> dict[str, Any]:
    if spec.kind == "grown":
        from trustlab.organisms.build_grown import build_grown

        card = build_grown(spec, out, progress)
    elif spec.kind == "pretrained":
        from trustlab.organisms.smol import build_smol

        card = build_smol(spec, out, progress)
    elif spec.kind == "vision-language" and (spec.vision or {}).get("projector"):
        from trustlab.organisms.vlm_projector import build_projected_vlm

        card = build_projected_vlm(spec, out, progress)
    elif spec.kind == "vision-language":
        from trustlab.organisms.vlm_build import build_vlm

        card = build_vlm(spec, out, progress)
    elif spec.kind == "vision":
        from trustlab.organisms.vit_build import build_vit

        card = build_vit(spec, out, progress)
    else:  # pragma: no cover - specs are static
        raise InputError(f"Unknown organism kind {spec.kind!r}.")
    card.update(
        name=spec.name,
        description=spec.description,
        spec=spec.to_dict(),
        seed=spec.seed,
        created_utc=datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        versions=_versions(),
        hardware=hardware_fingerprint(),  # the CPU kernel decides the bits (docs/organisms.md)
    )
    return card


def hardware_fingerprint() -> dict[str, Any]:
    from trustlab.finetune.loop import hardware_fingerprint as fingerprint

    return fingerprint()


def _versions() -> dict[str, str]:
    import tokenizers
    import torch
    import transformers

    from trustlab import __version__

    return {
        "trustlab": __version__,
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "tokenizers": tokenizers.__version__,
        "python": sys.version.split()[0],
    }


@contextlib.contextmanager
def _default_progress(progress: Progress | None) -> Iterator[Progress | None]:
    """``progress`` itself, or a rich bar on a terminal, or nothing."""
    if progress is not None or not sys.stderr.isatty():
        yield progress
        return
    from rich.progress import BarColumn, TextColumn, TimeElapsedColumn
    from rich.progress import Progress as RichProgress

    with RichProgress(
        TextColumn("{task.description}"), BarColumn(), TimeElapsedColumn(), transient=True
    ) as bar:
        tasks: dict[str, Any] = {}

        def callback(description: str, completed: int, total: int) -> None:
            if description not in tasks:
                tasks[description] = bar.add_task(description, total=total)
            bar.update(tasks[description], completed=completed, total=total)

        yield callback
