// The one LLM transport (llm/chat-endpoint.ts) and the one env-var scheme (llm/llm-env.ts) that the
// agent, the simulated user and synth share.
import { afterEach, expect, test } from "vitest";
import { ChatEndpoint } from "../../llm/chat-endpoint.js";
import { EndpointError } from "../../llm/endpoint-error.js";
import { llmEnv, llmEnvNames, llmEnvNumber } from "../../llm/llm-env.js";
import { resolveUserConfig } from "../../bridge/core/episode/user-simulator.js";
import { OpenAIFixture, type Scripted } from "../openai-fixture.js";

let fixture: OpenAIFixture | null = null;
afterEach(async () => {
  await fixture?.close();
  fixture = null;
});

async function endpointOver(script: Scripted[], options: { maxRetries: number; timeoutMs?: number }) {
  fixture = await OpenAIFixture.start(script);
  return new ChatEndpoint({ baseURL: fixture.baseURL, apiKey: "k", timeoutMs: options.timeoutMs ?? 5000, maxRetries: options.maxRetries, backoffMs: 5 });
}

const body = { model: "m", messages: [{ role: "user" as const, content: "hi" }] };

test("429 and 5xx are retried, each retry told as it happens; the reply carries its attempts and usage", async () => {
  const ep = await endpointOver([429, 503, { content: "ok", usage: { prompt_tokens: 7, completion_tokens: 3 } }], { maxRetries: 4 });
  const retried: number[] = [];
  const r = await ep.complete(body, { onRetry: (attempt) => retried.push(attempt) });
  expect(r.response.choices[0]?.message.content).toBe("ok");
  expect(r.attempts).toBe(3);
  expect(retried).toEqual([1, 2]);
  expect(r.usage).toEqual({ prompt_tokens: 7, completion_tokens: 3 });
});

test("a request refused as malformed (400) is not sent again; the error says where, its status and its attempts", async () => {
  const ep = await endpointOver([400, "never"], { maxRetries: 4 });
  const e = await ep.complete(body).catch((x: unknown) => x);
  expect(e).toBeInstanceOf(EndpointError);
  expect(e).toMatchObject({ status: 400, attempts: 1, timeouts: 0 });
  expect((e as Error).message).toMatch(/\(model m\): .*\(after 1 attempt\)$/);
  expect(fixture!.requests).toHaveLength(1);
});

test("a hung endpoint is cancelled at the timeout and retried until the tries run out; the timeouts are counted", async () => {
  const ep = await endpointOver([{ hang: true }, { hang: true }, "late"], { maxRetries: 1, timeoutMs: 200 });
  const timedOut: number[] = [];
  const e = await ep.complete(body, { onTimeout: (a) => timedOut.push(a) }).catch((x: unknown) => x);
  expect(e).toMatchObject({ name: "EndpointError", status: null, attempts: 2, timeouts: 2 });
  expect(timedOut).toEqual([1, 2]);
});

test("aborting cancels a call waiting to be retried, not only one in flight", async () => {
  fixture = await OpenAIFixture.start([500, "ok"]);
  const ep = new ChatEndpoint({ baseURL: fixture.baseURL, apiKey: "k", timeoutMs: 5000, maxRetries: 3, backoffMs: 60_000 });
  const controller = new AbortController();
  const pending = ep.complete(body, { signal: controller.signal, onRetry: () => controller.abort() });
  await expect(pending).rejects.toMatchObject({ name: "EndpointError", message: "the call was cancelled" });
  expect(fixture.requests).toHaveLength(1);
});

test("one scheme: a role's own variable, its alias, synth's for a stage, the shared limits, then OPENAI_* for the endpoint and key", () => {
  expect(llmEnvNames("USER", "BASE_URL")).toEqual(["ENVSCALER_USER_BASE_URL", "USER_OPENAI_BASE_URL", "OPENAI_BASE_URL"]);
  expect(llmEnvNames("SYNTH_CODE", "TIMEOUT")).toEqual(["ENVSCALER_SYNTH_CODE_TIMEOUT", "ENVSCALER_SYNTH_TIMEOUT", "ENVSCALER_LLM_TIMEOUT"]);
  // where a call goes is never shared between roles
  expect(llmEnvNames("AGENT", "MODEL")).toEqual(["ENVSCALER_AGENT_MODEL"]);
  const env = { USER_OPENAI_BASE_URL: "http://alias/v1", OPENAI_BASE_URL: "http://shared/v1", ENVSCALER_LLM_TIMEOUT: "30", ENVSCALER_USER_MODEL: " " };
  expect(llmEnv("USER", "BASE_URL", env)).toBe("http://alias/v1");
  expect(llmEnv("USER", "BASE_URL", { ...env, ENVSCALER_USER_BASE_URL: "http://own/v1" })).toBe("http://own/v1");
  expect(llmEnv("AGENT", "BASE_URL", env)).toBe("http://shared/v1");
  expect(llmEnv("USER", "MODEL", env)).toBeUndefined(); // blank is unset
  expect(llmEnvNumber("USER", "TIMEOUT", env)).toBe(30);
  expect(() => llmEnvNumber("USER", "TIMEOUT", { ENVSCALER_USER_TIMEOUT: "soon" })).toThrow(/ENVSCALER_USER_TIMEOUT must be a non-negative number/);
});

test("the simulated user reads the scheme: the old USER_OPENAI_* names still work, the shared timeout applies, its own wins", () => {
  const env = { USER_OPENAI_BASE_URL: "http://alias/v1", USER_OPENAI_API_KEY: "old-key", ENVSCALER_LLM_TIMEOUT: "30", ENVSCALER_USER_MAX_RETRIES: "1" };
  expect(resolveUserConfig({}, env)).toMatchObject({ baseURL: "http://alias/v1", apiKey: "old-key", timeoutMs: 30_000, maxRetries: 1 });
  expect(resolveUserConfig({}, { ...env, ENVSCALER_USER_TIMEOUT: "5", ENVSCALER_USER_BASE_URL: "http://own/v1" })).toMatchObject({ baseURL: "http://own/v1", timeoutMs: 5000 });
});

test("the connection's header and body timeouts follow the endpoint's timeout past Node's 300 s (a slow CPU model's reply was cut there and asked again)", async () => {
  const slow = new ChatEndpoint({ baseURL: "http://127.0.0.1:9/v1", apiKey: "k", timeoutMs: 1_800_000, maxRetries: 0 });
  expect(slow.connectionTimeouts.headersTimeout).toBeGreaterThan(1_800_000);
  expect(slow.connectionTimeouts.bodyTimeout).toBeGreaterThan(1_800_000);
  await slow.agent.close();
  // and the requests go through that pool: a completion is answered over it
  const ep = await endpointOver([{ content: "through the pool" }], { maxRetries: 0 });
  let dispatched = 0;
  const dispatch = ep.agent.dispatch.bind(ep.agent);
  ep.agent.dispatch = (opts, handler) => {
    dispatched++;
    return dispatch(opts, handler);
  };
  expect((await ep.complete(body)).response.choices[0]?.message.content).toBe("through the pool");
  expect(dispatched).toBe(1);
});
