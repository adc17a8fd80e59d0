# ReConForM for Blender. `make demo` and `make test` set everything up on a fresh machine.
PY      ?= python3.11
VENV    ?= .venv
BIN     := $(VENV)/bin
PYTHON  := $(BIN)/python
STAMP   := $(VENV)/.installed
PYTEST  := $(PYTHON) -m pytest -p no:pytest-blender
BLEXT    = $(shell $(PYTHON) -c "import bpy,os;print(os.path.normpath(os.path.join(os.path.dirname(bpy.__file__),'..','..','addons_core','bl_pkg','cli','blender_ext.py')))")
BLTAGS   = $(shell $(PYTHON) -c "import bpy,os;print(os.path.normpath(os.path.join(os.path.dirname(bpy.__file__),'..','_bpy_internal','extensions','tags.py')))")

.PHONY: install demo test test-fast test-core test-core-numpy2 bench bench-library extension clean test-bpy5

$(STAMP): requirements.txt requirements-library.txt requirements-ray.txt
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -r requirements.txt -r requirements-library.txt -r requirements-ray.txt
	touch $@

# numpy 2 beside the venv's numpy 1 (bpy 4.5 needs numpy < 2; Blender 5.2 runs core on numpy 2): `make test` runs
# core's fast tests again on it, in a child process (tests/core/test_numpy2.py)
NUMPY2  ?= .numpy2
$(NUMPY2)/.installed: $(STAMP)
	$(BIN)/pip install -q --no-deps --disable-pip-version-check --target $(NUMPY2) "numpy>=2,<3"
	touch $@

install: $(STAMP) $(NUMPY2)/.installed

demo: $(STAMP)
	$(PYTHON) tools/demo.py --out demo_output

test: $(STAMP) $(NUMPY2)/.installed
	$(PYTEST) -q

# Everything not marked slow or assets (pytest.ini): tests/core, the add-on's UI and bridge tests on synthetic
# scenes, and a smoke retarget on a generated pair (tests/addon/test_smoke_retarget.py).
test-fast: $(STAMP)
	$(PYTEST) -q -m "not slow and not assets"

test-core: $(STAMP)
	$(PYTEST) -q tests/core

# core/ on numpy 2 (Blender 5.1+ ships numpy 2): a separate venv without bpy.
VENV_NP2 ?= .venv-np2
test-core-numpy2:
	test -x $(VENV_NP2)/bin/python || ($(PY) -m venv $(VENV_NP2) && \
	  $(VENV_NP2)/bin/pip install -q "torch==2.13.0" pot "numpy>=2" pytest)
	$(VENV_NP2)/bin/python -m pytest -q tests/core

# the solver's bench, then the library runner's (12 jobs x 4 configurations: the better part of an hour on 2
# cores; `make bench-library` alone)
bench: $(STAMP)
	$(PYTHON) tools/bench/run.py
	$(PYTHON) tools/bench/bench_library.py

bench-library: $(STAMP)
	$(PYTHON) tools/bench/bench_library.py

# The add-on's tests (bridge, batch, panels, operators, gizmos, packaging) on Blender 5.x (bpy 5.0 wheel, Python
# 3.11) in a second venv; not part of `make test`.
VENV5   ?= .venv-bpy5
BPY5_TESTS = tests/addon
$(VENV5)/.installed: requirements.txt Makefile
	$(PY) -m venv $(VENV5)
	$(VENV5)/bin/pip install -q --upgrade pip
	$(VENV5)/bin/pip install -q "bpy==5.0.*" "numpy>=1.26,<2" "torch==2.13.0" "pot>=0.9.5" "pytest>=8"
	touch $@

test-bpy5: $(VENV5)/.installed
	$(VENV5)/bin/python -m pytest -p no:pytest-blender -q $(BPY5_TESTS)

extension: $(STAMP)
	mkdir -p dist
	$(PYTHON) $(BLEXT) validate --valid-tags $(BLTAGS) .
	$(PYTHON) $(BLEXT) build --source-dir . --output-dir dist --valid-tags $(BLTAGS)
	$(PYTHON) $(BLEXT) validate dist/reconform-$$(sed -n 's/^version = "\(.*\)"/\1/p' blender_manifest.toml).zip

clean:
	rm -rf dist build demo_output bench_output library_output .pytest_cache
