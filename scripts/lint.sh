#!/usr/bin/env bash
# `npm run lint`: every static check, both languages. TypeScript: ESLint (type-aware rules and the
# style rules, eslint.config.js) and tsc over the tests, bench and scripts (tsconfig.check.json).
# Python: ruff (lint + format check) and mypy --strict on the envscaler package
# (python-client/pyproject.toml), from the venv scripts/test-all.sh makes.
set -euo pipefail
cd "$(dirname "$0")/.."
echo "lint: tsc (tests, bench, scripts)"
npx tsc -p tsconfig.check.json
echo "lint: eslint"
npx eslint --max-warnings 0 .
echo "lint: layers (docs/architecture.md's table: imports point down)"
node scripts/check-layers.mjs
if [ -f python-client/pyproject.toml ]; then
  [ -x .venv/bin/python ] || python3 -m venv .venv
  .venv/bin/python -c "import ruff, mypy" 2>/dev/null || .venv/bin/pip install -q -e "python-client[test]"
  echo "lint: ruff check, ruff format --check, mypy --strict (python-client)"
  (cd python-client && ../.venv/bin/ruff check . && ../.venv/bin/ruff format --check . && ../.venv/bin/mypy)
fi
echo "lint: all clean"
