"""core.figures: Agg figures without pyplot, the shared panels, alt text, files written."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
from PIL import Image

from trustlab.core.errors import InputError
from trustlab.core.figures import (
    Series,
    alt_text,
    grouped_bars,
    metric_vs_parameter,
    new_figure,
    reliability_curve,
)
from trustlab.core.html_index import render_index
from trustlab.core.report import Report


def _line():
    x = np.array([0.05, 0.1, 0.2])
    return metric_vs_parameter(
        x, {"hcc": Series([0.95, 0.9, 0.8], lo=[0.93, 0.88, 0.77], hi=[0.97, 0.92, 0.83]),
            "split": [0.96, 0.91, 0.81]},
        xlabel="alpha", ylabel="coverage", title="coverage vs alpha", reference=0.9,
        reference_label="target")


def test_panels_draw_what_they_are_given():
    fig = _line()
    ax = fig.axes[0]
    assert ax.get_title() == "coverage vs alpha" and ax.get_xlabel() == "alpha"
    assert [line.get_label() for line in ax.get_lines()][:2] == ["hcc", "split"]
    np.testing.assert_allclose(ax.get_lines()[0].get_ydata(), [0.95, 0.9, 0.8])
    assert len(ax.collections) == 1  # one band: only 'hcc' has an interval
    fig, axes = new_figure(1, 2, title="two panels")
    grouped_bars(["a", "b"], {"m": Series([1.0, 2.0], lo=[0.5, 1.5], hi=[1.5, 2.5]),
                              "n": [1.5, 1.0]}, ax=axes[0, 0], ylabel="score")
    reliability_curve({"model": Series([0.1, 0.5, 0.8], x=[0.2, 0.5, 0.9])}, ax=axes[0, 1])
    assert len(axes[0, 0].patches) == 4
    assert axes[0, 1].get_xlim() == (0.0, 1.0)
    text = alt_text(fig)
    assert text.startswith("two panels.") and "Grouped bar chart of score" in text
    assert "Reliability plot" in text and "interval whiskers" in text


def test_alt_text_describes_data_and_reference():
    text = alt_text(_line())
    assert "line chart of coverage against alpha (0.05 to 0.2) for hcc, split" in text
    assert "shaded interval bands" in text and "dashed line at 0.9 (target)" in text
    assert "values from 0.77 to 0.97" not in text  # bands are not values: y range only
    assert "values from 0.8 to 0.96" in text


@pytest.mark.parametrize("call", [
    lambda: metric_vs_parameter([1, 2], {"a": [1, 2, 3]}, xlabel="x", ylabel="y"),
    lambda: metric_vs_parameter([1, 2], {}, xlabel="x", ylabel="y"),
    lambda: metric_vs_parameter([1, 2], {"a": Series([1, 2], lo=[0, 1])}, xlabel="x", ylabel="y"),
    lambda: grouped_bars([], {"a": []}, ylabel="y"),
    lambda: grouped_bars(["g"], {"a": Series([1.0], lo=[0.0, 1.0], hi=[2.0])}, ylabel="y"),
    lambda: reliability_curve({"a": [0.1, 0.2]}),
    lambda: new_figure(0, 1),
])
def test_bad_panel_inputs_are_input_errors(call):
    with pytest.raises(InputError):
        call()


def test_report_writes_png_with_title_and_alt_text(tmp_path):
    report = Report("hcc", title="t")
    report.metric("x", 1.0, headline=True)
    report.figure("coverage", _line(), caption="Coverage against alpha.")
    report.write(tmp_path)
    png = tmp_path / "figures" / "coverage.png"
    info = Image.open(png).info
    assert info["Title"] == "Coverage against alpha."
    assert info["Description"].startswith("coverage vs alpha: line chart of coverage")
    data = json.loads((tmp_path / "report.json").read_text())
    assert data["figures"]["coverage"]["alt"] == info["Description"]
    assert f"![{info['Description']}](figures/coverage.png)" in (tmp_path / "report.md").read_text()
    render_index(tmp_path)
    page = (tmp_path / "report.html").read_text()  # the run's page in the dashboard
    assert "alt='coverage vs alpha: line chart" in page


def test_figures_never_touch_pyplot_or_the_global_backend(tmp_path):
    code = (
        "import sys;"
        "from trustlab.core.figures import metric_vs_parameter;"
        "from trustlab.core.report import Report;"
        "r = Report('hcc'); r.metric('x', 1.0, headline=True);"
        "r.figure('f', metric_vs_parameter([1, 2], {'a': [1, 2]}, xlabel='x', ylabel='y'));"
        f"r.write({str(tmp_path)!r});"
        "print('matplotlib.pyplot' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False", out.stderr
    assert (tmp_path / "figures" / "f.png").stat().st_size > 1000


def test_grouped_bars_whiskers_span_each_interval_also_for_one_group():
    """One group: matplotlib must not read a size-1 whisker row as a scalar (a NumPy
    deprecation that a future NumPy turns into an error); the whiskers end at lo and hi."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fig = grouped_bars(["g"], {"a": Series([0.5], lo=[0.4], hi=[0.7]),
                                   "b": Series([0.6], lo=[0.2], hi=[0.9])}, ylabel="y")  # fmt: skip
    ends = sorted(float(y) for c in fig.axes[0].collections for seg in c.get_segments()
                  for y in seg[:, 1])  # fmt: skip
    assert ends == pytest.approx([0.2, 0.4, 0.7, 0.9])
