"""Quizzes: claims to classify, answered in a TOML file in the stage's
directory.

    [claim-3]
    claim = "A wake carries the future's output."
    choices = ["guaranteed", "implementation-specific", "false"]
    answer = ""            # the student writes one of the choices here

The reference tree's quiz.toml holds the key (its answers); the skeleton
generator blanks every answer marked `# STUDENT-ANSWER`, so labs/ and the
handout never carry it.
"""
try:
    import tomllib
except ImportError:
    import tomli as tomllib

FILE = "quiz.toml"


class QuizError(Exception):
    pass


def load(path):
    """{question id: {"claim":..., "choices": [...], "answer": ...}}"""
    try:
        data = tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as e:
        raise QuizError(f"{path.name} is not valid TOML: {e}") from None
    out = {}
    for qid, q in data.items():
        if not isinstance(q, dict):
            continue
        out[qid] = {"claim": q.get("claim", ""), "choices": list(q.get("choices", [])),
                    "answer": str(q.get("answer", "")).strip()}
    return out


def judge(ids, answers, key):
    """None when every question in ids is answered as the key says;
    otherwise (kind, message) with kind "blank" or "wrong". The message names
    the questions, never the right answers."""
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
    if wrong:
        return "wrong", f"{len(wrong)} of {len(ids)} answers are not right: {', '.join(wrong)} (reread the claims and the chapter's section)"
    if blank:
        return "blank", f"not started: answer {', '.join(blank)} in {FILE}"
    return None
