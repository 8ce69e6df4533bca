/**
 * The OpenAI fixture as a process, for tests in other languages (the Python client's):
 *
 *   node --import tsx tests/openai-fixture-main.ts SCRIPT.json REQUESTS.jsonl
 *
 * SCRIPT.json is a list of scripted replies (see OpenAIFixture); each request's body is appended
 * to REQUESTS.jsonl as one line. Prints `{"base_url": …}` once serving; stops on SIGTERM.
 */
import { appendFileSync, readFileSync } from "node:fs";
import { OpenAIFixture, type Scripted } from "./openai-fixture.js";

const [scriptPath, requestsPath] = process.argv.slice(2);
if (!scriptPath || !requestsPath) {
  process.stderr.write("usage: openai-fixture-main.ts SCRIPT.json REQUESTS.jsonl\n");
  process.exit(2);
}
const script = JSON.parse(readFileSync(scriptPath, "utf8")) as Scripted[];
const fixture = await OpenAIFixture.start((request) => {
  appendFileSync(requestsPath, `${JSON.stringify(request)}\n`);
  // past the end of the script: a 500, which the client sees as a failed model call
  return script.shift() ?? 500;
});
process.stdout.write(`${JSON.stringify({ base_url: fixture.baseURL })}\n`);
const stop = () => void fixture.close().then(() => process.exit(0));
process.once("SIGTERM", stop);
process.once("SIGINT", stop);
