"""`evalkit view`: the static viewer loaded in headless Chromium (Debian's `chromium` package).

The test installs nothing: without a Chromium binary it skips, saying so (`.ci/run` installs it).
Chromium is driven directly over its DevTools pipe (tests/support/browser.py), one browser for the
module and a new tab per page: a page's DOM is read after its scripts ran on a virtual-time
budget (data files added with <script src> pause the clock, so the session page is complete), and
every console message, uncaught exception or browser log entry (a blocked or failed load) the tab
produced fails the test."""

from __future__ import annotations

import html
import json
import re
import shutil
from pathlib import Path
from urllib.parse import urlencode

import pytest

from evalkit.cli import main
from tests.support.report_lint import check_file

FAKE_KEY = "sk-proj-" + "Zx9" * 12
PLANTED = [
    "<script>document.title='PWNED'</script> planted in a user message",
    f"the key {FAKE_KEY} must never reach the viewer",
    "<img src=x onerror=\"document.title='PWNED'\"> and | a | table | row",
]
BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


def _browser() -> str:
    for name in BROWSERS:
        path = shutil.which(name)
        if path:
            return path
    pytest.skip("no Chromium binary on PATH (apt-get install chromium; .ci/run installs it)")


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    """One headless Chromium for the module's pages (tests/support/browser.py), each page in a new
    tab; it skips, saying so, where there is no Chromium."""
    from tests.support.browser import Browser

    b = Browser(_browser(), tmp_path_factory.mktemp("chromium-profile"))
    yield b
    b.close()


def load_page(browser, index: Path, fragment: dict | None = None, screenshot: Path | None = None):
    """(DOM after the scripts ran, console lines) of the viewer page at ``fragment``; any line
    (an error, an uncaught exception, a blocked or failed load) is a failure."""
    url = index.resolve().as_uri() + ("#" + urlencode(fragment) if fragment else "")
    return browser.load(url, screenshot=screenshot)


@pytest.fixture(scope="module")
def viewed_run(tmp_path_factory) -> tuple[Path, str]:
    """A 3-session synthetic run (baseline and carry-all, which carries user messages verbatim),
    with markup planted in a user message of the first session; ``evalkit view`` written."""
    tmp = tmp_path_factory.mktemp("view")
    assert main(["synth", "--sessions", "3", "--out", str(tmp / "src")]) == 0
    lines = (tmp / "src/sessions.jsonl").read_text().splitlines()
    s = json.loads(lines[0])
    user = [m for m in s["messages"] if m["role"] == "user"][1]
    user["blocks"][0]["text"] = "\n".join(PLANTED) + "\n" + user["blocks"][0]["text"]
    lines[0] = json.dumps(s)
    (tmp / "src/sessions.jsonl").write_text("\n".join(lines) + "\n")
    cfg = tmp / "exp.toml"
    cfg.write_text(
        f'name = "viewed"\n[corpus]\nkind = "path"\npath = "{tmp / "src/sessions.jsonl"}"\n'
        '[replay]\narms = ["baseline", "carry-all"]\nworkers = 2\n'
    )
    run = tmp / "run"
    assert main(["run", "--config", str(cfg), "--run-dir", str(run)]) == 0
    assert main(["view", str(run), "--workers", "1"]) == 0
    return run, s["id"]


def test_view_writes_a_self_contained_folder(viewed_run):
    run, _ = viewed_run
    view = run / "view"
    assert {p.name for p in view.iterdir()} == {"index.html", "app.js", "app.css", "data"}
    page = (view / "index.html").read_text() + (view / "app.js").read_text()
    # no network: no absolute URL is loaded, only this folder's files
    assert not re.search(r"(src|href)=\"(https?:)?//", page)
    files = sorted(p.name for p in (view / "data").iterdir())
    assert "overview.js" in files and sum(f.endswith("-baseline.js") for f in files) == 3
    # session texts are data in ASCII JSON: the planted tag is not in any file as markup
    texts = [p.read_text(encoding="ascii") for p in (view / "data").iterdir()]
    assert not any("<script" in t for t in texts)
    # the planted key is redacted wherever the planted message shows (carried texts, excerpts)
    assert not any(FAKE_KEY in t for t in texts) and any("[REDACTED:" in t for t in texts)
    # the run folder's report now links its evidence to the viewer, and every link resolves
    report = (run / "report" / "report.md").read_text()
    assert "../view/index.html#cand=carry-all&s=" in report
    assert check_file(run / "report" / "report.md") == []


def test_overview_candidate_and_session_pages_in_chromium(viewed_run, browser, tmp_path):
    run, session = viewed_run
    index = run / "view" / "index.html"
    shots = tmp_path / "shots"
    shots.mkdir()

    dom, console = load_page(browser, index, screenshot=shots / "overview.png")
    assert console == []
    assert 'data-page="overview"' in dom and 'data-ready="1"' in dom
    assert '<div id="errors" hidden="">' in dom and "could not be built" not in dom
    assert 'href="#cand=carry-all"' in dom  # the verdict row links the candidate page
    for heading in ("Verdicts", "Effects (every decision metric)", "Scorecard", "Metric means", "Sessions"):
        assert f">{heading}</h2>" in dom, heading

    dom, console = load_page(browser, index, {"cand": "carry-all"}, shots / "candidate.png")
    assert console == [] and 'data-page="candidate"' in dom
    top = dom.split('class="top"')[1].split("</table>")[0]
    assert top.count("<tr") >= 2 and 'href="#cand=carry-all&amp;s=' in top

    dom, console = load_page(browser, index, {"cand": "carry-all", "s": session}, shots / "event.png")
    assert console == [] and 'data-page="session"' in dom and 'data-ready="1"' in dom
    events = dom.count('class="event"')
    assert events >= 1
    assert dom.count('class="pane baseline"') == events and dom.count('class="pane candidate"') == events
    assert 'class="mark kept"' in dom and 'class="mark lost"' in dom
    assert 'class="line ins"' in dom  # carry-all's carried texts differ from the baseline's
    # The planted markup is shown as text and never ran: no PWNED title, no <img> element, the
    # only scripts are the viewer's own files.
    assert "<title>evalkit viewer</title>" in dom and "PWNED</title>" not in dom
    assert html.escape(PLANTED[0], quote=False) in dom
    assert "<img" not in dom
    scripts = re.findall(r"<script[^>]*>", dom)
    assert scripts and all(re.fullmatch(r'<script src="(app\.js|data/[\w.-]+\.js)">', t) for t in scripts)
    for name in ("overview.png", "candidate.png", "event.png"):
        assert (shots / name).stat().st_size > 10_000, name


def test_a_real_session_run_in_chromium(transcripts, browser, tmp_path):
    """Real recorded sessions (Claude Code, from ../shared/transcripts) under a message-count
    trigger: every page loads without a console message, the panes and marks are there, and the
    sessions' own markup (command tags in user messages) shows as text."""
    src = transcripts / "claude-code" / "d-kimuson-claude-code-viewer"
    if not src.is_dir():
        pytest.skip(f"{src} not present")
    assert main(["import", "auto", str(src), "--redact", "--out", str(tmp_path / "corpus")]) == 0
    cfg = tmp_path / "real.toml"
    cfg.write_text(
        f'name = "real"\n[corpus]\nkind = "path"\npath = "{tmp_path / "corpus"}"\n'
        '[replay]\narms = ["baseline", "masking"]\ntrigger = "messages"\nmax_messages = 20\nworkers = 2\n'
        "[continuation]\nenabled = false\n"
    )
    run = tmp_path / "run"
    assert main(["run", "--config", str(cfg), "--run-dir", str(run)]) == 0
    assert main(["view", str(run), "--workers", "1"]) == 0
    index = run / "view" / "index.html"
    overview = json.loads(
        (run / "view" / "data" / "overview.js").read_text().split(",", 1)[1].rsplit(");", 1)[0]
    )
    session = max(overview["sessions"], key=lambda s: s["events"].get("baseline", 0))["session"]
    for fragment, page in (({}, "overview"), ({"cand": "masking"}, "candidate")):
        dom, console = load_page(browser, index, fragment)
        assert console == [] and f'data-page="{page}"' in dom and 'data-ready="1"' in dom
    dom, console = load_page(browser, index, {"cand": "masking", "s": session})
    assert console == [] and 'data-page="session"' in dom
    events = dom.count('class="event"')
    assert events >= 2 and dom.count('class="pane baseline"') == events
    assert 'class="mark kept"' in dom or 'class="mark lost"' in dom
    assert "&lt;command-name&gt;" in dom and "<command-name>" not in dom


@pytest.mark.slow
def test_the_default_experiment_in_chromium(browser, tmp_path):
    """The default experiment (pyproject.toml's [tool.evalkit]: every arm, the exams' ceiling and
    floor, continuation), cut to 2 sessions to stay quick: every kind of page loads without a
    console message, and a candidate's session page has its side-by-side panes and marks."""
    from tests.support.cli import run_cli

    root = Path(__file__).resolve().parents[2]
    run = tmp_path / "run"
    # in this process (run_cli): the pages are under test here, not the process start
    done = run_cli("run", "--sessions", "2", "--run-dir", str(run), cwd=root)
    assert done.returncode == 0, done.stderr
    assert main(["view", str(run), "--workers", "1"]) == 0
    index = run / "view" / "index.html"
    overview = json.loads(
        (run / "view" / "data" / "overview.js").read_text().split(",", 1)[1].rsplit(");", 1)[0]
    )
    session = max(overview["sessions"], key=lambda s: s["events"].get("baseline", 0))["session"]
    for fragment, page in (({}, "overview"), ({"cand": "head-tail"}, "candidate")):
        dom, console = load_page(browser, index, fragment)
        assert console == [] and f'data-page="{page}"' in dom and 'data-ready="1"' in dom
    dom, console = load_page(browser, index, {"cand": "head-tail", "s": session})
    assert console == [] and 'data-page="session"' in dom and 'data-ready="1"' in dom
    events = dom.count('class="event"')
    assert events >= 1 and dom.count('class="pane candidate"') == events
    assert 'class="mark kept"' in dom or 'class="mark lost"' in dom
