import type { ArgumentsCamelCase, Argv, CommandModule } from "yargs";
import { createLogger } from "../../bridge/fronts/zmq/logger.js";
import { Supervisor } from "../../bridge/fronts/zmq/supervisor.js";
import { BUNDLED_ENVS } from "../../envs/bundled.js";
import { EnvRegistry } from "../../envs/format/registry.js";
import { BridgeClient } from "../../agent/bridge-client.js";
import { closeMatches } from "./close-matches.js";

interface DemoArgs {
  envs: string;
  scenario?: string;
  seed: number;
  endpoint: string;
}

interface WireStep {
  observation: { content: string };
  reward: number;
  terminated: boolean;
  truncated: boolean;
  info: { diff: { op: string; path: string; value?: unknown }[]; end_reason?: string; reward_info?: { checks: { passed: boolean; description: string; error?: string }[] } };
}

const clip = (s: string, n = 300) => (s.length > n ? `${s.slice(0, n)}…` : s);

export const demoCommand: CommandModule<object, DemoArgs> = {
  command: "demo",
  describe: "Start a bridge on the bundled envs and play one scenario's reference solution over the wire",
  builder: (y: Argv) =>
    y
      .option("envs", { type: "string", default: BUNDLED_ENVS, describe: "bundle folder(s)" })
      .option("scenario", { type: "string", describe: "scenario id (default: the first task scenario with a reference solution)" })
      .option("seed", { type: "number", default: 0 })
      .option("endpoint", { type: "string", default: "tcp://127.0.0.1:*", describe: "where the demo bridge listens (* = a free port)" }),
  handler: async (args: ArgumentsCamelCase<DemoArgs>) => {
    // the reference solution is not part of the protocol (agents must not see it): read it locally
    const all = EnvRegistry.load([args.envs]).list().flatMap((b) => [...b.scenarios.values()]);
    const scenario = args.scenario ? all.find((s) => s.id === args.scenario) : all.find((s) => s.reference_actions?.length && s.mode === "task");
    if (!scenario) {
      if (!args.scenario) throw new Error("no scenario with a reference solution");
      const near = closeMatches(args.scenario, all.map((s) => s.id));
      throw new Error(`no scenario ${args.scenario}${near.length ? `; did you mean ${near.join(", ")}?` : ""} (\`npx envscaler list\` lists them all)`);
    }
    // BFCL and ACEBench tasks ship no reference solution: playing nothing would score 0 and say nothing about why
    if (!scenario.reference_actions?.length && !scenario.reference_messages?.length)
      throw new Error(
        `scenario ${scenario.id} has no reference solution to play (imported BFCL and ACEBench tasks have none): play it by hand with the Python client (envscaler.launch(envs=[${JSON.stringify(args.envs)}])) or \`npx envscaler ui --envs ${args.envs}\`, or score a model on it with \`npx envscaler eval\` / \`npx envscaler rollout\``,
      );

    process.env.ENVSCALER_LOG_LEVEL ??= "warn";
    const supervisor = new Supervisor({ envs: [args.envs], endpoint: args.endpoint, replicas: 1, logger: createLogger("envscaler-demo") });
    const { endpoints } = await supervisor.start();
    const client = new BridgeClient(endpoints[0]!);
    try {
      const hello = await client.request<{ protocol_version: number }>("hello", { client: "envscaler demo" });
      console.log(`bridge at ${endpoints[0]} (protocol v${hello.protocol_version})`);
      const { session_id, observation, info } = await client.request<{
        session_id: string;
        observation: { content: string };
        info: { env_id: string; scenario_id: string; seed: number; tools: unknown[] };
      }>("reset", { scenario_id: scenario.id, seed: args.seed });
      console.log(`env ${info.env_id} · scenario ${info.scenario_id} · seed ${info.seed} · ${info.tools.length} tools\n`);
      console.log(`TASK: ${observation.content}\n`);
      for (const action of scenario.reference_actions ?? []) {
        const r = await client.request<WireStep>("step", { session_id, action });
        console.log(`→ ${action.name}(${JSON.stringify(action.arguments)})`);
        console.log(`  ${clip(r.observation.content)}`);
        for (const op of r.info.diff) console.log(`  Δ ${op.op} ${op.path}${op.value !== undefined ? ` = ${clip(JSON.stringify(op.value), 120)}` : ""}`);
      }
      // a text reply ends a task episode; a conversation with no simulated user attached is ended by the client
      // the final reply is a step like the calls: shown, so the episode's last step is not missing from the transcript
      let end: WireStep | undefined;
      if (scenario.reference_messages?.length) {
        const reply = scenario.reference_messages.join("\n");
        end = await client.request<WireStep>("step", { session_id, action: reply });
        console.log(`→ reply: ${clip(reply)}`);
        console.log(`  ${clip(end.observation.content)}`);
      }
      if (!end || !(end.terminated || end.truncated)) {
        console.log("→ finish (the client ends the episode)");
        end = await client.request<WireStep>("finish", { session_id });
      }
      console.log(`\nreward ${end.reward} (${end.info.end_reason})`);
      for (const c of end.info.reward_info?.checks ?? []) console.log(`  ${c.passed ? "✓" : "✗"} ${c.description}${c.error ? ` — ${c.error}` : ""}`);
      await client.request("close", { session_id });
    } finally {
      client.close();
      await supervisor.stop();
    }
  },
};
