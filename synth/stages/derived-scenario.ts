import { existsSync, readFileSync, rmSync } from "node:fs";
import { join } from "node:path";
import { z } from "zod";
import { EnvRuntime } from "../../bridge/core/engine/env-runtime.js";
import type { PatchOp } from "../../bridge/core/state/json-patch.js";
import { canonicalJson } from "../../protocol/canonical-json.js";
import type { Scenario, ToolCall } from "../../envs/format/bundle-schema.js";
import type { LlmClient } from "../llm/llm-client.js";
import { derivedTaskPrompt } from "../prompts.js";
import { stageBundle } from "./stage-bundle.js";

/** The most checks a derived scenario gets from its call's state change (besides reference_state). */
const MAX_DIFF_CHECKS = 5;

const TaskText = z.object({ task: z.string().min(10) });

/**
 * The calls a derived scenario can be made of: the dual-agent test's positive calls that changed
 * the state and that its judge did not fail (the env's own `build-report.json`), once each.
 */
export function derivedCandidates(bundleDir: string): ToolCall[] {
  const file = join(bundleDir, "build-report.json");
  if (!existsSync(file)) return [];
  const report = JSON.parse(readFileSync(file, "utf8")) as { cases?: { tool: string; arguments: Record<string, unknown>; case_type: string; result: string; diff: unknown[] }[] };
  const seen = new Set<string>();
  const out: ToolCall[] = [];
  for (const c of report.cases ?? []) {
    if (c.case_type !== "positive" || c.result === "fail" || c.diff.length === 0) continue;
    const key = `${c.tool} ${canonicalJson(c.arguments)}`;
    if (seen.has(key)) continue;
    seen.add(key);
    out.push({ name: c.tool, arguments: c.arguments });
  }
  return out;
}

/** A JSON pointer's segments as a property access (`/loans/L1/status` → `["loans"]["L1"]["status"]`). */
function access(path: string): string {
  return path
    .split("/")
    .slice(1)
    .map((s) => `[${JSON.stringify(s.replace(/~1/g, "/").replace(/~0/g, "~"))}]`)
    .join("");
}

/** Checks that the final state holds what `diff` changed, one per op (at most MAX_DIFF_CHECKS). */
export function checksFromDiff(diff: readonly PatchOp[]): { description: string; source: string }[] {
  return diff.slice(0, MAX_DIFF_CHECKS).map((op) => {
    const at = `final${access(op.path)}`;
    // optional chaining: a check reading a record the agent never made fails, it does not throw
    const safe = at.replace(/\]\[/g, "]?.[");
    if (op.op === "remove") return { description: `${op.path} is removed`, source: `({final}) => ${safe} === undefined` };
    const json = JSON.stringify(op.value);
    return { description: `${op.path} is ${json.length > 60 ? `${json.slice(0, 57)}...` : json}`, source: `({final}) => JSON.stringify(${safe}) === ${JSON.stringify(json)}` };
  });
}

/** Every string and number in a call's arguments (array items too): what the task text must give the agent. */
function argumentValues(v: unknown): string[] {
  if (typeof v === "string" || typeof v === "number") return [String(v)];
  if (Array.isArray(v)) return v.flatMap(argumentValues);
  if (v !== null && typeof v === "object") return Object.values(v).flatMap(argumentValues);
  return [];
}

/**
 * A task scenario built around one verified call (see derivedCandidates), for a model that cannot
 * write a whole scenario whose checks work (the 1.5B: none in 12 tries on 2026-12-07): the call is
 * played on the scenario's initial state, the checks come from the state change it makes (plus
 * `reference_state`), and the model writes only the task text, re-asked until it states every
 * value the call needs. Null when the call changes nothing on the initial state or fails there.
 */
export async function deriveScenario(llm: LlmClient, bundleDir: string, call: ToolCall, meta: { id: string; envId: string; introduction: string; taken: string[] }): Promise<Scenario | null> {
  // played in a copy of the bundle holding one bare scenario on the default state (the bundle's
  // own scenarios.json is what this stage is replacing)
  const dir = join(bundleDir, ".vetting", `${meta.id}-derive`);
  stageBundle(bundleDir, dir, [{ id: "derive", env_id: meta.envId, task: "Play one call.", max_steps: 2 }]);
  let diff: PatchOp[];
  let observation: string;
  try {
    const rt = await EnvRuntime.start({ envs: [dir], hardStopGraceMs: 500 });
    try {
      const { episode_id } = await rt.reset("derive", 1);
      const r = await rt.step(episode_id, call);
      if (r.info.error || (r.observation.tool_results ?? []).some((t) => !t.ok)) return null;
      diff = r.info.diff;
      observation = r.observation.content;
    } finally {
      await rt.close();
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  if (diff.length === 0) return null;
  const needed = [...new Set(argumentValues(call.arguments))];
  const { task } = await llm.askJson(
    "scenario",
    derivedTaskPrompt({ introduction: meta.introduction, call: `${call.name}(${JSON.stringify(call.arguments)})`, result: observation, diff: JSON.stringify(diff), taken: meta.taken }),
    TaskText,
    (t) => {
      const missing = needed.filter((v) => !t.task.toLowerCase().includes(v.toLowerCase()));
      return missing.length ? `the task does not say ${missing.map((m) => JSON.stringify(m)).join(", ")}: an agent reading it could not make this call; state every value` : null;
    },
    { echo: false },
  );
  return {
    id: meta.id,
    env_id: meta.envId,
    mode: "task",
    task,
    checks: [...checksFromDiff(diff).map((c) => ({ kind: "js" as const, ...c })), { kind: "reference_state" as const }],
    reference_actions: [call],
  } as Scenario;
}
