import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { expect, test } from "vitest";
import { checkBundleIsolated } from "../../bridge/tools/check/check-isolated.js";
import { EnvRuntime } from "../../bridge/core/engine/env-runtime.js";
import { canonicalJson } from "../../protocol/canonical-json.js";
import { Scenario } from "../../envs/format/bundle-schema.js";
import { llmLimits, llmSummary, stageEndpoints } from "../../cli/commands/synth.js";
import { CallCache } from "../../llm/call-cache.js";
import { LlmClient, LlmError, type LlmEvent } from "../../synth/llm/llm-client.js";
import { runSynth } from "../../synth/pipeline.js";
import { apiBankRequest, prefilterReason, readTaskTexts } from "../../synth/stages/mine.js";
import { OpenAIFixture, type FixtureRequest } from "../openai-fixture.js";
import { haveShared, needsShared, sharedPath } from "../shared-data.js";
import { served, synthResponder, TASKS } from "../synth-fixture.js";

const tmp = () => mkdtempSync(join(tmpdir(), "envscaler-synth-"));
const llmFor = (fixture: OpenAIFixture, cacheDir: string, extra: Partial<ConstructorParameters<typeof LlmClient>[0]> = {}) =>
  new LlmClient({ endpoints: { default: { model: "fixture-model", baseURL: fixture.baseURL, apiKey: "test" } }, cacheDir, concurrency: 4, maxRetries: 1, ...extra });

test("mining filters: the original's cheap rules", () => {
  expect(prefilterReason("Show me a photo of my dog")).toBe("multimodal");
  expect(prefilterReason("Convert 20 USD to euros for my trip")).toBe("mentions currencies");
  expect(prefilterReason("Mail the report to ann@example.com today")).toBe("contains an e-mail address");
  expect(prefilterReason("Open https://example.com and book it")).toBe("contains a URL");
  expect(prefilterReason("预约明天的牙医，然后取消旧的预约")).toBe("not English");
  expect(prefilterReason("Book a table for two at the bistro tonight")).toBeNull();
});

const API_BANK = sharedPath("datasets", "api-bank", "lv3-train.json");
test.skipIf(!haveShared(API_BANK))(`mining reads API-Bank requests from the real dataset (${needsShared(API_BANK)})`, () => {
  const tasks = readTaskTexts(API_BANK, "api-bank");
  expect(tasks.length).toBeGreaterThan(1000);
  expect(tasks[0]).toBe("Find a cardiologist in Los Angeles for a check-up appointment.");
  expect(tasks.every((t) => !/TIME: |API-Request|Generate API Request/.test(t))).toBe(true);
  expect(apiBankRequest("x\nUser: Cancel my 3pm meeting.\nAI: ok")).toBe("Cancel my 3pm meeting.");
});

test("the LLM layer caches by content, re-asks invalid replies a bounded number of times, and bounds transport retries", async () => {
  let n = 0;
  const fixture = await OpenAIFixture.start((req: FixtureRequest) => {
    n++;
    const last = req.messages[req.messages.length - 1]!.content;
    if (last.includes("fail-http")) return 503;
    if (req.messages.some((m) => m.content.includes("never-json"))) return "no JSON here, sorry";
    return '```json\n{"a": 1}\n```';
  });
  try {
    const cache = tmp();
    const llm = llmFor(fixture, cache);
    const { z } = await import("zod");
    expect(await llm.askJson("plan", [{ role: "user", content: "ok" }], z.object({ a: z.number() }))).toEqual({ a: 1 });
    expect(await llm.askJson("plan", [{ role: "user", content: "ok" }], z.object({ a: z.number() }))).toEqual({ a: 1 });
    expect(n).toBe(1);
    expect(llm.usage.plan).toMatchObject({ calls: 1, cache_hits: 1, prompt_tokens: 1, completion_tokens: 1 });
    // a schema mismatch is re-asked with the reason, then given up with a reason
    await expect(llm.askJson("plan", [{ role: "user", content: "ok" }], z.object({ b: z.string() }), undefined)).rejects.toThrow(/still invalid after 2 re-asks: the JSON does not match the schema: b:/);
    expect(fixture.requests.at(-1)!.messages.at(-1)!.content).toMatch(/Your reply cannot be used: the JSON does not match the schema/);
    await expect(llm.askJson("plan", [{ role: "user", content: "never-json" }], z.object({ a: z.number() }))).rejects.toThrow(/not valid JSON/);
    const before = n;
    await expect(llm.chat("plan", [{ role: "user", content: "fail-http" }])).rejects.toBeInstanceOf(LlmError);
    expect(n - before).toBe(2); // one try plus maxRetries=1, then it stops
    // the cache key ignores the API key but not the model
    expect(CallCache.key({ model: "a", messages: [] })).not.toBe(CallCache.key({ model: "b", messages: [] }));
  } finally {
    await fixture.close();
  }
});

test("per-stage endpoints come from flags, then env vars, then --stage-model", () => {
  const e = stageEndpoints({ model: "big", baseUrl: "http://vllm:8000/v1", stageModel: ["test=small"] }, { ENVSCALER_SYNTH_JUDGE_MODEL: "judge-m", ENVSCALER_SYNTH_JUDGE_BASE_URL: "http://other/v1" });
  expect(e.plan).toMatchObject({ model: "big", baseURL: "http://vllm:8000/v1" });
  expect(e.test!.model).toBe("small");
  expect(e.judge).toMatchObject({ model: "judge-m", baseURL: "http://other/v1" });
  expect(() => stageEndpoints({ model: "m", stageModel: ["nope=x"] })).toThrow(/stage-model/);
  // the one-method-at-a-time fallback uses the code stage's model unless given its own
  expect(stageEndpoints({ model: "m", stageModel: ["code=coder"] }).method!.model).toBe("coder");
  expect(stageEndpoints({ model: "m", stageModel: [] }, { ENVSCALER_SYNTH_CODE_BASE_URL: "http://coder/v1" }).method!.baseURL).toBe("http://coder/v1");
  expect(stageEndpoints({ model: "m", stageModel: ["code=coder", "method=tiny"] }).method!.model).toBe("tiny");
  // so does the scaffolded mode's body stage
  expect(stageEndpoints({ model: "m", stageModel: ["code=coder"] }).body!.model).toBe("coder");
  expect(stageEndpoints({ model: "m", stageModel: ["code=coder", "body=tiny"] }).body!.model).toBe("tiny");
});

/** The two whole-pipeline runs: ~30 s on a quiet 2-core machine, twice that with other suites beside them. */
const PIPELINE_TIMEOUT_MS = 180_000;

test("the whole pipeline: task text → mined env → built, tested env → vetted scenarios → a served env scoring 1.0", async () => {
  served.length = 0;
  const fixture = await OpenAIFixture.start(synthResponder);
  const out = tmp();
  const input = join(out, "tasks.jsonl");
  writeFileSync(input, TASKS.map((t) => JSON.stringify({ task: t })).join("\n"));
  try {
    const llm = llmFor(fixture, join(out, ".cache"));
    const report = await runSynth(llm, { stage: "all", out, input, format: "jsonl", rounds: 4, perEnv: 2, conversationEvery: 2 });
    // mining: cheap filters, near-duplicates, the LLM's judgement, merged descriptions
    const reasons = report.mine!.rejected.map((r) => r.reason).join("\n");
    expect(reasons).toMatch(/multimodal/);
    expect(reasons).toMatch(/near-duplicate/);
    expect(reasons).toMatch(/no stateful env needed: a fact lookup/);
    const mined = JSON.parse(readFileSync(join(out, "mined.json"), "utf8"));
    expect(mined.envs).toHaveLength(1);
    expect(mined.envs[0].source_tasks).toHaveLength(2);
    // every bad reply was served and caught (re-asked), none got through
    expect(served, JSON.stringify(report, null, 1)).toEqual(["plan: invalid JSON", "code: constructor throws", "code: constructor loops", "test: a call without its arguments", "test: the same call on the same state", "scenario: checks always pass", "scenario: reference does not solve it"]);
    // the tester's call the tool's schema refuses was re-asked (it would test the bridge's check, not the env)
    const testAsks = fixture.requests.filter((r) => r.messages[0]!.content.includes("synth: test"));
    expect(testAsks[1]!.messages.at(-1)!.content).toMatch(/list_appointments: .*patient_id.*refused before the environment runs.*; for example "arguments": \{"patient_id":"P[12]"\}\n/);
    // a call repeated on the state its first run left unchanged was re-asked, naming the tools least tested
    const repeatAsk = testAsks.find((r) => /already called in round 1 on this same state/.test(r.messages.at(-1)!.content));
    expect(repeatAsk!.messages.at(-1)!.content).toMatch(/list_appointments\(\{"patient_id":"P1"\}\) was already called in round 1 on this same state.*least tested so far: book_appointment, cancel_appointment/);
    expect(testAsks[0]!.messages[1]!.content).toMatch(/Least tested so far \(prefer one of these\): list_appointments, book_appointment, cancel_appointment\n/);
    // the judge sees the state each call ran on (it cannot judge a query's answer without it)
    const judgeAsks = fixture.requests.filter((r) => r.messages[0]!.content.includes("synth: judge"));
    expect(judgeAsks[0]!.messages[1]!.content).toMatch(/State before the call:\n\{.*"appointments":\{"A1":\{[^}]*"patient_id":"P1"/);
    // and not the tester's label or expectation, which a small judge followed against the state (docs/local-model.md, run 15)
    for (const ask of judgeAsks) expect(ask.messages[1]!.content).not.toMatch(/positive|negative|Ann's Monday appointment|refused: unknown id|new appointment A2|refused: same day/);
    const codeAsks = fixture.requests.filter((r) => r.messages[0]!.content.includes("synth: code"));
    expect(codeAsks[1]!.messages.at(-1)!.content).toMatch(/does not load in the sandbox: Error: not ready/);
    expect(codeAsks[2]!.messages.at(-1)!.content).toMatch(/env_timeout|deadline|interrupted/i);
    const scenarioAsks = fixture.requests.filter((r) => r.messages[0]!.content.includes("synth: scenario") && !r.messages[0]!.content.includes("conversation scenario"));
    expect(scenarioAsks[1]!.messages.at(-1)!.content).toMatch(/already pass before the agent does anything: #0 "always"/);
    expect(scenarioAsks[2]!.messages.at(-1)!.content).toMatch(/reference solution scores 0\.\d+, not 1\.0/);
    // the dual-agent test, with its evidence
    expect(report.build!.envs).toEqual([{ env_id: "dental-clinic-v1", topic: "dental clinic scheduling", code_mode: "class", pass_rate: 1, kept: true, cases: 4 }]);
    const evidence = JSON.parse(readFileSync(join(out, "build", "dental_clinic", "build-report.json"), "utf8"));
    expect(evidence.cases[0]).toMatchObject({ tool: "list_appointments", refused: false, allowed: true, result: "warning" });
    // a refusal the judge found not allowed passes, whatever verdict the judge wrote beside it
    expect(evidence.cases[1]).toMatchObject({ tool: "cancel_appointment", case_type: "negative", refused: true, allowed: false, result: "pass", reason: "a correct refusal: appointment A99 does not exist" });
    expect(evidence.cases[2].diff[0]).toMatchObject({ op: "add", path: "/appointments/A2" });
    expect(report.usage.code).toMatchObject({ reasks: 2 });
    // the served bundle passes envscaler check and plays to 1.0 on the runtime the bridge uses
    expect(report.scenarios!.envs).toEqual({ "dental-clinic-v1": ["dental-clinic-1", "dental-clinic-2"] });
    expect(report.scenarios!.derived).toEqual({}); // every scenario here is the model's own
    const served_ = join(out, "envs", "dental-clinic");
    expect((await checkBundleIsolated(served_)).problems).toEqual([]);
    const scenarios = JSON.parse(readFileSync(join(served_, "scenarios.json"), "utf8"));
    expect(scenarios[1]).toMatchObject({ mode: "conversation", user_instructions: expect.stringMatching(/You are Bo/) });
    const rt = await EnvRuntime.start({ envs: [join(out, "envs")] });
    try {
      const { episode_id } = await rt.reset("dental-clinic-1", 7);
      for (const a of scenarios[0].reference_actions) await rt.step(episode_id, a);
      expect((await rt.step(episode_id, "Done.")).reward).toBe(1);
    } finally {
      await rt.close();
    }
    // a second run pays for nothing
    const calls = fixture.requests.length;
    const again = await runSynth(llmFor(fixture, join(out, ".cache")), { stage: "all", out, input, format: "jsonl", rounds: 4, perEnv: 2, conversationEvery: 2 });
    expect(fixture.requests.length).toBe(calls);
    expect(again.scenarios!.envs).toEqual(report.scenarios!.envs);
  } finally {
    await fixture.close();
  }
}, PIPELINE_TIMEOUT_MS);

test("a run killed midway and started again repeats no finished LLM call", async () => {
  const out = tmp();
  const input = join(out, "tasks.jsonl");
  writeFileSync(input, TASKS.map((t) => JSON.stringify({ task: t })).join("\n"));
  const cli = join(import.meta.dirname, "..", "..", "cli", "main.ts");
  const KILL_AT = 12;
  let child: ReturnType<typeof spawn> | undefined;
  const key = (r: FixtureRequest) => canonicalJson({ model: r.model, messages: r.messages });
  const fixture = await OpenAIFixture.start((req) => {
    if (fixture.requests.length === KILL_AT && child) {
      child.kill("SIGKILL");
      return 500;
    }
    return synthResponder(req);
  });
  try {
    const args = ["tsx", cli, "synth", "all", "--out", out, "--input", input, "--base-url", fixture.baseURL, "--model", "fixture-model", "--rounds", "4", "--per-env", "2", "--conversation-every", "2", "--concurrency", "1", "--no-progress"];
    const env = { ...process.env, OPENAI_API_KEY: "test" };
    child = spawn("npx", args, { env, stdio: "ignore" });
    const code = await new Promise<number | null>((r) => child!.on("exit", (c) => r(c)));
    expect(code).not.toBe(0); // it was killed
    const answered = new Set(fixture.requests.slice(0, KILL_AT - 1).map(key));
    expect(answered.size).toBe(KILL_AT - 1);
    const firstRun = fixture.requests.length;
    child = undefined;
    const second = spawn("npx", args, { env, stdio: "ignore" });
    expect(await new Promise<number | null>((r) => second.on("exit", (c) => r(c)))).toBe(0);
    const repeated = fixture.requests.slice(firstRun).filter((r) => answered.has(key(r)));
    expect(repeated).toEqual([]);
    expect(existsSync(join(out, "envs", "dental-clinic", "scenarios.json"))).toBe(true);
  } finally {
    await fixture.close();
  }
}, PIPELINE_TIMEOUT_MS);

test("the tester's re-ask example: its own values kept where the schema has them, the rest from the state, accepted by the schema", async () => {
  const { exampleArguments } = await import("../../bridge/tools/check/gaming-probes.js");
  const { ToolValidator } = await import("../../bridge/core/episode/tool-validator.js");
  const tool = { type: "function" as const, function: { name: "book", description: "Book.", parameters: { type: "object" as const, properties: { patient_id: { type: "string" }, day: { type: "string", enum: ["mon", "tue"] }, note: { type: "string" } }, required: ["patient_id", "day"] } } };
  const validator = new ToolValidator([tool]);
  const state = { patients: { P7: { name: "Ann" } }, appointments: { A1: { patient_id: "P7", day: "mon" } } };
  for (const seed of [1, 2, 3, 4, 5]) {
    const args = exampleArguments(tool, validator, state, { day: "tue", bogus: 1 }, seed)!;
    expect(validator.check("book", args)).toBeNull();
    expect(args).toMatchObject({ patient_id: "P7", day: "tue" }); // the state's only patient; the tester's own day
    expect(args).not.toHaveProperty("bogus");
  }
  // a given value of the wrong type is not kept (the example must be accepted)
  expect(exampleArguments(tool, validator, state, { day: 3 }, 1)!.day).toMatch(/^(mon|tue)$/);
  // the same seed shows the same example
  expect(exampleArguments(tool, validator, state, {}, 9)).toEqual(exampleArguments(tool, validator, state, {}, 9));
});

test("under --json-mode schema the tester must write its call's arguments (the grammar makes the model write them)", async () => {
  const { responseFormat } = await import("../../synth/llm/llm-client.js");
  const { TesterCall } = await import("../../synth/stages/build-env.js");
  const format = responseFormat("schema", "test", TesterCall) as { json_schema: { schema: { required: string[] } } };
  expect(format.json_schema.schema.required).toEqual(expect.arrayContaining(["tool", "arguments", "case_type"]));
});

test("the judge's verdict on a refusal is derived from whether the state and rules allow the call", async () => {
  const { verdictOf, Judgement } = await import("../../synth/stages/build-env.js");
  const { isRefusal } = await import("../../bridge/tools/check/is-refusal.js");
  expect(isRefusal('{"success":false,"error":"no such trial"}')).toBe(true);
  for (const text of ['{"success":true,"data":1}', '[{"success":false}]', "not json", '"success":false', "null"]) expect(isRefusal(text)).toBe(false);
  // a refusal: pass exactly when the call was not allowed, whatever the judge's own verdict
  expect(verdictOf({ allowed: false, result: "fail", reason: "trial 6 does not exist" }, true)).toEqual({ allowed: false, result: "pass", reason: "a correct refusal: trial 6 does not exist" });
  expect(verdictOf({ allowed: true, result: "pass", reason: "P2 is free on friday" }, true)).toEqual({ allowed: true, result: "fail", reason: "refused a call the state and the rules allow: P2 is free on friday" });
  // an accepted call keeps the judge's verdict
  for (const result of ["pass", "warning", "fail"] as const) expect(verdictOf({ allowed: false, result, reason: "r" }, false)).toEqual({ allowed: false, result, reason: "r" });
  // under a JSON schema the model writes its reading of the call, then `allowed`, then its verdict
  const { responseFormat } = await import("../../synth/llm/llm-client.js");
  const format = responseFormat("schema", "judge", Judgement) as { json_schema: { schema: { properties: object; required: string[] } } };
  expect(Object.keys(format.json_schema.schema.properties)).toEqual(["reason", "allowed", "result"]);
  expect(format.json_schema.schema.required).toEqual(["reason", "allowed", "result"]);
});

test("scenario vetting rejects checks that depend on the seed", async () => {
  const { vetScenario } = await import("../../synth/stages/scenarios.js");
  const { writeBundle } = await import("../../synth/stages/build-env.js");
  const manifest = (initial: number) => ({
    format: "envscaler.env/v1", id: "dice-v1", name: "Dice", introduction: "A die.", rules: [], class_name: "DiceEnv",
    // roll's label: the check asks for one a random agent cannot guess (its strings come from the
    // state and a few fixed words), so `envscaler check`'s random-agent probe does not pass the
    // scenario and vetting reaches the seed comparison this test is about
    tools: [{ type: "function", function: { name: "roll", description: "Roll.", parameters: { type: "object", properties: { label: { type: "string" } }, required: ["label"] } } }],
    default_state: { value: initial, label: "" },
  });
  const source = "class DiceEnv { constructor(s) { this.value = s.value; this.label = s.label; } roll({ label }) { this.label = label; this.value = Math.random(); return { value: this.value }; } }";
  const ROLL = { name: "roll", arguments: { label: "fair-die-7" } };
  const scenario = (check: string) =>
    Scenario.parse({ id: "dice-1", env_id: "dice-v1", mode: "task", task: "Roll the die.", checks: [{ kind: "js", description: "a good roll", source: `({final}) => final.label === "fair-die-7" && ${check}` }], reference_actions: [ROLL] });
  const probe = join(tmp(), "dice");
  writeBundle(probe, manifest(1), source, [scenario("true")]);
  // where seeds 0 (envscaler check), 1 and 2 (the determinism runs) land decides a check that
  // passes for seed 0 and flips between seeds 1 and 2
  const rt = await EnvRuntime.start({ envs: [probe] });
  const v: number[] = [];
  try {
    for (const seed of [0, 1, 2]) {
      const { episode_id } = await rt.reset("dice-1", seed);
      v.push(JSON.parse((await rt.step(episode_id, ROLL)).observation.content).value);
    }
  } finally {
    await rt.close();
  }
  expect(new Set(v).size).toBe(3);
  const t = (v[1]! + v[2]!) / 2;
  const below = v[0]! < t;
  const dir = join(tmp(), "dice");
  writeBundle(dir, manifest(below ? 1 : -1), source, []);
  const work = tmp();
  expect(await vetScenario(dir, scenario(`final.value ${below ? "<" : ">"} ${t}`), work)).toMatch(/#0 give different results under different seeds/);
  expect(await vetScenario(dir, scenario("final.value >= 0 && final.value < 1"), work)).toBeNull();
});

test("scenario vetting rejects checks a random agent passes, and a reference solution none of whose steps is checked", async () => {
  const { vetScenario } = await import("../../synth/stages/scenarios.js");
  const notes = join(import.meta.dirname, "..", "fixtures", "envs", "notes");
  const work = tmp();
  const scenario = (check: string, reference: { name: string; arguments: Record<string, unknown> }[]) =>
    Scenario.parse({ id: "notes-9", env_id: "notes-v1", mode: "task", task: "Tidy up the notes.", checks: [{ kind: "js", description: "the goal", source: `({final}) => ${check}` }], reference_actions: reference });
  const addTodo = { name: "add_note", arguments: { user_id: "u2", title: "todo", body: "call mom" } };
  const hasTodo = "Object.values(final.notes).some(n => n.user_id === 'u2' && n.title === 'todo' && n.body === 'call mom')";
  expect(await vetScenario(notes, scenario("final.notes.n1 === undefined", [{ name: "delete_note", arguments: { note_id: "n1" } }]), work)).toMatch(/a random agent reached reward 1.0/);
  expect(await vetScenario(notes, scenario(hasTodo, [addTodo, addTodo]), work)).toMatch(/leaving out any one reference action still scores 1.0/);
  expect(await vetScenario(notes, scenario(hasTodo, [addTodo]), work)).toBeNull();
});

test("a synth run that produces nothing exits 1 and says why", async () => {
  const out = tmp();
  const input = join(out, "tasks.jsonl");
  writeFileSync(input, JSON.stringify({ task: TASKS[0] }));
  const cli = join(import.meta.dirname, "..", "..", "cli", "main.ts");
  const fixture = await OpenAIFixture.start(() => 500); // an endpoint that never answers
  try {
    const child = spawn(process.execPath, ["--import", "tsx", cli, "synth", "mine", "--out", out, "--input", input, "--base-url", fixture.baseURL, "--model", "m", "--no-progress"], { env: { ...process.env, OPENAI_API_KEY: "test" }, stdio: ["ignore", "pipe", "pipe"] });
    let stderr = "";
    child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
    expect(await new Promise<number | null>((r) => child.on("exit", (c) => r(c)))).toBe(1);
    expect(stderr).toMatch(/synth mine: nothing was produced \(1 LLM calls failed on the transport, 0 replies still unusable after re-asks\)/);
    expect(existsSync(join(out, "report.json"))).toBe(true);
  } finally {
    await fixture.close();
  }
}, 60_000);

// The failure shapes a real small model on llama.cpp produced (issue 14): a reply repeated until the
// server's token cap (finish_reason "length"), and an endpoint that never answers.
test("a reply cut at the token cap is re-asked with that reason; max_tokens is sent; the echo of the cut reply is bounded", async () => {
  const repeated = "The library has books and members. ".repeat(400);
  const fixture = await OpenAIFixture.start([{ content: repeated, finish_reason: "length" }, '```json\n{"a": 1}\n```']);
  const events: LlmEvent[] = [];
  try {
    const llm = llmFor(fixture, tmp(), { maxTokens: 64, onEvent: (e) => events.push(e) });
    const { z } = await import("zod");
    expect(await llm.askJson("mine", [{ role: "user", content: "judge" }], z.object({ a: z.number() }))).toEqual({ a: 1 });
    expect(fixture.requests.map((r) => r.max_tokens)).toEqual([64, 64]);
    const reask = fixture.requests[1]!.messages;
    expect(reask.at(-1)!.content).toMatch(/cut off at the token limit \(max_tokens 64\).*finish_reason "length"/);
    expect(reask.at(-2)!.content.length).toBeLessThan(2100);
    expect(llm.usage.mine).toMatchObject({ calls: 2, reasks: 1, truncated: 1, invalid: 0, failures: 0 });
    expect(events.map((e) => e.kind)).toEqual(["truncated"]);
    // even a cut reply whose prefix would parse is not used
    const again = await OpenAIFixture.start([{ content: '{"a": 2}', finish_reason: "length" }, '{"a": 3}']);
    try {
      expect(await llmFor(again, tmp()).askJson("mine", [{ role: "user", content: "x" }], z.object({ a: z.number() }))).toEqual({ a: 3 });
    } finally {
      await again.close();
    }
  } finally {
    await fixture.close();
  }
});

test("a hung endpoint: each try is cancelled at the timeout and retried, counted, reported, and the error says what to raise", async () => {
  const fixture = await OpenAIFixture.start(() => ({ hang: true }));
  const events: LlmEvent[] = [];
  try {
    const llm = llmFor(fixture, tmp(), { timeoutMs: 200, maxRetries: 1, onEvent: (e) => events.push(e) });
    await expect(llm.chat("code", [{ role: "user", content: "x" }])).rejects.toThrow(/failed after 2 tries; 2 of them timed out after 0.2 s \(raise --timeout/);
    expect(fixture.requests).toHaveLength(2);
    expect(llm.usage.code).toMatchObject({ calls: 0, retries: 1, timeouts: 2, failures: 1, invalid: 0 });
    expect(events.map((e) => e.kind)).toEqual(["timeout", "retry", "timeout"]);
    expect(llm.inFlight).toBe(0);
    // a schema-invalid reply and a failed call are told apart in the summary
    expect(llmSummary(llm.totals())).toMatch(/0 replies still unusable after re-asks.*1 calls failed on the transport after 1 retries \(2 timeouts\)/);
  } finally {
    await fixture.close();
  }
});

test("LLM limits come from the flags, else ENVSCALER_LLM_* env vars, else the defaults", () => {
  expect(llmLimits({}, {})).toEqual({ timeoutMs: 120_000, maxRetries: 4, jsonMode: "off", reaskTemperatureStep: 0.3 });
  expect(llmLimits({}, { ENVSCALER_LLM_TIMEOUT: "600", ENVSCALER_LLM_MAX_RETRIES: "1", ENVSCALER_LLM_MAX_TOKENS: "1024", ENVSCALER_LLM_JSON_MODE: "schema", ENVSCALER_LLM_REASK_TEMPERATURE_STEP: "0" })).toEqual({ timeoutMs: 600_000, maxRetries: 1, maxTokens: 1024, jsonMode: "schema", reaskTemperatureStep: 0 });
  expect(llmLimits({ timeout: 30, maxRetries: 0, maxTokens: 256, jsonMode: "object", reaskTemperatureStep: 0.5 }, { ENVSCALER_LLM_TIMEOUT: "600", ENVSCALER_LLM_JSON_MODE: "schema", ENVSCALER_LLM_REASK_TEMPERATURE_STEP: "0" })).toEqual({ timeoutMs: 30_000, maxRetries: 0, maxTokens: 256, jsonMode: "object", reaskTemperatureStep: 0.5 });
  expect(() => llmLimits({ reaskTemperatureStep: -0.1 }, {})).toThrow(/re-ask temperature step must be between 0 and 1; got -0.1/);
  expect(() => llmLimits({ timeout: 0 }, {})).toThrow(/timeout must be a positive/);
  expect(() => llmLimits({}, { ENVSCALER_LLM_MAX_RETRIES: "many" })).toThrow(/ENVSCALER_LLM_MAX_RETRIES must be a number/);
  expect(() => llmLimits({}, { ENVSCALER_LLM_JSON_MODE: "grammar" })).toThrow(/JSON mode must be one of off, object, schema; got 'grammar'/);
});

test("--json-mode: JSON stages send response_format (the stage's JSON Schema, or json_object); code stages and 'off' send none; the cache tells them apart", async () => {
  const fixture = await OpenAIFixture.start(synthResponder);
  try {
    const cache = tmp();
    const { MineJudgement } = await import("../../synth/stages/mine.js");
    const { minePrompt } = await import("../../synth/prompts.js");
    const ask = (jsonMode: "off" | "object" | "schema") => llmFor(fixture, cache, { jsonMode }).askJson("mine", minePrompt(TASKS[0]!), MineJudgement);
    await ask("schema");
    const sent = fixture.requests.at(-1)!.response_format as { type: string; json_schema: { name: string; schema: { properties: Record<string, { maxLength?: number }>; required: string[] } } };
    expect(sent.type).toBe("json_schema");
    expect(sent.json_schema.name).toBe("mine");
    expect(Object.keys(sent.json_schema.schema.properties)).toEqual(["needs_env", "topic", "description", "reason"]);
    expect(sent.json_schema.schema.properties.description!.maxLength).toBe(600);
    expect(sent.json_schema.schema.required).toEqual(["needs_env", "topic", "description"]);
    expect(sent.json_schema.schema).not.toHaveProperty("$schema");
    await ask("object");
    expect(fixture.requests.at(-1)!.response_format).toEqual({ type: "json_object" });
    await ask("off");
    expect(fixture.requests.at(-1)).not.toHaveProperty("response_format");
    expect(fixture.requests).toHaveLength(3); // three different requests: none answered from another's cache entry
    await ask("schema");
    expect(fixture.requests).toHaveLength(3);
    // a stage that wants code, not JSON, never carries a response_format
    await llmFor(fixture, cache, { jsonMode: "schema" }).ask("code", [{ role: "system", content: "[envscaler synth: code]" }, { role: "user", content: "x" }], (r) => r);
    expect(fixture.requests.at(-1)).not.toHaveProperty("response_format");
  } finally {
    await fixture.close();
  }
});

test("synth with stderr not a terminal logs a progress line every few seconds, with timeouts and retries; the flags reach the requests", async () => {
  const out = tmp();
  const input = join(out, "tasks.jsonl");
  writeFileSync(input, JSON.stringify({ task: TASKS[0] }));
  const cli = join(import.meta.dirname, "..", "..", "cli", "main.ts");
  const fixture = await OpenAIFixture.start(() => ({ hang: true }));
  try {
    const args = ["--import", "tsx", cli, "synth", "mine", "--out", out, "--input", input, "--base-url", fixture.baseURL, "--model", "m", "--timeout", "1", "--max-retries", "1", "--max-tokens", "77"];
    const child = spawn(process.execPath, args, { env: { ...process.env, OPENAI_API_KEY: "test", ENVSCALER_PROGRESS_INTERVAL: "0.3" }, stdio: ["ignore", "pipe", "pipe"] });
    let stderr = "";
    let stdout = "";
    child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
    child.stdout.on("data", (d: Buffer) => (stdout += d.toString()));
    expect(await new Promise<number | null>((r) => child.on("exit", (c) => r(c)))).toBe(1);
    expect(stderr).toMatch(/^synth \d+s: .*in flight, calls 0 retries \d timeouts \d/m);
    // the stage is named (0/1) while its only, hung call is in flight, not "starting" until an item ends
    expect(stderr).toMatch(/^synth \d+s: mine 0\/1 \| 1 in flight/m);
    expect(stderr).toMatch(/timeouts [12] /);
    expect(stdout).toMatch(/1 calls failed on the transport after 1 retries \(2 timeouts\)/);
    expect(fixture.requests.map((r) => r.max_tokens)).toEqual([77, 77]);
  } finally {
    await fixture.close();
  }
}, 60_000);

test("a tester that never writes a call the env could run: its rounds are not counted, and an env tested on fewer than half its rounds is not kept", async () => {
  const fixture = await OpenAIFixture.start((req: FixtureRequest) =>
    (req.messages[0]?.content ?? "").includes("synth: test")
      ? JSON.stringify({ tool: "list_appointments", arguments: {}, case_type: "positive", expectation: "the appointments" })
      : synthResponder(req),
  );
  const out = tmp();
  const input = join(out, "tasks.jsonl");
  writeFileSync(input, TASKS.map((t) => JSON.stringify({ task: t })).join("\n"));
  try {
    const report = await runSynth(llmFor(fixture, join(out, ".cache")), { stage: "all", out, input, format: "jsonl", rounds: 4, perEnv: 1, conversationEvery: 0 });
    expect(report.build!.envs).toEqual([{ env_id: "dental-clinic-v1", topic: "dental clinic scheduling", code_mode: "class", pass_rate: 0, kept: false, cases: 0 }]);
    expect(report.build!.rejected).toEqual([{ item: "dental-clinic-v1", reason: "dual-agent test: only 0 of its rounds ran a call the env could run (at least 2 needed)" }]);
    // each round asked once and re-asked twice, none judged
    expect(fixture.requests.filter((r) => r.messages[0]!.content.includes("synth: test"))).toHaveLength(12);
    expect(fixture.requests.filter((r) => r.messages[0]!.content.includes("synth: judge"))).toHaveLength(0);
  } finally {
    await fixture.close();
  }
}, PIPELINE_TIMEOUT_MS);
