"""Rubric files: one TOML file per stage, read by people and by the grader."""
import dataclasses
import pathlib

try:
    import tomllib  # Python 3.11 and later
except ImportError:  # Ubuntu 22.04's Python 3.10: the python3-tomli package
    import tomli as tomllib

LANES = ("plain", "race", "valgrind", "tsan", "perf", "quiz")
# System libraries a rubric may ask for (`libs = ["uring"]`: -luring on the
# stage's test binaries and on those of every stage that uses it). A short
# list on purpose: each one is a package in grader/deps.sh, and a name that
# is not here is a rubric error, never a link flag.
LIBS = ("uring",)


class RubricError(Exception):
    pass


@dataclasses.dataclass
class Item:
    stage: str
    id: str
    points: float
    lane: str
    tests: list
    clause: str
    section: str
    runs: int = 1
    hang: str = ""
    hidden: bool = False   # from the instructor's HIDDEN dir: not in the handout
    cpus: float = 0        # CPUs the item needs to be judged (machine.share()); less: not judged, 0 of 0 on Gradescope

    @property
    def key(self):
        return f"{self.stage}/{self.id}"


@dataclasses.dataclass
class Stage:
    name: str          # "01-signal"
    title: str
    chapter: str       # "docs/01-signal.md"
    sources: list      # student files
    uses: list         # earlier stages linked in
    items: list
    path: pathlib.Path
    libs: list = dataclasses.field(default_factory=list)   # system libraries its tests link (-l), from LIBS

    @property
    def number(self):
        return int(self.name.split("-", 1)[0])

    @property
    def max_points(self):
        return sum(i.points for i in self.items)

    def lane_items(self, lane):
        return [i for i in self.items if i.lane == lane]


# The CPUs a perf item needs unless it says (`cpus = 0.5` for one that
# measures its own thread's CPU time, `cpus = 2` for one that times two
# workers side by side): a whole one, since a quota below it throttles a
# real-time measurement. Other lanes need none.
PERF_CPUS = 1.0


def _cpus(where, raw):
    cpus = raw.get("cpus", PERF_CPUS if raw["lane"] == "perf" else 0)
    if isinstance(cpus, bool) or not isinstance(cpus, (int, float)) or not 0 <= cpus <= 64:
        raise RubricError(f"{where}: item '{raw['id']}': cpus must be a number from 0 to 64, not {cpus!r}")
    return float(cpus)


def load_stage(path):
    path = pathlib.Path(path)
    try:
        data = tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as e:
        raise RubricError(f"{path}: {e}") from None
    where = str(path)
    for key in ("stage", "title", "chapter", "sources"):
        if key not in data:
            raise RubricError(f"{where}: missing '{key}'")
    name = data["stage"]
    libs = list(data.get("libs", []))
    for lib in libs:
        if lib not in LIBS:
            raise RubricError(f"{where}: libs: '{lib}' is not one the grader links (known: {', '.join(LIBS)})")
    if path.stem != name:
        raise RubricError(f"{where}: stage '{name}' does not match the file name")
    items, seen = [], set()
    for raw in data.get("item", []):
        for key in ("id", "points", "lane", "tests", "clause", "section"):
            if key not in raw:
                raise RubricError(f"{where}: an item lacks '{key}': {raw}")
        if raw["id"] in seen:
            raise RubricError(f"{where}: item id '{raw['id']}' is used twice")
        seen.add(raw["id"])
        if raw["lane"] not in LANES:
            raise RubricError(f"{where}: item '{raw['id']}': lane must be one of {', '.join(LANES)}")
        if not raw["tests"]:
            raise RubricError(f"{where}: item '{raw['id']}' names no test")
        if raw["points"] <= 0:
            raise RubricError(f"{where}: item '{raw['id']}' must be worth points")
        unknown = set(raw) - {"id", "points", "lane", "tests", "clause", "section", "runs", "hang", "cpus"}
        if unknown:
            raise RubricError(f"{where}: item '{raw['id']}': unknown keys {sorted(unknown)}")
        items.append(Item(stage=name, id=raw["id"], points=raw["points"], lane=raw["lane"],
                          tests=list(raw["tests"]), clause=raw["clause"], section=raw["section"],
                          runs=int(raw.get("runs", 1)), hang=raw.get("hang", ""), cpus=_cpus(where, raw)))
    if not items:
        raise RubricError(f"{where}: no items")
    return Stage(name=name, title=data["title"], chapter=data["chapter"], sources=list(data["sources"]),
                 uses=list(data.get("uses", [])), items=items, path=path, libs=libs)


def load_hidden(stages, hidden_dir):
    """Adds the items of an instructor's hidden rubric files
    (HIDDEN/rubric/NN-name.toml: `[[item]]` tables only, for stages that
    exist) to those stages."""
    by_name = {s.name: s for s in stages}
    for path in sorted((pathlib.Path(hidden_dir) / "rubric").glob("*.toml")):
        if path.stem not in by_name:
            raise RubricError(f"{path}: hidden items for a stage that does not exist ({path.stem})")
        stage = by_name[path.stem]
        data = tomllib.loads(path.read_text())
        ids = {i.id for i in stage.items}
        for raw in data.get("item", []):
            for key in ("id", "points", "lane", "tests", "clause", "section"):
                if key not in raw:
                    raise RubricError(f"{path}: an item lacks '{key}': {raw}")
            if raw["id"] in ids:
                raise RubricError(f"{path}: hidden item id '{raw['id']}' is already used in {stage.name}")
            if raw["lane"] not in LANES:
                raise RubricError(f"{path}: item '{raw['id']}': lane must be one of {', '.join(LANES)}")
            ids.add(raw["id"])
            stage.items.append(Item(stage=stage.name, id=raw["id"], points=raw["points"], lane=raw["lane"],
                                    tests=list(raw["tests"]), clause=raw["clause"], section=raw["section"],
                                    runs=int(raw.get("runs", 1)), hang=raw.get("hang", ""), hidden=True,
                                    cpus=_cpus(path, raw)))
    return stages


def load_all(rubric_dir, hidden_dir=None):
    stages = [load_stage(p) for p in sorted(pathlib.Path(rubric_dir).glob("*.toml"))]
    if hidden_dir:
        load_hidden(stages, hidden_dir)
    names = {s.name for s in stages}
    for s in stages:
        for u in s.uses:
            if u not in names:
                raise RubricError(f"{s.path}: uses unknown stage '{u}'")
    return stages


def select(stages, spec):
    """STAGE=1, STAGE=01, STAGE=01-signal, STAGE=1,2 -> the matching stages."""
    if not spec:
        return stages
    wanted = []
    for part in str(spec).split(","):
        part = part.strip()
        match = [s for s in stages if s.name == part or (part.isdigit() and s.number == int(part))]
        if not match:
            known = ", ".join(s.name for s in stages)
            raise RubricError(f"STAGE={part}: no such stage (known: {known})")
        wanted.extend(m for m in match if m not in wanted)
    return wanted
