"""Finding the student's work wherever it is (lab_grader/discover.py): each
shape a student really submits, and each refusal, on small fake trees."""
import dataclasses
import os
import stat
import sys
import zipfile

import pytest

from conftest import GRADER

sys.path.insert(0, str(GRADER))
from lab_grader import discover, listing, rubric  # noqa: E402

STAGES = rubric.load_all(GRADER / "rubric")
BY_NAME = {s.name: s for s in STAGES}


def make(root, files):
    """Writes {relative path: text} under root; returns root."""
    for rel, body in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(body)
    return root


def make_zip(path, files, links=()):
    """A zip of {member name: text}, plus symlink members (name, target)."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for name, body in files.items():
            z.writestr(name, body)
        for name, target in links:
            info = zipfile.ZipInfo(name)
            info.external_attr = (stat.S_IFLNK | 0o777) << 16
            z.writestr(info, target)
    return path


def tree_of(found):
    """{stage/file: text} of what find() wrote; every one a regular file."""
    out = {}
    for p in sorted(found.tree.rglob("*")):
        assert not p.is_symlink(), f"{p} is a symlink"
        if p.is_file():
            assert stat.S_ISREG(os.lstat(p).st_mode)
            out[str(p.relative_to(found.tree))] = p.read_text()
    return out


def run(tmp_path, source, stages=STAGES):
    dest = tmp_path / "dest"
    return discover.find(source, stages, dest)


# ---- the shapes --------------------------------------------------------------

def test_labs_at_the_top(tmp_path):
    src = make(tmp_path / "sub", {"labs/01-signal/signal.c": "s", "labs/01-signal/signal.h": "h",
                                  "labs/02-block-on/parker.c": "p", "labs/02-block-on/build.o": "\0",
                                  "labs/02-block-on/tests/t.c": "t", "README.md": "r"})
    f = run(tmp_path, src)
    assert f.problem is None and f.shape == "labs"
    assert tree_of(f) == {"01-signal/signal.c": "s", "01-signal/signal.h": "h", "02-block-on/parker.c": "p"}
    assert f.stages == ["01-signal", "02-block-on"]
    assert "02-block-on: block_on.c not found" in f.notes
    assert any("left out 1 file(s) of labs/02-block-on/" in n and "build.o" in n for n in f.notes)
    assert ("left out the folder labs/02-block-on/tests/: only the files directly in a stage folder are graded"
            in f.notes)


def test_labs_one_folder_down_as_github_zips_it(tmp_path):
    src = make(tmp_path / "sub", {"async-lab-main/labs/01-signal/signal.c": "s",
                                  "async-lab-main/README.md": "r", "async-lab-main/docs/x.md": "d"})
    f = run(tmp_path, src)
    assert f.shape == "labs-nested" and f.problem is None
    assert tree_of(f) == {"01-signal/signal.c": "s"}
    assert "found labs/ one folder down, in async-lab-main/" in f.notes


def test_stage_folders_at_the_top_and_one_down(tmp_path):
    f = run(tmp_path, make(tmp_path / "a", {"01-signal/signal.c": "s", "04-deadline-signal/quiz.toml": "q"}))
    assert f.shape == "stages" and tree_of(f) == {"01-signal/signal.c": "s", "04-deadline-signal/quiz.toml": "q"}
    f = discover.find(make(tmp_path / "b", {"mywork/01-signal/signal.c": "s"}), STAGES, tmp_path / "d2")
    assert f.shape == "stages" and "found stage folders one folder down, in mywork/" in f.notes


def test_loose_files_go_to_their_stages(tmp_path):
    src = make(tmp_path / "sub", {"signal.c": "s", "signal.h": "h", "deadline_signal.c": "d",
                                  "quiz.toml": "q", "helpers.c": "x", "notes.txt": "n"})
    f = run(tmp_path, src)
    assert f.shape == "loose" and f.problem is None
    assert tree_of(f) == {"01-signal/signal.c": "s", "01-signal/signal.h": "h",
                          "04-deadline-signal/deadline_signal.c": "d", "04-deadline-signal/quiz.toml": "q"}
    assert "helpers.c is not a file of any stage graded here: left out" in f.notes


def test_quiz_alone_goes_to_the_stage_with_a_quiz(tmp_path):
    f = run(tmp_path, make(tmp_path / "sub", {"quiz.toml": "q"}))
    assert tree_of(f) == {"04-deadline-signal/quiz.toml": "q"} and f.stages == ["04-deadline-signal"]


def test_loose_files_one_folder_down(tmp_path):
    f = run(tmp_path, make(tmp_path / "sub", {"Stage1/signal.c": "s", "Stage1/signal.h": "h"}))
    assert f.shape == "loose" and tree_of(f) == {"01-signal/signal.c": "s", "01-signal/signal.h": "h"}
    assert "found the stage files one folder down, in Stage1/" in f.notes


def shared_stages():
    """Two stages that share a file name, as a header shared by stages would."""
    a = dataclasses.replace(BY_NAME["01-signal"], sources=["signal.c", "shared.h"])
    b = dataclasses.replace(BY_NAME["02-block-on"], sources=["parker.c", "block_on.c", "shared.h"])
    return [a, b]


@pytest.mark.parametrize("files,expect,note", [
    ({"signal.c": "s", "shared.h": "x", "parker.c": "p"},
     {"01-signal/signal.c", "01-signal/shared.h", "02-block-on/parker.c"}, "whose sources are all here"),
    ({"signal.c": "s", "shared.h": "x", "parker.c": "p", "block_on.c": "b"},
     {"01-signal/signal.c", "01-signal/shared.h", "02-block-on/parker.c", "02-block-on/block_on.c",
      "02-block-on/shared.h"}, "put in 01-signal, 02-block-on"),
    ({"shared.h": "x", "signal.h": "h"}, {"01-signal/signal.h"}, "none of their sources is here: left out"),
])
def test_a_shared_name_goes_by_whose_sources_are_here(tmp_path, files, expect, note):
    f = run(tmp_path, make(tmp_path / "sub", files), shared_stages())
    assert set(tree_of(f)) == expect
    assert any(n.startswith("shared.h belongs to 01-signal, 02-block-on") and note in n for n in f.notes), f.notes


def test_only_the_stages_asked_for(tmp_path):
    src = make(tmp_path / "sub", {"labs/01-signal/signal.c": "s", "labs/04-deadline-signal/quiz.toml": "q"})
    f = run(tmp_path, src, [BY_NAME["04-deadline-signal"]])
    assert tree_of(f) == {"04-deadline-signal/quiz.toml": "q"}


@pytest.mark.parametrize("files,shape", [
    ({"labs/01-signal/signal.c": "s"}, "zip+labs"),
    ({"async-lab-main/labs/01-signal/signal.c": "s", "async-lab-main/Makefile": "m"}, "zip+labs-nested"),
    ({"01-signal/signal.c": "s"}, "zip+stages"),
    ({"signal.c": "s", "__MACOSX/._signal.c": "junk"}, "zip+loose"),
])
def test_a_zip_of_each_shape(tmp_path, files, shape):
    f = run(tmp_path, make_zip(tmp_path / "up.zip", files))
    assert f.problem is None and f.shape == shape
    assert tree_of(f) == {"01-signal/signal.c": "s"}


def test_a_folder_holding_only_a_zip(tmp_path):
    (tmp_path / "sub").mkdir()
    make_zip(tmp_path / "sub" / "submission.zip", {"signal.c": "s"})
    f = run(tmp_path, tmp_path / "sub")
    assert f.shape == "zip+loose" and tree_of(f) == {"01-signal/signal.c": "s"}
    assert "found only submission.zip: graded what it holds" in f.notes


# ---- the refusals ------------------------------------------------------------

def refused(f):
    assert f.tree is None and f.problem and "\n" not in f.problem and f.stages == []
    return f.problem


def test_nothing_that_fits_says_what_was_expected_and_found(tmp_path):
    f = run(tmp_path, make(tmp_path / "sub", {"README.md": "r", "notes.txt": "n"}), [BY_NAME["01-signal"]])
    assert refused(f) == ("no stage folder and no file of any stage: expected labs/01-signal/signal.c "
                          "or signal.c; found: README.md, notes.txt")
    assert not any((tmp_path / "dest").iterdir())


def test_nothing_inside_one_folder_lists_what_it_holds(tmp_path):
    f = run(tmp_path, make(tmp_path / "sub", {"repo/src/signal.c": "s", "repo/README.md": "r"}))
    assert "found: repo/README.md, repo/src/" in refused(f)
    assert "(or the same for 02-block-on" in f.problem


def empty_dir(path):
    path.mkdir()
    return path


@pytest.mark.parametrize("source,says", [
    (lambda t: t / "missing", "nothing was submitted"),
    (lambda t: empty_dir(t / "e"), "found: nothing, the submission is empty"),
    (lambda t: make(t, {"x.zip": "not a zip"}) / "x.zip", "x.zip is not a zip file that can be read"),
    (lambda t: make(t, {"signal.c": "s"}) / "signal.c", "neither a folder nor a .zip file"),
])
def test_no_submission_or_not_a_zip(tmp_path, source, says):
    assert says in refused(run(tmp_path, source(tmp_path)))


@pytest.mark.parametrize("member", ["../evil.c", "/etc/evil.c", "labs/../../evil.c", "..\\evil.c", "C:/evil.c"])
def test_a_zip_member_outside_the_zip_refuses_it(tmp_path, member):
    f = run(tmp_path, make_zip(tmp_path / "up.zip", {"signal.c": "s", member: "x"}))
    assert f"member '{member}' points outside the zip" in refused(f)
    assert not any((tmp_path / "dest").iterdir())
    assert not (tmp_path / "evil.c").exists()


def test_symlinks_are_never_followed_nor_copied(tmp_path):
    secret = make(tmp_path, {"secret.txt": "root:x"}) / "secret.txt"
    src = make(tmp_path / "sub", {"labs/01-signal/signal.h": "h"})
    os.symlink(secret, src / "labs/01-signal/signal.c")
    f = run(tmp_path, src)
    assert tree_of(f) == {"01-signal/signal.h": "h"}
    assert "refused labs/01-signal/signal.c: a symbolic link (only regular files are graded); left out" in f.notes
    assert "01-signal: signal.c not found" in f.notes


def test_a_symlink_alone_is_a_problem(tmp_path):
    (tmp_path / "sub").mkdir()
    os.symlink("/etc/passwd", tmp_path / "sub" / "signal.c")
    f = run(tmp_path, tmp_path / "sub")
    assert "nothing to grade: every file of a stage was refused (signal.c), see the notes" in refused(f)
    assert any("refused signal.c: a symbolic link" in n for n in f.notes)


def test_a_symlinked_labs_folder_is_not_followed(tmp_path):
    real = make(tmp_path / "solutions", {"01-signal/signal.c": "reference"})
    (tmp_path / "sub").mkdir()
    os.symlink(real, tmp_path / "sub" / "labs")
    assert "found: labs (symlink)" in refused(run(tmp_path, tmp_path / "sub"))


def test_a_symlinked_stage_folder_is_named(tmp_path):
    real = make(tmp_path / "solutions", {"02-block-on/parker.c": "reference"})
    src = make(tmp_path / "sub", {"labs/01-signal/signal.c": "s"})
    os.symlink(real / "02-block-on", src / "labs" / "02-block-on")
    f = run(tmp_path, src)
    assert tree_of(f) == {"01-signal/signal.c": "s"}
    assert "refused labs/02-block-on: a symbolic link (only regular files are graded); left out" in f.notes


def test_a_corrupt_zip_member(tmp_path):
    path = make_zip(tmp_path / "up.zip", {"signal.c": "int x;" * 100})
    raw = bytearray(path.read_bytes())
    at = raw.index(b"signal.c") + len(b"signal.c") + 5       # inside the compressed data
    raw[at] ^= 0xFF
    path.write_bytes(bytes(raw))
    assert "refused up.zip: signal.c cannot be unpacked" in refused(run(tmp_path, path))


def test_a_shared_name_alone_is_given_no_stage(tmp_path):
    f = run(tmp_path, make(tmp_path / "sub", {"shared.h": "x"}), shared_stages())
    assert refused(f).startswith("nothing to grade: no file could be given a stage, see the notes; expected")


def test_a_symlink_in_a_zip_is_refused(tmp_path):
    f = run(tmp_path, make_zip(tmp_path / "up.zip", {"signal.h": "h"}, links=[("signal.c", "/etc/shadow")]))
    assert tree_of(f) == {"01-signal/signal.h": "h"}
    assert any(n.startswith("refused signal.c: a symbolic link") for n in f.notes)


def test_a_fifo_is_not_a_regular_file(tmp_path):
    src = make(tmp_path / "sub", {"01-signal/signal.h": "h"})
    os.mkfifo(src / "01-signal" / "signal.c")
    f = run(tmp_path, src)
    assert "refused 01-signal/signal.c: not a regular file; left out" in f.notes


def test_zip_bomb_and_size_caps(tmp_path, monkeypatch):
    monkeypatch.setattr(listing, "MAX_UNPACKED", 1 << 20)
    f = run(tmp_path, make_zip(tmp_path / "bomb.zip", {"signal.c": "s", "pad.txt": "\0" * (2 << 20)}))
    assert refused(f) == "refused bomb.zip: its members would unpack to more than 1 MiB"
    monkeypatch.setattr(listing, "MAX_FILE", 1000)
    f = discover.find(make(tmp_path / "big", {"signal.c": "x" * 1001, "signal.h": "h"}), STAGES, tmp_path / "d2")
    assert "refused signal.c: larger than 0 KiB; left out" in f.notes and f.stages == ["01-signal"]


def test_a_zip_member_is_read_only_up_to_the_cap(tmp_path):
    """The default caps, on a member that inflates 2 MiB from a few KiB."""
    f = run(tmp_path, make_zip(tmp_path / "up.zip", {"signal.c": "\0" * (2 << 20), "signal.h": "h"}))
    assert (tmp_path / "up.zip").stat().st_size < 20000
    assert "refused signal.c: larger than 1024 KiB; left out" in f.notes
    assert tree_of(f) == {"01-signal/signal.h": "h"}


def test_too_many_entries(tmp_path, monkeypatch):
    monkeypatch.setattr(listing, "MAX_ENTRIES", 50)
    files = {f"f{i}.txt": "" for i in range(60)}
    assert "more than 50 files and folders" in refused(run(tmp_path, make(tmp_path / "sub", files)))
    assert "more than 50 members" in refused(discover.find(make_zip(tmp_path / "m.zip", files), STAGES,
                                                           tmp_path / "d2"))


def test_total_size_cap(tmp_path, monkeypatch):
    monkeypatch.setattr(discover, "MAX_TOTAL", 100)
    f = run(tmp_path, make(tmp_path / "sub", {"signal.c": "x" * 60, "signal.h": "x" * 60}))
    assert "add up to more than 0 MiB" in refused(f)
    assert not any((tmp_path / "dest").iterdir())


def test_a_member_twice_and_two_labs_folders(tmp_path):
    with pytest.warns(UserWarning):   # zipfile warns of the duplicate name as it writes it
        make_zip(tmp_path / "dup.zip", {"signal.c": "a", "./signal.c": "b"})
        with zipfile.ZipFile(tmp_path / "dup.zip", "a") as z:
            z.writestr("signal.c", "c")
    assert "it holds signal.c twice" in refused(run(tmp_path, tmp_path / "dup.zip"))
    src = make(tmp_path / "two", {"a/labs/01-signal/signal.c": "s", "b/labs/01-signal/signal.c": "s"})
    assert "more than one labs/ folder one level down (a/labs/, b/labs/)" in refused(
        discover.find(src, STAGES, tmp_path / "d2"))


def test_dest_must_be_empty(tmp_path):
    make(tmp_path / "dest", {"x": ""})
    with pytest.raises(ValueError, match="not empty"):
        discover.find(tmp_path, STAGES, tmp_path / "dest")


def test_hostile_file_names_are_refused_and_never_reach_a_note_raw(tmp_path):
    src = make(tmp_path / "sub", {"01-signal/signal.c": "s", "01-signal/\x1b[2Jfake 21 of 21.h": "x",
                                  "01-signal/-rf.c": "x"})
    f = run(tmp_path, src)
    assert tree_of(f) == {"01-signal/signal.c": "s"}
    assert "refused 01-signal/fake 21 of 21.h: its name has characters other than letters, digits and . _ + -; " \
           "left out" in f.notes
    assert any(n.startswith("refused 01-signal/-rf.c: its name has") for n in f.notes)
    assert not any("\x1b" in n for n in f.notes)
    f = discover.find(make(tmp_path / "b", {"\x1b]0;x\x07README\r.md": "r"}), STAGES, tmp_path / "d2")
    assert refused(f).endswith("; found: README .md")
