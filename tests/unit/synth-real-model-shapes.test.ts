// Replies Qwen2.5-Coder 0.5B gave synth on llama.cpp (docs/local-model.md), replayed on the fixture.
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { expect, test } from "vitest";
import { closeJson, LlmClient, reaskTemperature, STAGE_MAX_TOKENS } from "../../synth/llm/llm-client.js";
import { minePrompt } from "../../synth/prompts.js";
import { checkPlan, EnvPlan, fillRecordIds, keyRecordsById, requiredFlagsToArrays } from "../../synth/stages/build-env.js";
import { mine, withoutCopiedExamples } from "../../synth/stages/mine.js";
import { OpenAIFixture, type Scripted } from "../openai-fixture.js";

const tmp = () => mkdtempSync(join(tmpdir(), "envscaler-synth-real-"));
const client = (fixture: OpenAIFixture, extra: Partial<ConstructorParameters<typeof LlmClient>[0]> = {}) =>
  new LlmClient({ endpoints: { default: { model: "m", baseURL: fixture.baseURL, apiKey: "k" } }, cacheDir: tmp(), concurrency: 1, maxRetries: 0, ...extra });

/** A real mine reply: the model stopped (finish_reason "stop") inside the description string. */
const STOPPED_MID_STRING =
  '{"needs_env": true, "reason": "A clinical trial is a domain system with persistent records.", "topic": "Clinical Trials", "description": "To find a clinical trial for a patient with stage 2 breast cancer, users can use a domain system that reads and changes patient information, such as their name, age, gender, and study details.';
/** The same model repeating itself until the token cap. */
const RUNAWAY: Scripted = { content: '{"needs_env": true, "reason": "' + "The system stores trials and patients. ".repeat(60), finish_reason: "length" };

test("short-reply stages carry their own token cap (the lower of it and --max-tokens); the long ones only --max-tokens", async () => {
  const fixture = await OpenAIFixture.start(() => "{}");
  try {
    const ask = async (llm: LlmClient, stage: string) => {
      await llm.chat(stage, [{ role: "user", content: `${stage} ${Math.random()}` }]);
      return fixture.requests.at(-1)!.max_tokens;
    };
    const capped = client(fixture, { maxTokens: 1536 });
    expect([await ask(capped, "mine"), await ask(capped, "test"), await ask(capped, "judge"), await ask(capped, "plan"), await ask(capped, "code")]).toEqual([512, 512, 512, 1536, 1536]);
    const uncapped = client(fixture);
    expect([await ask(uncapped, "mine"), await ask(uncapped, "plan")]).toEqual([STAGE_MAX_TOKENS.mine, undefined]);
    expect(await ask(client(fixture, { maxTokens: 100 }), "judge")).toBe(100);
    expect(await ask(client(fixture, { maxTokens: 1536, stageMaxTokens: {} }), "mine")).toBe(1536);
  } finally {
    await fixture.close();
  }
});

test("mine on the real model's failure shapes: a runaway reply cut at the stage cap is re-asked; a reply that stopped inside its last string is closed and used; other broken JSON is re-asked", async () => {
  const BROKEN = '{"reason": "Trials are records." "needs_env": true, "topic": "Clinical trials", "description": "A registry."}';
  const fixture = await OpenAIFixture.start([RUNAWAY, BROKEN, STOPPED_MID_STRING]);
  try {
    const llm = client(fixture, { maxTokens: 1536 });
    const r = await mine(llm, ["Find a clinical trial for a patient with stage 2 breast cancer."]);
    expect(r.envs).toEqual([{ topic: "Clinical Trials", description: expect.stringMatching(/^To find a clinical trial .* study details\.$/), source_tasks: ["Find a clinical trial for a patient with stage 2 breast cancer."] }]);
    expect(fixture.requests.map((q) => q.max_tokens)).toEqual([512, 512, 512]);
    const last = fixture.requests[2]!.messages;
    expect(last[3]!.content).toMatch(/cut off at the token limit \(max_tokens 512\)/);
    expect(last[5]!.content).toMatch(/not valid JSON \(Expected ','/);
    expect(llm.usage.mine).toMatchObject({ calls: 3, reasks: 2, truncated: 1, closed: 1, invalid: 0 });
  } finally {
    await fixture.close();
  }
});

test("each re-ask raises the temperature (the 0.5B gave byte-identical replies to re-asks at 0.2), up to 1.0; a step of 0 keeps it; the cache keys the re-asks apart", async () => {
  const fixture = await OpenAIFixture.start([RUNAWAY, RUNAWAY, RUNAWAY, STOPPED_MID_STRING]);
  try {
    const llm = new LlmClient({ endpoints: { default: { model: "m", baseURL: fixture.baseURL, apiKey: "k", temperature: 0.2 } }, cacheDir: tmp(), concurrency: 1, maxRetries: 0, maxReasks: 3 });
    await mine(llm, ["Find a clinical trial for a patient with stage 2 breast cancer."]);
    expect(fixture.requests.map((q) => q.temperature)).toEqual([0.2, 0.5, 0.8, 1]);
  } finally {
    await fixture.close();
  }
  const still = await OpenAIFixture.start([RUNAWAY, STOPPED_MID_STRING]);
  try {
    const llm = new LlmClient({ endpoints: { default: { model: "m", baseURL: still.baseURL, apiKey: "k", temperature: 0.2 } }, cacheDir: tmp(), concurrency: 1, maxRetries: 0, reaskTemperatureStep: 0 });
    await mine(llm, ["Find a clinical trial for a patient with stage 2 breast cancer."]);
    expect(still.requests.map((q) => q.temperature)).toEqual([0.2, 0.2]);
  } finally {
    await still.close();
  }
  expect([reaskTemperature(0.7, 1, 0.3), reaskTemperature(0.7, 2, 0.3), reaskTemperature(1.2, 1, 0.3), reaskTemperature(0, 3, 0.1)]).toEqual([1, 1, 1.2, 0.3]);
});

// Qwen2.5-Coder 1.5B's mine replies (docs/local-model.md): the first two copy the prompt's examples
// of an environment in one sentence; the third uses the definition's words with its own examples
const COPIED_STRESS = "A domain system with persistent records (entities with attributes) that tools read and change, e.g. a clinic's appointments, a library's loans, an inventory. Users can input their anxiety levels and receive personalized stress management techniques.";
const COPIED_RECORDS = "A secure environment is required to access medical records for a patient named John Smith. The system should have persistent records (entities with attributes) that tools read and change, such as a clinic's appointments, a library's loans, an inventory. Users can log in to the system and request access to specific records.";
const OWN_EXAMPLES = "A secure access system for medical records is needed for a patient named John Smith. The system should have persistent records (entities with attributes) that tools read and change, such as the patient's medical history, medications, appointments, and test results.";

test("a mine description's sentences that copy the prompt's examples of an environment are dropped (the 1.5B merged two unrelated lines through them, and re-asks got the same reply); one that says nothing else is re-asked", async () => {
  expect(withoutCopiedExamples(COPIED_STRESS)).toBe("Users can input their anxiety levels and receive personalized stress management techniques.");
  expect(withoutCopiedExamples(COPIED_RECORDS)).toBe("A secure environment is required to access medical records for a patient named John Smith. Users can log in to the system and request access to specific records.");
  expect(withoutCopiedExamples(OWN_EXAMPLES)).toBe(OWN_EXAMPLES);
  // the same words, but not four of them in a row in the examples' order, are the task's own
  expect(withoutCopiedExamples("Holds on library loans and an inventory of the books.")).toBe("Holds on library loans and an inventory of the books.");
  const reply = (description: string, needs_env = true) => JSON.stringify({ needs_env, topic: "stress management", description, reason: "x" });
  const ONLY_COPY = "A domain system with persistent records that tools read and change, e.g. a clinic's appointments, a library's loans, an inventory.";
  const fixture = await OpenAIFixture.start([reply(ONLY_COPY), reply(COPIED_STRESS), reply("Allergy records of users and the foods that trigger them; users look up and add allergies."), reply(ONLY_COPY, false)]);
  try {
    const llm = client(fixture);
    const r = await mine(llm, ["Provide stress management techniques for reducing anxiety and promoting mental well-being."]);
    expect(r.envs.map((e) => e.description)).toEqual(["Users can input their anxiety levels and receive personalized stress management techniques."]);
    expect(fixture.requests[1]!.messages.at(-1)!.content).toMatch(/only repeats this prompt's examples of an environment/);
    // two lines whose copies used to make them look alike are now two envs
    const two = await mine(llm, ["Provide allergy information for a user with a milk allergy.", "Find a clinical trial for a patient with stage 2 breast cancer."]);
    expect(two.envs).toHaveLength(1); // the clinical-trial line was judged to need no env
    expect(two.envs[0]!.description).toMatch(/^Allergy records/);
    expect(fixture.requests).toHaveLength(4);
  } finally {
    await fixture.close();
  }
});

test("plan records keyed by id but without the id their schema requires get it from their key (the 1.5B's commonest plan mistake); other missing fields stay errors", () => {
  const record = (extra: Record<string, unknown> = {}) => ({ type: "object", properties: { id: { type: "string" }, user: { type: "string" }, ...extra }, required: ["id", "user"] });
  // the 1.5B's plan (state part, shortened): two collections of records without ids, and a plain object
  const plan = EnvPlan.parse({
    env_name: "wellness_retreat",
    title: "Wellness retreats",
    introduction: "Book retreats.",
    rules: ["A reservation needs a user."],
    state_schema: { type: "object", properties: { appointments: { type: "object", additionalProperties: record() }, reservations: { type: "object", additionalProperties: record() }, progress: { type: "object", properties: { user1: { type: "object" } } } } },
    initial_state: { appointments: { "1": { user: "John Doe" }, "2": { user: "Jane Smith" } }, reservations: { "1": { user: "John Doe" } }, progress: { user1: { health: 70 } } },
    tools: ["list_reservations", "book_retreat", "cancel_reservation"].map((name) => ({ name, description: "A tool.", kind: "query", parameters: { type: "object", properties: {}, required: [] } })),
  });
  expect(checkPlan(plan)).toBeNull();
  expect(plan.initial_state).toEqual({ appointments: { "1": { user: "John Doe", id: "1" }, "2": { user: "Jane Smith", id: "2" } }, reservations: { "1": { user: "John Doe", id: "1" } }, progress: { user1: { health: 70 } } });
  // a numeric id schema gets a number; a record that has an id keeps its own
  const numeric = { ...plan, state_schema: { type: "object", properties: { rooms: { type: "object", additionalProperties: { ...record(), properties: { id: { type: "integer" }, user: { type: "string" } } } } } }, initial_state: { rooms: { "7": { user: "a" }, x: { id: 9, user: "b" } } } };
  fillRecordIds(numeric);
  expect(numeric.initial_state).toEqual({ rooms: { "7": { user: "a", id: 7 }, x: { id: 9, user: "b" } } });
  // a missing reference (patient_id) is not the key: still reported
  const ref = { ...plan, state_schema: { type: "object", properties: { visits: { type: "object", additionalProperties: { type: "object", properties: { id: { type: "string" }, patient_id: { type: "string" } }, required: ["id", "patient_id"] } } } }, initial_state: { visits: { v1: { id: "v1" } } } };
  expect(checkPlan(ref)).toMatch(/\/visits\/v1 must have required property 'patient_id'/);
});

test("plan records stored under an array's positions are stored under their own ids (the 1.5B's trials: \"0\" held id 1); ambiguous ones stay as written", () => {
  const trial = (id: number, treatment: string) => ({ id, patient_id: id, cancer_type: "Breast Cancer", stage: 2, treatment });
  const plan = EnvPlan.parse({
    env_name: "clinical_trial_system",
    title: "Clinical trials",
    introduction: "Find trials.",
    rules: ["A trial has an id."],
    state_schema: { type: "object", properties: { trials: { type: "object", additionalProperties: { type: "object", properties: { id: { type: "integer" }, patient_id: { type: "integer" }, cancer_type: { type: "string" }, stage: { type: "integer" }, treatment: { type: "string" } }, required: ["id", "patient_id"] } } } },
    // the 1.5B's plan (2026-12-07), shortened
    initial_state: { trials: { "0": trial(1, "Chemotherapy"), "1": trial(2, "Radiation Therapy"), "2": trial(3, "Immunotherapy") } },
    tools: ["search_clinical_trials", "view_clinical_trial_details", "add_new_trial"].map((name) => ({ name, description: "A tool.", kind: "query", parameters: { type: "object", properties: {}, required: [] } })),
  });
  expect(checkPlan(plan)).toBeNull();
  expect(Object.entries(plan.initial_state.trials as object).map(([k, r]) => [k, (r as { id: number; treatment: string }).id, (r as { treatment: string }).treatment])).toEqual([
    ["1", 1, "Chemotherapy"],
    ["2", 2, "Radiation Therapy"],
    ["3", 3, "Immunotherapy"],
  ]);
  // string ids too; a collection whose ids repeat, or where one record has none, or a value that is not records, stays as written
  const state = {
    rooms: { a: { id: "r1" }, b: { id: "r2" } },
    twice: { "0": { id: 1 }, "1": { id: 1 } },
    partly: { "0": { id: 5 }, "1": { name: "x" } },
    right: { r1: { id: "r1" } },
    progress: { user1: { health: 70 } },
    counter: 3,
  };
  const other = { ...plan, initial_state: structuredClone(state) };
  keyRecordsById(other);
  expect(other.initial_state).toEqual({ ...state, rooms: { r1: { id: "r1" }, r2: { id: "r2" } } });
});

test("a plan schema written with draft 3's \"required\": true on its properties is turned into required arrays (5 of the 1.5B's plans), then checked as usual", () => {
  // the 1.5B's check-up plan, shortened: true on each property and on the record and its items
  const history = { type: "array", items: { type: "object", properties: { date: { type: "string", required: true }, description: { type: "string", required: true } }, required: true }, required: true };
  const schema = { type: "object", properties: { patients: { type: "object", additionalProperties: { type: "object", properties: { id: { type: "string", required: true }, name: { type: "string", required: true }, nickname: { type: "string", required: false }, medical_history: history }, required: true } } } };
  requiredFlagsToArrays(schema);
  expect(schema.properties.patients.additionalProperties).toEqual({
    type: "object",
    properties: { id: { type: "string" }, name: { type: "string" }, nickname: { type: "string" }, medical_history: { type: "array", items: { type: "object", properties: { date: { type: "string" }, description: { type: "string" } }, required: ["date", "description"] } } },
    required: ["id", "name", "medical_history"],
  });
  // a default, enum or example that holds {"required": true} is data, not a schema
  const data = { type: "object", properties: { rule: { type: "object", default: { required: true }, enum: [{ required: true }], examples: [{ required: false }] } }, required: ["rule"] };
  requiredFlagsToArrays(data);
  expect(data).toEqual({ type: "object", properties: { rule: { type: "object", default: { required: true }, enum: [{ required: true }], examples: [{ required: false }] } }, required: ["rule"] });
  // in a whole plan: the state schema and each tool's parameters (the 1.5B's find_class), then the ids
  const plan = EnvPlan.parse({
    env_name: "healthcare_checkup",
    title: "Check-ups",
    introduction: "Book check-ups.",
    rules: ["A patient has a name."],
    state_schema: { type: "object", properties: { patients: { type: "object", additionalProperties: { type: "object", properties: { id: { type: "string", required: true }, name: { type: "string", required: true } }, required: true } } } },
    initial_state: { patients: { P1: { name: "John Doe" } } },
    tools: ["find_patient", "add_patient", "book_checkup"].map((name) => ({ name, description: "A tool.", kind: "query", parameters: { type: "object", properties: { name: { type: "string", required: true } } } })),
  });
  expect(checkPlan(plan)).toBeNull();
  expect(plan.tools[0]!.parameters).toEqual({ type: "object", properties: { name: { type: "string" } }, required: ["name"] });
  expect(plan.initial_state).toEqual({ patients: { P1: { name: "John Doe", id: "P1" } } });
});

test("closeJson adds only a missing tail: the closing quote and brackets of a reply that stopped early (the real 0.5B replies), nothing else", () => {
  // real replies (mine, after the prompt change): the final } missing; the final "} missing
  expect(closeJson('{"reason": "x", "needs_env": true, "topic": "Healthcare", "description": "A wellness retreat."')).toEqual({ reason: "x", needs_env: true, topic: "Healthcare", description: "A wellness retreat." });
  expect(closeJson('Here: {"a": [1, {"b": "say \\"hi\\" and {no} brackets')).toEqual({ a: [1, { b: 'say "hi" and {no} brackets' }] });
  expect(closeJson('```json\n{"a": {"b": 1}, "c": "text')).toEqual({ a: { b: 1 }, c: "text" });
  for (const bad of ['{"a": ', '{"a": 1,', '{"a": 1}}', '{"a": 1} trailing', "no json here", '{"a": 1 "b": 2', '{"a": [1}']) expect(closeJson(bad)).toBeNull();
});

test("the mine prompt puts the verdict and the env first and the reason last, and a reply that stopped inside its description or reason is still used (the 0.5B's habit)", async () => {
  const system = minePrompt("Book a table for two.")[0]!.content;
  const format = system.slice(system.indexOf("Reply with JSON only"));
  const at = (k: string) => format.indexOf(`"${k}"`);
  expect([at("needs_env"), at("topic"), at("description"), at("reason")].every((x, i, a) => x > 0 && (i === 0 || x > a[i - 1]!))).toBe(true);
  expect(format).toMatch(/2-3 sentences/);
  // real replies: with the reason first, 4 of 6 stopped inside it and were lost; these keep what the stage needs
  const stoppedInDescription = '{"needs_env": true, "topic": "Clinical trials", "description": "A registry of trials and the patients enrolled in them.';
  const stoppedInReason = '{"needs_env": false, "topic": "Stress management", "description": "Techniques, not records.", "reason": "The task asks for advice, which needs no records.';
  const fixture = await OpenAIFixture.start([stoppedInDescription, stoppedInReason]);
  try {
    const r = await mine(client(fixture), ["Find a clinical trial for a patient with stage 2 breast cancer.", "Provide stress management techniques for reducing anxiety."]);
    expect(r.envs.map((e) => e.topic)).toEqual(["Clinical trials"]);
    expect(r.rejected).toEqual([{ item: "Provide stress management techniques for reducing anxiety.", reason: "no stateful env needed: The task asks for advice, which needs no records." }]);
    expect(fixture.requests).toHaveLength(2); // no re-ask
  } finally {
    await fixture.close();
  }
});
