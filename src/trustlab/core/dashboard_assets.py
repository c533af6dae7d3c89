"""The dashboard's stylesheet and script, written beside the pages (no CDN, no network).

The script is plain, dependency-free JavaScript (no build step): sorting and filtering of the
index, the "compare selected" action, and choosing which runs a comparison page shows. Every
page is complete without it: the index lists every run, run pages and comparison pages are
static HTML.
"""

from __future__ import annotations

__all__ = ["DASHBOARD_CSS", "DASHBOARD_JS"]

DASHBOARD_CSS = """
:root{--fg:#1d2430;--muted:#57606a;--line:#d0d7de;--head:#f3f5f7;--ok:#1a7f37;--bad:#cf222e;
--focus:#0969da}
body{font-family:system-ui,-apple-system,"Segoe UI",sans-serif;margin:1.5rem auto;max-width:78rem;
padding:0 1rem;color:var(--fg);line-height:1.4}
h1{margin-bottom:.2rem} h2{border-bottom:1px solid var(--line);padding-bottom:.3rem;margin-top:2rem}
a{color:#0550ae} a:focus,button:focus,input:focus,select:focus{outline:3px solid var(--focus);
outline-offset:1px}
table{border-collapse:collapse;margin:.6rem 0;font-size:.9rem}
td,th{border:1px solid var(--line);padding:.25rem .55rem;text-align:left;vertical-align:top}
th{background:var(--head)} .meta{color:var(--muted);font-size:.85rem}
.num{font-variant-numeric:tabular-nums;white-space:nowrap}
.status-ok{color:var(--ok);font-weight:600} .status-failed{color:var(--bad);font-weight:600}
th button{font:inherit;font-weight:600;background:none;border:0;padding:0;cursor:pointer;
color:inherit} th button::after{content:" \\2195";color:var(--muted)}
th[aria-sort=ascending] button::after{content:" \\2191"} th[aria-sort=descending] button::after{content:" \\2193"}
.controls{display:flex;flex-wrap:wrap;gap:.8rem;align-items:end;margin:.8rem 0}
.controls label{display:flex;flex-direction:column;font-size:.85rem;color:var(--muted)}
.controls input,.controls select,.controls button{font:inherit;padding:.25rem .4rem}
ul.hl{margin:0;padding-left:1rem} .side{display:flex;gap:1rem;overflow-x:auto;align-items:flex-start}
.side>div{flex:0 0 auto;max-width:38rem} figure{margin:1rem 0} figure img{max-width:100%;
border:1px solid #eee} figcaption{color:var(--muted);font-size:.85rem}
.scroll{overflow-x:auto}
pre.error{background:#fff5f5;border:1px solid #f3c2c2;padding:.6rem;white-space:pre-wrap}
[hidden]{display:none!important}
"""

DASHBOARD_JS = r"""
(function () {
  "use strict";
  function $(sel, root) { return (root || document).querySelector(sel); }
  function $all(sel, root) { return Array.prototype.slice.call((root || document).querySelectorAll(sel)); }

  // ---- the index: filter, sort, compare --------------------------------------------------
  function initIndex() {
    var table = $("#runs");
    if (!table) { return; }
    var controls = $("#controls");
    controls.hidden = false;
    var rows = $all("tbody tr", table);
    var text = $("#filter-text"), method = $("#filter-method"), status = $("#filter-status");
    var count = $("#shown-count"), message = $("#compare-message");

    function apply() {
      var q = text.value.trim().toLowerCase(), m = method.value, s = status.value, shown = 0;
      rows.forEach(function (tr) {
        var ok = (!m || tr.dataset.method === m) && (!s || tr.dataset.status === s) &&
                 (!q || tr.textContent.toLowerCase().indexOf(q) >= 0);
        tr.hidden = !ok;
        if (ok) { shown += 1; }
      });
      count.textContent = shown + " of " + rows.length + " runs shown";
    }
    [text, method, status].forEach(function (el) {
      el.addEventListener("input", apply); el.addEventListener("change", apply);
    });

    $all("thead th[data-sort] button", table).forEach(function (button) {
      button.addEventListener("click", function () {
        var th = button.parentNode, key = th.dataset.sort;
        var dir = th.getAttribute("aria-sort") === "ascending" ? "descending" : "ascending";
        $all("thead th", table).forEach(function (other) { other.removeAttribute("aria-sort"); });
        th.setAttribute("aria-sort", dir);
        var sign = dir === "ascending" ? 1 : -1, body = $("tbody", table);
        rows.sort(function (a, b) {
          var x = a.dataset[key] || "", y = b.dataset[key] || "";
          return (x < y ? -1 : x > y ? 1 : 0) * sign;
        });
        rows.forEach(function (tr) { body.appendChild(tr); });
      });
    });

    $("#compare-button").addEventListener("click", function () {
      var picked = $all("tbody input[type=checkbox]:checked", table).map(function (box) {
        return box.closest("tr");
      });
      var methods = picked.map(function (tr) { return tr.dataset.method; });
      var failed = picked.filter(function (tr) { return tr.dataset.status !== "ok"; });
      if (picked.length < 2) { message.textContent = "Select two or more runs to compare."; return; }
      if (methods.some(function (x) { return x !== methods[0]; })) {
        message.textContent = "Select runs of one method: a comparison is within a method."; return;
      }
      if (failed.length) { message.textContent = "A failed run has no report to compare."; return; }
      picked.sort(function (a, b) {  // the earliest run first: it is the baseline
        var x = a.dataset.started + a.dataset.run, y = b.dataset.started + b.dataset.run;
        return x < y ? -1 : x > y ? 1 : 0;
      });
      var runs = picked.map(function (tr) { return encodeURIComponent(tr.dataset.run); }).join(",");
      window.location.href = picked[0].dataset.compare + "?runs=" + runs;
    });
    apply();
  }

  // ---- a comparison page: show the chosen runs, deltas against the first shown ---------
  function fmt(v) {
    if (v === 0) { return "0"; }
    var a = Math.abs(v);
    if (a >= 1e-3 && a < 1e6) { return String(Number(v.toPrecision(4))); }
    // Python writes 1.234e-05: a two-digit exponent
    return v.toExponential(3).replace(/e([+-])(\d)$/, function (_, s, d) { return "e" + s + "0" + d; });
  }
  function initCompare() {
    var page = $("#compare");
    if (!page) { return; }
    var params = new URLSearchParams(window.location.search);
    var wanted = (params.get("runs") || "").split(",").filter(Boolean).map(decodeURIComponent);
    var all = $all("[data-run-col]", page).map(function (el) { return el.dataset.runCol; });
    var known = all.filter(function (r, i) { return all.indexOf(r) === i; });
    var show = wanted.filter(function (r) { return known.indexOf(r) >= 0; });
    if (show.length < 1) { show = known; }
    $all("[data-run-col]", page).forEach(function (el) {
      el.hidden = show.indexOf(el.dataset.runCol) < 0;
    });
    var base = show[0];
    $("#baseline-name").textContent = base;
    $all("tr[data-metric-row]", page).forEach(function (tr) {
      var baseCell = $("[data-run-col='" + CSS.escape(base) + "'] [data-value]", tr) ||
                     $("td[data-run-col='" + CSS.escape(base) + "'][data-kind=value]", tr);
      var bv = baseCell ? JSON.parse(baseCell.dataset.value) : null;
      $all("td[data-kind=delta]", tr).forEach(function (td) {
        var cell = $("td[data-run-col='" + CSS.escape(td.dataset.runCol) + "'][data-kind=value]", tr);
        var v = cell ? JSON.parse(cell.dataset.value) : null;
        if (typeof v === "number" && typeof bv === "number" && td.dataset.runCol !== base) {
          var d = v - bv;
          td.dataset.delta = JSON.stringify(d);
          td.textContent = (d > 0 ? "+" : "") + fmt(d);
        } else {
          delete td.dataset.delta;
          td.textContent = td.dataset.runCol === base ? "baseline" : "\u2014";
        }
      });
    });
    $("#compare-count").textContent = show.length + " of " + known.length + " runs shown";
  }

  document.addEventListener("DOMContentLoaded", function () { initIndex(); initCompare(); });
})();
"""
