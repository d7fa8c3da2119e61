"""Gradescope's results.json, on every path, from this module alone: built
from a grading's item results (build), or for when grading crashed
(fallback) or the upload held nothing to grade (no_work); every one
checked against a JSON Schema written from Gradescope's published spec
(grader/schemas/gradescope-results.schema.json) and written by the JSON
encoder, atomically (write), so that Gradescope never shows a bare
"autograder failed" or rejects a file that printf built from a log
holding a tab or an escape.

    python3 -m lab_grader.results_json validate FILE
    python3 -m lab_grader.results_json fallback OUT MESSAGE [LOGFILE]
    python3 -m lab_grader.results_json nowork OUT MESSAGE      (nothing in the upload to grade)
    python3 -m lab_grader.results_json annotate FILE NOTES      (the upload's notes atop FILE's output)

(run from grader/). The checks need python3-jsonschema; fallback writes
even without it, since it is what runs when something is already wrong.
"""
import json
import math
import pathlib
import sys

from . import files, text, scoring
from .diagnosis import UNTRUSTED, clean, failure_block
from .outcomes import Status

SCHEMA = pathlib.Path(__file__).resolve().parents[1] / "schemas" / "gradescope-results.schema.json"
_validator = None


def _get_validator():
    global _validator
    if _validator is None:
        import jsonschema  # python3-jsonschema
        schema = json.loads(SCHEMA.read_text())
        _validator = jsonschema.Draft7Validator(schema)
    return _validator


def _where(path):
    """A JSON path as one reads it: tests[3].score, or (top level)."""
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(top level)"


def _non_finite(data, path=()):
    """Paths of NaN and infinities: json.dump writes them, JSON has none."""
    if isinstance(data, float) and not math.isfinite(data):
        yield path
    elif isinstance(data, dict):
        for k, v in data.items():
            yield from _non_finite(v, path + (k,))
    elif isinstance(data, (list, tuple)):
        for i, v in enumerate(data):
            yield from _non_finite(v, path + (i,))


def validate(data):
    """Every way data breaks the schema, one readable line each, sorted by
    where (empty when data is a valid results.json)."""
    try:
        validator = _get_validator()
    except ImportError:
        return ["cannot check results.json: python3-jsonschema is not installed (grader/deps.sh test)"]
    errors = []
    for e in validator.iter_errors(data):
        where = _where(e.absolute_path)
        if e.validator in ("anyOf", "oneOf") and isinstance(e.schema, dict):
            parent = e.schema.get("description") or "it matches none of the allowed forms"
            errors.append((where, f"{where}: {parent}"))
        elif e.validator == "additionalProperties":
            errors.append((where, f"{where}: {e.message} (the spec names no such field)"))
        else:
            errors.append((where, f"{where}: {e.message}"))
    for path in _non_finite(data):
        where = _where(path)
        errors.append((where, f"{where}: {_data_at(data, path)!r} is not a JSON number"))
    return [msg for _, msg in sorted(errors)]


def _data_at(data, path):
    for part in path:
        data = data[part]
    return data


def _cleaned(data):
    """A copy of data with every string through text.clean(): results.json
    carries student text, and the student reads it on a web page."""
    if isinstance(data, str):
        return text.clean(data)
    if isinstance(data, dict):
        return {text.clean(k): _cleaned(v) for k, v in data.items()}
    if isinstance(data, (list, tuple)):
        return [_cleaned(v) for v in data]
    return data


def _dump(path, data):
    path = pathlib.Path(path)
    body = json.dumps(data, indent=2, ensure_ascii=False, allow_nan=False) + "\n"
    return files.write_atomic(path, body.encode("utf-8"))


def write(path, data, require_schema=True):
    """Cleans every string in data (text.clean), checks the result against
    the schema and writes it to path atomically (a temporary file in the
    same folder, then a rename: Gradescope never reads half a file).
    Raises ValueError, writing nothing, when the data is not valid.
    require_schema=False: where python3-jsonschema is missing (a student's
    machine), write without the check rather than not at all."""
    data = _cleaned(data)
    errors = validate(data)
    if not require_schema:
        errors = [e for e in errors if not e.startswith("cannot check results.json")]
    if errors:
        more = f" (and {len(errors) - 5} more)" if len(errors) > 5 else ""
        raise ValueError("not a valid results.json: " + "; ".join(errors[:5]) + more)
    return _dump(path, data)


def _advice(r):
    """What a student should do about an item that was not judged."""
    if r.item.lane == "quiz":
        return ("your instructor marks this item (the grader you were given has the answer key only hashed: "
                "it counts a group's wrong answers, it gives no points)")
    if "make check" in r.summary:
        return "run make grade for this lane"
    if scoring.NEEDS_CPUS in r.summary:
        return ("nothing here says your code is wrong: this item needs more CPUs than the machine that graded it has, "
                "so a regrade there cannot judge it either; it counts once graded where it has them")
    return ("nothing here says your code is wrong: the machine could not judge this item just now; "
            "ask for a regrade (or resubmit)")


def build(grading, results, seconds, unjudged="zero"):
    """results.json of a grading (pipeline.Builds and its item results;
    seconds: how long it ran), in Gradescope's format: every item, always.
    An item not judged is there with why and what to do; unjudged="zero"
    counts it as 0 of its points (until regraded), "omit" as 0 of 0."""
    tests = []
    for r in results:
        entry = {
            "name": f"{r.item.key}: {r.item.clause}",
            "number": r.item.key,
            "score": r.points,
            "max_score": r.item.points,
            "status": "passed" if r.status == Status.PASSED else "failed",
            "output": r.item.clause if r.status == Status.PASSED else "\n".join(failure_block(grading, r)),
            "output_format": "text",
            # hidden tests: students see them once the instructor publishes the grades
            "visibility": "after_published" if r.item.hidden else "visible",
        }
        if r.status == Status.NOT_JUDGED:
            entry["output"] = f"Not judged: {clean(r.summary)}\nWhat to do: {_advice(r)}"
            entry["extra_data"] = {"judged": False}
            if unjudged == "omit":
                # 0 of 0, in one line, with no status: Gradescope shows it
                # neither failed nor owed, and nobody asks for a regrade of
                # what the platform cannot measure
                entry["max_score"] = 0
                del entry["status"]
                why = r.summary.removeprefix("cannot judge on this machine: ")
                entry["output"] = (f"Not judged on this machine ({text.one_line(why, 160)}): not part of your "
                                   "score." if r.item.lane != "quiz" else
                                   f"Not judged here: {clean(r.summary)}.")
        tests.append(entry)
    for name in dict.fromkeys(r.item.stage for r in results):
        review = getattr(grading.builds.get(name), "review", [])
        if review:
            # the instructor's alone: a hidden entry of no points (students never see it)
            tests.append({"name": f"{name}/review: code for the instructor to read", "number": f"{name}/review",
                          "score": 0, "max_score": 0, "status": "passed", "visibility": "hidden",
                          "output": "\n".join(clean(x) for x in review[:40]), "output_format": "text"})
    if grading.untrusted:
        return {"score": 0, "execution_time": round(seconds, 1), "output": UNTRUSTED, "output_format": "text",
                "visibility": "visible", "stdout_visibility": "hidden", "tests": []}
    # the visible items only: a count over hidden ones too tells a student a hidden item failed
    visible = [r for r in results if not r.item.hidden]
    head = [f"{sum(1 for r in visible if r.status == Status.PASSED)} of {len(visible)} visible items passed"]
    not_judged = [r for r in results if r.status == Status.NOT_JUDGED]
    if not_judged:
        head.append(f"{len(not_judged)} item(s) not judged: each says why and what to do")
    for name in dict.fromkeys(r.item.stage for r in results):
        b = grading.builds.get(name)
        if b is None:
            continue
        for note in b.notes + b.remarks:
            head.append(f"{name}: note: {clean(note)}")
        for w in b.warnings:
            head.append(f"{name}: your code compiled with warnings:")
            head += ["  " + line for line in clean(w).splitlines()[:12]]
        if not b.ok and b.error and b.error.log:
            head.append(f"{name}: the compiler said:")
            head += ["  " + line for line in clean(b.error.log).strip().splitlines()[:25]]
    return {
        "score": sum(r.points for r in results),
        "execution_time": round(seconds, 1),
        "output": "\n".join(head),
        "output_format": "text",
        "visibility": "visible",
        "stdout_visibility": "hidden",
        "tests": tests,
    }


def fallback(message, log_text="", tail_chars=4000):
    """A valid results.json for when grading crashed: score 0, one visible
    failing test that holds the message and the cleaned tail of the log.
    Plain text formats throughout, so a '<' in a compiler message is shown,
    not read as HTML."""
    message = text.one_line(message, limit=1000) or "the grader stopped before it wrote its results"
    body = message
    log = text.tail(log_text or "", tail_chars)
    if log.strip():
        body += "\n\nThe end of the grader's log:\n\n" + log
    return {
        "score": 0,
        "output": "The grader could not finish, so this score is not your grade. " + message,
        "output_format": "text",
        "visibility": "visible",
        "stdout_visibility": "hidden",
        "tests": [{
            "name": "grading did not finish",
            "number": "0",
            "score": 0,
            "status": "failed",
            "output": body + "\n\nIf this happens again, tell your instructor.",
            "output_format": "text",
            "visibility": "visible",
        }],
    }


UPLOAD_PAGE = "docs/upload.md in your handout (\"What to upload\")"


def no_work(message):
    """A valid results.json for an upload in which nothing could be graded:
    score 0, one visible test that says what was found, what was expected,
    and where the student reads what to upload. Not a failure of the
    grader, so it asks nobody to tell the instructor."""
    message = text.one_line(message, limit=1500) or "the upload is empty"
    return {
        "score": 0,
        "output": f"Nothing in your upload could be graded: {message}\nWhat to upload: {UPLOAD_PAGE}.",
        "output_format": "text",
        "visibility": "visible",
        "stdout_visibility": "hidden",
        "tests": [{
            "name": "your upload",
            "number": "0",
            "score": 0,
            "status": "failed",
            "output": f"{message}\n\nUpload your files of the stage under their own names; {UPLOAD_PAGE} "
                      "says which shapes are taken.",
            "output_format": "text",
            "visibility": "visible",
        }],
    }


def annotate(data, notes):
    """data with the notes about the upload (find_work.py's lines: a file
    left out, one not found, the shape taken) at the top of its output,
    where the student sees them."""
    notes = [text.one_line(n, limit=500) for n in notes if n.strip()][:20]
    if not notes:
        return data
    head = "About your upload:\n" + "\n".join(f"  {n}" for n in notes)
    if any("left out" in n or "not found" in n for n in notes):
        head += f"\n  (what to upload: {UPLOAD_PAGE})"
    data = dict(data)
    data["output"] = head + ("\n\n" + data["output"] if data.get("output") else "")
    return data


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    if len(argv) == 2 and argv[0] == "validate":
        try:
            data = json.loads(pathlib.Path(argv[1]).read_text())
        except (OSError, ValueError) as e:
            print(f"{argv[1]}: not JSON: {e}", file=sys.stderr)
            return 1
        errors = validate(data)
        for e in errors:
            print(f"{argv[1]}: {e}", file=sys.stderr)
        return 1 if errors else 0
    if len(argv) in (3, 4) and argv[0] == "fallback":
        log = ""
        if len(argv) == 4:
            try:
                log = pathlib.Path(argv[3]).read_bytes()[-1_000_000:]
            except OSError as e:
                log = f"(the log {argv[3]} cannot be read: {e})"
        data = fallback(argv[2], log)
        try:
            write(argv[1], data)
        except ValueError:  # no jsonschema here: the fallback is valid by its self-test
            _dump(argv[1], _cleaned(data))
        return 0
    if len(argv) == 3 and argv[0] == "nowork":
        try:
            write(argv[1], no_work(argv[2]))
        except ValueError:
            _dump(argv[1], _cleaned(no_work(argv[2])))
        return 0
    if len(argv) == 3 and argv[0] == "annotate":
        try:
            data = json.loads(pathlib.Path(argv[1]).read_text())
            notes = pathlib.Path(argv[2]).read_text(errors="replace").splitlines()
            write(argv[1], annotate(data, notes))
        except (OSError, ValueError) as e:
            print(f"{argv[1]}: not annotated: {e}", file=sys.stderr)
            return 1
        return 0
    print(__doc__.strip().split("\n\n")[1], file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
