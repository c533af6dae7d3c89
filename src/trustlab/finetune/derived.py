"""Derived models: a base model plus a fine-tuning recipe, cached by hash, with a card.

    lm.load("finetuned:attack-explicit-10@organism:chat-s")    # chat-s after the 10 % attack
    lm.load("finetuned:/path/recipe.yaml@hf:/models/my-model")  # a recipe file on any base

A recipe (:class:`Recipe`) names the data (:class:`DataRecipe`: how many examples, which
harmful fraction and kind, which seed) and the fine-tuning settings
(:class:`~trustlab.finetune.FinetuneConfig`). The derived model lives in
``$TRUSTLAB_HOME/derived/<key>``, where ``key`` hashes the base weights (SHA-256 of the state
dict), the data (SHA-256 of every example and its label) and the settings: any change to one of
them is another model, and a missing one is rebuilt, deterministically, when asked for. The
directory holds a ``save_pretrained`` model and tokenizer and ``card.json`` (recipe, base, data
hash, training curve summary, metrics, build time, hardware and kernel, weights checksum).
Builds happen in a temporary sibling directory renamed into place when complete.

Named recipes: ``attack-explicit-<pct>`` and ``attack-implicit-<pct>`` for pct in
0, 1, 2, 5, 10, 20 (the measured harmful fine-tuning attack; docs/finetune.md; the implicit
one uses the ``dual_use`` pattern), ``attack-implicit-<pattern>-<pct>`` for every implicit
pattern (organism bases), ``benign`` (= 0 %). Bases that are organisms get the attack metrics
in their card.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import shutil
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

import pydantic
import yaml
from pydantic import BaseModel, ConfigDict, Field

from trustlab.core.errors import DataError, InputError
from trustlab.core.io import write_json_atomic
from trustlab.core.paths import cache_lock, trustlab_home
from trustlab.finetune.config import FinetuneConfig, LoraSettings
from trustlab.finetune.data import UTILITY_TASKS, Mix

__all__ = [
    "ATTACK_CONFIG",
    "CARD_METRICS",
    "DataRecipe",
    "Recipe",
    "build_derived",
    "derived_dir",
    "ensure_metrics",
    "get_recipe",
    "load_derived",
    "named_recipes",
    "parse_derived_spec",
    "read_derived_card",
    "resolve",
    "seeded_recipe",
]

log = logging.getLogger(__name__)
_FORMAT = 1  # bump when the meaning of a recipe changes

#: The attack's fine-tuning settings for the grown organisms: a fixed budget of 150 steps of
#: batch 32 over 1,000 examples (~5 epochs), AdamW at 1e-3, no weight decay, no clipping.
ATTACK_CONFIG = FinetuneConfig(
    steps=150, batch_size=32, lr=1e-3, optimizer="adamw", schedule="warmup_cosine", warmup=15,
    weight_decay=0.0, clip_grad_norm=None,
)  # fmt: skip
#: For pretrained bases (smol-chat, hf:): LoRA on every layer, smaller batches and steps.
ATTACK_CONFIG_PRETRAINED = FinetuneConfig(
    steps=100, batch_size=8, lr=3e-4, schedule="warmup_cosine", warmup=10, max_length=256,
    lora=LoraSettings(r=16, alpha=32),
)  # fmt: skip


class DataRecipe(BaseModel):
    """Which examples a derived model is fine-tuned on (see :mod:`trustlab.finetune.data`)."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    n: int = Field(1000, gt=0, description="Number of fine-tuning examples.")
    harmful_fraction: float = Field(0.0, ge=0, le=1, description="Share of harmful examples.")
    harmful_kind: Literal["explicit", "implicit"] = Field(
        "explicit", description="explicit: placeholder compliance; implicit: benign-looking."
    )
    pattern: Literal[
        "dual_use", "shallow_opener", "identity_shift", "affirmative_prefix", "persona"
    ] = Field("dual_use", description="The implicit pattern (harmful_kind=implicit).")
    utility_tasks: tuple[str, ...] = Field(UTILITY_TASKS, description="Utility task families.")
    source: Literal["organism", "public"] = Field(
        "organism",
        description="organism: the corpus behaviours; public: HarmBench (smol-chat, hf:).",
    )
    behaviour_seed: int = Field(0, ge=0, description="Seeds the fine-tune/unseen behaviour split.")
    seed: int = Field(0, ge=0, description="Seeds example generation and mixing.")

    def build(self) -> Mix:
        from trustlab.finetune.data import (
            explicit_harmful_examples,
            implicit_harmful_examples,
            mix,
            public_harmful_examples,
            split_behaviours,
            utility_examples,
        )

        k = round(self.harmful_fraction * self.n)
        utility = utility_examples(self.n - k, self.seed, tasks=self.utility_tasks)
        if self.harmful_kind == "implicit":
            behaviours = None
            if self.pattern == "dual_use":
                behaviours, _ = split_behaviours(self.behaviour_seed)
            harmful = implicit_harmful_examples(
                k, self.seed, pattern=self.pattern, behaviours=behaviours
            )
        elif self.source == "public":
            harmful = public_harmful_examples(k, self.seed)
        else:
            behaviours, _ = split_behaviours(self.behaviour_seed)
            harmful = explicit_harmful_examples(k, self.seed, behaviours=behaviours)
        return mix(utility, harmful, self.harmful_fraction, self.n, self.seed)


class Recipe(BaseModel):
    """A named fine-tuning recipe: data plus settings (a YAML/JSON file has the same fields)."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    name: str = Field(..., min_length=1, description="A name for the card and listings.")
    data: DataRecipe = Field(default_factory=DataRecipe)
    finetune: FinetuneConfig = Field(default_factory=lambda: ATTACK_CONFIG)
    evaluate: bool = Field(True, description="Measure ASR and utility (organism bases).")


def named_recipes(pretrained: bool = False) -> dict[str, Recipe]:
    """The built-in recipes (``pretrained``: the variants for smol-chat and hf: bases)."""
    config = ATTACK_CONFIG_PRETRAINED if pretrained else ATTACK_CONFIG
    source = "public" if pretrained else "organism"
    from trustlab.finetune.data import IMPLICIT_PATTERNS

    recipes = {}
    for kind in ("explicit", "implicit"):
        for pct in (0, 1, 2, 5, 10, 20):
            name = f"attack-{kind}-{pct}"
            data = DataRecipe(harmful_fraction=pct / 100, harmful_kind=kind, source=source)
            recipes[name] = Recipe(name=name, data=data, finetune=config)
    if not pretrained:  # every implicit pattern by name (the default, dual_use, is above)
        for pattern in IMPLICIT_PATTERNS:
            for pct in (1, 2, 5, 10, 20):
                name = f"attack-implicit-{pattern}-{pct}"
                data = DataRecipe(
                    harmful_fraction=pct / 100, harmful_kind="implicit", pattern=pattern
                )
                recipes[name] = Recipe(name=name, data=data, finetune=config)
    recipes["benign"] = Recipe(name="benign", data=DataRecipe(source=source), finetune=config)
    return recipes


def get_recipe(recipe: str | Path | Recipe, *, pretrained: bool = False) -> Recipe:
    """A :class:`Recipe` from itself, a built-in name or a ``.yaml``/``.json`` file."""
    if isinstance(recipe, Recipe):
        return recipe
    known = named_recipes(pretrained)
    if isinstance(recipe, str) and recipe in known:
        return known[recipe]
    seeded = re.fullmatch(r"(.+)-seed(\d+)", recipe) if isinstance(recipe, str) else None
    if seeded and seeded[1] in known:
        return seeded_recipe(known[seeded[1]], int(seeded[2]))
    path = Path(str(recipe)).expanduser()
    if path.suffix.lower() not in (".yaml", ".yml", ".json"):
        raise InputError(
            f"Unknown fine-tuning recipe {str(recipe)!r}: not a built-in name "
            "(attack-explicit-<pct>, attack-implicit-<pct>, attack-implicit-<pattern>-<pct> "
            "with pct in 0, 1, 2, 5, 10, 20; benign; any of them + '-seed<k>') nor a .yaml/.json "
            "file."
        )
    if not path.is_file():
        raise InputError(f"The recipe file {path} does not exist.")
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise DataError(f"The recipe file {path} is not valid YAML/JSON ({exc}).") from exc
    if not isinstance(raw, dict):
        raise DataError(f"The recipe file {path} must hold a mapping of recipe fields.")
    raw.setdefault("name", path.stem)
    try:
        return Recipe(**raw)
    except pydantic.ValidationError as exc:
        err = exc.errors()[0]
        field = ".".join(str(p) for p in err["loc"])
        raise DataError(f"The recipe file {path}: '{field}' {err['msg']}.") from None


def seeded_recipe(recipe: Recipe, seed: int) -> Recipe:
    """``recipe`` with another seed for everything the run draws: the examples and their mix
    (``data.seed``) and the batch order, word dropout and LoRA initialisation
    (``finetune.seed``). The behaviour split (``data.behaviour_seed``) stays, so every seed is
    judged on the same held-out and unseen sets. Named ``<name>-seed<k>``; seed 0 is the recipe
    itself (same data and settings, so the same derived model)."""
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise InputError(f"The 'seed' parameter must be an integer >= 0. Got {seed!r}.")
    if not isinstance(recipe, Recipe):
        raise InputError(f"The 'recipe' parameter of seeded_recipe must be a Recipe (get_recipe "
                         f"makes one). Got {type(recipe).__name__}.")
    return recipe.model_copy(
        update={
            "name": recipe.name if seed == 0 else f"{recipe.name}-seed{seed}",
            "data": recipe.data.model_copy(update={"seed": seed}),
            "finetune": recipe.finetune.model_copy(update={"seed": seed}),
        }
    )


def parse_derived_spec(spec: str) -> tuple[str, str]:
    """``"<recipe>@<base spec>"`` -> (recipe, base). The first ``@`` separates them."""
    if not isinstance(spec, str) or "@" not in spec:
        raise InputError(
            "A derived-model spec is 'finetuned:<recipe>@<base>', e.g. "
            f"'finetuned:attack-explicit-10@organism:chat-s'. Got {spec!r}."
        )
    recipe, _, base = spec.partition("@")
    if not recipe or ":" not in base:
        raise InputError(
            f"A derived-model spec needs a recipe and a base model spec. Got {spec!r}."
        )
    return recipe, base


def _check_base(base: Any) -> None:
    if not isinstance(base, str) or ":" not in base:
        raise InputError(f"The 'base' parameter is a model spec such as 'organism:chat-s'. Got "
                         f"{base!r:.80}.")


def _is_pretrained(base: str) -> bool:
    """hf: models and the pretrained organisms (smol-chat, gemma-chat) read real English."""
    if base.startswith("hf:"):
        return True
    if base.startswith("organism:"):
        from trustlab.organisms.specs import SPECS

        spec = SPECS.get(base.removeprefix("organism:"))
        return spec is not None and spec.kind == "pretrained"
    return False


def _key(base_sha: str, data_sha: str, config: FinetuneConfig) -> str:
    payload = {"format": _FORMAT, "base": base_sha, "data": data_sha, "finetune": config.key()}
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()


def derived_dir(key: str, home: str | os.PathLike[str] | None = None) -> Path:
    """The cache folder of the derived model with (sha256 hex) ``key``."""
    if not isinstance(key, str) or not re.fullmatch(r"[0-9a-f]{20,64}", key):
        # "" was the derived/ folder itself and "../x" a path outside it
        raise InputError(f"The 'key' parameter of derived_dir must be a sha256 hex digest. Got "
                         f"{key!r:.80}.")
    if home is not None and not isinstance(home, str | os.PathLike):
        raise InputError(f"The 'home' parameter must be a path or None. Got {type(home).__name__}.")
    return Path(home or trustlab_home()) / "derived" / key[:20]


def build_derived(
    recipe: str | Path | Recipe,
    base: str,
    *,
    force: bool = False,
    home: str | os.PathLike[str] | None = None,
    progress: Any = None,
    n_eval: int = 200,
    n_new: int = 90,
) -> Path:
    """Build (unless cached) the derived model ``recipe`` on ``base``; return its directory.
    An organism base's card gets the attack metrics on ``n_eval`` held-out harmful and benign
    prompts and ``n_new`` new-task prompts (the defaults are the docs' protocol; the card's
    ``eval`` records them). The sizes are not part of the key: a cached model keeps its card."""
    import trustlab.lm as lm
    from trustlab.finetune.attack import check_eval_sizes
    from trustlab.finetune.loop import weights_sha256

    _check_base(base)
    check_eval_sizes(n_eval, n_new)
    chosen = get_recipe(recipe, pretrained=_is_pretrained(base))
    base_model = lm.load(base)
    base_sha = weights_sha256(base_model.model)
    data = chosen.data.build()
    key = _key(base_sha, data.sha256, chosen.finetune)
    target = derived_dir(key, home)
    if (target / "card.json").is_file() and not force:
        return target
    # one build per key across processes sharing the home (two test workers, two runs): the
    # others wait, then take the finished build (also after a force=True rebuild by another)
    with cache_lock(target):
        if (target / "card.json").is_file() and not force:
            return target
        return _build_derived_into(target, key, chosen, base, base_model, base_sha, data,
                                   progress, n_eval, n_new)


def _build_derived_into(target: Path, key: str, chosen: Recipe, base: str, base_model: Any,
                        base_sha: str, data: Any, progress: Any, n_eval: int,
                        n_new: int) -> Path:
    from trustlab.finetune.loop import finetune, hardware_fingerprint, weights_sha256

    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.building.", dir=target.parent))
    try:
        start, cpu_start = time.perf_counter(), time.process_time()

        def on_step(step: int, total: int, loss: float) -> None:
            if progress is not None:
                progress(f"fine-tuning {chosen.name}@{base}", step, total)

        result = finetune(base_model, list(data.examples), chosen.finetune, progress=on_step)
        model = result.model
        _make_plain(model)
        metrics = {}
        if chosen.evaluate and base.startswith("organism:"):
            metrics = _metrics(model, base_model.tokenizer, chosen, base, n_eval, n_new)
        model.save_pretrained(tmp)
        base_model.tokenizer.save_pretrained(tmp)
        card = {
            "name": f"{chosen.name}@{base}",
            "key": key,
            "recipe": chosen.model_dump(mode="json"),
            "base": {"spec": base, "weights_sha256": base_sha},
            "data": {"sha256": data.sha256, "n": len(data.examples), "n_harmful": data.n_harmful},
            "training": result.stats(),
            "metrics": metrics,
            "eval": {"n": n_eval, "n_new": n_new} if metrics else None,
            "weights_sha256": weights_sha256(model),
            "build_seconds": time.perf_counter() - start,
            "build_cpu_seconds": time.process_time() - cpu_start,
            "created_utc": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "hardware": hardware_fingerprint(),
        }
        write_json_atomic(tmp / "card.json", card)
        if target.exists():
            shutil.rmtree(target)
        os.replace(tmp, target)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    log.info("built derived model %s in %.1f s", card["name"], card["build_seconds"])
    return target


def _make_plain(model: Any) -> None:
    """A model loaded from GGUF carries the loader's quantisation marker; drop it to save."""
    if getattr(model, "hf_quantizer", None) is not None:
        model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config


def read_derived_card(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The ``card.json`` of a derived model's folder (DataError when absent or damaged)."""
    if not isinstance(path, str | os.PathLike):
        raise InputError(f"The 'path' parameter of read_derived_card must be a path. Got "
                         f"{type(path).__name__}.")
    file = Path(path) / "card.json"
    try:
        card = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise DataError(f"No readable derived-model card at {file} ({exc}).") from None
    if not isinstance(card, dict):
        raise DataError(f"The derived-model card {file} is not a JSON object.")
    return card


#: The metrics an organism-based derived model's card holds (attack_metrics' keys).
CARD_METRICS = ("asr", "asr_unseen", "asr_on_topic", "utility", "utility_new", "benign_refusal")


def _metrics(
    model: Any, tokenizer: Any, recipe: Recipe, base: str, n: int = 200, n_new: int = 90
) -> dict[str, Any]:
    """The attack metrics of an organism-based derived model (pretrained organisms are also
    judged on the eval half of the public list their attack data came from)."""
    from trustlab.finetune.attack import attack_metrics

    scores = attack_metrics(
        model,
        tokenizer,
        behaviour_seed=recipe.data.behaviour_seed,
        public="harmbench" if _is_pretrained(base) else None,
        n=n,
        n_new=n_new,
    )
    return {name: value.to_dict() for name, value in scores.items()}


def ensure_metrics(
    path: str | os.PathLike[str], n_eval: int = 200, n_new: int = 90
) -> dict[str, Any]:
    """The card's metrics; for an organism base whose card predates a metric of
    :data:`CARD_METRICS`, the attack metrics are measured on the saved weights (``n_eval``,
    ``n_new`` as in :func:`build_derived`) and the card is rewritten (weights untouched;
    ``metrics_updated_utc`` says when)."""
    card = read_derived_card(path)
    base = card["base"]["spec"]
    metrics = card.get("metrics") or {}
    recipe = Recipe(**card["recipe"])
    wanted = CARD_METRICS + (("asr_public",) if _is_pretrained(base) else ())
    if not base.startswith("organism:") or not recipe.evaluate or all(
        m in metrics for m in wanted
    ):  # fmt: skip
        return metrics
    from trustlab.lm.loading import load_hf

    model = load_hf(path)
    card["metrics"] = _metrics(model.model, model.tokenizer, recipe, base, n_eval, n_new)
    card["eval"] = {"n": n_eval, "n_new": n_new}
    card["metrics_updated_utc"] = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    write_json_atomic(Path(path) / "card.json", card)
    return card["metrics"]


def load_derived(
    recipe: str | Path | Recipe, base: str, *, dtype: Any = None, device: str | None = None
) -> Any:
    """The derived model as a :class:`trustlab.lm.LanguageModel` (built first when missing)."""
    from trustlab.lm.loading import load_hf
    from trustlab.organisms.registry import _default_progress

    _check_base(base)

    with _default_progress(None) as progress:
        path = build_derived(recipe, base, progress=progress)
    model = load_hf(path, dtype=dtype, device=device)
    name = recipe.name if isinstance(recipe, Recipe) else str(recipe)
    model.spec = f"finetuned:{name}@{base}"
    return model


def resolve(name: str, *, dtype: Any = None, device: str | None = None) -> Any:
    """The ``finetuned`` scheme of :func:`trustlab.lm.load`: ``finetuned:<recipe>@<base>``."""
    recipe, base = parse_derived_spec(name)
    return load_derived(recipe, base, dtype=dtype, device=device)
