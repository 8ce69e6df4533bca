#!/usr/bin/env bash
# Installs the npm dependencies exactly as locked. package.json pins msgpackr-extract (msgpackr's
# optional native accelerator) with `overrides` to 3.0.4, the newest version whose platform
# packages are on every registry mirror we met, so the lockfile is complete and `npm ci` takes it;
# should a mirror still refuse it, `npm install` resolves the same versions.
set -euo pipefail
cd "$(dirname "$0")/.."
npm ci --no-audit --no-fund || { echo "npm ci refused the lockfile; falling back to npm install" >&2; npm install --no-audit --no-fund; }
