"""mkdocs hooks for the textbook site (mkdocs.yml `hooks:`; mkdocs 1.4 or later).

What they add to `mkdocs build`, without touching docs/*.md:
  - the nav lists docs/hints/*.md under "Hints" when that folder exists;
  - grading.md, "How it's graded", is written from grader/rubric/*.toml into
    a folder beside the site (build/site-gen/) at every build, never committed: one table per stage,
    each rubric item linked to the chapter section its `section` names;
  - a <details> hint gets markdown="1" if it lacks it, so its body renders
    as Markdown (md_in_html), collapsed until opened; its <summary> goes on a
    line of its own with markdown="span" (Python-Markdown 3.4 wraps a
    <summary> that shares the <details> line in a <p>, and the browser then
    shows "Details" instead of the hint's title: HTML wants the summary as
    the first child, https://html.spec.whatwg.org/multipage/interactive-elements.html#the-summary-element);
  - a quoted code block (<!-- quote: path#region -->, grader/authoring/quotes.py)
    shows the file it is quoted from above it;
  - a <details> hint is folded on load wherever it is (an `open` attribute
    is dropped), and the hint pages (docs/hints/) are kept out of the search
    index: a search for an item's name must not show its near-answer. Their
    page meta gets `search: exclude: true` (mkdocs-material 9 honours it), and,
    because Debian 12's mkdocs-material 8.2.5 and mkdocs' own search plugin
    do not, the written search/search_index.json is filtered after the build.
"""
import html
import json
import pathlib
import re
import sys

from mkdocs.structure.files import File
try:
    from mkdocs.plugins import event_priority
except ImportError:                      # mkdocs before 1.4: hooks run after plugins anyway
    def event_priority(_):
        return lambda f: f
from pymdownx.slugs import slugify

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "grader"))
from lab_grader import rubric  # noqa: E402

GRADING = "grading.md"
# the same heading ids as mkdocs.yml's toc slugify, which are GitHub's
SLUG = slugify(case="lower")
HEADING = re.compile(r"^#{1,6}[ \t]+(.*?)[ \t#]*$", re.M)
FENCE = re.compile(r"^(```|~~~).*?^\1[ \t]*$", re.M | re.S)
EXPLICIT = re.compile(r'<a (?:id|name)="([^"]+)"')
DETAILS = re.compile(r"^<details(?P<attrs>[^>]*)>[ \t]*(?:<summary(?P<sattrs>[^>]*)>)?", re.M)
HINTS = "hints/"                # the folder of the hint pages, relative to docs_dir
OPEN = re.compile(r"\s+open(?:=(?:\"[^\"]*\"|'[^']*'|\S+))?(?=[\s>]|$)")
QUOTE = re.compile(r"^<!-- quote: (?P<path>[^#\s]+)#(?P<name>[\w.-]+) -->$", re.M)


def anchors(markdown):
    """{anchor: what to call it} of a chapter: its headings (GitHub's ids) and <a id> anchors."""
    text = FENCE.sub("", markdown)
    out = {a: a for a in EXPLICIT.findall(text)}
    for m in HEADING.finditer(text):
        title = re.sub(r"[`*]", "", m.group(1)).strip()
        out.setdefault(SLUG(title, "-"), title)
    return out


def grading_page(stages, docs):
    """The Markdown of the "How it's graded" page."""
    lines = ["# How it's graded", "",
             "Every item of every stage's rubric (`grader/rubric/NN-name.toml`), with the",
             "contract clause it grades and the section that teaches it. `make grade",
             "ITEMS=id` grades one item. This page is written from the rubrics each",
             "time the site is built.", ""]
    for stage in stages:
        chapter = pathlib.PurePosixPath(stage.chapter).relative_to("docs").as_posix()
        path = docs / chapter
        found = anchors(path.read_text()) if path.exists() else {}
        lines += [f"## {stage.name}: {stage.title}", "",
                  f"{stage.max_points:g} points; the chapter: [{chapter}]({chapter}).", "",
                  "| item | points | lane | clause | read |", "| --- | --- | --- | --- | --- |"]
        for item in stage.items:
            anchor = item.section.lstrip("#")
            title = found.get(anchor, anchor)
            cell = lambda s: html.escape(s).replace("|", "&#124;")  # noqa: E731
            lines.append(f'| <span id="{stage.name}-{item.id}">`{item.id}`</span> | {item.points:g} | {item.lane} '
                         f"| {cell(item.clause)} | [{cell(title)}]({chapter}#{anchor}) |")
        lines.append("")
    return "\n".join(lines)


def details(m):
    """A <details> tag (and a <summary> on its line) as md_in_html renders them right."""
    attrs, sattrs = OPEN.sub("", m.group("attrs")), m.group("sattrs")   # folded on load, always
    out = f"<details{attrs}>" if "markdown=" in attrs else f'<details{attrs} markdown="1">'
    if sattrs is not None:
        out += "\n" + (f"<summary{sattrs}>" if "markdown=" in sattrs else f'<summary{sattrs} markdown="span">')
    return out


def on_config(config):
    hints = sorted((pathlib.Path(config["docs_dir"]) / "hints").glob("*.md"))
    nav = [entry for entry in config["nav"] if not isinstance(entry, dict) or "Hints" not in entry]
    nav.append({"How it's graded": GRADING})
    if hints:
        nav.append({"Hints": [f"hints/{p.name}" for p in hints]})
    config["nav"] = nav
    return config


def on_files(files, config):
    site = pathlib.Path(config["site_dir"])
    gen = site.with_name(site.name + "-gen")   # beside the site: a build elsewhere (-d) writes its own
    gen.mkdir(parents=True, exist_ok=True)
    stages = rubric.load_all(ROOT / "grader" / "rubric")
    (gen / GRADING).write_text(grading_page(stages, pathlib.Path(config["docs_dir"])))
    files.append(File(GRADING, str(gen), config["site_dir"], config["use_directory_urls"]))
    return files


def is_hint_page(src):
    return pathlib.PurePosixPath(str(src).replace("\\", "/")).as_posix().startswith(HINTS)


def without_hints(index):
    """A search index (search_index.json's dict) without the hint pages' entries."""
    docs = index.get("docs", [])
    index["docs"] = [d for d in docs if not d.get("location", "").startswith(HINTS)]
    return index


def on_page_markdown(markdown, page, config, files):
    if is_hint_page(page.file.src_path):
        page.meta.setdefault("search", {})["exclude"] = True
    markdown = DETAILS.sub(details, markdown)
    return QUOTE.sub(lambda m: f'{m.group(0)}\n<p class="quote-source">{html.escape(m.group("path"))}</p>\n',
                     markdown)


@event_priority(-100)           # after the search plugin has written its index
def on_post_build(config):
    path = pathlib.Path(config["site_dir"]) / "search" / "search_index.json"
    if path.is_file():
        index = json.loads(path.read_text())
        if "index" in index:    # a prebuilt lunr index cannot be filtered entry by entry
            raise SystemExit("site_hooks: search prebuild_index is on: the hint pages cannot be "
                             "kept out of the prebuilt index (turn prebuild_index off)")
        path.write_text(json.dumps(without_hints(index), separators=(",", ":")))
