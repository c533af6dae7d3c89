"""The report of ``trustlab run toolcall``: metrics, tables and figures from the model studies.

Headline metrics come from the first model that shows a tool decision; every model gets its
own prefixed metrics. A model without a decision reports its probe flip rate and no verdict.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from trustlab.core import Report
from trustlab.core.figures import (
    Series,
    add_alt_text,
    grouped_bars,
    metric_vs_parameter,
    new_figure,
)
from trustlab.methods.toolcall.study import ModelStudy

__all__ = ["write_report"]

TESTS = (
    ("ablation", "necessity (directional ablation)"),
    ("clamp", "necessity (clamp to the analysis mean)"),
    ("addition", "sufficiency (addition)"),
)


def _rate_metrics(
    report: Report, name: str, rate: Any, description: str, *, headline: bool = False
) -> None:
    report.metric(
        name,
        rate.rate,
        headline=headline,
        description=f"{description} ({rate.k}/{rate.n}; 95% Clopper–Pearson "
        f"{rate.lower:.3f} to {rate.upper:.3f}).",
    )
    report.metric(f"{name}_low", rate.lower, description=f"Lower 95% bound of {name}.")
    report.metric(f"{name}_high", rate.upper, description=f"Upper 95% bound of {name}.")


def write_report(report: Report, config: Any, studies: list[ModelStudy]) -> None:
    first = next((s for s in studies if s.decided), None)
    flips, sweep, choice, tests, controls, dose, quality = [], [], [], [], [], [], []
    attribution, patching, trans, lens, scaffold, cosines, speed = [], [], [], [], [], [], []
    for st in studies:
        lab = st.label
        head = st is first
        for split, check in (
            ("probe", st.probe),
            ("analysis", st.flips_analysis),
            ("heldout", st.flips_heldout),
        ):
            if check is None:
                continue
            rate = check.flip_rate()
            flips.append(
                {
                    "model": lab,
                    "split": split,
                    **check.counts(),
                    "flip_rate": rate.rate,
                    "flip_low": rate.lower,
                    "flip_high": rate.upper,
                }
            )
        if not st.decided:
            _rate_metrics(
                report,
                f"{lab}_probe_flip_rate",
                st.probe.flip_rate(),
                f"{lab}: share of probe held-out pairs that flip the tool decision",
            )
            report.note(
                f"**{lab}** ({st.n_params:,} parameters): {st.reason}. No verdict on μΔ "
                "for this model."
            )
            continue
        att_rows = st.attribution.table()
        patch_rows = st.patching.rows()
        _model_metrics(report, st, head, att_rows, patch_rows)
        sweep += [{"model": lab, **r} for r in st.sweep.rows()]
        choice += [{"model": lab, **r} for r in st.choice.rows]
        for key, _ in TESTS:
            t = st.tests[key]
            tests.append({"model": lab, **t.summary()})
            controls += [{"model": lab, **r} for r in t.control_rows()]
        dose += [{"model": lab, **r} for r in st.dose]
        for what, q in st.quality.items():
            quality.append({"model": lab, "replies_to": what, **q})
        attribution += [{"model": lab, **row} for row in att_rows]
        patching += [{"model": lab, **row} for row in patch_rows]
        trans += [{"model": lab, **r} for r in st.transmission]
        lens += [{"model": lab, **r} for r in st.lens]
        if st.scaffold is not None:
            scaffold += [{"model": lab, **r} for r in st.scaffold.rows]
            cosines += [{"model": lab, **r} for r in st.scaffold.cosines]
        for stage, sec in st.timings.items():
            speed.append({"model": lab, "stage": stage, "seconds": sec})
        _figures(report, st, att_rows, patch_rows)
        _note(report, st)
    if first is None:
        report.metric(
            "any_tool_decision",
            False,
            headline=True,
            description="No model showed a tool decision; no verdict on μΔ.",
        )
    report.table(
        "flips",
        flips,
        caption="Pairs per model and split: flip = execution variant "
        "calls, analysis does not; both_call, neither_calls, reversed are the pairs "
        "that do not flip (counted, never dropped silently). Clopper–Pearson 95%.",
    )
    if not sweep:
        return
    report.table(
        "layer_sweep",
        sweep,
        caption="Separation of held-out pairs by the projection "
        "on unit μΔ per layer and position (offset from the last token): ROC-AUC with "
        "DeLong 95%, paired accuracy with Clopper–Pearson 95%, threshold accuracy at "
        "the midpoint of the fitted means.",
    )
    report.table(
        "layer_choice",
        choice,
        caption="Candidates scored on the selection slice of "
        "the analysis pairs (never the held-out ones): add_flips, ablate_flips (sign of "
        "the decision logit), score = min of the two.",
    )
    report.table(
        "causal_tests",
        tests,
        caption="Held-out pairs that flip: flip rate of μΔ and "
        "of the worst random control (Clopper–Pearson 95%), μΔ minus the worst control "
        "(Newcombe paired 95%), mean decision-logit shift (bootstrap 95%).",
    )
    report.table("controls", controls, caption="Every random control of every test.")
    report.table(
        "dose_response",
        dose,
        caption="Addition of alpha·μΔ to held-out analysis "
        "prompts, with random vectors of the same norm.",
    )
    report.table(
        "induced_calls",
        quality,
        caption="Full replies: share of calls whose payload "
        "parses (valid) and whose language and task are the request's "
        "(arguments_match), steered analysis prompts against the model's own calls.",
    )
    report.table(
        "attribution",
        attribution,
        caption="Direct logit attribution of the first-"
        "token decision logit (call − prose) on analysis pairs: mean per variant, "
        "execution − analysis with bootstrap 95%, share of the gap. Rows with in_sum "
        "add up (with the correction) to the logit difference; head rows split "
        "attn_out.",
    )
    report.table(
        "patching",
        patching,
        caption="Activation patching at the decision position: "
        "denoise = share of the logit gap restored when the component comes from the "
        "execution variant into the analysis variant; noise = share removed the other "
        "way. Ratio of means, bootstrap 95% over pairs.",
    )
    report.table(
        "transmission",
        trans,
        caption="μΔ added to analysis prompts: change of each "
        "component's direct attribution, and the injected vector's own direct path.",
    )
    report.table(
        "logit_lens",
        lens,
        caption="Decision logit of the mean execution and "
        "analysis streams read through the final norm and unembedding per layer, and "
        "cos(μΔ, W_U[call] − W_U[prose]).",
    )
    if scaffold:
        report.table(
            "scaffold",
            scaffold,
            caption="Held-out requests with and without the "
            "system scaffold, with the execution verb, the analysis verb and a neutral "
            "word: call rate (Clopper–Pearson 95%) and position on μΔ (0 = analysis "
            "mean, 1 = execution mean).",
        )
        report.table("scaffold_cosines", cosines, caption="μΔ with and without the scaffold.")
    report.table("timings", speed, caption="Wall seconds per stage (shared machine).")


def _model_metrics(
    report: Report, st: ModelStudy, head: bool, table: list[dict], rows: list[dict]
) -> None:
    lab = st.label
    _rate_metrics(
        report,
        f"{lab}_heldout_flip_rate",
        st.flips_heldout.flip_rate(),
        f"{lab}: share of held-out pairs whose verb flips the tool decision",
        headline=head,
    )
    worst = 0.0
    within = True
    for key, text in TESTS:
        t = st.tests[key]
        _rate_metrics(
            report,
            f"{lab}_{key}_flip_rate",
            t.flip_rate(),
            f"{lab}, {text} of μΔ on held-out pairs that flip",
            headline=head,
        )
        w = t.worst_control_rate()
        if w is not None:
            _rate_metrics(
                report,
                f"{lab}_{key}_worst_control_flip_rate",
                w,
                f"{lab}, {text}: the worst of {t.control_flips.shape[0]} random controls",
            )
            worst = max(worst, w.rate)
        within = within and t.controls_within_band()
    report.metric(
        f"{lab}_worst_control_flip_rate",
        worst,
        headline=head,
        description=f"{lab}: the largest flip rate of any random control in any test.",
    )
    report.metric(
        f"{lab}_controls_within_band",
        within,
        headline=head,
        description=f"{lab}: every test's worst control has a 95% upper bound on its "
        f"flip rate <= {st.tests['ablation'].control_band}.",
    )
    report.metric(f"{lab}_layer", st.choice.layer, description="Layer of μΔ (resid_pre index).")
    report.metric(
        f"{lab}_position",
        st.choice.position,
        description="Position of μΔ (offset from the last prompt token).",
    )
    att = st.attribution
    report.metric(
        f"{lab}_attribution_identity_error",
        att.identity_error(),
        headline=head,
        description="max |sum of component attributions + correction − logit "
        "difference| over the attributed prompts.",
    )
    blocks = [r for r in table if r["in_sum"] and r["kind"] != "correction"]
    top = max(blocks, key=lambda r: abs(r["difference"]))
    report.metric(
        f"{lab}_top_component",
        top["component"],
        headline=head,
        description=f"Component with the largest direct attribution to the "
        f"execution − analysis gap ({top['share_of_gap']:.0%} of it).",
    )
    heads = [r for r in table if r["kind"] == "head"]
    if heads:
        best = max((r for r in rows if r["kind"] == "head"), key=lambda r: r["denoise"])
        report.metric(
            f"{lab}_top_patched_head",
            best["component"],
            description=f"Head whose patching restores most of the gap "
            f"({best['denoise']:.2f} of it).",
        )
    if st.scaffold is not None:
        sc = st.scaffold
        report.metric(
            f"{lab}_scaffold_default_position",
            sc.default_position,
            headline=head,
            description="Neutral request on μΔ with the scaffold (0 = analysis mean, "
            "1 = execution mean).",
        )
        for on in (True, False):
            report.metric(
                f"{lab}_neutral_call_rate_{'with' if on else 'without'}_scaffold",
                sc.value(on, "neutral", "call_rate"),
                description="Call rate of the neutral request.",
            )


def _note(report: Report, st: ModelStudy) -> None:
    t = {k: st.tests[k] for k, _ in TESTS}
    rates = {k: v.flip_rate() for k, v in t.items()}
    worst = {k: v.worst_control_rate() for k, v in t.items()}
    fh = st.flips_heldout.counts()
    text = (
        f"**{st.label}** ({st.n_params:,} parameters, {st.n_layers} layers): "
        f"{fh['flip']} of {fh['pairs']} held-out pairs flip. μΔ at "
        f"{st.direction.layers_[st.choice.layer]}, position {st.choice.position} "
        f"(‖μΔ‖ = {float(st.direction.vector(st.choice.layer, st.choice.position).norm()):.2f}). "
    )
    for k, label in TESTS:
        r, w = rates[k], worst[k]
        text += (
            f"{label}: {r.rate:.2f} [{r.lower:.2f}, {r.upper:.2f}] of {r.n} prompts flip; worst "
            f"control {w.rate:.2f} [{w.lower:.2f}, {w.upper:.2f}]. "
        )
    m = st.means
    j = st.choice.layer
    between = m["analysis"][j] * m["execution"][j] < 0
    text += (
        f"At layer {j} the execution mean projects to {m['execution'][j]:+.2f} and the analysis "
        f"mean to {m['analysis'][j]:+.2f} on unit μΔ: "
        + (
            "zero lies between them, so ablation (projection 0) is not the analysis value."
            if between
            else "both lie on one side of zero: zero is not a neutral value here."
        )
    )
    if st.scaffold is not None:
        sc = st.scaffold
        text += (
            f" Scaffold: the neutral request calls at {sc.value(True, 'neutral', 'call_rate'):.2f} "
            f"with it and {sc.value(False, 'neutral', 'call_rate'):.2f} without; it sits at "
            f"{sc.default_position:.2f} of the way from the analysis to the execution mean."
        )
    report.note(text)


def _figures(report: Report, st: ModelStudy, table: list[dict], rows: list[dict]) -> None:
    lab = st.label
    sw = st.sweep
    fig, axes = new_figure(1, 2, size=(10, 3.6), squeeze=True)
    im = axes[0].imshow(sw.auc.T, aspect="auto", origin="lower", vmin=0.5, vmax=1.0, cmap="viridis")
    axes[0].set_xticks(range(len(sw.layers)), [str(i) for i in range(len(sw.layers))])
    axes[0].set_yticks(range(len(sw.positions)), [str(p) for p in sw.positions])
    axes[0].set_xlabel("layer (resid_pre; last = final resid_post)")
    axes[0].set_ylabel("position (from the end)")
    axes[0].set_title("held-out ROC-AUC of the projection on μΔ", fontsize=9)
    fig.colorbar(im, ax=axes[0])
    j = (
        len(sw.positions) - 1
        if st.choice is None
        else len(st.direction.positions_) + st.choice.position
    )
    xs = np.arange(len(sw.layers))
    axes[1].plot(xs, sw.paired_accuracy[:, j], marker="o", label="paired accuracy")
    axes[1].fill_between(xs, sw.paired_low[:, j], sw.paired_high[:, j], alpha=0.2)
    axes[1].plot(xs, sw.threshold_accuracy[:, j], marker="s", label="threshold accuracy")
    axes[1].set_ylim(0.0, 1.05)
    axes[1].set_xlabel("layer")
    axes[1].set_ylabel("accuracy on held-out pairs")
    ax2 = axes[1].twinx()
    ax2.plot(xs, sw.norm[:, j], color="0.4", ls="--", label="‖μΔ‖")
    ax2.set_ylabel("‖μΔ‖")
    axes[1].legend(fontsize=7, loc="lower right")
    axes[1].set_title(f"position {sw.positions[j]}", fontsize=9)
    add_alt_text(
        fig,
        f"Heat map of held-out ROC-AUC per layer and position for {lab}, and line "
        f"chart of paired and threshold accuracy and the norm of μΔ per layer at "
        f"position {sw.positions[j]}.",
    )
    report.figure(
        f"{lab}_layer_sweep",
        fig,
        caption=f"{lab}: how well μΔ separates held-out pairs, per layer and position.",
    )

    groups = [label for _, label in TESTS]
    mu = [st.tests[k].flip_rate() for k, _ in TESTS]
    wc = [st.tests[k].worst_control_rate() for k, _ in TESTS]
    fig = grouped_bars(
        ["ablation", "clamp", "addition"],
        {
            "μΔ": Series([r.rate for r in mu], [r.lower for r in mu], [r.upper for r in mu]),
            "worst random control": Series(
                [r.rate for r in wc], [r.lower for r in wc], [r.upper for r in wc]
            ),
        },
        ylabel="flip rate (held-out)",
        title=f"{lab}: necessity and sufficiency",
        reference=st.tests["ablation"].control_band,
        reference_label="control band",
    )
    report.figure(
        f"{lab}_causal", fig, caption=f"{lab}: {', '.join(groups)}; 95% Clopper–Pearson whiskers."
    )

    if st.dose:
        alphas = [r["alpha"] for r in st.dose]
        series = {
            "μΔ": Series(
                [r["flip_rate"] for r in st.dose],
                [r["flip_low"] for r in st.dose],
                [r["flip_high"] for r in st.dose],
            )
        }
        if all("worst_control_flip_rate" in r for r in st.dose):
            series["worst random control"] = Series(
                [r["worst_control_flip_rate"] for r in st.dose],
                [r["worst_control_low"] for r in st.dose],
                [r["worst_control_high"] for r in st.dose],
            )
        fig = metric_vs_parameter(
            alphas,
            series,
            xlabel="alpha (× μΔ)",
            ylabel="flip rate",
            title=f"{lab}: sufficiency dose-response",
            logx=True,
            band_label="95% Clopper–Pearson",
        )
        report.figure(
            f"{lab}_dose_response",
            fig,
            caption=f"{lab}: analysis prompts that call "
            "the tool after adding alpha·μΔ, and after random vectors of equal norm.",
        )

    blocks = [r for r in table if r["in_sum"]]
    heads = [r for r in table if r["kind"] == "head"]
    fig, axes = new_figure(1, 2 if heads else 1, size=(11 if heads else 6, 3.6), squeeze=False)
    ax = axes[0, 0]
    names = [r["component"].replace("blocks.", "").replace("_out", "") for r in blocks]
    vals = np.array([r["difference"] for r in blocks])
    err = np.vstack(
        [
            vals - [r["difference_low"] for r in blocks],
            [r["difference_high"] for r in blocks] - vals,
        ]
    ).clip(min=0)
    ax.bar(range(len(vals)), vals, yerr=err, capsize=2, color="C0")
    ax.set_xticks(range(len(vals)), names, rotation=45, fontsize=7)
    ax.axhline(0, color="0.3", lw=0.8)
    ax.set_ylabel("attribution, execution − analysis")
    ax.set_title("direct logit attribution per component", fontsize=9)
    if heads:
        grid = np.full((st.n_layers, st.n_heads or 1), np.nan)
        for r in heads:
            grid[r["layer"], r["head"]] = r["difference"]
        lim = float(np.nanmax(np.abs(grid))) or 1.0
        im = axes[0, 1].imshow(grid, cmap="RdBu_r", vmin=-lim, vmax=lim, aspect="auto")
        axes[0, 1].set_xlabel("head")
        axes[0, 1].set_ylabel("layer")
        axes[0, 1].set_title("per head", fontsize=9)
        fig.colorbar(im, ax=axes[0, 1])
    add_alt_text(
        fig,
        f"Bar chart of each component's direct attribution to the execution − "
        f"analysis decision-logit gap for {lab}, with bootstrap whiskers"
        + (", and a heat map per layer and head." if heads else "."),
    )
    report.figure(
        f"{lab}_attribution",
        fig,
        caption=f"{lab}: which components write the decision into the first output token.",
    )

    head_rows = [r for r in rows if r["kind"] == "head"]
    block_rows = [r for r in rows if r["kind"] != "head"]
    fig, axes = new_figure(
        1, 3 if head_rows else 1, size=(14 if head_rows else 6, 3.6), squeeze=False
    )
    ax = axes[0, 0]
    xs = np.arange(len(block_rows))
    for k, (key, off) in enumerate((("denoise", -0.2), ("noise", 0.2))):
        y = np.array([r[key] for r in block_rows])
        e = np.vstack(
            [y - [r[f"{key}_low"] for r in block_rows], [r[f"{key}_high"] for r in block_rows] - y]
        ).clip(min=0)
        ax.bar(xs + off, y, width=0.4, yerr=e, capsize=2, color=f"C{k}", label=key)
    ax.set_xticks(
        xs, [r["component"].replace("blocks.", "") for r in block_rows], rotation=45, fontsize=7
    )
    ax.set_ylabel("share of the logit gap")
    ax.legend(fontsize=7)
    ax.set_title("patching per site", fontsize=9)
    if head_rows:
        for c, key in enumerate(("denoise", "noise"), start=1):
            grid = np.full((st.n_layers, st.n_heads or 1), np.nan)
            for r in head_rows:
                grid[r["layer"], r["head"]] = r[key]
            im = axes[0, c].imshow(
                grid,
                cmap="magma",
                vmin=min(0.0, float(np.nanmin(grid))),
                vmax=max(1.0, float(np.nanmax(grid))),
                aspect="auto",
            )
            axes[0, c].set_title(f"heads, {key}", fontsize=9)
            axes[0, c].set_xlabel("head")
            axes[0, c].set_ylabel("layer")
            fig.colorbar(im, ax=axes[0, c])
    add_alt_text(
        fig,
        f"Bar chart of the share of the decision-logit gap moved by patching each "
        f"site along the pair for {lab}, both directions"
        + (", and heat maps per layer and head." if head_rows else "."),
    )
    report.figure(
        f"{lab}_patching",
        fig,
        caption=f"{lab}: activation patching at the decision "
        "position (denoise: execution → analysis; noise: the reverse).",
    )

    if st.scaffold is not None:
        sc = st.scaffold
        variants = ["execution", "analysis", "neutral"]
        series = {}
        for on in (True, False):
            rs = [
                next(r for r in sc.rows if r["scaffold"] == on and r["variant"] == v)
                for v in variants
            ]
            series["with scaffold" if on else "without scaffold"] = Series(
                [r["call_rate"] for r in rs],
                [r["call_low"] for r in rs],
                [r["call_high"] for r in rs],
            )
        fig = grouped_bars(
            variants,
            series,
            ylabel="tool-call rate (held-out)",
            title=f"{lab}: does the scaffold make calling the default?",
        )
        report.figure(
            f"{lab}_scaffold",
            fig,
            caption=f"{lab}: call rate by request verb, with "
            f"and without the system scaffold (neutral word {sc.neutral_verb!r}).",
        )
