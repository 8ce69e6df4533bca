import { spawnSync } from "node:child_process";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, test } from "vitest";
import { systemPrompt, type AgentMode, type ScenarioMode } from "../../agent/system-prompt.js";

// The agent's default system prompt exists twice on purpose: agent/system-prompt.ts (envscaler
// rollout) and python-client/envscaler/agent.py (envscaler.rollout), because the pip package
// cannot read the npm package's files. This keeps the two texts identical, byte for byte.
const PY = join(import.meta.dirname, "..", "..", ".venv", "bin", "python");
const HAVE_CLIENT = existsSync(PY) && spawnSync(PY, ["-c", "import envscaler.agent"]).status === 0;
const WHY = `the Python client is not importable with ${PY}: run scripts/test-all.sh (it makes the venv)`;

const info = {
  introduction: "A library with books and members.",
  rules: ["Members may borrow at most 3 books.", "Ünïcode rules stay as written."],
  tools: [{ type: "function", function: { name: "get_book", description: "Look a book up.", parameters: { type: "object", properties: { book_id: { type: "string" } }, required: ["book_id"] } } }],
};

function pythonPrompt(mode: ScenarioMode, agentMode: AgentMode, rules: string[]): string {
  const script = "import json,sys\nfrom envscaler.agent import system_prompt\na=json.load(sys.stdin)\nsys.stdout.write(system_prompt(a['info'], a['mode']))";
  const r = spawnSync(PY, ["-c", script], { input: JSON.stringify({ info: { ...info, rules, mode }, mode: agentMode }), encoding: "utf8" });
  if (r.status !== 0) throw new Error(r.stderr);
  return r.stdout;
}

describe.skipIf(!HAVE_CLIENT)(`the Python agent's system prompt is the TypeScript one (${HAVE_CLIENT ? "python client found" : WHY})`, () => {
  const cases = (["task", "conversation"] as const).flatMap((mode) => (["fc", "prompt"] as const).flatMap((agentMode) => [[], info.rules].map((rules) => ({ mode, agentMode, rules }))));
  test.each(cases)("$mode scenario, $agentMode mode, $rules.length rules", ({ mode, agentMode, rules }) => {
    expect(pythonPrompt(mode, agentMode, rules)).toBe(systemPrompt({ mode, agentMode, introduction: info.introduction, rules, tools: info.tools }));
  });
});
