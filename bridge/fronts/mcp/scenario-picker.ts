import type { EnvRegistry } from "../../../envs/format/registry.js";
import { unknownScenario } from "../../core/sessions/unknowns.js";

/** A shell-style glob (`*`, `?`) over scenario ids as a RegExp. */
function globRegExp(glob: string): RegExp {
  const body = glob.replace(/[.+^${}()|[\]\\]/g, "\\$&").replace(/\*/g, ".*").replace(/\?/g, ".");
  return new RegExp(`^${body}$`);
}

/**
 * Which scenarios a session may play: one fixed scenario (`--scenario`), the ids matching a glob
 * (`--scenarios`), or every scenario served. A session names its scenario at start (header or
 * `start_episode`); with exactly one allowed, it starts on that one without being asked.
 */
export class ScenarioPicker {
  readonly ids: string[];

  constructor(
    private readonly registry: EnvRegistry,
    options: { scenario?: string; scenarios?: string },
  ) {
    const all = registry.list().flatMap((b) => [...b.scenarios.keys()]);
    if (options.scenario !== undefined) {
      if (!registry.scenario(options.scenario)) throw new Error(`no scenario ${options.scenario} in the envs served`);
      this.ids = [options.scenario];
    } else if (options.scenarios !== undefined) {
      const re = globRegExp(options.scenarios);
      this.ids = all.filter((id) => re.test(id));
      if (this.ids.length === 0) throw new Error(`no scenario id matches ${options.scenarios}`);
    } else {
      this.ids = all;
    }
  }

  /** The scenario a session gets when it names none: the only one allowed, else none (it must call start_episode). */
  get implicit(): string | undefined {
    return this.ids.length === 1 ? this.ids[0] : undefined;
  }

  /** Checks a requested scenario id; throws `unknown_scenario` naming what is allowed. */
  check(id: string): string {
    if (!this.ids.includes(id)) {
      const hint = this.ids.length <= 20 ? `: ${this.ids.join(", ")}` : ` (${this.ids.length} scenarios)`;
      throw unknownScenario(id, `scenario ${JSON.stringify(id)} is not served here; allowed${hint}`);
    }
    return id;
  }

  describe(id: string): { scenario_id: string; env_id: string; mode: string } {
    const found = this.registry.scenario(id)!;
    return { scenario_id: id, env_id: found.bundle.id, mode: found.scenario.mode };
  }
}
