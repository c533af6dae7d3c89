import json

import numpy as np
import pytest

from trustlab.core.errors import (
    ConfigError,
    InputError,
    MissingDependencyError,
    TrustlabError,
    UnknownMethodError,
)
from trustlab.core.io import atomic_write, write_json_atomic, write_text_atomic


def test_atomic_write_keeps_old_file_when_interrupted(tmp_path):
    target = tmp_path / "result.json"
    write_text_atomic(target, "old")
    with pytest.raises(RuntimeError), atomic_write(target) as handle:
        handle.write("half")
        raise RuntimeError("crash in the middle")
    assert target.read_text() == "old"
    assert list(tmp_path.iterdir()) == [target]  # no temp file left behind


def test_json_handles_numpy_and_rejects_nan(tmp_path):
    path = write_json_atomic(tmp_path / "a" / "b.json", {"x": np.float32(1.5), "y": np.arange(3)})
    assert json.loads(path.read_text()) == {"x": 1.5, "y": [0, 1, 2]}
    with pytest.raises(ValueError):
        write_json_atomic(tmp_path / "c.json", {"x": float("nan")})
    assert not (tmp_path / "c.json").exists()


def test_error_tree_and_one_line_messages():
    assert issubclass(ConfigError, ValueError) and issubclass(ConfigError, TrustlabError)
    assert issubclass(InputError, ValueError)
    assert str(InputError("two\n  lines")) == "two lines"
    assert str(UnknownMethodError("no such id")) == "no such id"  # not quoted like KeyError
    err = MissingDependencyError.for_package("onnxruntime", "verify", "Sampling ONNX networks")
    assert "pip install 'trustlab[verify]'" in str(err) and isinstance(err, ImportError)


def test_atomic_files_get_ordinary_permissions(tmp_path):
    import os
    import stat

    path = write_text_atomic(tmp_path / "r.txt", "x")
    mask = os.umask(0)
    os.umask(mask)
    assert stat.S_IMODE(path.stat().st_mode) == 0o666 & ~mask


@pytest.mark.parametrize("bad", [0.0, 1.0, 1.5, -0.1, True, "0.1", None])
def test_check_open_unit_rejects_with_a_named_message(bad):
    from trustlab.core.validation import check_open_unit

    with pytest.raises(InputError, match="The 'alpha' parameter of HCC must be"):
        check_open_unit(bad, "alpha", "HCC")


def test_check_open_unit_accepts_numpy_and_ints_in_range():
    from trustlab.core.validation import check_open_unit

    assert check_open_unit(np.float32(0.25), "alpha", "x") == 0.25


def test_paths_follow_the_environment(monkeypatch, tmp_path):
    from trustlab.core.paths import shared_data_dir, trustlab_home

    monkeypatch.setenv("TRUSTLAB_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("TRUSTLAB_SHARED_DATA", str(tmp_path / "data"))
    assert trustlab_home() == tmp_path / "home"
    assert shared_data_dir("cifar10h") == tmp_path / "data" / "cifar10h"
    monkeypatch.delenv("TRUSTLAB_SHARED_DATA")
    assert shared_data_dir().parts[-2:] == ("shared", "data")
