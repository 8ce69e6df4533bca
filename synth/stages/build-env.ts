import { mkdirSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { Ajv } from "ajv";
import { z } from "zod";
import { checkBundleIsolated } from "../../bridge/tools/check/check-isolated.js";
import { exampleArguments } from "../../bridge/tools/check/gaming-probes.js";
import { isRefusal } from "../../bridge/tools/check/is-refusal.js";
import { EnvRuntime } from "../../bridge/core/engine/env-runtime.js";
import type { StepResult } from "../../bridge/core/episode/episode.js";
import { ENV_ID_RE, type ToolSchema } from "../../envs/format/bundle-schema.js";
import { ToolValidator } from "../../bridge/core/episode/tool-validator.js";
import { canonicalJson } from "../../protocol/canonical-json.js";
import { extractCode, InvalidReply, LlmError, type LlmClient } from "../llm/llm-client.js";
import { bodyPrompt, codePrompt, judgePrompt, methodPrompt, planPrompt, testerPrompt } from "../prompts.js";
import type { MinedEnv, Rejection } from "./mine.js";
import { repairHints } from "./repair-hints.js";
import { BODY_MARKER, bodyOf, HELPER_DOCS, scaffoldFor } from "./scaffold.js";

const JsonObject = z.record(z.string(), z.unknown());

export const EnvPlan = z.object({
  env_name: z.string().regex(/^[a-z][a-z0-9_]{1,40}$/, "env_name is snake_case"),
  title: z.string().min(1),
  introduction: z.string().min(1),
  rules: z.array(z.string()).min(1),
  state_schema: JsonObject,
  initial_state: JsonObject,
  tools: z
    .array(
      z.object({
        name: z.string().regex(/^[a-z][a-z0-9_]{0,63}$/),
        description: z.string().min(1),
        kind: z.enum(["query", "change"]),
        // each property's schema is an object: under --json-mode schema the decoder then cannot write
        // {"id": "string"} (what the 0.5B wrote), and without it the message names the property
        parameters: z.object({ type: z.literal("object"), properties: z.record(z.string(), JsonObject).default({}), required: z.array(z.string()).optional() }).passthrough(),
      }),
    )
    .min(3),
});
export type EnvPlan = z.infer<typeof EnvPlan>;

// `arguments` is required, not defaulted: under a JSON schema the server's grammar then makes the
// model write it (the 1.5B, free to leave it out, put the arguments into its expectation's prose)
export const TesterCall = z.object({ tool: z.string(), arguments: JsonObject, case_type: z.enum(["positive", "negative"]), expectation: z.string().default("") });
export type TesterCall = z.infer<typeof TesterCall>;
// the order is the order a model under a JSON schema writes them in: its reading of the state and
// rules first, then `allowed`, then the verdict. With `allowed` first the 1.5B wrote `true` and then
// "the call is not allowed because the appointment_id does not exist" (docs/local-model.md, runs 16-17)
export const Judgement = z.object({ reason: z.string(), allowed: z.boolean(), result: z.enum(["pass", "warning", "fail"]) });
export type Judgement = z.infer<typeof Judgement>;

export interface TestCase {
  round: number;
  tool: string;
  arguments: Record<string, unknown>;
  case_type: "positive" | "negative";
  expectation: string;
  observation: string;
  diff: unknown[];
  /** The env answered `{success: false, ...}`. */
  refused: boolean;
  /** The judge's answer to "do the state and the rules allow this call?" (absent for an env fault). */
  allowed?: boolean;
  result: "pass" | "warning" | "fail";
  reason: string;
}

/**
 * A refused call passes exactly when the judge found it not allowed by the state and the rules, and
 * fails when it found it allowed; an accepted call keeps the judge's verdict. The 1.5B judge failed
 * correct refusals while its own reason said the call was invalid ("falls on a day not available",
 * "does not allow adding a new trial if the patient already has one": docs/local-model.md, run 15):
 * it answers "is this call allowed?" more reliably than "did the method behave correctly?".
 */
export function verdictOf(judged: Judgement, refused: boolean): Pick<TestCase, "allowed" | "result" | "reason"> {
  if (!refused) return judged;
  return judged.allowed
    ? { allowed: true, result: "fail", reason: `refused a call the state and the rules allow: ${judged.reason}` }
    : { allowed: false, result: "pass", reason: `a correct refusal: ${judged.reason}` };
}

export interface BuiltEnv {
  env_id: string;
  dir: string;
  topic: string;
  /** How the class was written: whole ("class", `--code-mode whole`), one method per tool, or tool bodies in the plan's scaffold. */
  code_mode: CodeMode;
  pass_rate: number;
  kept: boolean;
  cases: TestCase[];
}

/** The ways of writing the env class (`--code-mode`, `--code-fallback`). */
export const CODE_WAYS = ["whole", "methods", "scaffold"] as const;
export type CodeWay = (typeof CODE_WAYS)[number];
/** What the build report records for each way (the whole class has been "class" since before the flag). */
export type CodeMode = "class" | "methods" | "scaffold";
const MODE_OF: Record<CodeWay, CodeMode> = { whole: "class", methods: "methods", scaffold: "scaffold" };
/** The stage whose calls each way makes (its endpoint, token cap and counters). */
const STAGE_OF: Record<CodeWay, string> = { whole: "code", methods: "method", scaffold: "body" };

export interface BuildOptions {
  /** How the class is written first. @default "whole" */
  codeMode?: CodeWay;
  /** How it is written when the first way fails ("none": the env is rejected). @default "methods" */
  codeFallback?: CodeWay | "none";
  /** Where bundles are written, one folder per env. */
  outDir: string;
  /** Dual-agent test rounds per env. @default 12 */
  rounds?: number;
  /** Keep an env when (pass + warning) / total reaches this (EnvScaler's filter). @default 0.85 */
  threshold?: number;
  onProgress?: (done: number, total: number) => void;
}

export interface BuildResult {
  built: BuiltEnv[];
  rejected: Rejection[];
}

const pascal = (s: string) => s.split("_").map((w) => w.charAt(0).toUpperCase() + w.slice(1)).join("");

const isObject = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === "object" && !Array.isArray(v);

/**
 * Gives each record of a collection the `id` its schema requires and the plan left out, from the
 * key it is stored under. Records keyed by id without the id inside are the small models' most
 * common plan mistake (Qwen2.5-Coder 1.5B: four plans in two runs, re-asked with the reason and
 * repeated; docs/local-model.md), and the key says exactly what the id is. Only a field named
 * `id`, only when the schema requires it: a missing `patient_id` is a reference, not the key.
 */
export function fillRecordIds(plan: EnvPlan): void {
  const properties = isObject(plan.state_schema.properties) ? plan.state_schema.properties : {};
  for (const [name, records] of Object.entries(plan.initial_state)) {
    const schema = properties[name];
    const record = isObject(schema) && isObject(schema.additionalProperties) ? schema.additionalProperties : null;
    if (!record || !Array.isArray(record.required) || !record.required.includes("id") || !isObject(records)) continue;
    const idSchema = isObject(record.properties) && isObject(record.properties.id) ? record.properties.id : {};
    const numeric = idSchema.type === "integer" || idSchema.type === "number";
    for (const [key, r] of Object.entries(records)) {
      if (isObject(r) && !("id" in r)) r.id = numeric && /^-?\d+$/.test(key) ? Number(key) : key;
    }
  }
}

/**
 * Stores each record of a collection under its own `id` when the plan stored them under other keys:
 * the 1.5B wrote `{"0": {"id": 1}, "1": {"id": 2}}` (an array's positions kept as keys,
 * docs/local-model.md, 2026-12-07), and its tools then looked records up by the id an agent passes
 * (`this.trials[trial_id]`), so `view(trial_id: 1)` returned the record whose id is 2 and its tester
 * and judge failed the env over it. Only when every record of the collection has an `id` that is a
 * string or a number, and no two give the same key; otherwise the plan is checked as written.
 */
export function keyRecordsById(plan: EnvPlan): void {
  for (const [name, records] of Object.entries(plan.initial_state)) {
    if (!isObject(records)) continue;
    const entries = Object.entries(records);
    const ids = entries.map(([, r]) => (isObject(r) && (typeof r.id === "string" || typeof r.id === "number") ? String(r.id) : null));
    if (entries.length === 0 || ids.some((id) => id === null) || new Set(ids).size !== ids.length) continue;
    if (entries.every(([key], i) => key === ids[i])) continue;
    plan.initial_state[name] = Object.fromEntries(entries.map(([, r], i) => [ids[i]!, r]));
  }
}

/**
 * Turns JSON Schema draft 3's `"required": true` on a property into the `required` array of the
 * object holding it (and drops a boolean `required` anywhere else), in place. Qwen2.5-Coder 1.5B
 * wrote its schemas that way in 5 plans over two runs, re-asked with ajv's "required must be array"
 * and repeated each time (docs/local-model.md); the intent is unambiguous.
 */
export function requiredFlagsToArrays(schema: unknown): void {
  if (Array.isArray(schema)) {
    for (const s of schema) requiredFlagsToArrays(s);
    return;
  }
  if (!isObject(schema)) return;
  const flagged = isObject(schema.properties) ? Object.entries(schema.properties).filter(([, p]) => isObject(p) && p.required === true).map(([name]) => name) : [];
  if (typeof schema.required === "boolean") delete schema.required;
  if (flagged.length) schema.required = [...new Set([...(Array.isArray(schema.required) ? (schema.required as unknown[]) : []), ...flagged])];
  for (const [key, v] of Object.entries(schema)) if (key !== "required" && key !== "enum" && key !== "const" && key !== "default" && key !== "examples") requiredFlagsToArrays(v);
}

/** Why a plan cannot be built (null: it can). Repairs unambiguous small-model slips first (draft-3 `required`, missing record ids, records not stored under their ids): the plan askJson returns is the one checked. */
export function checkPlan(plan: EnvPlan): string | null {
  requiredFlagsToArrays(plan.state_schema);
  for (const t of plan.tools) requiredFlagsToArrays(t.parameters);
  fillRecordIds(plan);
  keyRecordsById(plan);
  const names = plan.tools.map((t) => t.name);
  const dup = names.find((n, i) => names.indexOf(n) !== i);
  if (dup) return `tool ${dup} is listed twice`;
  for (const [k, v] of Object.entries(plan.initial_state)) {
    if (Array.isArray(v) && v.some((x) => x && typeof x === "object")) return `initial_state.${k} is an array of records; make it an object keyed by record id`;
  }
  const ajv = new Ajv({ allErrors: true, strict: false });
  let validate;
  try {
    validate = ajv.compile(plan.state_schema);
  } catch (e) {
    return `state_schema is not a valid JSON Schema: ${(e as Error).message}`;
  }
  if (!validate(plan.initial_state)) return `initial_state does not fit state_schema: ${(validate.errors ?? []).slice(0, 5).map((e) => `${e.instancePath || "/"} ${e.message}`).join("; ")}`;
  for (const t of plan.tools) {
    try {
      ajv.compile(t.parameters);
    } catch (e) {
      return `tool ${t.name}: parameters are not a valid JSON Schema: ${(e as Error).message}`;
    }
  }
  return null;
}

/** Writes a bundle folder in the exact format `envscaler check` and the bridge read. */
export function writeBundle(dir: string, manifest: Record<string, unknown>, source: string, scenarios: unknown[]): void {
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, "manifest.json"), `${JSON.stringify(manifest, null, 1)}\n`);
  writeFileSync(join(dir, "env.js"), `${source}\n`);
  writeFileSync(join(dir, "scenarios.json"), `${JSON.stringify(scenarios, null, 1)}\n`);
}

export function manifestFor(plan: EnvPlan, envId: string, className: string): Record<string, unknown> {
  return {
    format: "envscaler.env/v1",
    id: envId,
    name: plan.title,
    introduction: plan.introduction,
    rules: plan.rules,
    class_name: className,
    tools: toolSchemas(plan),
    state_schema: plan.state_schema,
    default_state: plan.initial_state,
  };
}

/** The fewest dual-agent rounds that must count (run a call the env could run) for an env to be kept: half of them. */
const minCountedRounds = (rounds: number) => Math.ceil(rounds / 2);

/** The plan's tools as the manifest lists them (OpenAI function schemas). */
function toolSchemas(plan: EnvPlan): ToolSchema[] {
  return plan.tools.map((t) => ({ type: "function" as const, function: { name: t.name, description: t.description, parameters: t.parameters } }));
}

/** The scenario a freshly built env carries until the scenario stage replaces it: the test loop runs in it. */
const probeScenario = (envId: string, steps: number) => ({ id: `${envId}-probe`, env_id: envId, task: "Probe the environment's tools.", max_steps: steps });

/**
 * Stage 2 for one env: plan, write the class (re-asked until it loads in the sandbox and matches
 * its tools), then the dual-agent test: a tester LLM picks calls, the sandbox runs them in a real
 * episode (watched by the engine's watchdog), a judge LLM reviews code, result and diff.
 */
export async function buildEnv(llm: LlmClient, mined: MinedEnv, options: BuildOptions): Promise<BuiltEnv> {
  const rounds = options.rounds ?? 12;
  const plan = await llm.askJson("plan", planPrompt(mined.topic, mined.description), EnvPlan, checkPlan);
  const envId = `${plan.env_name.replace(/_/g, "-")}-v1`;
  if (!ENV_ID_RE.test(envId)) throw new LlmError(`plan: env name ${plan.env_name} does not make a valid env id`);
  const className = `${pascal(plan.env_name)}Env`;
  const dir = join(options.outDir, plan.env_name);
  const manifest = manifestFor(plan, envId, className);

  const probe = [probeScenario(envId, rounds + 1)];
  const ways = [...new Set([options.codeMode ?? "whole", options.codeFallback ?? "methods"])].filter((w): w is CodeWay => w !== "none");
  const { source, code_mode } = await writeClass(llm, plan, { dir, manifest, className, probe }, ways);

  const cases = await dualAgentTest(llm, { dir, envId, plan, source, rounds });
  const ok = cases.filter((c) => c.result !== "fail").length;
  const passRate = cases.length ? Math.round((ok / cases.length) * 1000) / 1000 : 0;
  // rounds whose call the tester could not make runnable are not counted (dualAgentTest): a pass
  // rate over fewer than half the rounds is too thin to keep an env on
  const kept = passRate >= (options.threshold ?? 0.85) && cases.length >= minCountedRounds(rounds);
  writeFileSync(join(dir, "build-report.json"), `${JSON.stringify({ env_id: envId, topic: mined.topic, code_mode, pass_rate: passRate, kept, cases }, null, 1)}\n`);
  return { env_id: envId, dir, topic: mined.topic, code_mode, pass_rate: passRate, kept, cases };
}

interface ClassTarget {
  dir: string;
  manifest: Record<string, unknown>;
  className: string;
  probe: unknown[];
}

/** Writes `source` as the bundle's env.js and checks it in the sandbox (loads, matches its tools, no tool throws on simple input). */
async function tryClass(target: ClassTarget, source: string): Promise<string[]> {
  rmSync(target.dir, { recursive: true, force: true });
  writeBundle(target.dir, target.manifest, source, target.probe);
  return (await checkBundleIsolated(target.dir)).problems;
}

/**
 * The env class, written each way in turn until one works (`--code-mode`, then `--code-fallback`):
 * whole; one method per tool, in order (each checked in the class as far as it is written,
 * re-asked with what went wrong); or the plan's scaffold with one body per tool (the same, inside a
 * class the plan decides). `code_mode` says which way made it.
 */
async function writeClass(llm: LlmClient, plan: EnvPlan, target: ClassTarget, ways: readonly CodeWay[]): Promise<{ source: string; code_mode: CodeMode }> {
  for (const [i, way] of ways.entries()) {
    try {
      const source = way === "whole" ? await writeWhole(llm, plan, target) : way === "methods" ? await writeMethods(llm, plan, target) : await writeScaffolded(llm, plan, target);
      return { source, code_mode: MODE_OF[way] };
    } catch (e) {
      const next = ways[i + 1];
      if (!(e instanceof LlmError) || !next) throw e;
      llm.fallback(STAGE_OF[way], `the ${way === "whole" ? "whole class" : way === "methods" ? "class written one method at a time" : "scaffolded class"} failed (${e.message.slice(0, 200)}); writing it ${next === "whole" ? "whole" : next === "methods" ? "one method at a time" : "as tool bodies in the plan's scaffold"}`);
    }
  }
  throw new Error("writeClass: no way of writing the class was given"); // buildEnv always passes one
}

async function writeWhole(llm: LlmClient, plan: EnvPlan, target: ClassTarget): Promise<string> {
  return llm.ask("code", codePrompt(plan, target.className), async (reply) => {
    const code = extractCode(reply);
    const problems = await tryClass(target, code);
    if (problems.length) throw new InvalidReply(`the class does not work: ${problems.join("; ")}${hinted(code, problems, plan)}`);
    return code;
  });
}

async function writeMethods(llm: LlmClient, plan: EnvPlan, target: ClassTarget): Promise<string> {
  const methods: string[] = [];
  for (const [i, tool] of plan.tools.entries()) {
    // checked in the class as it stands: the methods accepted so far, this one, and a stub for each
    // tool still to come (a method may call the others)
    const stubs = plan.tools.slice(i + 1).map((t) => `${t.name}(args) {\n  return { success: false, error: "not written yet" };\n}`);
    methods.push(
      await llm.ask("method", methodPrompt(plan, target.className, tool), async (reply) => {
        const method = methodSource(extractCode(reply), tool.name);
        const problems = await tryClass(target, classOf(target.className, [...methods, method, ...stubs]));
        if (problems.length) throw new InvalidReply(`the method does not work: ${problems.join("; ")}${hinted(method, problems, plan)}`);
        return method;
      }),
    );
  }
  const source = classOf(target.className, methods);
  const problems = await tryClass(target, source);
  if (problems.length) throw new LlmError(`code: the class put together from its methods does not work: ${problems.join("; ")}`);
  return source;
}

/**
 * The scaffolded way (synth/stages/scaffold.ts): the class, its helpers and each tool's argument
 * checks come from the plan; plain lookups and listings are filled by the scaffold; the model
 * writes each other tool's body, one call per tool (a small model loses the thread over several
 * bodies at once, as it does over a whole class), each checked in the class as it stands and
 * re-asked with the exact exception, the arguments that raised it and the repair hints.
 */
async function writeScaffolded(llm: LlmClient, plan: EnvPlan, target: ClassTarget): Promise<string> {
  const scaffold = scaffoldFor(plan, target.className);
  const bodies = new Map(scaffold.filled);
  // the skeleton alone (every body still to write a stub) must pass: if not, the plan has something
  // the scaffold does not handle, and no body the model writes would fix it
  const bare = await tryClass(target, scaffold.source(bodies));
  if (bare.length) throw new LlmError(`scaffold: the class skeleton does not pass the check: ${bare.join("; ")}`);
  for (const tool of plan.tools) {
    if (bodies.has(tool.name)) continue;
    const prompt = bodyPrompt(plan, target.className, tool, { skeleton: scaffold.skeleton(tool.name, bodies), helpers: HELPER_DOCS, marker: BODY_MARKER });
    const body = await llm.ask("body", prompt, async (reply) => {
      const written = bodyOf(reply, tool.name, Object.keys(tool.parameters.properties));
      const problems = await tryClass(target, scaffold.source(new Map([...bodies, [tool.name, written]])));
      if (problems.length) throw new InvalidReply(`the body does not work: ${problems.join("; ")}${hinted(written, problems, plan)}`);
      return written;
    });
    bodies.set(tool.name, body);
  }
  const source = scaffold.source(bodies);
  const problems = await tryClass(target, source);
  if (problems.length) throw new LlmError(`code: the scaffolded class with its bodies does not work: ${problems.join("; ")}`);
  return source;
}

/** The likely causes found in the written source, as a sentence for the re-ask ("" when none). */
function hinted(source: string, problems: string[], plan: EnvPlan): string {
  const hints = repairHints(source, problems, plan.initial_state);
  return hints.length ? `. Likely cause: ${hints.join(" ")}` : "";
}

/** A class whose constructor keeps the state's top-level keys as fields, with these methods. */
function classOf(className: string, methods: string[]): string {
  const body = methods.map((m) => m.split("\n").map((line) => `  ${line}`).join("\n")).join("\n\n");
  return `class ${className} {\n  constructor(state) {\n    Object.assign(this, state);\n  }\n\n${body}\n}`;
}

/**
 * One method's source from a reply: `name({...}) {...}`. The common near-misses of small models are
 * taken as they meant them (a `function name(...)` declaration); a whole class or another name is
 * re-asked.
 */
function methodSource(code: string, name: string): string {
  const text = code.trim().replace(new RegExp(`^function\\s+(?=${name}\\s*\\()`), "");
  if (/^class\s/.test(text)) throw new InvalidReply(`reply with the method ${name} only, not a class`);
  if (!new RegExp(`^${name}\\s*\\(`).test(text)) throw new InvalidReply(`the reply must be the method itself, starting with ${name}(`);
  return text;
}

async function dualAgentTest(llm: LlmClient, env: { dir: string; envId: string; plan: EnvPlan; source: string; rounds: number }): Promise<TestCase[]> {
  const rt = await EnvRuntime.start({ envs: [env.dir], hardStopGraceMs: 500 });
  const cases: TestCase[] = [];
  const counts = new Map<string, number>(env.plan.tools.map((t) => [t.name, 0]));
  // the bridge checks arguments against the tool's schema before the env sees them: a call it
  // refuses there tests nothing of the env, yet the 1.5B sent `{}` in 8 of 12 rounds (6 called
  // positive) and its judge failed the env for the refusal (docs/local-model.md); such a call is re-asked
  const schemas = toolSchemas(env.plan);
  const validator = new ToolValidator(schemas);
  // a call made again on the same state shows nothing the first did not (the 1.5B repeated one
  // search with the same arguments, so one tool of its env was all the judge saw): re-asked
  const made = new Map<string, { round: number; stateHash: string }>();
  try {
    let episode = (await rt.reset(`${env.envId}-probe`, 0)).episode_id;
    for (let round = 1; round <= env.rounds; round++) {
      const state = await rt.state(episode);
      const stateHash = rt.stateHash(episode);
      const stats = [...counts].map(([n, c]) => `${n}: ${c}`).join("\n");
      const fewest = Math.min(...counts.values());
      const leastTested = [...counts].filter(([, c]) => c === fewest).map(([n]) => n);
      let call: TesterCall;
      try {
        call = await llm.askJson("test", testerPrompt({ introduction: env.plan.introduction, tools: env.plan.tools, state, stats, leastTested, round }), TesterCall, (c) => {
          if (!counts.has(c.tool)) return `there is no tool ${c.tool}; tools: ${[...counts.keys()].join(", ")}`;
          const problem = validator.check(c.tool, c.arguments);
          if (problem !== null) {
            // the 1.5B sent the same incomplete call after being told what was missing: an example
            // with its own values kept and the rest taken from the state is what it can copy
            const example = exampleArguments(schemas.find((t) => t.function.name === c.tool)!, validator, JSON.parse(state), c.arguments, round);
            return `${c.tool}: ${problem}. Such a call is refused before the environment runs, so it tests nothing: give every required argument a value of its type, for a negative case too (make that one wrong by meaning: an id that does not exist, a rule it breaks)${example ? `; for example "arguments": ${JSON.stringify(example)}` : ""}`;
          }
          const before = made.get(`${c.tool} ${canonicalJson(c.arguments)}`);
          return before && before.stateHash === stateHash
            ? `${c.tool}(${JSON.stringify(c.arguments)}) was already called in round ${before.round} on this same state, so it tests nothing new: test another tool (least tested so far: ${leastTested.join(", ")}) or other arguments`
            : null;
        });
      } catch (e) {
        // the tester could not write a call the environment would run: the round tests nothing and is not counted
        if (!(e instanceof LlmError)) throw e;
        continue;
      }
      counts.set(call.tool, (counts.get(call.tool) ?? 0) + 1);
      made.set(`${call.tool} ${canonicalJson(call.arguments)}`, { round, stateHash });
      const r: StepResult = await rt.step(episode, { name: call.tool, arguments: call.arguments });
      const refused = isRefusal(r.observation.content);
      const judged = r.info.error
        ? { result: "fail" as const, reason: `env fault: ${r.info.error.code}: ${r.info.error.message}` }
        : verdictOf(
            await llm.askJson(
              "judge",
              judgePrompt({
                // the state the call ran on: without it the 1.5B judged an empty search result wrong
                // with no way to see that no record matched (docs/local-model.md, 2026-12-07)
                rules: env.plan.rules, source: env.source, stateBefore: state, tool: call.tool, argumentsJson: JSON.stringify(call.arguments),
                result: r.observation.content, diff: JSON.stringify(r.info.diff),
              }),
              Judgement,
            ),
            refused,
          );
      cases.push({ round, tool: call.tool, arguments: call.arguments, case_type: call.case_type, expectation: call.expectation, observation: r.observation.content, diff: r.info.diff, refused, ...judged });
      if (r.terminated || r.truncated) {
        await rt.closeEpisode(episode);
        episode = (await rt.reset(`${env.envId}-probe`, round)).episode_id;
      }
    }
  } finally {
    await rt.close();
  }
  return cases;
}

/** Stage 2 over many envs, concurrently (the LLM client bounds the calls in flight). */
export async function buildEnvs(llm: LlmClient, mined: MinedEnv[], options: BuildOptions): Promise<BuildResult> {
  const rejected: Rejection[] = [];
  let done = 0;
  options.onProgress?.(0, mined.length); // shown before the first env's (slow) plan, code and test calls
  const built = await Promise.all(
    mined.map(async (m) => {
      try {
        const b = await buildEnv(llm, m, options);
        const counted = minCountedRounds(options.rounds ?? 12);
        if (!b.kept) {
          rejected.push({
            item: b.env_id,
            reason: b.cases.length < counted ? `dual-agent test: only ${b.cases.length} of its rounds ran a call the env could run (at least ${counted} needed)` : `dual-agent test pass rate ${b.pass_rate} < ${options.threshold ?? 0.85}`,
          });
        }
        return b;
      } catch (e) {
        if (!(e instanceof LlmError)) throw e;
        rejected.push({ item: m.topic, reason: e.message });
        return null;
      } finally {
        options.onProgress?.(++done, mined.length);
      }
    }),
  );
  return { built: built.filter((b): b is BuiltEnv => b !== null), rejected };
}
