# The lab's only entry point.
#
#   make grade                       grade labs/ (your work), every stage
#   make grade STAGE=1               one stage (1, 01 or 01-signal; or 1,2)
#   make grade TARGET=dir            any tree shaped like labs/
#   make grade RESULTS=results.json  also write Gradescope's results.json (JUNIT=out.xml: pytest's JUnit XML)
#   make grade ITEMS=a,b  TEST=suite/name  SEED=n   narrow down, replay a seed
#   make grade BUDGET=540            stop after 540 s: items left are "not judged" (RESULTS= is written as it goes)
#   make check STAGE=1               the quick pass: no Valgrind/TSan/perf, race items once
#   make watch STAGE=1               make check again on every save
#   make debug STAGE=1 TEST=s/name   one test in gdb, built at -O0, in one process (GDB=0: without gdb)
#   (in a stage folder, e.g. labs/01-signal: make grade, check, watch, debug TEST=.., hint ITEM=..,
#    trace take that stage of that tree; trace writes trace.json in that folder)
#   make compile_commands.json       for clangd: every file with the grader's flags
#   make hint STAGE=1 ITEM=latest-waker   the next hint for one rubric item (RESET=1: start over;
#                                    without ITEM: the stage's items and the hints seen)
#   make trace STAGE=3 [EXAMPLE=three_tasks] [RENDER=trace.png]
#                                    build a stage's example with tracing on (TARGET=labs by default:
#                                    your runtime) and write trace.json for ui.perfetto.dev (docs/tracing.md)
#   make clean
#+instructors (make handout leaves these lines out: they need this repository)
#
# For instructors:
#   make grade TARGET=solutions      the reference: full marks
#   make grade HIDDEN=dir            add an instructor's hidden items (dir/rubric, dir/tests)
#   make grade RESULTS=r.json UNJUDGED=omit   an item not judged counts 0 of 0 (default: 0 of its points)
#   make grade-class SUBMISSIONS=dir a folder of student trees: gradebook.csv + most failed items
#                                    (ROSTER=roster.csv: ids joined in, canvas.csv and gradescope.csv too)
#   make test                        the project's own tests
#   make checkpoints                 grade every chapter checkpoint on a tree with only its steps written (part of test; ~25 s alone)
#   make labs                        regenerate labs/ from solutions/
#   make quotes                      rewrite the code the docs quote from its marked source, and each chapter's
#                                    "How the grader checks this stage" from its rubric (make test checks both)
#   make handout                     the student handout, in build/handout
#   make autograder [STAGE=n] [HIDDEN=dir]  a Gradescope autograder zip for one assignment (build/autograder*.zip)
#   sudo python3 grader/course/gradescope_sim.py --stage n   that zip graded as Gradescope would, at its
#                                    default 0.5 CPU and 768 MB, 10 runs of the reference (docs/instructors.md)
#   make docs                        the textbook as a website, in build/site (make docs-serve: on localhost:8000)
#   make bench                       benchmarks against Tokio, libuv and others, as ratios (bench/README.md)
#-instructors
# GNU make ($(shell), $(if), $(filter) below)
SHELL = /bin/sh

# Every path below starts at ROOT, so this Makefile works from any folder: a
# stage folder's own Makefile (labs/01-signal/Makefile, written by `make labs`)
# includes it, and there STAGE and TARGET default to that stage of that tree.
ROOT := $(patsubst %/,%,$(dir $(abspath $(lastword $(MAKEFILE_LIST)))))
STAGE_FOLDER := $(filter-out $(ROOT),$(patsubst %/,%,$(dir $(abspath $(firstword $(MAKEFILE_LIST))))))
ifneq ($(STAGE_FOLDER),)
STAGE ?= $(notdir $(STAGE_FOLDER))
TARGET ?= $(patsubst %/,%,$(dir $(STAGE_FOLDER)))
endif
# The folder's own stage: then the commands a tool suggests need no STAGE=.
HERE = $(if $(STAGE_FOLDER),$(filter $(notdir $(STAGE_FOLDER)),$(STAGE)))

TARGET ?= labs
STAGE ?=
ITEMS ?=
ITEM ?=
RESET ?=
TEST ?=
SEED ?=
RESULTS ?=
JUNIT ?=
WERROR ?=
TIMINGS ?=
SUBMISSIONS ?=
GRADEBOOK ?=
GDB ?=
HIDDEN ?=
UNJUDGED ?=
BUDGET ?=
EXAMPLE ?=
OUT ?= trace.json
RENDER ?=
VG_SCALE ?= 0.05

# The first Python that has pytest: python3 on PATH may be a build without
# the distribution's packages, while /usr/bin/python3 has them. Expanded
# when a recipe runs, so after `deps` has installed what was missing.
# Found once per make run, at its first use (each probe starts a Python).
PY = $(eval PY := $(shell for p in python3 /usr/bin/python3; do if command -v $$p >/dev/null 2>&1 && $$p -c 'import pytest' 2>/dev/null; then command -v $$p; break; fi; done))$(PY)
PYTEST = $(PY) -m pytest -p no:cacheprovider -q --no-header --tb=no -rN
NEED_PY = test -n "$(PY)" || { echo "no Python with pytest found (tried python3, /usr/bin/python3)"; exit 2; }

# A Python with matplotlib (the distribution's python3-matplotlib) for
# drawing traces; else the one with pytest (trace.json is still written).
PY_MPL = $(shell for p in python3 /usr/bin/python3; do if command -v $$p >/dev/null 2>&1 && $$p -c 'import matplotlib, tomllib' 2>/dev/null; then command -v $$p; break; fi; done)

# A bad STAGE=, TARGET=, ITEMS=, TEST=, SEED=, BUDGET=, VG_SCALE=, JOBS= ... stops make
# here, in one line, before anything runs (grader/lab_grader/arguments.py
# checks them; the grader checks again when pytest is run by hand). Expanded
# with the recipe: $(call CHECK,kind args...).
CHECK = $(eval CHECK_SAYS := $(shell $(or $(PY),python3) $(ROOT)/grader/tools.py args $(1) 2>&1))$(if $(CHECK_SAYS),$(error $(CHECK_SAYS)))

GRADE_ARGS = --target="$(TARGET)" --stage="$(STAGE)" --items="$(ITEMS)" --test="$(TEST)" \
	--seed="$(SEED)" --valgrind-scale="$(VG_SCALE)" \
	$(if $(RESULTS),--results="$(RESULTS)") $(if $(JUNIT),--junit="$(JUNIT)") \
	$(if $(WERROR),--werror) $(if $(TIMINGS),--timings) $(if $(HIDDEN),--hidden="$(HIDDEN)") \
	$(if $(UNJUDGED),--unjudged="$(UNJUDGED)") $(if $(BUDGET),--budget="$(BUDGET)")

.PHONY: grade check watch debug compile_commands.json deps trace clean hint

grade: deps
	$(call CHECK,grade $(GRADE_ARGS))
	@$(NEED_PY)
	@$(PYTEST) $(ROOT)/grader/grade $(GRADE_ARGS)

check: deps
	$(call CHECK,grade $(GRADE_ARGS))
	@$(NEED_PY)
	@$(PYTEST) $(ROOT)/grader/grade $(GRADE_ARGS) --quick

watch: deps
	$(call CHECK,watch --stage="$(STAGE)" --target="$(TARGET)")
	@$(PY) $(ROOT)/grader/tools.py watch --stage "$(STAGE)" --target "$(TARGET)"

debug: deps
	$(call CHECK,debug --stage="$(STAGE)" --test="$(TEST)" --target="$(TARGET)")
	@$(PY) $(ROOT)/grader/tools.py debug --stage "$(STAGE)" --test "$(TEST)" --target "$(TARGET)" $(if $(filter 0,$(GDB)),--no-gdb)

compile_commands.json: deps
	@$(PY) $(ROOT)/grader/tools.py compile-commands --target "$(TARGET)"

deps:
	@sh $(ROOT)/grader/deps.sh grade

# The written hints (docs/hints/NN-name.md), one level at a time; the level
# reached is kept in .hints. Needs Python only, so no deps.
hint:
	$(call CHECK,hint --stage="$(STAGE)" --item="$(ITEM)")
	@$(or $(PY),python3) $(ROOT)/grader/tools.py hint --stage "$(STAGE)" --item "$(ITEM)" $(if $(RESET),--reset) \
	    $(if $(HERE),--in-stage-folder)

# The stage's example (examples/NN-name/) with -DLAB_TRACE, run; its trace in $(OUT).
# An earlier stage that make grade would not use is the reference's, as in
# make grade, and a line says so (grader/tracing/trace_build.py).
trace:
	@test -n "$(STAGE)" || { echo "usage: make trace STAGE=n [EXAMPLE=name] [TARGET=labs] [OUT=trace.json] [RENDER=trace.png]"; exit 2; }
	@$(or $(PY_MPL),$(PY),python3) $(ROOT)/grader/tracing/trace_build.py --stage "$(STAGE)" --example "$(EXAMPLE)" --target "$(TARGET)" \
	    --out "$(OUT)" $(if $(RENDER),--render "$(RENDER)")

clean:
	cd "$(ROOT)" && rm -rf build examples/06-reactor/build examples/07-work-stealing/build trace.json trace.png compile_commands.json
	$(if $(STAGE_FOLDER),rm -f "$(CURDIR)/trace.json" "$(CURDIR)/trace.png")

#+instructors
.PHONY: grade-class test checkpoints labs labs-check quotes quotes-check handout autograder deps-test bench docs docs-serve

grade-class: deps
	$(call CHECK,grade-class --submissions="$(SUBMISSIONS)" --stage="$(STAGE)" --items="$(ITEMS)" --jobs="$(JOBS)" --hidden="$(HIDDEN)")
	@$(PY) $(ROOT)/grader/course/grade_class.py "$(SUBMISSIONS)" $(if $(GRADEBOOK),--out "$(GRADEBOOK)") --stage="$(STAGE)" --hidden="$(HIDDEN)" \
	    $(if $(ITEMS),--items="$(ITEMS)") $(if $(JOBS),--jobs="$(JOBS)") $(if $(DISPATCH),--dispatch="$(DISPATCH)") $(if $(HOSTS),--hosts="$(HOSTS)") \
	    $(if $(ROSTER),--roster="$(ROSTER)") $(if $(CANVAS_TITLE),--canvas-title="$(CANVAS_TITLE)")

# One pytest worker more than the machine has cores: a grading waits on
# its tests' own limits and sleeps (CPU 75 % busy at -n 2 on 2 cores), and
# a third worker fills that: 07's 46 mutants 78.9 s -> 70.3 s.
TEST_WORKERS = $(shell expr $$(nproc 2>/dev/null || echo 2) + 1)

test: deps-test labs-check quotes-check
	@$(NEED_PY)
	@cd "$(ROOT)" && $(PY) -m pytest -p no:cacheprovider -q --no-header -rfE --durations=15 grader/selftest -n $(TEST_WORKERS)

# Part of test, alone here: the chapters' "A good order:" steps
# (grader/authoring/steps.py), each checkpoint graded with only its steps written.
checkpoints: deps-test
	@$(NEED_PY)
	@cd "$(ROOT)" && $(PY) -m pytest -p no:cacheprovider -q --no-header -rfE \
	    grader/selftest/test_checkpoints.py -n 2

labs:
	@python3 $(ROOT)/grader/authoring/skeleton.py --write

labs-check:
	@python3 $(ROOT)/grader/authoring/skeleton.py --check

quotes:
	@python3 $(ROOT)/grader/authoring/quotes.py --write
	@python3 $(ROOT)/grader/authoring/checks.py --write

quotes-check:
	@python3 $(ROOT)/grader/authoring/quotes.py --check
	@python3 $(ROOT)/grader/authoring/checks.py --check

handout: deps labs-check
	@$(PY) $(ROOT)/grader/course/handout.py

autograder: deps labs-check
	@$(PY) $(ROOT)/grader/course/autograder.py --stage="$(STAGE)" $(if $(HIDDEN),--hidden="$(HIDDEN)") $(if $(BUDGET),--budget="$(BUDGET)") \
	    $(if $(UNJUDGED),--unjudged="$(UNJUDGED)")

deps-test:
	@sh $(ROOT)/grader/deps.sh test

# The textbook site (mkdocs.yml): docs/*.md with the rubric's grading table,
# built --strict (a broken link fails). grader/selftest/test_site.py loads it in Chromium.
PY_DOCS = $(shell for p in python3 /usr/bin/python3; do if command -v $$p >/dev/null 2>&1 && $$p -c 'import mkdocs, tomllib' 2>/dev/null; then command -v $$p; break; fi; done)
NEED_DOCS = test -n "$(PY_DOCS)" || { echo "no Python with mkdocs found (tried python3, /usr/bin/python3)"; exit 2; }

docs:
	@sh $(ROOT)/grader/deps.sh docs
	@$(NEED_DOCS)
	@cd "$(ROOT)" && $(PY_DOCS) -m mkdocs build --strict --quiet && echo "wrote build/site (open build/site/index.html)"

docs-serve:
	@sh $(ROOT)/grader/deps.sh docs
	@$(NEED_DOCS)
	@cd "$(ROOT)" && $(PY_DOCS) -m mkdocs serve --strict

# Never a prerequisite of test: CI runs only `make test`.
bench:
	@sh $(ROOT)/bench/deps.sh
	@$(MAKE) -C $(ROOT)/bench run

clean-all: clean
	$(MAKE) -C $(ROOT)/bench clean
#-instructors
