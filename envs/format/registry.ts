import { BundleLoadError, findBundleDirs, loadBundle, type BundleProblem, type EnvBundle } from "./load-bundle.js";
import type { Scenario } from "./bundle-schema.js";

/** Every bundle under one or more paths, indexed by env id and by (globally unique) scenario id. */
export class EnvRegistry {
  private readonly envs = new Map<string, EnvBundle>();
  private readonly scenarioIndex = new Map<string, EnvBundle>();

  constructor(bundles: Iterable<EnvBundle>) {
    const problems: BundleProblem[] = [];
    for (const b of bundles) {
      if (this.envs.has(b.id)) problems.push({ file: b.dir, message: `env id ${b.id} is also used by ${this.envs.get(b.id)!.dir}` });
      this.envs.set(b.id, b);
      for (const id of b.scenarios.keys()) {
        const other = this.scenarioIndex.get(id);
        if (other && other !== b) problems.push({ file: b.dir, message: `scenario id ${id} is also used by ${other.id}` });
        this.scenarioIndex.set(id, b);
      }
    }
    if (problems.length) throw new BundleLoadError(problems);
  }

  /** Loads every bundle under the given paths; all problems are reported together. */
  static load(paths: string[]): EnvRegistry {
    const bundles: EnvBundle[] = [];
    const problems: BundleProblem[] = [];
    for (const p of paths) {
      for (const dir of findBundleDirs(p)) {
        try {
          bundles.push(loadBundle(dir));
        } catch (e) {
          if (e instanceof BundleLoadError) problems.push(...e.problems);
          else throw e;
        }
      }
    }
    if (problems.length) throw new BundleLoadError(problems);
    return new EnvRegistry(bundles);
  }

  env(id: string): EnvBundle | undefined {
    return this.envs.get(id);
  }

  list(): EnvBundle[] {
    return [...this.envs.values()];
  }

  /** The bundle and scenario for a scenario id. */
  scenario(id: string): { bundle: EnvBundle; scenario: Scenario } | undefined {
    const bundle = this.scenarioIndex.get(id);
    const scenario = bundle?.scenario(id);
    return bundle && scenario ? { bundle, scenario } : undefined;
  }
}
