"""The run viewer in a real headless browser: Debian's chromium driven by Playwright (``make browser-tools``).

Two runs by the embedded model (IO and CoT on GSM8K) and one scripted run per method view; the test opens
the served site, a run, a problem and its calls, compares the two embedded runs, and opens the static export
from ``file://``. With ``AGENTIC_VIEWER_SCREENSHOTS=docs/viewer`` it also writes the screenshots of docs/viewer.md.
"""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from tests.conftest import make_spec, run, run_e2e
from tests.doubles import ScriptedBackbone
from agentic_repro.viewer import cli, data, site

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]
CHROMIUM = "/usr/bin/chromium"
EMBEDDED = ["benchmark=gsm8k", "backbone=local", "limit=2", "backbone.sampling.max_tokens=256", "experiment=viewer"]


def scripted_method_runs(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """DynaGraph, DyFlow, DenoiseFlow and AUQ runs with the scripted double, for their views."""
    import tests.test_auq_method as ta
    import tests.test_denoiseflow as tdf
    import tests.test_dyflow as tdy
    import tests.test_dynagraph as tdg
    import tests.test_viewer as tv

    tiny = root / "data"
    (tiny / "tiny").mkdir(parents=True)
    (tiny / "tiny" / "test.jsonl").write_text("".join(
        json.dumps({"id": f"p{i}", "q": f"What is {i}+{i}?", "a": str(2 * i)}) + "\n" for i in range(4)))
    monkeypatch.setenv("AGENTIC_REPRO_DATA", str(tiny))
    tv.io_run(root / "io_a", tv.right_on_1, seed=1)                   # p1 right
    tv.io_run(root / "io_b", tv.right_on_1_and_2, seed=2)             # p1 and p2 right: A wrong / B right on p2
    run(make_spec(root / "dg", tdg.method_cfg(), limit=1), ScriptedBackbone(tdg.script_factory()))
    tdy.run_dyflow(root / "dy", tdy.Script([[tdy.SOLVE], [tdy.ORGANIZE]]))
    run(make_spec(root / "df", tdf.df_method("full"), limit=1), ScriptedBackbone(tdf.world))
    counter = root / "counter"
    monkeypatch.setenv("AGENTIC_REPRO_DATA", str(counter))

    def auq_script(messages, sampling):
        text = messages[-1]["content"]
        if ta.REFLECT in text:
            return ta.reply(ta._right(text), 0.9)
        return ta.reply(ta._right(text), 0.95 if ta._now(text)[0] == 0 else 0.5, "maybe")
    run(ta._spec(root / "auq", counter, [2], "dual"), ScriptedBackbone(auq_script))


def test_open_a_run_a_problem_its_calls_and_compare_two_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    assert Path(CHROMIUM).exists(), "chromium is missing: make browser-tools"
    _, m_io = run_e2e(tmp_path / "embedded", ["method=io", *EMBEDDED])
    _, m_cot = run_e2e(tmp_path / "embedded", ["method=cot", *EMBEDDED])
    assert m_io["n"] == m_cot["n"] == 2 and m_io["n_errors"] == m_cot["n_errors"] == 0
    scripted_method_runs(tmp_path / "scripted", monkeypatch)
    shots = browse([tmp_path / "embedded" / "results", tmp_path / "scripted"], tmp_path)
    if os.environ.get("AGENTIC_VIEWER_SCREENSHOTS"):
        dest = Path(os.environ["AGENTIC_VIEWER_SCREENSHOTS"])
        dest.mkdir(parents=True, exist_ok=True)
        for png in shots.iterdir():
            shutil.copy(png, dest / png.name)


def browse(roots: list[Path], tmp_path: Path) -> Path:
    """Drive the site of ``roots`` (an embedded IO and CoT run on GSM8K, the scripted method runs) in chromium;
    returns the folder of screenshots."""
    from playwright.sync_api import expect, sync_playwright

    shots = tmp_path / "shots"
    shots.mkdir()
    out = tmp_path / "site"
    site.build(roots, out, quiet=True)
    runs = {r.rel: r for root in roots for r in data.find_runs(root)}
    io_run = next(r for r in runs.values() if r.method == "io" and r.benchmark == "gsm8k")
    cot_run = next(r for r in runs.values() if r.method == "cot" and r.benchmark == "gsm8k")
    io_preds = data.problems_of(io_run)
    server = cli.serve(out, 0)
    base = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, timeout=60_000,
                                         args=["--no-sandbox", "--disable-gpu"])
            try:
                page = browser.new_page(viewport={"width": 1280, "height": 800})
                page.set_default_timeout(20_000)
                page.goto(f"{base}/index.html")
                expect(page.locator("a.run-link")).to_have_count(len(runs))
                page.screenshot(path=str(shots / "runs.png"), full_page=True)
                page.fill("#q", "gsm8k")                                   # the text filter hides the others
                gsm8k = sum(1 for r in runs.values() if r.benchmark == "gsm8k")
                expect(page.locator("#runs tbody tr:visible")).to_have_count(gsm8k)

                page.click(f'tr[data-id="{io_run.id}"] a.run-link')
                expect(page.locator("h1")).to_contain_text("io on gsm8k")
                expect(page.locator("#problems tbody tr")).to_have_count(len(io_preds))
                wrong = sum(1 for r in data.problem_rows(io_run) if r["wrong"])
                page.check('input[name="pf"][value="wrong"]')
                expect(page.locator("#problems tbody tr:visible")).to_have_count(wrong)
                page.check('input[name="pf"][value=""]')
                page.screenshot(path=str(shots / "run.png"), full_page=True)

                first = next(iter(io_preds.values()))
                page.click(f'a.problem-link:text-is("{first["id"]}")')
                call = page.locator("details.call").first
                expect(page.locator("details.call")).to_have_count(1)
                call.locator("summary").click()
                question = first["trace"]["messages"][-1]["content"].splitlines()[0]
                expect(call.locator(".msg.user pre")).to_contain_text(question)     # the full prompt, from the cache
                expect(call.locator("pre.reply")).to_have_text(first["raw_output"])  # and the model's reply
                expect(call.locator("summary")).to_contain_text("qwen2.5-coder-0.5b")
                page.screenshot(path=str(shots / "problem.png"), full_page=True)

                page.goto(f"{base}/index.html")
                page.check(f'input.pick[value="{io_run.id}"]')
                page.check(f'input.pick[value="{cot_run.id}"]')
                page.click("#compare-btn")
                expect(page.locator("#compare tbody tr")).to_have_count(len(io_preds))
                expect(page.locator("#compare-summary")).not_to_be_empty()
                page.check('input[name="cf"][value="a-better"]')
                io_rows = {r["id"]: r for r in data.problem_rows(io_run)}
                cot_rows = {r["id"]: r for r in data.problem_rows(cot_run)}
                a_only = sum(1 for k in io_rows if io_rows[k]["right"] and cot_rows[k]["wrong"])
                expect(page.locator("#compare tbody tr:visible")).to_have_count(a_only)
                page.check('input[name="cf"][value=""]')
                page.screenshot(path=str(shots / "compare.png"), full_page=True)

                # two scripted runs of known outcomes, ticked B first: the first ticked is A
                one = next(r for r in runs.values() if r.method == "io" and r.seed == 1)   # right on p1
                two = next(r for r in runs.values() if r.method == "io" and r.seed == 2)   # right on p1 and p2
                page.goto(f"{base}/index.html")
                page.check(f'input.pick[value="{two.id}"]')
                page.check(f'input.pick[value="{one.id}"]')
                page.click("#compare-btn")
                expect(page.locator("#run-a")).to_have_value(two.id)
                expect(page.locator("#compare-summary")).to_have_text(
                    "both wrong: 2 · both right: 1 · a right b wrong: 1")
                page.check('input[name="cf"][value="a-better"]')
                expect(page.locator("#compare tbody tr:visible")).to_have_count(1)
                expect(page.locator("#compare tbody tr:visible td").first).to_have_text("p2")
                page.locator("#compare tbody tr:visible a").first.click()           # A's answer: its problem page
                expect(page.locator("h1")).to_contain_text("p2")
                expect(page.locator("nav")).to_contain_text("seed 2")

                for method, selector, name in (("dynagraph", "#dag svg", "dynagraph.png"),
                                               ("dyflow", ".view.dyflow svg", "dyflow.png"),
                                               ("denoiseflow", ".view.denoiseflow .card", "denoiseflow.png"),
                                               ("auq_dual", "#confidence-curve svg", "auq.png")):
                    r = next(r for r in runs.values() if r.method == method)
                    row = data.problem_rows(r)[0]
                    page.goto(f"{base}/runs/{r.id}/p/{row['page']}")
                    expect(page.locator(selector).first).to_be_visible()
                    page.locator(".view").first.screenshot(path=str(shots / name))

                # the export opens without a server: the comparison loads its runs from file://
                page.goto((out / "compare.html").as_uri() + f"?a={io_run.id}&b={cot_run.id}")
                expect(page.locator("#compare tbody tr")).to_have_count(len(io_preds))
            finally:
                browser.close()
    finally:
        server.shutdown()
        server.server_close()
    for png in ("runs", "run", "problem", "compare", "dynagraph", "dyflow", "denoiseflow", "auq"):
        assert (shots / f"{png}.png").stat().st_size > 5_000, png
    return shots


def test_graded_pairs_are_higher_or_lower_and_a_killed_resume_is_running_stale(tmp_path: Path,
                                                                               monkeypatch: pytest.MonkeyPatch):
    """Issue 29 items 5 and 8 as a reader sees them: two F1-scored runs (0.67 vs 0.4 on p1) are "a higher", never
    "both wrong"; a run re-run at a smaller limit shows the interval of what metrics.json covers. Scripted runs only
    (no model server)."""
    from playwright.sync_api import expect, sync_playwright

    import tests.test_viewer as tv

    assert Path(CHROMIUM).exists(), "chromium is missing: make browser-tools"
    tiny = tmp_path / "data"
    (tiny / "tiny").mkdir(parents=True)
    (tiny / "tiny" / "test.jsonl").write_text("".join(
        json.dumps({"id": f"p{i}", "q": f"What is {i}+{i}?", "a": str(2 * i)}) + "\n" for i in range(8)))
    monkeypatch.setenv("AGENTIC_REPRO_DATA", str(tiny))
    f1 = tmp_path / "f1"
    tv.f1_run(f1, lambda m, s: "ANSWER: 2 apples x y" if "1+1" in m[-1]["content"] else "ANSWER: 0 apples", 1)
    tv.f1_run(f1, lambda m, s: "ANSWER: 2 apples x y z w q r" if "1+1" in m[-1]["content"] else "ANSWER: 0 apples", 2)
    rerun = tmp_path / "rerun"
    tv.io_run(rerun, tv.right_from_4, limit=8)
    tv.io_run(rerun, tv.right_from_4, limit=4)
    runs = {r.seed: r for r in data.find_runs(f1 / "results")}
    (small,) = data.find_runs(rerun / "results")
    out = tmp_path / "site"
    site.build([f1 / "results", rerun / "results"], out, quiet=True)
    shots = tmp_path / "shots"
    shots.mkdir()
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, timeout=60_000,
                                     args=["--no-sandbox", "--disable-gpu"])
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 700})
            page.set_default_timeout(20_000)
            page.goto((out / "compare.html").as_uri() + f"?a={runs[1].id}&b={runs[2].id}")
            expect(page.locator("#compare tbody tr")).to_have_count(2)
            expect(page.locator("#compare-summary")).to_have_text("same score: 1 · a higher: 1")
            expect(page.locator("#compare tbody tr").nth(1).locator("td").last).to_have_text("a higher")
            page.check('input[name="cf"][value="a-better"]')
            expect(page.locator("#compare tbody tr:visible")).to_have_count(1)
            expect(page.locator('label[data-binary-only]')).to_be_hidden()          # no "both wrong" for F1
            page.screenshot(path=str(shots / "compare-graded.png"), full_page=True)
            page.goto((out / "runs" / small.id / "index.html").as_uri())
            expect(page.locator("#score")).to_contain_text("0.0% [0.0, 49.0]")
            expect(page.locator("#problems tbody tr")).to_have_count(4)
            expect(page.locator("#covers")).to_contain_text("metrics.json covers 4 problems")
            page.screenshot(path=str(shots / "run-rerun.png"), full_page=True)
        finally:
            browser.close()
    if os.environ.get("AGENTIC_VIEWER_SHOTS_29"):
        for png in shots.iterdir():
            shutil.copy(png, Path(os.environ["AGENTIC_VIEWER_SHOTS_29"]) / png.name)
