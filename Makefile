# Two commands on a fresh machine: `make run` (the pipeline) and `make test` (the suite).
# Both create .venv and install the project once; re-running reuses the install
# (it is redone only when pyproject.toml changes).
SHELL := /bin/bash
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(CURDIR)/$(VENV)/bin
STAMP := $(VENV)/.installed
export PATH := $(BIN):$(PATH)
export RAY_AUTH_MODE ?= disabled
export RAY_USAGE_STATS_ENABLED ?= 0
export MLFLOW_DISABLE_TELEMETRY ?= true
export DO_NOT_TRACK ?= true

.PHONY: install run study test test-all gpu-check ui dashboard dag clean-runs

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; assert sys.version_info[:2] == (3, 11), f"Python 3.11 is required, found {sys.version.split()[0]}"'
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[test,bench]'
	touch $(STAMP)

install: $(STAMP)

run: $(STAMP)
	$(BIN)/dvc repro

# one paper at the study scale (study/dvc.yaml, flows/scale_pipeline.py): its outputs under study/, its
# report in study/reports/<paper>/ with the RUN.md the run writes. PAPER: tu_gimpel, shevchenko_osokin,
# goyal_2018, goyal_2019, goyal_mlm; `make study` alone runs all five.
study: $(STAMP)
	$(BIN)/dvc repro $(if $(PAPER),$$($(BIN)/python -m flows.scale_pipeline --target '$(PAPER)'),study/dvc.yaml)

test: $(STAMP)
	$(BIN)/python -m pytest -q

test-all: $(STAMP)
	$(BIN)/python -m pip install -q -e '.[test,bench,cluster,integration]'
	$(BIN)/python -m pytest -q -m ''

# the GPU path on a lent GPU machine (no Ray, MLflow, DVC or Optuna there): gpu/README.md
gpu-check:
	python -m gpu.check --out $(or $(OUT),gpu-check)

# the MLflow UI on the embedded store, or `make ui STORE=<backend store URI> PORT=<port> UI_HOST=<address>`.
# It first prints a link to each experiment's runs table: MLflow 3.17 opens pages in its GenAI view
# until the browser has chosen "Model training" (the switch at the top left; remembered after one click).
# The UI has no authentication: a UI_HOST other than a loopback address prints a warning
# (flows.cli.check_exposure; a shared server with authentication: infra/README.md).
ui: STORE ?= sqlite:///$(CURDIR)/mlflow.db
ui: PORT ?= 5000
ui: UI_HOST ?= 127.0.0.1
ui: $(STAMP)
	@$(BIN)/python -c 'import flows.cli as c; c.check_exposure()' ui '$(UI_HOST)' '$(PORT)'
	@$(BIN)/python -m components.tracking.mlflow_tracker links --store '$(STORE)' --server 'http://$(UI_HOST):$(PORT)'
	MLFLOW_SERVER_ENABLE_JOB_EXECUTION=false $(BIN)/mlflow server --host '$(UI_HOST)' --port '$(PORT)' \
	  --workers 1 --backend-store-uri '$(STORE)'

# optuna-dashboard on the sweeps' Optuna studies: $APPROXINFER_OPTUNA_STORAGE if set, else optuna.db
# beside mlflow.db (flows.study_storage.study_storage_url; the schema is created under its lock first).
# `make dashboard PORT=<port> UI_HOST=<address>`; no authentication either: a non-loopback UI_HOST warns.
dashboard: PORT ?= 8080
dashboard: UI_HOST ?= 127.0.0.1
dashboard: $(STAMP)
	@$(BIN)/python -c 'import flows.cli as c; c.check_exposure()' dashboard '$(UI_HOST)' '$(PORT)'
	@url="$$($(BIN)/python -c 'from flows.study_storage import open_study_storage as o, study_storage_url as u; o(u()); print(u())')" \
	  && $(BIN)/optuna-dashboard "$$url" --host '$(UI_HOST)' --port '$(PORT)'

dag: $(STAMP)
	$(BIN)/dvc dag

# remove the Ray Tune folders (.ray_results/<stage>) of stages that are not running: interrupted
# runs then restart from scratch instead of resuming
clean-runs: $(STAMP)
	$(BIN)/python -m flows.lifecycle clean
