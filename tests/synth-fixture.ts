// Scripted LLM replies for the synth pipeline tests: a tiny dental-clinic env, planned, coded,
// tested and given scenarios, with bad replies mixed in that the pipeline must catch.
import type { FixtureRequest } from "./openai-fixture.js";

export const TASKS = [
  "Schedule a dentist appointment for patient Ann on Tuesday and cancel her old Monday one.",
  "What is the capital of France and how many people live there?",
  "Schedule a dentist appointment for patient Ann on Tuesday and cancel her old Monday one please.",
  "Show me a photo of a cat sitting on a dentist chair.",
  "Move my dental cleaning appointment at the clinic to Friday.",
];

export const PLAN = {
  env_name: "dental_clinic",
  title: "Dental clinic scheduling",
  introduction: "A dental clinic's appointment book: patients and their appointments.",
  rules: ["A patient may hold at most one booked appointment per day.", "Only booked appointments can be cancelled."],
  state_schema: { type: "object", required: ["patients", "appointments", "next_id"], properties: { next_id: { type: "integer" } } },
  initial_state: {
    patients: { P1: { name: "Ann" }, P2: { name: "Bo" } },
    appointments: { A1: { patient_id: "P1", day: "monday", status: "booked" } },
    next_id: 2,
  },
  tools: [
    { name: "list_appointments", description: "A patient's appointments.", kind: "query", parameters: { type: "object", properties: { patient_id: { type: "string" } }, required: ["patient_id"] } },
    { name: "book_appointment", description: "Book a day for a patient.", kind: "change", parameters: { type: "object", properties: { patient_id: { type: "string" }, day: { type: "string" } }, required: ["patient_id", "day"] } },
    { name: "cancel_appointment", description: "Cancel an appointment.", kind: "change", parameters: { type: "object", properties: { appointment_id: { type: "string" } }, required: ["appointment_id"] } },
  ],
};

export const GOOD_CODE = `class DentalClinicEnv {
  constructor(state) { this.patients = state.patients; this.appointments = state.appointments; this.next_id = state.next_id; }
  list_appointments({ patient_id }) {
    if (!this.patients[patient_id]) return { success: false, error: "no patient " + patient_id };
    return { success: true, data: Object.entries(this.appointments).filter(([, a]) => a.patient_id === patient_id).map(([id, a]) => ({ id, ...a })) };
  }
  book_appointment({ patient_id, day }) {
    if (!this.patients[patient_id]) return { success: false, error: "no patient " + patient_id };
    if (Object.values(this.appointments).some((a) => a.patient_id === patient_id && a.day === day && a.status === "booked")) return { success: false, error: "already booked that day" };
    const id = "A" + this.next_id++;
    this.appointments[id] = { patient_id, day, status: "booked" };
    return { success: true, data: { appointment_id: id } };
  }
  cancel_appointment({ appointment_id }) {
    const a = this.appointments[appointment_id];
    if (!a) return { success: false, error: "no appointment " + appointment_id };
    if (a.status !== "booked") return { success: false, error: "not booked" };
    a.status = "cancelled";
    return { success: true };
  }
}`;

const TEST_CALLS = [
  { tool: "list_appointments", arguments: { patient_id: "P1" }, case_type: "positive", expectation: "Ann's Monday appointment" },
  { tool: "cancel_appointment", arguments: { appointment_id: "A99" }, case_type: "negative", expectation: "refused: unknown id" },
  { tool: "book_appointment", arguments: { patient_id: "P2", day: "friday" }, case_type: "positive", expectation: "new appointment A2" },
  { tool: "book_appointment", arguments: { patient_id: "P2", day: "friday" }, case_type: "negative", expectation: "refused: same day" },
];

const GOOD_SCENARIO = {
  task: "Ann (P1) wants to move her Monday appointment to Tuesday: book Tuesday, then cancel Monday.",
  state_overrides: {},
  checklist: [
    { description: "Ann has a booked Tuesday appointment", source: "({final}) => Object.values(final.appointments).some(a => a.patient_id === 'P1' && a.day === 'tuesday' && a.status === 'booked')" },
    { description: "A1 is cancelled", source: "({final}) => final.appointments.A1.status === 'cancelled'" },
  ],
  reference_actions: [
    { name: "book_appointment", arguments: { patient_id: "P1", day: "tuesday" } },
    { name: "cancel_appointment", arguments: { appointment_id: "A1" } },
  ],
};

const CONVERSATION_SCENARIO = {
  task: "Bo (P2) calls to book a Wednesday appointment.",
  user_instructions: "You are Bo, patient P2. You want an appointment on Wednesday. Give your id only when asked.",
  state_overrides: { patients: { P3: { name: "Cy" } } },
  checklist: [{ description: "Bo has a Wednesday booking", source: "({final}) => Object.values(final.appointments).some(a => a.patient_id === 'P2' && a.day === 'wednesday')" }],
  reference_actions: [{ name: "book_appointment", arguments: { patient_id: "P2", day: "wednesday" } }],
};

const json = (v: unknown) => "```json\n" + JSON.stringify(v) + "\n```";

/** Which bad replies the script produced, so tests can see each was caught. */
export const served: string[] = [];

export function synthResponder(req: FixtureRequest): string | number {
  const system = req.messages[0]?.content ?? "";
  const user = req.messages[1]?.content ?? "";
  const lastUser = [...req.messages].reverse().find((m) => m.role === "user")?.content ?? "";
  // a re-ask shows the rejected reply (an assistant turn) or, in stages that re-ask without it,
  // lists the rejections in the last user message ("Earlier replies … were rejected: 1. …")
  const rejections = (lastUser.split("were rejected:\n")[1] ?? "").split("\n").filter((l) => /^\d+\. /.test(l)).length;
  const attempt = req.messages.filter((m) => m.role === "assistant").length + rejections;
  const stage = /\[envscaler synth: (\w+)\]/.exec(system)?.[1];
  switch (stage) {
    case "mine":
      if (/capital of France/.test(user)) return json({ needs_env: false, reason: "a fact lookup", topic: "geography", description: "facts" });
      return json({ needs_env: true, reason: "appointments are records that change", topic: "dental clinic scheduling", description: "A dental clinic appointment book where patients book, move and cancel appointments." });
    case "plan":
      if (attempt === 0) return (served.push("plan: invalid JSON"), "Sure! Here is the plan: {\"env_name\": \"dental_clinic\", ");
      return json(PLAN);
    case "code":
      if (attempt === 0) return (served.push("code: constructor throws"), "```js\nclass DentalClinicEnv { constructor() { throw new Error('not ready'); } }\n```");
      if (attempt === 1) return (served.push("code: constructor loops"), "```js\nclass DentalClinicEnv { constructor() { for (;;) {} } }\n```");
      return "```js\n" + GOOD_CODE + "\n```";
    case "test": {
      const round = Number(/Round (\d+)\./.exec(user)?.[1] ?? 1);
      // the real 1.5B's shape: a "positive" case with no arguments at all (refused by the tool's schema before the env runs)
      if (round === 1 && attempt === 0) return (served.push("test: a call without its arguments"), json({ tool: "list_appointments", arguments: {}, case_type: "positive", expectation: "the appointments" }));
      // the real 1.5B's other shape: round 1's read again, on the state it left unchanged
      if (round === 2 && attempt === 0) return (served.push("test: the same call on the same state"), json(TEST_CALLS[0]));
      return json(TEST_CALLS[(round - 1) % TEST_CALLS.length]);
    }
    case "judge":
      // the small judge's shape: a correct refusal failed while its reason says the call was invalid (derived to pass)
      if (/cancel_appointment\(\{"appointment_id":"A99"\}\)/.test(user)) return json({ allowed: false, result: "fail", reason: "appointment A99 does not exist" });
      if (/^Call: list_appointments/m.test(user)) return json({ allowed: true, result: "warning", reason: "no paging" });
      return json({ allowed: !/"success":false/.test(user), result: "pass", reason: "behaves as specified" });
    case "scenario": {
      if (/conversation scenario/.test(system)) return json(CONVERSATION_SCENARIO);
      if (attempt === 0) return (served.push("scenario: checks always pass"), json({ ...GOOD_SCENARIO, checklist: [{ description: "always", source: "() => true" }, ...GOOD_SCENARIO.checklist] }));
      if (attempt === 1) return (served.push("scenario: reference does not solve it"), json({ ...GOOD_SCENARIO, reference_actions: GOOD_SCENARIO.reference_actions.slice(0, 1) }));
      return json(GOOD_SCENARIO);
    }
  }
  return 400;
}
