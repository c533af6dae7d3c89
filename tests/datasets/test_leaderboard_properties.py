"""Issue 38's property tests for leaderboards: a score table written to CSV reads back as the same
matrix, sub-leaderboards are the frame's sub-tables, model names and indices are inverse, and the
built-in tables are well formed; malformed arguments give one-line InputErrors."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from trustlab.core.errors import DataError, InputError
from trustlab.datasets.leaderboards import (
    BUILTIN_LEADERBOARDS,
    Leaderboard,
    bundled_path,
    load_leaderboard,
)

SOME = settings(max_examples=25, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.function_scoped_fixture])


@st.composite
def boards(draw):
    n, k = draw(st.integers(2, 6)), draw(st.integers(2, 5))
    cells = draw(st.lists(st.one_of(st.integers(0, 1000).map(lambda v: v / 10), st.just(np.nan)),
                          min_size=n * k, max_size=n * k))
    scores = np.array(cells, dtype=float).reshape(n, k)
    scores[:, 0] = np.arange(n) + 0.5  # every model keeps a score
    return Leaderboard.from_array(scores, [f"model {i}" for i in range(n)],
                                  [f"bench{j}" for j in range(k)], name="drawn")


@SOME
@given(boards())
def test_a_csv_reads_back_as_the_same_matrix(tmp_path, board):
    path = tmp_path / "scores.csv"
    board.to_frame().rename_axis("model").reset_index().to_csv(path, index=False)
    back = load_leaderboard(path)
    assert back.models == board.models and back.datasets == board.datasets
    np.testing.assert_allclose(back.scores, board.scores, equal_nan=True)
    assert back.has_missing == board.has_missing and back.shape == board.shape


@SOME
@given(boards(), st.data())
def test_selections_are_sub_tables_and_names_index_rows(board, data):
    rows = data.draw(st.lists(st.integers(0, board.n_models - 1), min_size=1, unique=True))
    cols = data.draw(st.lists(st.sampled_from(board.datasets), min_size=1, unique=True))
    sub = board.select([board.models[i] for i in rows], cols)
    np.testing.assert_array_equal(sub.to_frame().to_numpy(),
                                  board.to_frame().iloc[rows][cols].to_numpy())
    by_index = board.select(rows, cols)  # indices are the same rows as names
    assert by_index.models == sub.models and by_index.datasets == sub.datasets
    np.testing.assert_array_equal(by_index.scores, sub.scores)
    for i, m in enumerate(board.models):
        assert board.model_index(m) == i == board.model_index(np.int64(i))
    kept = board.drop_datasets(cols[:-1]) if len(cols) < board.n_datasets else board
    assert set(kept.datasets) == set(board.datasets) - set(cols[:-1]) or kept is board
    assert not kept.scores.flags.writeable


def test_builtin_tables_are_well_formed():
    for name in BUILTIN_LEADERBOARDS:
        board = load_leaderboard(name)
        assert board.n_models >= 2 and board.n_datasets >= 2
        assert len(set(board.models)) == board.n_models and not np.isinf(board.scores).any()
    assert bundled_path("benchbench_bbh_27tasks.tsv").is_file()


BOARD = Leaderboard.from_array([[1.0, 2.0], [3.0, 4.0]])


@pytest.mark.parametrize(("call", "match"), [
    (lambda: Leaderboard.from_array([["a", "b"], ["c", "d"]]), "numbers"),
    (lambda: Leaderboard.from_array([1.0, 2.0]), "2-D"),
    (lambda: Leaderboard.from_array([[1.0, np.inf], [1.0, 2.0]]), "inf"),
    (lambda: Leaderboard.from_array([[1.0], [2.0]], models=["a", "a"]), "unique"),
    (lambda: BOARD.model_index(True), "name or an index"),
    (lambda: BOARD.model_index(5), "out of range"),
    (lambda: BOARD.model_index("m9"), "not in leaderboard"),
    (lambda: BOARD.select(models="m0"), "list of names"),
    (lambda: BOARD.select(datasets="d0"), "list of names"),
    (lambda: BOARD.drop_datasets("d0"), "list of names"),
    (lambda: BOARD.drop_datasets(["zz"]), "unknown"),
    (lambda: bundled_path("../x.csv"), "file name"),
    (lambda: bundled_path(None), "file name"),
    (lambda: load_leaderboard(None), "built-in name"),
    (lambda: load_leaderboard("no_such_board"), "Unknown leaderboard"),
    (lambda: load_leaderboard(next(iter(BUILTIN_LEADERBOARDS)), drop=True), "no options"),
])
def test_bad_arguments_are_one_line_errors(call, match):
    with pytest.raises((InputError, DataError), match=match) as caught:
        call()
    assert "\n" not in str(caught.value)
