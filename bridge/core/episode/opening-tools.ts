import type { Scenario, ToolSchema } from "../../../envs/format/bundle-schema.js";
import type { EnvBundle } from "../../../envs/format/load-bundle.js";

const openingToolsCache = new WeakMap<Scenario, ToolSchema[]>();
/**
 * The tools an episode of this scenario shows at reset: the env's, less those a later user turn
 * adds (multi-turn scenarios). Computed once per scenario, so every reset shares one array.
 */
export function openingTools(bundle: EnvBundle, scenario: Scenario): ToolSchema[] {
  let tools = openingToolsCache.get(scenario);
  if (!tools) {
    const held = new Set((scenario.user_turns ?? []).flatMap((t) => t.add_tools ?? []));
    // frozen: every episode of the scenario shares it
    tools = Object.freeze(bundle.manifest.tools.filter((t) => !held.has(t.function.name))) as ToolSchema[];
    openingToolsCache.set(scenario, tools);
  }
  return tools;
}
