"""`trustlab run sae-idempotency`: SAE architectures × idempotency-loss weights λ on LM activations.

Residual activations of an organism (default ``chat-s``, middle layer; ``--quick``: ``chat-xs``
when it is already built, else synthetic sparse activations, said in the report) or of a file
the user gives are scaled to E‖x‖² = d_in, split into train/eval tokens, and an SAE of every
architecture is trained at every λ. Reported per (architecture, λ): FVU, L0, dead latents,
delta-loss, re-encoding error, active-set Jaccard, per-latent reliability and scale sensitivity;
plus the norm-trajectory plot and the idempotency-vs-FVU Pareto plot.
"""

from __future__ import annotations

import contextlib
from dataclasses import asdict, replace
from typing import Any, ClassVar, Literal

import numpy as np
import torch
from pydantic import Field, field_validator, model_validator

from trustlab.core import ExperimentConfig, Report, RunContext, register
from trustlab.core.errors import ConfigError
from trustlab.core.figures import add_alt_text, new_figure
from trustlab.core.runtime import Threads, torch_runtime
from trustlab.methods.sae_idempotency.idempotency import diagnose
from trustlab.methods.sae_idempotency.io import load_activations, load_saelens
from trustlab.methods.sae_idempotency.metrics import (
    dead_latent_fraction,
    delta_loss,
    fraction_of_variance_unexplained,
    l0,
    reconstruct,
)
from trustlab.methods.sae_idempotency.synthetic import sparse_feature_data
from trustlab.methods.sae_idempotency.train import SAETrainer, TrainConfig, normalization_scale

ArchName = Literal["relu", "topk", "batchtopk", "jumprelu"]

#: The experiment's training defaults (the library's, with a smaller dictionary and run).
_TRAIN = TrainConfig(d_sae=384, k=8, n_steps=800)


class SAEIdempotencyConfig(ExperimentConfig):
    source: Literal["model", "model_if_built", "file", "synthetic"] = Field(
        "model",
        description="Activations from `model` (built if missing), from `model` only when it is "
        "already built (else synthetic), from `activations_file`, or synthetic sparse data.",
    )
    model: str = Field("organism:chat-s", description="LM spec whose residual stream is read.")
    layer: int | None = Field(
        None, ge=0, description="Block whose resid_post is read (default: (n_layers - 1) // 2)."
    )
    n_prompts: int = Field(
        1200, ge=8, description="Chat-corpus conversations run through the model for tokens."
    )
    activations_file: str | None = Field(
        None, description="A .pt/.npy/.safetensors file of activations [..., d] (source=file)."
    )
    activations_key: str | None = Field(
        None, description="Tensor name inside the activations file when it holds several."
    )
    external_sae: str | None = Field(
        None,
        description="An SAELens-layout folder to audit on the same (unscaled) eval activations.",
    )
    architectures: list[ArchName] = Field(
        ["relu", "topk", "batchtopk", "jumprelu"], min_length=1, description="SAE architectures."
    )
    lambdas: list[float] = Field(
        [0.0, 1.0, 10.0], min_length=1, description="Idempotency-loss weights λ (0 = none)."
    )
    train: TrainConfig = Field(
        _TRAIN, description="SAE training (TrainConfig: d_sae, k, l1_coefficient, "
        "l0_coefficient, bandwidth, initial_threshold, sparsity_warmup_fraction, "
        "unit_norm_decoder, auxk_alpha, auxk_k, dead_after, idempotency_grad, lr, batch_size, "
        "n_steps, grad_clip, log_every); architecture and idempotency_lambda are set per cell "
        "from 'architectures' and 'lambdas'."
    )
    eval_fraction: float = Field(
        0.2, gt=0.0, lt=1.0, description="Share of tokens held out for every metric."
    )
    max_eval_tokens: int = Field(4000, ge=10, description="Cap on held-out tokens evaluated.")
    n_iter: int = Field(10, ge=2, description="Iterations of x ↦ D(E(x)) in the norm trajectory.")
    rel_tol: float = Field(
        0.2, ge=0.0, description="Relative tolerance of per-latent reliability (|z'−z| ≤ tol·z)."
    )
    scales: list[float] = Field(
        [0.5, 0.8, 1.25, 2.0], min_length=1, description="Input scales c of scale sensitivity."
    )
    delta_loss_prompts: int = Field(
        64, ge=0, description="Prompts for delta-loss (0 = skip; needs a model source)."
    )
    synthetic_features: int = Field(
        256, ge=2, description="Ground-truth features of the synthetic source."
    )
    synthetic_d: int = Field(64, ge=2, description="Width of the synthetic activations.")
    synthetic_tokens: int = Field(20000, ge=100, description="Tokens of the synthetic source.")
    threads: Threads = Field(1, description="torch CPU threads (fixed for determinism).")

    QUICK: ClassVar[dict[str, Any]] = {
        "source": "synthetic",  # deterministic and independent of the organism cache
        "model": "organism:chat-xs",
        "n_prompts": 300,
        "lambdas": [0.0, 3.0],
        "train": {"d_sae": 128, "n_steps": 80},
        "max_eval_tokens": 500,
        "delta_loss_prompts": 24,
        "synthetic_tokens": 3000,
    }

    @model_validator(mode="before")
    @classmethod
    def _nested_defaults(cls, data: Any) -> Any:
        """A partial 'train' mapping (--set train.lr=1e-3, the quick preset) fills in from the
        experiment's defaults, not the library's."""
        if isinstance(data, dict) and isinstance(data.get("train"), dict):
            data = {**data, "train": {**asdict(_TRAIN), **data["train"]}}
        return data

    @model_validator(mode="after")
    def _cross_checks(self) -> SAEIdempotencyConfig:
        if self.train.architecture != _TRAIN.architecture or self.train.idempotency_lambda:
            raise ValueError("architecture and λ are chosen per cell: set 'architectures' and "
                             "'lambdas', not 'train.architecture' or 'train.idempotency_lambda'")
        if self.source == "file" and not self.activations_file:
            raise ValueError("source=file needs activations_file=<path>")
        return self

    @field_validator("lambdas")
    @classmethod
    def _nonnegative(cls, v: list[float]) -> list[float]:
        if any(x < 0 for x in v):
            raise ValueError(f"every λ must be >= 0; got {v}")
        return sorted(set(v))

    @field_validator("scales")
    @classmethod
    def _positive(cls, v: list[float]) -> list[float]:
        if any(x <= 0 for x in v):
            raise ValueError(f"every scale must be > 0; got {v}")
        return v


def _prompts(n: int, seed: int) -> list[str]:
    """``n`` chat-corpus conversations: the corpus is generated from ``seed`` (the run's
    ``--seed``; seed 0 is the corpus the organisms were trained on) and sampled with it."""
    from trustlab.organisms import build_chat_corpus, format_chat

    corpus = build_chat_corpus(seed=seed, n_train=max(100, n))
    examples = corpus.train
    order = np.random.default_rng(seed).permutation(len(examples))[:n]
    return [
        format_chat([{"role": "user", "content": examples[i].prompt}]) + examples[i].response
        for i in order
    ]


def _activations(config: SAEIdempotencyConfig, ctx: RunContext) -> dict[str, Any]:
    """Raw activations [n, d] plus what produced them (model, site, prompts, description)."""
    source = config.source
    if source == "model_if_built":
        name = config.model.removeprefix("organism:")
        built = False
        if config.model.startswith("organism:"):
            from trustlab.organisms import is_built

            with contextlib.suppress(Exception):
                built = is_built(name)
        source = "model" if built else "synthetic"
        if not built:
            ctx.report.note(
                f"{config.model} is not built on this machine, so this quick run used synthetic "
                "sparse activations (build it with `trustlab organisms build "
                f"{name}` to use real ones; the first build takes about a minute)."
            )
    if source == "file":
        x = load_activations(config.activations_file, config.activations_key)
        return {"x": x, "desc": f"activations from {config.activations_file}", "model": None}
    if source == "synthetic":
        data = sparse_feature_data(
            config.synthetic_tokens,
            config.synthetic_d,
            config.synthetic_features,
            p_active=min(1.0, 2.0 * config.train.k / config.synthetic_features),
            noise=0.01,
            generator=ctx.torch_generator("synthetic"),
        )
        return {
            "x": data.x,
            "desc": f"synthetic: {config.synthetic_features} random unit features in "
            f"{config.synthetic_d} dims, each firing with probability "
            f"{min(1.0, 2.0 * config.train.k / config.synthetic_features):.3f}, magnitudes "
            "U(0.5, 1.5), "
            "noise std 0.01",
            "model": None,
        }
    from trustlab import lm

    model = lm.load(config.model)
    layer = config.layer if config.layer is not None else (model.n_layers - 1) // 2
    if layer >= model.n_layers:
        raise ConfigError(
            f"layer must be < n_layers={model.n_layers} of {config.model}. Got {layer}."
        )
    site = f"blocks.{layer}.resid_post"
    prompts = _prompts(config.n_prompts, ctx.seed)
    acts = lm.token_activations(model, prompts, site, "all", batch_size=32, progress=ctx.progress)
    x = acts.acts[:, 0, :]
    return {
        "x": x,
        "desc": f"{config.model} {site}, every token of {len(prompts)} chat-corpus conversations",
        "model": model,
        "site": site,
        "prompts": prompts,
    }


def _train_config(config: SAEIdempotencyConfig, arch: str, lam: float) -> TrainConfig:
    return replace(config.train, architecture=arch, idempotency_lambda=lam)


def _row(sae: Any, x_eval: torch.Tensor, config: SAEIdempotencyConfig) -> tuple[dict, Any]:
    z, x_hat = reconstruct(sae, x_eval)
    diag = diagnose(sae, x_eval, n_iter=config.n_iter, rel_tol=config.rel_tol, scales=config.scales)
    row = {
        "fvu": fraction_of_variance_unexplained(x_eval, x_hat),
        "l0": l0(z),
        "dead": dead_latent_fraction(z),
    }
    row.update(diag.as_row())
    return row, diag


@register("sae-idempotency", config=SAEIdempotencyConfig)
def run(config: SAEIdempotencyConfig, ctx: RunContext) -> Report:
    report = ctx.report
    with torch_runtime(config.threads, deterministic=True):
        with ctx.stage("activations"):
            src = _activations(config, ctx)
        x_raw = src["x"]
        perm = torch.randperm(x_raw.shape[0], generator=ctx.torch_generator("split"))
        n_eval = max(10, round(config.eval_fraction * x_raw.shape[0]))
        eval_idx, train_idx = perm[:n_eval][: config.max_eval_tokens], perm[n_eval:]
        scale = normalization_scale(x_raw[train_idx])
        x_train, x_eval = x_raw[train_idx] * scale, x_raw[eval_idx] * scale
        report.note(
            f"Activations: {src['desc']}; {x_raw.shape[0]} tokens of width {x_raw.shape[1]}, "
            f"{len(train_idx)} for training and {len(eval_idx)} held out for every metric. "
            f"Scaled by s = {scale:.4g} so that E‖s·x‖² = d_in; SAEs see s·x."
        )
        rows: list[dict[str, Any]] = []
        trajectories: dict[tuple[str, float], Any] = {}
        model = src.get("model")
        dl_prompts = src.get("prompts", [])[: config.delta_loss_prompts] if model else []
        cells = [(a, lam) for a in config.architectures for lam in config.lambdas]
        clean_loss: float | None = None
        with ctx.stage("train and evaluate SAEs"):
            for arch, lam in ctx.progress(cells, description="SAEs"):
                gen = ctx.torch_generator(f"sae-{arch}")  # same init and batches across λ
                trainer = SAETrainer(_train_config(config, arch, lam)).fit(x_train, generator=gen)
                row, diag = _row(trainer.sae_, x_eval, config)
                if dl_prompts:
                    dl = delta_loss(model, trainer.sae_, dl_prompts, src["site"], input_scale=scale)
                    row["delta_loss"] = dl.delta
                    row["loss_recovered"] = dl.loss_recovered
                    clean_loss = dl.clean
                rows.append({"architecture": arch, "lambda": lam, **row})
                trajectories[(arch, lam)] = diag.trajectory
        if config.external_sae:
            with ctx.stage("external SAE"):
                ext = load_saelens(config.external_sae)
                row, diag = _row(ext, x_raw[eval_idx], config)
                rows.append({"architecture": f"external:{ext.architecture}", "lambda": None, **row})
                trajectories[("external", 0.0)] = diag.trajectory
                report.note(
                    f"External SAE {config.external_sae} ({ext.architecture}, d_sae={ext.d_sae}) "
                    "was evaluated on the unscaled held-out activations."
                )
    _report(report, config, rows, trajectories, dl_prompts, clean_loss)
    return report


def _report(
    report: Report,
    config: SAEIdempotencyConfig,
    rows: list[dict[str, Any]],
    trajectories: dict[tuple[str, float], Any],
    dl_prompts: list[str],
    clean_loss: float | None,
) -> None:
    columns = ["architecture", "lambda", "fvu", "l0", "dead"]
    if dl_prompts:
        columns += ["delta_loss", "loss_recovered"]
    columns += [
        "reencode_error",
        "jaccard",
        "reliability",
        "scale_error",
        "scale_jaccard",
        "norm_growth",
        "traj_converges",
        "traj_explodes",
        "traj_collapses",
        "traj_cycles",
        "traj_drifts",
    ]
    table = [
        {c: (round(r[c], 5) if isinstance(r.get(c), float) else r.get(c)) for c in columns}
        for r in rows
    ]
    report.table(
        "architectures_by_lambda",
        table,
        caption="Held-out tokens. fvu: fraction of variance unexplained; l0: mean active latents; "
        "dead: share of latents silent on the held-out tokens; delta_loss: LM next-token loss "
        "with the SAE spliced in minus clean (nats/token); reencode_error: mean "
        "‖E(D(z))−z‖/‖z‖; jaccard: active sets of z and E(D(z)); reliability: mean per-latent "
        f"share of firings that re-fire within {config.rel_tol:g}·z; scale_error: mean "
        "‖E(cx)−cE(x)‖/‖cE(x)‖ over the scales; norm_growth: ‖z_T‖/‖z_1‖ after "
        f"{config.n_iter} iterations of x ↦ D(E(x)); traj_*: share of tokens per outcome.",
    )
    lam0, lam_max = min(config.lambdas), max(config.lambdas)
    by = {(r["architecture"], r["lambda"]): r for r in rows}
    reductions = []
    for arch in config.architectures:
        base, best = by[(arch, lam0)], by[(arch, lam_max)]
        report.metric(
            f"{arch}.reencode_error",
            base["reencode_error"],
            headline=True,
            description=f"{arch} SAE re-encoding error at λ={lam0:g}.",
        )
        report.metric(
            f"{arch}.fvu", base["fvu"], headline=True, description=f"{arch} SAE FVU at λ={lam0:g}."
        )
        report.metric(
            f"{arch}.jaccard",
            base["jaccard"],
            description=f"{arch} SAE active-set Jaccard at λ={lam0:g}.",
        )
        if lam_max > lam0:
            report.metric(
                f"{arch}.reencode_error_lam{lam_max:g}",
                best["reencode_error"],
                headline=True,
                description=f"{arch} re-encoding error with the idempotency loss λ={lam_max:g}.",
            )
            report.metric(
                f"{arch}.fvu_lam{lam_max:g}",
                best["fvu"],
                description=f"{arch} FVU with λ={lam_max:g}.",
            )
            reductions.append(1 - best["reencode_error"] / base["reencode_error"])
    if reductions:
        report.metric(
            "mean_relative_reencode_reduction",
            float(np.mean(reductions)),
            headline=True,
            description=f"Mean over architectures of 1 − error(λ={lam_max:g})/error(λ={lam0:g}).",
        )
    if clean_loss is not None:
        report.metric("clean_lm_loss", clean_loss, description="LM loss without any SAE.")
    report.note(
        "Training: Adam, unit-norm decoder rows (gradient projected onto the sphere), AuxK "
        "dead-latent loss (α=1/32, k_aux=d_in/2) for TopK/BatchTopK, linear sparsity warm-up over "
        "10% of steps and learning-rate decay over the last 20%. The idempotency loss is "
        f"λ‖E(D(z))−z‖² with idempotency_grad={config.train.idempotency_grad!r}. Every λ of one "
        "architecture starts from the same initialisation and sees the same batches."
    )
    report.figure(
        "norm_trajectory",
        _trajectory_figure(trajectories, config),
        caption="Mean latent norm ‖z_t‖ over iterations of x ↦ D(E(x)), λ = "
        f"{lam0:g} (solid) and {lam_max:g} (dashed).",
    )
    report.figure(
        "pareto_idempotency_fvu",
        _pareto_figure(rows, config),
        caption="Re-encoding error against FVU per architecture across λ "
        "(labels are λ); lower-left is better.",
    )


def _trajectory_figure(trajectories: dict, config: SAEIdempotencyConfig):
    lam0, lam_max = min(config.lambdas), max(config.lambdas)
    fig, axes = new_figure(size=(6.0, 4.0))
    ax = axes[0, 0]
    for i, arch in enumerate([*config.architectures, "external"]):
        for lam, style in ((lam0, "-"), (lam_max, "--")):
            traj = trajectories.get((arch, lam if arch != "external" else 0.0))
            if traj is None or (arch == "external" and style == "--"):
                continue
            t = np.arange(1, len(traj.z_norms) + 1)
            ax.plot(t, traj.z_norms, style, color=f"C{i}", label=f"{arch} λ={lam:g}")
    ax.set_yscale("log")
    ax.set_xlabel("iteration t")
    ax.set_ylabel("mean ‖z_t‖")
    ax.legend(fontsize=7)
    add_alt_text(fig, f"Line chart (log scale) of the mean latent norm over {config.n_iter} "
                      f"iterations of x -> D(E(x)) for {', '.join(config.architectures)} at "
                      f"lambda {lam0:g} (solid) and {lam_max:g} (dashed).")
    return fig


def _pareto_figure(rows: list[dict], config: SAEIdempotencyConfig):
    fig, axes = new_figure(size=(6.0, 4.0))
    ax = axes[0, 0]
    for i, arch in enumerate(config.architectures):
        part = [r for r in rows if r["architecture"] == arch]
        ax.plot(
            [r["fvu"] for r in part],
            [r["reencode_error"] for r in part],
            "o-",
            color=f"C{i}",
            label=arch,
        )
        for r in part:
            ax.annotate(f"{r['lambda']:g}", (r["fvu"], r["reencode_error"]), fontsize=7)
    ax.set_xlabel("FVU")
    ax.set_ylabel("re-encoding error ‖E(D(z))−z‖/‖z‖")
    ax.legend(fontsize=7)
    add_alt_text(fig, "Scatter of re-encoding error against FVU, one line per architecture "
                      f"({', '.join(config.architectures)}) through lambda "
                      f"{', '.join(f'{lam:g}' for lam in config.lambdas)}; lower left is better.")
    return fig
