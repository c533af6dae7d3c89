"""Property tests of the bundled-data loaders (ConfAIde, PrivacyLens): whatever the files hold,
a list of records or a one-line DataError naming the file — never another exception."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from trustlab.core.errors import DataError
from trustlab.datasets.confaide import load_confaide_tier2
from trustlab.datasets.privacylens import load_privacylens_seeds

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=6),
    lambda kids: st.lists(kids, max_size=3) | st.dictionaries(
        st.sampled_from(["name", "seed", "trajectory", "data_type", "data_subject",
                         "data_sender", "data_recipient", "transmission_principle",
                         "toolkits", "user_instruction", "x"]), kids, max_size=6),
    max_leaves=15)
_FIXTURE = settings(max_examples=60, deadline=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture])


def test_bundled_copies_load():
    assert len(load_confaide_tier2()) == 98
    assert len(load_privacylens_seeds()) == 493


@_FIXTURE
@given(st.lists(json_values, max_size=3) | json_values)
def test_privacylens_any_json(tmp_path, data):
    path = tmp_path / "main_data.json"
    path.write_text(json.dumps(data))
    try:
        seeds = load_privacylens_seeds(path)
    except DataError as exc:
        assert str(path) in str(exc) and "\n" not in str(exc)
        return
    assert isinstance(data, list) and len(seeds) == len(data)


@_FIXTURE
@given(st.binary(max_size=40))
def test_privacylens_any_bytes(tmp_path, raw):
    path = tmp_path / "main_data.json"
    path.write_bytes(raw)
    try:
        load_privacylens_seeds(path)
    except DataError as exc:
        assert str(path) in str(exc)


line = st.builds("Information about {} is collected by {} in order to {}.".format,
                 st.text("abc ", min_size=1, max_size=5), st.text("xyz", min_size=1, max_size=5),
                 st.text("pq", min_size=1, max_size=5)) | st.text(max_size=20)


@_FIXTURE
@given(st.lists(line, max_size=4), st.lists(st.text("0123456789-.ab", max_size=4), max_size=4))
def test_confaide_any_files(tmp_path, lines, ratings):
    (tmp_path / "tier_2a.txt").write_text("\n".join(lines), encoding="utf-8")
    (tmp_path / "tier_2_labels.txt").write_text(" ".join(ratings), encoding="utf-8")
    try:
        flows = load_confaide_tier2(tmp_path)
    except DataError as exc:
        assert "\n" not in str(exc)
        return
    assert len(flows) == len([ln for ln in lines if ln.strip()])


def test_missing_folder_and_bad_bytes(tmp_path):
    with pytest.raises(DataError, match="Cannot read ConfAIde"):
        load_confaide_tier2(tmp_path / "nope")
    (tmp_path / "tier_2a.txt").write_bytes(b"\xff\xfe\x00")
    (tmp_path / "tier_2_labels.txt").write_text("1")
    with pytest.raises(DataError):
        load_confaide_tier2(tmp_path)


def test_privacylens_record_with_a_list_trajectory(tmp_path):
    seed = dict.fromkeys(["data_type", "data_subject", "data_sender", "data_recipient",
                          "transmission_principle"], "x")
    path = tmp_path / "m.json"
    path.write_text(json.dumps([{"name": "a", "seed": seed, "trajectory": []}]))
    with pytest.raises(DataError, match=r"record 0 .* is not a record object"):
        load_privacylens_seeds(path)
