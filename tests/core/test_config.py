from pathlib import Path
from typing import ClassVar, Literal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import Field, model_validator

from trustlab.core import ConfigError, ExperimentConfig, resolve_config
from trustlab.core.config import parse_overrides


class Inner(ExperimentConfig):
    depth: int = Field(2, ge=1, description="depth")


class ToyConfig(ExperimentConfig):
    alpha: float = Field(0.1, gt=0, lt=1, description="miscoverage")
    n: int = Field(100, gt=1, description="samples")
    rule: Literal["mean", "median"] = Field("mean", description="rule")
    alphas: list[float] = Field([0.1, 0.2], description="several")
    inner: Inner = Field(Inner(), description="nested")
    QUICK: ClassVar[dict] = {"n": 10}


def test_precedence_defaults_quick_file_set(tmp_path):
    assert resolve_config(ToyConfig).n == 100
    assert resolve_config(ToyConfig, quick=True).n == 10
    f = tmp_path / "c.yaml"
    f.write_text("n: 20\nalpha: 0.3\n")
    cfg = resolve_config(ToyConfig, quick=True, file=f)
    assert (cfg.n, cfg.alpha) == (20, 0.3)
    cfg = resolve_config(ToyConfig, quick=True, file=f, overrides=["n=30", "inner.depth=4"])
    assert (cfg.n, cfg.alpha, cfg.inner.depth) == (30, 0.3, 4)


def test_overrides_parse_yaml_values():
    assert parse_overrides(["a=[1, 2]", "b.c=x", "d=1e-3", "e=true"]) == {
        "a": [1, 2], "b": {"c": "x"}, "d": 1e-3, "e": True
    }
    cfg = resolve_config(ToyConfig, overrides=["alphas=[0.01,0.05]", "rule=median"])
    assert cfg.alphas == [0.01, 0.05] and cfg.rule == "median"


@pytest.mark.parametrize(
    ("override", "fragment"),
    [
        ("bogus=1", "Unknown config key 'bogus'"),
        ("alpha=1.5", "'alpha' parameter"),
        ("rule=mode", "'rule' parameter"),
        ("n=abc", "'n' parameter"),
        ("inner.depth=0", "'inner.depth' parameter"),
        ("novalue", "key=value"),
    ],
)
def test_bad_overrides_are_one_line_config_errors(override, fragment):
    with pytest.raises(ConfigError) as info:
        resolve_config(ToyConfig, overrides=[override], method_id="toy")
    message = str(info.value)
    assert fragment in message and "\n" not in message


class CrossConfig(ExperimentConfig):
    low: float = Field(0.0, description="lower end")
    high: float = Field(1.0, description="upper end")

    @model_validator(mode="after")
    def _ordered(self):
        if self.low >= self.high:
            raise ValueError(f"low ({self.low}) must be below high ({self.high})")
        return self


def test_cross_field_error_names_the_problem_not_an_empty_parameter():
    with pytest.raises(ConfigError) as info:
        resolve_config(CrossConfig, overrides=["low=2"], method_id="toy")
    message = str(info.value)
    assert "''" not in message and "Value error" not in message
    assert message == "The config of toy is invalid: low (2.0) must be below high (1.0)."


def test_unknown_key_lists_valid_keys():
    with pytest.raises(ConfigError, match="Valid keys: alpha, alphas, inner, n, rule"):
        resolve_config(ToyConfig, overrides=["bogus=1"])


def test_bad_yaml_file(tmp_path):
    f = tmp_path / "bad.yaml"
    f.write_text("a: [1, 2\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        resolve_config(ToyConfig, file=f)
    with pytest.raises(ConfigError, match="does not exist"):
        resolve_config(ToyConfig, file=tmp_path / "missing.yaml")
    g = tmp_path / "list.yaml"
    g.write_text("- 1\n- 2\n")
    with pytest.raises(ConfigError, match="mapping"):
        resolve_config(ToyConfig, file=g)


def test_config_is_frozen():
    cfg = resolve_config(ToyConfig)
    with pytest.raises(Exception):  # noqa: B017 - pydantic's frozen error type
        cfg.n = 3  # type: ignore[misc]


def test_config_reference_lists_every_field():
    from trustlab.core.config import config_reference

    table = config_reference(ToyConfig)
    for name in ToyConfig.model_fields:
        assert f"`{name}`" in table
    assert "gt 0" in table and "`10`" in table  # constraints and the quick preset are shown


class PathConfig(ExperimentConfig):
    data_dir: str | None = Field(None, description="a folder the user may give")
    scores_file: str | None = Field(None, description="a file the user may give")
    model: str = Field("organism:chat-xs", description="not a path field")
    extra_path: Path | None = Field(None, description="typed path")
    report_file: str | None = Field(None, description="written by the run",
                                    json_schema_extra={"output": True})
    FULL: ClassVar[dict] = {"model": "organism:chat-l"}


def test_user_given_paths_must_exist(tmp_path):
    from trustlab.core.config import path_fields

    assert path_fields(PathConfig) == {"data_dir": "dir", "scores_file": "file",
                                       "extra_path": "path"}
    (tmp_path / "f.csv").write_text("x")
    ok = resolve_config(PathConfig, overrides={"data_dir": str(tmp_path),
                                               "scores_file": str(tmp_path / "f.csv")})
    assert ok.data_dir == str(tmp_path)
    for key, value, fragment in [
        ("data_dir", "/typo", "names a path that does not exist: '/typo'"),
        ("data_dir", str(tmp_path / "f.csv"), "must be a directory"),
        ("scores_file", str(tmp_path), "must be a file"),
        ("extra_path", "/no/such", "does not exist"),
    ]:
        with pytest.raises(ConfigError, match=f"'{key}' parameter of m") as err:
            resolve_config(PathConfig, overrides={key: value}, method_id="m")
        assert fragment in str(err.value)
    resolve_config(PathConfig, overrides={"report_file": "/not/yet/written.txt"})  # output


def test_full_preset_and_config_dir(tmp_path):
    assert resolve_config(PathConfig, full=True).model == "organism:chat-l"
    with pytest.raises(ConfigError, match="exclude each other"):
        resolve_config(PathConfig, full=True, quick=True)
    with pytest.raises(ConfigError, match="is a directory; give a YAML file"):
        resolve_config(PathConfig, file=tmp_path)


@settings(max_examples=80, deadline=None)
@given(st.lists(st.text(max_size=12), max_size=4))
def test_parse_overrides_property(items):
    """Any text gives a nested dict or a one-line ConfigError, never another exception."""
    try:
        out = parse_overrides(items)
    except ConfigError as exc:
        assert "\n" not in str(exc)
        return
    assert isinstance(out, dict)
    for item in items:
        key = item.partition("=")[0].strip()
        node = out
        for part in key.split(".")[:-1]:
            node = node[part]
        assert key.split(".")[-1] in node
