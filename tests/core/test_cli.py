import subprocess
import sys
import time

import pytest
from tests.cli_inprocess import run_cli

from trustlab.core.catalogue import CATALOGUE


def trustlab(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "trustlab.cli", *args], capture_output=True, text=True, timeout=120
    )


def test_version_and_list():
    out = trustlab("--version")
    assert out.returncode == 0 and out.stdout.startswith("trustlab ")
    listing = trustlab("list")
    assert listing.returncode == 0
    for info in CATALOGUE:
        assert info.id in listing.stdout


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (("run", "no-such-method"), "Unknown method id 'no-such-method'"),
        (("report", "/nonexistent/dir"), "does not exist"),
        (("run", "all", "--set", "x=1"), "takes no --config or --set"),
    ],
)
def test_user_errors_are_one_line_exit_2(args, fragment):
    out = trustlab(*args)
    assert out.returncode == 2, out.stderr
    assert fragment in out.stderr
    assert "Traceback" not in out.stderr and len(out.stderr.strip().splitlines()) == 1


def test_cli_start_imports_no_method_package():
    """`trustlab list` / `--version` must stay instant: no method package (torch, ...) imported."""
    code = (
        "import sys; import trustlab.cli as c; c._mount_method_clis(['list']);"
        "from trustlab.core.registry import implemented_ids; implemented_ids();"
        "print(sorted(m for m in sys.modules if m.startswith('trustlab.methods.')), 'torch' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[] False"


def test_bad_config_values_exit_2_naming_the_key(tmp_path):
    bad_yaml = tmp_path / "bad.yaml"
    bad_yaml.write_text("n_splits: [1,\n")
    cases = [
        (("run", "hcc", "--set", "n_splits=0"), "'n_splits'"),
        (("run", "hcc", "--set", "no_such_key=1"), "Valid keys:"),
        (("run", "hcc", "--config", str(bad_yaml)), "not valid YAML"),
        (("run", "hcc", "--config", str(tmp_path / "missing.yaml")), "does not exist"),
    ]
    for args, fragment in cases:
        out = trustlab(*args, "--out", str(tmp_path / "never"))
        assert out.returncode == 2, (args, out.stderr)
        assert fragment in out.stderr and "Traceback" not in out.stderr, (args, out.stderr)
        assert len(out.stderr.strip().splitlines()) == 1, out.stderr
    assert not (tmp_path / "never").exists()


def test_serve_routes_to_the_method_service():
    out = trustlab("serve", "lisa", "--help")
    assert out.returncode == 0, out.stderr
    assert "--db" in out.stdout and "--token" in out.stdout
    bad = trustlab("serve", "hcc")
    assert bad.returncode == 2 and "offers no service" in bad.stderr


def _main(argv: list[str], capsys) -> tuple[int, str, str]:
    """``trustlab ARGV`` in-process: exit code, stdout, stderr."""
    return run_cli(argv, capsys)


def test_verify_alias_reaches_flowreach(capsys):
    """`trustlab verify ARGS` is `trustlab flowreach verify ARGS`: the real command's help (its
    --result-file option, which the alias's stub lacks) and its one-line input error."""
    code, out, err = _main(["verify", "--help"], capsys)
    assert code == 0, err
    assert "--benchmark" in out and "--result-file" in out
    code, out, err = _main(["verify", "/nonexistent/net.onnx", "/nonexistent/prop.vnnlib"], capsys)
    assert code == 2 and "does not exist" in err and "Traceback" not in err, err
    assert len(err.strip().splitlines()) == 1, err


def test_usage_errors_are_one_line_exit_2():
    """click's own errors (missing argument, unknown option, bad type) are one line too."""
    for args, fragment in [
        (("run",), "Missing argument 'method'"),
        (("run", "hcc", "--bogus"), "No such option: --bogus"),
        (("run", "hcc", "--seed", "x"), "Invalid value for '--seed'"),
        (("run", "hcc", "--seed", "-1"), "seed must be an integer"),
        (("run", "hcc", "--quick", "--full"), "exclude each other"),
        (("organisms", "build"), "Missing argument 'name'"),
        (("report",), "Missing argument 'directory'"),
    ]:
        out = trustlab(*args)
        assert out.returncode == 2, (args, out.stderr)
        assert fragment in out.stderr and "Traceback" not in out.stderr, (args, out.stderr)
        assert len(out.stderr.strip().splitlines()) == 1, (args, out.stderr)
    assert "(see 'trustlab run --help')" in trustlab("run", "hcc", "--bogus").stderr


def test_output_path_checked_before_the_run_starts(tmp_path):
    existing = tmp_path / "existing_file"
    existing.write_text("keep me")
    for out, fragment in [(existing, "exists and is a file"),
                          (existing / "below", "'" + str(existing) + "' is a file")]:
        start = time.perf_counter()
        proc = trustlab("run", "hcc", "--out", str(out))  # the full run would take minutes
        assert proc.returncode == 2 and fragment in proc.stderr, proc.stderr
        assert len(proc.stderr.strip().splitlines()) == 1
        assert time.perf_counter() - start < 30
    assert existing.read_text() == "keep me"
    proc = trustlab("run", "all", "--out", str(existing))
    assert proc.returncode == 2 and "exists and is a file" in proc.stderr
    assert "plan:" not in proc.stdout  # refused before the plan, let alone a run


def test_config_dir_and_missing_user_paths_name_the_problem(tmp_path):
    proc = trustlab("run", "hcc", "--config", str(tmp_path))
    assert proc.returncode == 2 and "is a directory; give a YAML file" in proc.stderr
    for key, method in (("cifar10h.dir", "hcc"), ("data_dir", "flowreach")):
        proc = trustlab("run", method, "--quick", "--set", f"{key}=/typo",
                        "--out", str(tmp_path / "never"))
        assert proc.returncode == 2, proc.stderr
        assert f"'{key}' parameter of {method}" in proc.stderr and "'/typo'" in proc.stderr
        assert len(proc.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "never").exists()


def test_report_lists_damaged_reports_with_a_reason(tmp_path):
    cases = {"list": "[1, 2]", "empty": "{}", "nohead": '{"method_id": "hcc"}',
             "broken": '{"method_id": ', "badmetric": '{"method_id": "x", "headline": {}, '
             '"metrics": {"m": 3}}'}
    for name, text in cases.items():
        (tmp_path / name).mkdir()
        (tmp_path / name / "report.json").write_text(text)
    proc = trustlab("report", str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    assert proc.stdout.startswith("0 report(s) indexed (5 damaged, not shown)")
    reasons = {}
    for line in proc.stderr.strip().splitlines():
        path, _, why = line.removeprefix("damaged: ").partition("report.json: ")
        reasons[path.rstrip("/").rsplit("/", 1)[-1]] = why
    assert reasons.pop("broken").startswith("not valid JSON (line 1:")
    assert reasons == {
        "badmetric": "metric 'm' has no value",
        "empty": "is an empty object",
        "list": "holds a JSON list, not a report object",
        "nohead": "has no 'headline'",
    }
    page = (tmp_path / "index.html").read_text()
    assert "Damaged files (5, not shown)" in page and "<tr data-run=" not in page
