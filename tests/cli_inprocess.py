"""``trustlab ARGV`` through ``cli.main`` in-process, for tests: the console script's path
(one-line errors and exit codes included) without a second interpreter importing torch."""

from __future__ import annotations

import sys

import pytest


def run_cli(argv: list[str], capsys) -> tuple[int, str, str]:
    """Exit code, stdout and stderr of ``trustlab ARGV`` run through ``cli.main``."""
    from trustlab import cli

    capsys.readouterr()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(sys, "argv", ["trustlab", *argv])
        try:
            cli.main()
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
    out = capsys.readouterr()
    return code, out.out, out.err
