"""core.runtime: torch threads and determinism are set for a block and restored after it."""

from __future__ import annotations

import subprocess
import sys

import pytest

from trustlab.core.errors import InputError
from trustlab.core.runtime import torch_runtime

torch = pytest.importorskip("torch")


def test_settings_apply_inside_and_restore_after_also_on_error():
    before = (torch.get_num_threads(), torch.are_deterministic_algorithms_enabled())
    target = 1 if before[0] != 1 else 2
    with torch_runtime(threads=target, deterministic=True):
        assert torch.get_num_threads() == target
        assert torch.are_deterministic_algorithms_enabled()
    assert (torch.get_num_threads(), torch.are_deterministic_algorithms_enabled()) == before
    with pytest.raises(RuntimeError, match="boom"), torch_runtime(threads=target,
                                                                   deterministic=True):
        raise RuntimeError("boom")
    assert (torch.get_num_threads(), torch.are_deterministic_algorithms_enabled()) == before


def test_none_leaves_settings_alone_and_decorator_form_restores():
    before = torch.get_num_threads()
    with torch_runtime():
        assert torch.get_num_threads() == before

    @torch_runtime(threads=1)
    def inner() -> int:
        return torch.get_num_threads()

    assert inner() == 1 and inner() == 1
    assert torch.get_num_threads() == before


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "2"])
def test_bad_thread_counts_are_input_errors(bad):
    with pytest.raises(InputError, match="'threads'"), torch_runtime(threads=bad):
        pass


def test_importing_core_does_not_import_torch_or_pyplot():
    code = ("import sys, trustlab.core, trustlab.core.runtime, trustlab.core.figures, "
            "trustlab.core.validation, trustlab.datasets.digits; "
            "print('torch' in sys.modules, 'matplotlib.pyplot' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]
