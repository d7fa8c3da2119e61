"""The textbook as a website (mkdocs.yml, `make docs`), checked in a real browser.

The site is built once (mkdocs build --strict, as `make docs` does), served
on a loopback port, and every page is loaded once in one headless Chromium
session: no page logs a console error, every link inside the site reaches a
page and an id on it, every picture loads, every rubric item's section is an
id on its chapter's page and on the grading page, every hint (<details>) is
closed on load with its body not displayed, and a screenshot of stage 01
shows the page. Skipped, with the reason, only where Chromium or its driver
is not installed (deps.sh test installs both on Debian).
"""
import contextlib
import fcntl
import functools
import http.server
import io
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import urllib.parse

import pytest

from conftest import ROOT, stages

CHROMIUM = shutil.which("chromium")
DRIVER = shutil.which("chromedriver")
WIDTH, HEIGHT = 1280, 1024
SHOT = "01-signal.html"          # the chapter whose screenshot is checked

pytestmark = pytest.mark.skipif(not (CHROMIUM and DRIVER),
                                reason="no chromium or chromedriver on PATH (apt-get install chromium chromium-driver)")

# What one page load collects, in one script: the DOM's ids, where its links
# go (resolved by the browser), its pictures, its hints.
COLLECT = """
// closed <details> content is content-visibility: hidden in Chromium, which
// leaves it boxes: checkVisibility() is what says whether it is rendered
const shown = e => e.checkVisibility();
const h1 = document.querySelector('article h1');
return {
  h1: h1 ? h1.textContent.replace(/\\u00b6$/, '').trim() : null,
  ids: Array.from(document.querySelectorAll('[id]'), e => e.id),
  links: Array.from(document.querySelectorAll('a[href]'), a => a.href),
  images: Array.from(document.querySelectorAll('article img'),
                     i => [i.src, i.complete && i.naturalWidth > 0]),
  details: Array.from(document.querySelectorAll('article details'), d => ({
    open: d.open,
    summary: d.firstElementChild ? d.firstElementChild.tagName : null,
    title: d.firstElementChild ? d.firstElementChild.textContent.trim() : '',
    body_shown: Array.from(d.children).slice(1).some(shown),
    body_elements: d.children.length - 1,   // 0: the body was left as raw Markdown text
  })),
  highlighted: document.querySelectorAll('article .highlight code span').length,
};
"""


def build(out):
    """mkdocs build --strict into out, as `make docs` does; an error message, or None."""
    proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet",
                           "-f", str(ROOT / "mkdocs.yml"), "-d", str(out)],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    return None if proc.returncode == 0 else f"mkdocs build --strict failed:\n{proc.stdout}{proc.stderr}"


@contextlib.contextmanager
def serve(site):
    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(site)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


@contextlib.contextmanager
def chromium():
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--hide-scrollbars", f"--window-size={WIDTH},{HEIGHT}"):
        opts.add_argument(arg)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(executable_path=DRIVER), options=opts)
    try:
        driver.set_page_load_timeout(30)
        # --window-size counts the window's frame: the viewport is set exactly here
        driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                               {"width": WIDTH, "height": HEIGHT, "deviceScaleFactor": 1, "mobile": False})
        yield driver
    finally:
        driver.quit()


def screenshot(browser, base, png_path, hinted):
    """What the screenshot of SHOT shows, and whether a hint (on page hinted) opens when clicked."""
    from PIL import Image
    browser.get(base + SHOT)
    out = {"window": browser.execute_script("return [window.innerWidth, window.innerHeight]")}
    png = browser.get_screenshot_as_png()
    png_path.write_bytes(png)
    img = Image.open(io.BytesIO(png)).convert("RGB")
    colours = img.getcolors(maxcolors=img.size[0] * img.size[1])
    out.update(size=list(img.size), colours=len(colours), commonest=max(n for n, _ in colours),
               header=list(img.getpixel((img.size[0] // 2, 10))))
    if hinted is None:
        return out
    browser.get(base + hinted)
    hint = browser.find_element("css selector", "article details summary")
    browser.execute_script("arguments[0].scrollIntoView({block: 'center'})", hint)
    hint.click()
    out["hint_opens"] = browser.execute_script(
        "const d = document.querySelector('article details');"
        "return d.open && Array.from(d.children).slice(1).some(e => e.checkVisibility())")
    return out


def collect(work):
    """Build, serve, and load every page once in one Chromium: what the tests check."""
    site = work / "site"
    error = build(site)
    if error:
        return {"error": error}
    pages = {}
    with serve(site) as base, chromium() as browser:
        for path in sorted(site.rglob("*.html")):
            name = path.relative_to(site).as_posix()
            browser.get(base + name)
            info = browser.execute_script(COLLECT)
            info["errors"] = [e["message"] for e in browser.get_log("browser") if e["level"] == "SEVERE"]
            pages[name] = info
        # stage 01's hints page if there is one, else the first page with a hint
        hinted = sorted((n for n, info in pages.items() if info["details"]),
                        key=lambda n: (n != "hints/" + SHOT, n))
        shot = screenshot(browser, base, work / SHOT.replace(".html", ".png"), hinted[0] if hinted else None)
        return {"base": base, "pages": pages, "shot": shot}


def collect_or_error(work):
    """collect(), or {"error": what went wrong}: a worker reading it fails the same way, never collects again."""
    try:
        return collect(work)
    except Exception as e:  # noqa: BLE001 -- a browser that will not start, a page that times out
        return {"error": f"{type(e).__name__}: {e}".strip()}


@pytest.fixture(scope="module")
def seen(tmp_path_factory):
    """collect()'s findings, once per run: under pytest-xdist every worker runs
    a module fixture of its own (pytest-dev/pytest-xdist#271), so the first
    worker here collects, under a lock in the run's shared temporary folder,
    and the other reads what it wrote."""
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        data = collect_or_error(tmp_path_factory.mktemp("site"))
    else:
        shared = tmp_path_factory.getbasetemp().parent / "test_site"
        shared.mkdir(exist_ok=True)
        with open(shared / "lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)    # held while collecting: the other worker waits
            done = shared / "seen.json"
            if not done.exists():
                data = collect_or_error(shared)
                done.write_text(json.dumps(data))
            data = json.loads(done.read_text())
    if "error" in data:
        pytest.fail(data["error"])
    return data


@pytest.fixture(scope="module")
def pages(seen):
    return seen["pages"]


@pytest.fixture(scope="module")
def base(seen):
    return seen["base"]


def chapter_page(stage):
    return re.sub(r"\.md$", ".html", stage.chapter.removeprefix("docs/"))


def test_every_page_loads_without_console_errors(pages):
    assert len(pages) >= 10, f"the site has only {sorted(pages)}"
    bad = {name: info["errors"] for name, info in pages.items() if info["errors"]}
    assert not bad, f"pages that logged console errors: {bad}"


def test_links_reach_a_page_and_an_id(pages, base):
    broken = []
    for name, info in pages.items():
        for href in info["links"]:
            if not href.startswith(base):
                continue               # another site, or mailto:
            url = urllib.parse.urlsplit(href)
            target = url.path.removeprefix(urllib.parse.urlsplit(base).path) or "index.html"
            if target.endswith("/"):
                target += "index.html"
            if target.startswith(("assets/", "search/", "site/")) or target.endswith(".xml"):
                continue
            if target not in pages:
                broken.append(f"{name} -> {href} (no such page)")
            elif url.fragment and urllib.parse.unquote(url.fragment) not in pages[target]["ids"]:
                broken.append(f"{name} -> {href} (no id '{url.fragment}' on {target})")
    assert not broken, "links that go nowhere:\n" + "\n".join(sorted(set(broken)))


def test_pictures_load(pages, base):
    seen, broken = set(), []
    for name, info in pages.items():
        for src, ok in info["images"]:
            seen.add(src.removeprefix(base))
            if not ok:
                broken.append(f"{name}: {src}")
    assert not broken, f"pictures that did not load: {broken}"
    pictures = {f"img/{p.name}" for p in (ROOT / "docs" / "img").glob("*.png")}
    assert pictures <= seen, f"pictures in docs/img no page shows: {sorted(pictures - seen)}"


@pytest.mark.parametrize("stage", stages(), ids=lambda s: s.name)
def test_rubric_sections_are_ids(stage, pages):
    page = chapter_page(stage)
    assert page in pages, f"{stage.chapter} is not on the site"
    ids = set(pages[page]["ids"])
    missing = [f"{i.id} -> {i.section}" for i in stage.items if i.section.lstrip("#") not in ids]
    assert not missing, f"rubric sections with no id on {page}: {missing}"
    grading = pages["grading.html"]
    rows = [i.id for i in stage.items if f"{stage.name}-{i.id}" not in grading["ids"]]
    assert not rows, f"items with no row on grading.html: {rows}"
    links = {urllib.parse.urlsplit(h)._replace(scheme="", netloc="").geturl().lstrip("/") for h in grading["links"]}
    unlinked = [i.id for i in stage.items if f"{page}{i.section}" not in links]
    assert not unlinked, f"items whose row on grading.html does not link {page}#section: {unlinked}"


def test_hints_are_collapsed(pages):
    fences = re.compile(r"^(```|~~~).*?^\1[ \t]*$", re.M | re.S)
    sources = sorted((ROOT / "docs").glob("*.md")) + sorted((ROOT / "docs").glob("hints/*.md"))
    written = sum(len(re.findall(r"^[ \t]*<details\b", fences.sub("", p.read_text()), re.M)) for p in sources)
    found = [(name, d) for name, info in pages.items() for d in info["details"]]
    assert written and len(found) == written, f"docs/ has {written} <details> hints, the site shows {len(found)}"
    bad = [f"{name}: '{d['title']}' (open={d['open']}, first child <{d['summary']}>, body shown={d['body_shown']}, "
           f"{d['body_elements']} elements in the body)"
           for name, d in found if d["open"] or d["summary"] != "SUMMARY" or d["body_shown"] or not d["title"]
           or not d["body_elements"]]
    assert not bad, "hints not collapsed under their own title on load, with a body rendered from Markdown:\n" + \
        "\n".join(bad)


def test_chapter_screenshot(pages, seen):
    info, shot = pages[SHOT], seen["shot"]
    title = re.search(r"^# (.*)$", (ROOT / "docs" / SHOT.replace(".html", ".md")).read_text(), re.M).group(1)
    assert info["h1"] == title, f"{SHOT}'s title is {info['h1']!r}, the chapter's is {title!r}"
    assert info["highlighted"] > 50, f"{SHOT}'s code is not highlighted ({info['highlighted']} token spans)"
    assert shot["window"] == [WIDTH, HEIGHT], f"the window is {shot['window']}, not {WIDTH}x{HEIGHT}"
    assert shot["size"] == [WIDTH, HEIGHT], f"the screenshot is {shot['size']}, not {WIDTH}x{HEIGHT}"
    assert shot["colours"] > 100 and shot["commonest"] < 0.9 * WIDTH * HEIGHT, \
        f"the screenshot is nearly blank ({shot['colours']} colours, " \
        f"the commonest covers {shot['commonest'] / (WIDTH * HEIGHT):.0%})"
    # the theme's stylesheet applied: material's indigo header bar across the top
    assert all(abs(c - want) < 16 for c, want in zip(shot["header"], (0x40, 0x51, 0xb5))), \
        f"the header bar is {shot['header']}, not the theme's indigo: its CSS did not load"
    assert shot.get("hint_opens"), "clicking a hint's title does not show its body (or the site has no hint)"
