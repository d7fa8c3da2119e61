"""Quizzes: claims to classify, answered in a TOML file in the stage's
directory.

    [claim-3]
    claim = "A wake carries the future's output."
    choices = ["guaranteed", "implementation-specific", "false"]
    answer = ""            # the student writes one of the choices here

The reference tree's quiz.toml holds the key (its answers); the skeleton
generator blanks every answer marked `# STUDENT-ANSWER`, so labs/ and the
handout never carry it in clear.

The handout carries it hashed instead (HASHED, written by make handout into
grader/reference/NN-name/): for each graded group of questions, a random
salt and the SHA-256 of the salt and the group's right answers, one string.
One hash per group, not per question: a hash of one question's answer would
be undone by trying its three choices. From the group's hash the grader
counts how many of a student's answers in the group are wrong, never which:
it tries every answer set the group's choices allow (3^5 = 243 for five
questions of three choices), keeps the one whose hash matches, and compares.
So the key is hidden from a reader, not from a program: a student who runs
the same search learns the key. What the hash buys is that the feedback the
chapter promises ("how many answers in a group are wrong") exists in the
handout without the answers lying in a file to be read; the points stay
the instructor's to give (scoring.from_quiz), from the key in clear.
"""
import hashlib
import itertools
import secrets

try:
    import tomllib
except ImportError:
    import tomli as tomllib

FILE = "quiz.toml"
HASHED = "quiz-key.toml"
MAX_SETS = 100_000      # the answer sets a group may allow; past it, the handout refuses to hash it


class QuizError(Exception):
    pass


def load(path):
    """{question id: {"claim":..., "choices": [...], "answer": ...}}"""
    data = _toml(path)
    out = {}
    for qid, q in data.items():
        if not isinstance(q, dict):
            continue
        choices = q.get("choices", [])
        if not isinstance(choices, list):
            raise QuizError(f"{path.name}: [{qid}] choices must be a list of strings")
        out[qid] = {"claim": q.get("claim", ""), "choices": choices, "answer": str(q.get("answer", "")).strip()}
    return out


def _toml(path):
    """The file's TOML, or a QuizError that says in one line why not."""
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as e:
        raise QuizError(f"{path.name} is not valid TOML: {e}") from None
    except UnicodeDecodeError:
        raise QuizError(f"{path.name} is not UTF-8 text") from None
    except OSError as e:
        raise QuizError(f"{path.name} cannot be read: {e.strerror}") from None


def score(ids, answers, key):
    """None when every question in ids is answered as the key says;
    otherwise (kind, message) with kind "blank" or "wrong". The message
    counts the wrong answers; it names neither them nor the right ones."""
    blank, wrong, invalid = [], [], []
    for qid in ids:
        if qid not in key:
            raise QuizError(f"the rubric names question '{qid}', which the key does not have")
        mine = answers.get(qid, {}).get("answer", "")
        if not mine:
            blank.append(qid)
        elif mine not in key[qid]["choices"]:
            invalid.append(f"{qid} ('{mine}' is not one of {', '.join(key[qid]['choices'])})")
        elif mine != key[qid]["answer"]:
            wrong.append(qid)
    if invalid:
        return "wrong", "answers that are not among the choices: " + "; ".join(invalid)
    if blank:
        # before any count: a count over a group answered in part would
        # say, one answer at a time, which answers are right
        return "blank", f"not started: answer {', '.join(blank)} in {FILE}"
    if wrong:
        return "wrong", wrong_message(len(wrong), len(ids))
    return None


def wrong_message(n, of):
    return (f"{n} of the {of} answers of this group {'is' if n == 1 else 'are'} not right (which, the grader "
            "never says: reread the claims and the chapter's section)")


def _digest(salt, ids, values):
    text = salt + "\n" + "\n".join(f"{q}={v}" for q, v in zip(ids, values))
    return hashlib.sha256(text.encode()).hexdigest()


def hash_group(ids, key, salt=None):
    """The hashed key of one graded group: {"questions", "choices", "salt",
    "sha256"}; the right answers are in it only through the hash."""
    choices = [list(key[q]["choices"]) for q in ids]
    sets = 1
    for c in choices:
        sets *= len(c)
    if sets > MAX_SETS:
        raise QuizError(f"a group of {len(ids)} questions allows {sets} answer sets; more than {MAX_SETS} "
                        "is too many to count its wrong answers by trying them: split the group")
    salt = salt or secrets.token_hex(16)
    return {"questions": list(ids), "choices": choices, "salt": salt,
            "sha256": _digest(salt, ids, [key[q]["answer"] for q in ids])}


def write_hashed(path, groups):
    """groups: {item id: hash_group(...)}, as TOML (written by hand: the
    standard library reads TOML but does not write it)."""
    def s(x):
        return '"' + x.replace("\\", "\\\\").replace('"', '\\"') + '"'
    lines = ["# The quiz key, hashed: for each graded group, the SHA-256 of the salt and the",
             "# group's right answers (grader/lab_grader/quiz.py says how it is used, and what",
             "# it does not hide). Written by make handout; the instructors' repository holds",
             "# the key in clear.", ""]
    for item_id, g in groups.items():
        lines += [f"[{item_id}]",
                  "questions = [" + ", ".join(s(q) for q in g["questions"]) + "]",
                  "choices = [" + ", ".join("[" + ", ".join(s(c) for c in cs) + "]" for cs in g["choices"]) + "]",
                  f"salt = {s(g['salt'])}",
                  f"sha256 = {s(g['sha256'])}", ""]
    path.write_text("\n".join(lines))


def load_hashed(path):
    data = _toml(path)
    return {k: v for k, v in data.items() if isinstance(v, dict)}


def count_wrong(group, answers):
    """How many of answers' answers to the group's questions are wrong,
    found by trying every answer set against the group's hash; None when no
    set matches (a hashed key that does not belong to these questions)."""
    ids = group["questions"]
    mine = [answers.get(q, {}).get("answer", "") for q in ids]
    for values in itertools.product(*group["choices"]):
        if _digest(group["salt"], ids, values) == group["sha256"]:
            return sum(a != b for a, b in zip(mine, values))
    return None


def score_hashed(ids, answers, group):
    """score(), from a hashed group: None, or (kind, message); the message
    gives the number of wrong answers, never which."""
    if list(ids) != list(group.get("questions", [])):
        raise QuizError(f"the hashed key's group is {group.get('questions')}, the rubric's {list(ids)}")
    blank, invalid = [], []
    for q, choices in zip(ids, group["choices"]):
        mine = answers.get(q, {}).get("answer", "")
        if not mine:
            blank.append(q)
        elif mine not in choices:
            invalid.append(f"{q} ('{mine}' is not one of {', '.join(choices)})")
    if invalid:
        return "wrong", "answers that are not among the choices: " + "; ".join(invalid)
    if blank:
        return "blank", f"not started: answer {', '.join(blank)} in {FILE}"
    n = count_wrong(group, answers)
    if n is None:
        raise QuizError("the hashed key matches no answer set of its choices: it was not written for this quiz")
    return ("wrong", wrong_message(n, len(ids))) if n else None
