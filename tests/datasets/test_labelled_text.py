"""Users' labelled texts: CSV, JSONL and datasets folders; named labels; one-line errors."""

from __future__ import annotations

import json

import pytest

from trustlab.core.errors import DataError
from trustlab.datasets.labelled_text import read_labelled_texts


def test_csv_with_named_labels(tmp_path):
    p = tmp_path / "d.csv"
    p.write_text('text,label,topic\n"A claim, with a comma",fake,health\nA true one,real,health\nAnother,1,x\n')
    d = read_labelled_texts(p, group_column="topic")
    assert d.texts == ("A claim, with a comma", "A true one", "Another")
    assert d.labels == (1, 0, 1) and d.groups == ("health", "health", "x") and d.n_positive == 2


def test_jsonl_with_custom_columns_and_labels(tmp_path):
    p = tmp_path / "d.jsonl"
    rows = [{"body": "x", "y": "EXT"}, {"body": "y", "y": "ok"}, {"body": "z", "y": True}]
    p.write_text("\n".join(json.dumps(r) for r in rows) + "\n\n")
    d = read_labelled_texts(p, text_column="body", label_column="y", positive=("ext",), negative=("ok",))
    assert d.labels == (1, 0, 1)


@pytest.mark.parametrize(
    ("content", "match"),
    [
        ("text,label\nhello,maybe\nbye,0\n", "maybe"),
        ("text,label\nhello,1\nbye,1\n", "one class"),
        ("text,lab\nhello,1\n", "no 'label' column"),
        ("text,label\n,1\nbye,0\n", "empty"),
    ],
)
def test_bad_files_are_one_line_data_errors(tmp_path, content, match):
    p = tmp_path / "d.csv"
    p.write_text(content)
    with pytest.raises(DataError, match=match) as exc:
        read_labelled_texts(p)
    assert "\n" not in str(exc.value)


def test_missing_and_wrong_kind(tmp_path):
    with pytest.raises(DataError, match="does not exist"):
        read_labelled_texts(tmp_path / "none.csv")
    (tmp_path / "d.txt").write_text("x")
    with pytest.raises(DataError, match=r"\.csv or \.jsonl"):
        read_labelled_texts(tmp_path / "d.txt")
    (tmp_path / "bad.jsonl").write_text("{not json\n")
    with pytest.raises(DataError, match="not JSON"):
        read_labelled_texts(tmp_path / "bad.jsonl")


def test_datasets_folder(tmp_path):
    datasets = pytest.importorskip("datasets")
    datasets.Dataset.from_dict({"text": ["a", "b", "c"], "label": [1, 0, 0]}).save_to_disk(tmp_path / "ds")
    d = read_labelled_texts(tmp_path / "ds")
    assert d.texts == ("a", "b", "c") and d.labels == (1, 0, 0)
    with pytest.raises(DataError, match="datasets"):
        read_labelled_texts(tmp_path)  # a folder that is no dataset
