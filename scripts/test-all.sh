#!/usr/bin/env bash
# Every test the project has: TypeScript (vitest), the bundled envs (envscaler check), and the
# Python client's pytest suite in a venv this script creates itself.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -d node_modules ] || bash scripts/install.sh
# suites that read ../shared (tests/shared-data.ts) skip in a clone without it; where it is there
# (CI), a missing file fails them instead, so they cannot skip unnoticed
if [ -d "${ENVSCALER_SHARED:-../shared}" ]; then export ENVSCALER_SHARED_REQUIRED=1; fi
npm run build
# the BFCL parity tests (vitest) run the original classes of the pinned bfcl-eval from this venv. It
# goes in without its dependencies (they pull torch and model SDKs); its multi-turn classes need only
# mpmath, which python-client[test] pins.
if [ -f python-client/pyproject.toml ]; then
  [ -x .venv/bin/python ] || python3 -m venv .venv
  .venv/bin/pip install -q -e "python-client[test]"
  .venv/bin/pip install -q --no-deps "bfcl-eval==2026.3.23"
fi
npx vitest run
# the bundled envs must all pass `envscaler check` (skipped only while none is bundled yet)
if ls envs/*/manifest.json >/dev/null 2>&1; then node dist/cli/main.js check envs/; fi
if [ -f python-client/pyproject.toml ]; then
  [ -x .venv/bin/python ] || python3 -m venv .venv
  .venv/bin/pip install -q -e "python-client[test,ray]"
  .venv/bin/python -m pytest -q python-client/tests
  # envscaler.ray on a real 3-raylet Ray cluster (opt-in mark `ray`, ~1.5 min on 2 cores)
  .venv/bin/python -m pytest -q python-client/tests -m ray
  # the trainer adapters inside the real trainers (opt-in mark `trainers`), one job in a venv of its
  # own: python-client[train] pins torch (~6 GB, the CUDA build PyPI has; it runs on CPU), TRL and
  # skyrl-gym, kept out of the default suite's venv. openrlhf goes in
  # without its dependencies (vLLM, DeepSpeed and flash-attn need a GPU); its agent module needs
  # only aiohttp and pylatexenc besides torch and transformers.
  started=$(date +%s)
  [ -x .venv-train/bin/python ] || python3 -m venv .venv-train
  .venv-train/bin/pip install -q -e "python-client[train]"
  .venv-train/bin/pip install -q --no-deps "openrlhf==0.11.2" "pylatexenc==2.10"
  .venv-train/bin/pip install -q aiohttp  # openrlhf's agent module imports it (its other deps are GPU installs)
  # verl likewise without its dependencies (vLLM/SGLang, FSDP, Megatron need GPUs; it pins
  # transformers<5.11, older than the [train] extra's): its agent-loop module needs only these
  .venv-train/bin/pip install -q --no-deps "verl==0.9.1"
  .venv-train/bin/pip install -q "ray==2.60.0" "tensordict==0.15.3" "hydra-core==1.3.8" "codetiming==1.4.0" orjson cachetools fastapi uvicorn
  # verifiers 0.3.1: the newest release with the v0 MultiTurnEnv (0.4.0 ships only its v1 stack)
  .venv-train/bin/pip install -q "verifiers==0.3.1"
  installed=$(date +%s)
  # a trainer package that failed to install fails its tests here instead of skipping them unnoticed
  ENVSCALER_TRAINERS_REQUIRED=1 HF_HUB_OFFLINE=1 .venv-train/bin/python -m pytest -q python-client/tests -m trainers
  echo "trainer suite: install $((installed - started)) s, tests $(($(date +%s) - installed)) s"
fi
