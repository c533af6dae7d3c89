"""Property tests of core's registry, catalogue, run result and error classes (issue 38):
any method id gives the catalogue's answer or a one-line UnknownMethodError, never another
exception; a registration round-trips; every error class is a TrustlabError with one-line text."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trustlab.core import (
    CATALOGUE,
    ExperimentConfig,
    InputError,
    MethodInfo,
    MissingDependencyError,
    NotFittedError,
    Report,
    RunResult,
    SolverError,
    TrustlabError,
    UnknownMethodError,
    get_experiment,
    is_implemented,
    method_info,
    register,
)
from trustlab.core import registry as registry_module
from trustlab.core.errors import BackendError, ConfigError, DataError

IDS = [info.id for info in CATALOGUE]
SETTINGS = settings(max_examples=40, deadline=None, derandomize=True)

method_ids = st.one_of(
    st.sampled_from(IDS),
    st.sampled_from(IDS).map(str.upper),
    st.sampled_from(IDS).map(lambda s: s.replace("-", "_") if "-" in s else f" {s}"),
    st.text(max_size=12),
    st.none(), st.integers(), st.floats(), st.booleans(),
    st.lists(st.integers(), max_size=2), st.dictionaries(st.text(max_size=2), st.integers(),
                                                         max_size=1),
)


@SETTINGS
@given(method_ids)
def test_any_method_id_is_a_catalogue_id_or_a_one_line_unknown_method_error(method_id):
    valid = isinstance(method_id, str) and method_id in IDS
    for lookup in (method_info, is_implemented):
        try:
            got = lookup(method_id)
        except UnknownMethodError as exc:
            assert not valid, f"{lookup.__name__}({method_id!r}) rejected a catalogue id"
            assert str(exc) and "\n" not in str(exc) and "Valid ids" in str(exc)
            continue
        assert valid, f"{lookup.__name__}({method_id!r}) accepted an unknown id"
        if lookup is method_info:
            assert isinstance(got, MethodInfo) and got.id == method_id
            assert got.module == method_id.replace("-", "_")
        else:
            assert isinstance(got, bool)
            module_file = registry_module.method_module_file(method_id, "experiment")
            assert got == (method_id in registry_module._REGISTRY or module_file.is_file())


class _Config(ExperimentConfig):
    pass


@SETTINGS
@given(st.sampled_from(IDS), st.sampled_from([None, int, dict, ExperimentConfig, _Config, "x"]))
def test_register_then_get_experiment_round_trips_and_bad_configs_are_input_errors(method_id,
                                                                                   config):
    saved = dict(registry_module._REGISTRY)
    try:
        registry_module._REGISTRY.clear()

        def run(cfg, ctx):  # never called
            raise AssertionError

        if not (isinstance(config, type) and issubclass(config, ExperimentConfig)):
            with pytest.raises(InputError, match="ExperimentConfig"):
                register(method_id, config=config)
            assert method_id not in registry_module._REGISTRY
            return
        assert register(method_id, config=config)(run) is run  # the decorator returns fn
        exp = get_experiment(method_id)  # no import: it is registered
        assert exp.info == method_info(method_id) and exp.id == method_id
        assert exp.config_cls is config and exp.run is run
        assert is_implemented(method_id)
    finally:
        registry_module._REGISTRY.clear()
        registry_module._REGISTRY.update(saved)


@SETTINGS
@given(st.text(max_size=12))
def test_register_and_get_experiment_reject_unknown_ids(method_id):
    if method_id in IDS:
        return
    with pytest.raises(UnknownMethodError):
        register(method_id, config=_Config)
    with pytest.raises(UnknownMethodError):
        get_experiment(method_id)


@SETTINGS
@given(st.text(max_size=8), st.sampled_from(IDS))
def test_run_result_points_at_the_report_inside_its_out_dir(name, method_id):
    out = Path("runs") / method_id / (name.replace("/", "_").replace("\0", "") or "x")
    report = Report(method_id=method_id)
    result = RunResult(report, out)
    assert result.report is report and result.out_dir == out
    assert result.report_path == out / "report.json" and result.report_path.parent == out


ERRORS = [(ConfigError, ValueError), (InputError, ValueError), (DataError, ValueError),
          (UnknownMethodError, LookupError), (NotFittedError, RuntimeError),
          (SolverError, RuntimeError), (BackendError, ConnectionError),
          (MissingDependencyError, ImportError)]


@SETTINGS
@given(st.sampled_from(ERRORS), st.text(max_size=30))
def test_errors_are_trustlab_errors_and_their_builtin_with_one_line_messages(pair, message):
    cls, builtin = pair
    with pytest.raises(TrustlabError) as caught:
        raise cls(message)
    assert isinstance(caught.value, builtin)
    text = str(caught.value)
    assert "\n" not in text and text == " ".join(message.split())


def test_missing_dependency_error_names_the_extra_to_install():
    exc = MissingDependencyError.for_package("onnx", "verify", "Loading ONNX networks")
    assert isinstance(exc, ImportError) and "pip install 'trustlab[verify]'" in str(exc)
    assert "onnx" in str(exc) and "Loading ONNX networks" in str(exc)
