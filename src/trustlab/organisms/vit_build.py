"""``vit-xs``: a small Vision Transformer trained on a generated image-classification task.

A ``transformers`` ``ViTForImageClassification`` (config in ``spec.vision``) is trained from
scratch on :func:`trustlab.vision.classification_set` (``task``: which shape; random colours,
sizes, positions, rotations, backgrounds and noise are nuisances) and evaluated on held-out
images drawn from another seed. A second generated task (``downstream``: how many objects) is
its fine-tuning target (gmu's ViT experiments): :func:`vit_task_data` gives both, and the card
records the downstream task, its classes and its chance level. Saved as a ``save_pretrained``
folder with a ``ViTImageProcessor`` (rescale 1/255, normalise to [-1, 1], no resize), so
``AutoModelForImageClassification`` and ``AutoImageProcessor`` load it as any HF ViT.
"""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch.nn import functional as F

from trustlab.core.errors import DataError, InputError
from trustlab.core.runtime import torch_runtime
from trustlab.organisms.specs import OrganismSpec

__all__ = ["VIT_DEFAULTS", "build_vit", "load_vit", "vit_task_data"]

#: Defaults of ``spec.vision`` for vision (classifier) organisms.
VIT_DEFAULTS: dict[str, Any] = {
    "task": "shape",
    "downstream": "count",
    "image_size": 32,
    "patch_size": 8,
    "hidden_size": 64,
    "num_hidden_layers": 3,
    "num_attention_heads": 4,
    "intermediate_size": 128,
    "n_train": 4000,
    "n_heldout": 500,
}
_TRAIN_SEED, _HELDOUT_SEED = 0, 1  # classification_set seeds of the two splits


def vit_task_data(task: str, split: str, n: int, *, size: int = 32) -> tuple[torch.Tensor, torch.Tensor]:
    """``(pixels [n, 3, size, size] in [-1, 1], labels [n])`` of a generated task
    (``"shape"``, ``"count"``, ``"colour"``, ``"position"``); ``split`` ``"train"`` or
    ``"heldout"`` (another seed: no image is shared)."""
    from trustlab.vision import classification_set

    if split not in ("train", "heldout"):
        raise InputError(f"The 'split' parameter must be 'train' or 'heldout'. Got {split!r}.")
    data = classification_set(task, n, seed=_TRAIN_SEED if split == "train" else _HELDOUT_SEED,
                              size=size)  # fmt: skip
    pixels = torch.from_numpy(data.images).permute(0, 3, 1, 2).float().div_(127.5).sub_(1.0)
    return pixels, torch.from_numpy(data.labels)


def _accuracy(model: Any, x: torch.Tensor, y: torch.Tensor, batch: int = 250) -> float:
    model.eval()
    with torch.no_grad():
        hits = sum(int((model(pixel_values=x[i : i + batch]).logits.argmax(-1) == y[i : i + batch]).sum())
                   for i in range(0, len(y), batch))  # fmt: skip
    return hits / len(y)


def build_vit(spec: OrganismSpec, out: Path, progress: Any = None) -> dict[str, Any]:
    """Build ``spec`` (kind ``vision``) into ``out`` and return its card."""
    from transformers import ViTConfig, ViTForImageClassification, ViTImageProcessor

    from trustlab.vision.generator import CLASSIFICATION_TASKS

    assert spec.train is not None
    s = {**VIT_DEFAULTS, **(spec.vision or {})}
    train = spec.train
    start = time.process_time()
    with torch_runtime(train.threads, deterministic=True):
        x, y = vit_task_data(s["task"], "train", s["n_train"], size=s["image_size"])
        xh, yh = vit_task_data(s["task"], "heldout", s["n_heldout"], size=s["image_size"])
        t_data = time.process_time() - start
        classes = CLASSIFICATION_TASKS[s["task"]]
        config = ViTConfig(
            image_size=s["image_size"], patch_size=s["patch_size"], num_channels=3,
            hidden_size=s["hidden_size"], num_hidden_layers=s["num_hidden_layers"],
            num_attention_heads=s["num_attention_heads"], intermediate_size=s["intermediate_size"],
            hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, num_labels=len(classes),
            id2label=dict(enumerate(classes)), label2id={c: i for i, c in enumerate(classes)},
        )  # fmt: skip
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(spec.seed)
            model = ViTForImageClassification(config)
        generator = torch.Generator().manual_seed(spec.seed)
        opt = torch.optim.AdamW(model.parameters(), lr=train.lr, weight_decay=train.weight_decay)
        model.train()
        losses = []
        for step in range(train.steps):
            warm = min(1.0, (step + 1) / max(1, train.warmup))
            for g in opt.param_groups:
                g["lr"] = train.lr * warm * (0.05 + 0.95 * 0.5 * (1 + math.cos(math.pi * step / train.steps)))
            idx = torch.randint(len(y), (train.batch_size,), generator=generator)
            xb = x[idx]
            flip = torch.rand(train.batch_size, generator=generator) < 0.5  # shapes are mirror-symmetric
            xb = torch.where(flip[:, None, None, None], xb.flip(3), xb)
            loss = F.cross_entropy(model(pixel_values=xb).logits, y[idx])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            losses.append(float(loss.detach()))
            if progress is not None and (step % 20 == 0 or step == train.steps - 1):
                progress("training", step + 1, train.steps)
        t_train = time.process_time() - start
        accuracy = _accuracy(model, xh, yh)
        train_accuracy = _accuracy(model, x[: s["n_heldout"]], y[: s["n_heldout"]])
    model.save_pretrained(out)
    ViTImageProcessor(do_resize=False, do_rescale=True, rescale_factor=1 / 255, do_normalize=True,
                      image_mean=[0.5] * 3, image_std=[0.5] * 3).save_pretrained(out)  # fmt: skip
    downstream = CLASSIFICATION_TASKS[s["downstream"]]
    return {
        "kind": "vision",
        "architecture": "ViTForImageClassification",
        "n_params": sum(p.numel() for p in model.parameters()),
        "task": {"name": s["task"], "classes": list(classes), "n_train": s["n_train"],
                 "n_heldout": s["n_heldout"], "train_seed": _TRAIN_SEED,
                 "heldout_seed": _HELDOUT_SEED, "image_size": s["image_size"]},
        "downstream": {"name": s["downstream"], "classes": list(downstream),
                       "chance": 1 / len(downstream),
                       "data": "trustlab.organisms.vit_build.vit_task_data"},
        "vision_settings": s,
        "training": {
            "data_cpu_seconds": t_data,
            "train_cpu_seconds": t_train - t_data,
            "final_loss": float(np.mean(losses[-max(1, train.steps // 10) :])),
            "steps": train.steps,
        },
        "metrics": {"heldout_accuracy": accuracy, "train_accuracy": train_accuracy,
                    "chance": 1 / len(classes)},
    }


def load_vit(name_or_path: str | Path = "vit-xs", *, home: Any = None) -> tuple[Any, Any]:
    """``(ViTForImageClassification, ViTImageProcessor)`` of a vision organism (built first
    when not cached) or of a folder."""
    from transformers import AutoImageProcessor, AutoModelForImageClassification

    from trustlab.organisms.registry import _default_progress, build, is_built, organism_dir
    from trustlab.organisms.specs import SPECS

    if isinstance(name_or_path, str) and name_or_path in SPECS:
        if SPECS[name_or_path].kind != "vision":
            raise InputError(f"{name_or_path} is not an image classifier (use trustlab.lm.load).")
        if not is_built(name_or_path, home):
            with _default_progress(None) as progress:
                build(name_or_path, home=home, progress=progress)
        path = organism_dir(name_or_path, home)
    else:
        path = Path(name_or_path)
    if not (path / "config.json").is_file():
        raise DataError(f"{path} holds no image classifier (no config.json).")
    model = AutoModelForImageClassification.from_pretrained(path, local_files_only=True).eval()
    return model, AutoImageProcessor.from_pretrained(path, local_files_only=True)
