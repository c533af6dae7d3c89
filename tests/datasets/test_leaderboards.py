"""Leaderboard loader: built-ins, files, frames, orientation and errors."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from trustlab.core.errors import DataError, InputError
from trustlab.datasets.leaderboards import (
    BUILTIN_LEADERBOARDS,
    HELM_CLASSIC_CONTAMINATED,
    Leaderboard,
    load_leaderboard,
)

SHAPES = {
    "bbh24": (107, 24),
    "bbh27": (107, 27),
    "mmlu57": (82, 57),
    "helm_classic_accuracy": (67, 16),
    "openllm_v1": (87, 6),
    "openllm_v2": (340, 6),
}


@pytest.mark.parametrize("name", list(SHAPES))
def test_builtins_load_with_expected_shape(name):
    lb = load_leaderboard(name)
    assert lb.shape == SHAPES[name]
    assert len(set(lb.models)) == lb.n_models
    assert not lb.scores.flags.writeable


def test_bbh24_drops_the_three_v2_tasks_and_keeps_values():
    b24, b27 = load_leaderboard("bbh24"), load_leaderboard("bbh27")
    assert set(b27.datasets) - set(b24.datasets) == {
        "Dyck Languages", "Multistep Arithmetic Two", "Word Sorting"}
    assert b24.scores[0, b24.datasets.index("Boolean Expressions")] == 96.4  # GPT-4, from the TSV
    assert b24.models[0] == "GPT-4"


def test_helm_missing_and_contamination_mask():
    lb = load_leaderboard("helm_classic_accuracy")
    raw = load_leaderboard("helm_classic_accuracy_raw")
    assert lb.has_missing
    assert np.isnan(lb.scores).sum() - np.isnan(raw.scores).sum() == 4
    i = lb.model_index("T0pp (11B)")
    for d in HELM_CLASSIC_CONTAMINATED["T0pp (11B)"]:
        assert np.isnan(lb.scores[i, lb.datasets.index(d)])
    assert "Mean win rate" in lb.info.columns


def test_from_frame_orientation_and_info(tmp_path):
    df = pd.DataFrame({"name": ["a", "b"], "acc": [0.5, 0.7], "err": [0.1, 0.3], "org": ["x", "y"]})
    lb = Leaderboard.from_frame(df, higher_is_better={"err": False})
    assert lb.datasets == ("acc", "err")
    np.testing.assert_allclose(lb.scores[:, 1], [-0.1, -0.3])
    assert list(lb.info["org"]) == ["x", "y"]
    path = tmp_path / "s.tsv"
    df.to_csv(path, sep="\t", index=False)
    lb2 = load_leaderboard(path)
    np.testing.assert_allclose(lb2.scores, [[0.5, 0.1], [0.7, 0.3]])
    csv = tmp_path / "s.csv"
    csv.write_text("model,a,b\nm1,1,-\nm2,2,3\n")
    lb3 = load_leaderboard(csv)
    assert np.isnan(lb3.scores[0, 1])


def test_errors_are_one_line_and_typed(tmp_path):
    with pytest.raises(DataError, match="Unknown leaderboard"):
        load_leaderboard("nope")
    with pytest.raises(DataError, match="does not exist"):
        load_leaderboard(tmp_path / "missing.csv")
    bad = tmp_path / "dup.csv"
    bad.write_text("model,a\nm,1\nm,2\n")
    with pytest.raises(DataError, match="more than once"):
        load_leaderboard(bad)
    assert load_leaderboard(bad, duplicates="last").scores[0, 0] == 2
    with pytest.raises(InputError):
        Leaderboard(np.zeros((2, 2)), ("a", "b"), ("x",))
    with pytest.raises(InputError, match="not in leaderboard"):
        load_leaderboard("bbh24").model_index("no-such-model")
    pq = tmp_path / "t.parquet"
    pq.write_bytes(b"x")
    with pytest.raises((DataError, ImportError)):
        load_leaderboard(pq)


def test_select_and_builtins_registry():
    lb = load_leaderboard("bbh24")
    sub = lb.select(models=[0, 2], datasets=list(lb.datasets[:3]))
    assert sub.shape == (2, 3)
    assert sub.scores[1, 0] == lb.scores[2, 0]
    assert set(SHAPES) <= set(BUILTIN_LEADERBOARDS)
