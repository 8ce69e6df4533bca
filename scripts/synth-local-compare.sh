#!/usr/bin/env bash
# Runs OUR synth on the first N API-Bank lines (lv3-train.json, the lines that pass the mine
# prefilter, as tests/real-llm/local-model.test.ts picks them) against a local model, one stage at
# a time so each stage's wall time and the machine's load are recorded. These are the settings of
# the side-by-side run with the original EnvScaler in docs/local-model.md:
#
#   scripts/synth-local-compare.sh N OUT BASE_URL [MODEL]
#   e.g. scripts/synth-local-compare.sh 3 /tmp/ours3 http://127.0.0.1:8080/v1 qwen2.5-coder-1.5b
#
# Env: ROUNDS (dual-agent rounds, default 4), PER_ENV (scenarios per env, default 1), TIMEOUT (seconds per request, default 1800), JSON_MODE
# (default schema), MAX_TOKENS (default 2048: the local-llm server's own -n, which is the only cap
# the original's calls have), CODE_MODE / CODE_FALLBACK (synth's --code-mode / --code-fallback,
# default whole / methods), CACHE (the LLM call cache, default OUT/.cache: another run's cache replays
# its finished calls, e.g. to try another code mode on the same plans), NICE (the stages' nice level,
# default 19; 0 when the machine is left to the model, since a niced stage starves under load). Needs `npm run build` and ../shared/datasets. Writes OUT/tasks.jsonl,
# OUT/timings.tsv (stage, start, end, exit code, /proc/loadavg at the end) and synth's own output.
set -uo pipefail
N=${1:?N lines} OUT=${2:?out dir} URL=${3:?base url} MODEL=${4:-qwen2.5-coder-1.5b}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
DATA=${API_BANK:-}
for d in "$ROOT/../shared" "$ROOT/../../shared"; do # a clone beside shared/, or a worktree in wt/
  [ -z "$DATA" ] && [ -f "$d/datasets/api-bank/lv3-train.json" ] && DATA=$d/datasets/api-bank/lv3-train.json
done
[ -n "$DATA" ] || { echo "no ../shared/datasets/api-bank/lv3-train.json (set API_BANK)" >&2; exit 2; }
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
cd "$ROOT"
node --input-type=module -e '
import { prefilterReason, readTaskTexts } from "./dist/synth/stages/mine.js";
import { writeFileSync } from "node:fs";
const [data, n, out] = process.argv.slice(1);
const t = [...new Set(readTaskTexts(data, "api-bank"))].filter((x) => !prefilterReason(x)).slice(0, Number(n));
writeFileSync(out, t.map((x) => JSON.stringify({ task: x })).join("\n") + "\n");
' "$DATA" "$N" "$OUT/tasks.jsonl" || exit 2
export OPENAI_API_KEY=${OPENAI_API_KEY:-sk-local}
common=(--out "$OUT" --base-url "$URL" --model "$MODEL" --concurrency 2 --timeout "${TIMEOUT:-1800}" --max-retries 1
  --max-tokens "${MAX_TOKENS:-2048}" --json-mode "${JSON_MODE:-schema}" --rounds "${ROUNDS:-4}"
  --per-env "${PER_ENV:-1}" --conversation-every 0 --code-mode "${CODE_MODE:-whole}" --code-fallback "${CODE_FALLBACK:-methods}" ${CACHE:+--cache "$CACHE"})
for stage in mine build scenarios; do
  extra=(); [ "$stage" = mine ] && extra=(--input "$OUT/tasks.jsonl")
  t0=$(date +%s)
  nice -n "${NICE:-19}" node dist/cli/main.js synth "$stage" "${common[@]}" "${extra[@]}" 2> "$OUT/synth.$stage.log"
  rc=$?
  printf '%s\t%s\t%s\t%s\t%s\n' "$stage" "$t0" "$(date +%s)" "$rc" "$(cat /proc/loadavg)" >> "$OUT/timings.tsv"
  [ "$rc" = 0 ] || break # a stage that produced nothing exits 1; the next has nothing to read
done
