import subprocess
import sys

import pytest

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


def test_verify_alias_reaches_flowreach():
    out = trustlab("verify", "--help")
    assert out.returncode == 0, out.stderr
    assert "--benchmark" in out.stdout
    missing = trustlab("verify", "/nonexistent/net.onnx", "/nonexistent/prop.vnnlib")
    assert missing.returncode == 2 and "Traceback" not in missing.stderr, missing.stderr
