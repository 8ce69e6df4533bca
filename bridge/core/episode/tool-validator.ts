import { Ajv, type ValidateFunction } from "ajv";
import type { ToolSchema } from "../../../envs/format/bundle-schema.js";

/**
 * Validates tool arguments against each tool's JSON Schema. Parameters are closed by default
 * (`additionalProperties: false` unless the schema says otherwise): a misspelt argument is an error
 * the agent can read and fix, not a silently ignored key.
 */
export class ToolValidator {
  private readonly schemas = new Map<string, Record<string, unknown>>();
  /** Compiled on a tool's first check (about 1 ms a schema: an env of 20 tools made every first reset 20-40 ms). */
  private readonly validators = new Map<string, ValidateFunction | { error: string }>();
  // OpenAPI's numeric formats (BFCL marks floats with format: "float") describe, not constrain: accept them silently
  private readonly ajv = new Ajv({ allErrors: true, strict: false, formats: { float: true, double: true, int32: true, int64: true } });
  // an env's tools are compiled once per thread, not per episode
  private static readonly cache = new WeakMap<readonly ToolSchema[], ToolValidator>();

  /** The validator of a tool list, shared by every episode of the env. */
  static for(tools: readonly ToolSchema[]): ToolValidator {
    let v = ToolValidator.cache.get(tools);
    if (!v) ToolValidator.cache.set(tools, (v = new ToolValidator(tools)));
    return v;
  }

  constructor(tools: readonly ToolSchema[]) {
    for (const t of tools) {
      const params = t.function.parameters as Record<string, unknown>;
      this.schemas.set(t.function.name, "additionalProperties" in params ? params : { ...params, additionalProperties: false });
    }
  }

  /** Compiles every tool's schema now (warming a replica, `envscaler check`); throws on the first that does not compile. */
  compileAll(): void {
    for (const name of this.schemas.keys()) {
      const v = this.validator(name);
      if (v && "error" in v) throw new Error(v.error);
    }
  }

  private validator(name: string): ValidateFunction | { error: string } | undefined {
    let v = this.validators.get(name);
    if (v) return v;
    const schema = this.schemas.get(name);
    if (!schema) return undefined;
    try {
      v = this.ajv.compile(schema);
    } catch (e) {
      v = { error: `the parameters schema of tool ${name} does not compile: ${(e as Error).message}` };
    }
    this.validators.set(name, v);
    return v;
  }

  has(name: string): boolean {
    return this.schemas.has(name);
  }

  get names(): string[] {
    return [...this.schemas.keys()];
  }

  /** null when valid, else a readable message naming every problem. */
  check(name: string, args: Record<string, unknown>): string | null {
    const v = this.validator(name);
    if (!v) return `unknown tool ${name}`;
    if ("error" in v) return v.error;
    if (v(args)) return null;
    return (v.errors ?? [])
      .map((e) => {
        const path = e.instancePath.slice(1).replace(/\//g, ".");
        const where = path ? `'${path}'` : "arguments";
        // a nested key is named by its whole path: "unexpected argument 'location_id'; missing required
        // argument 'location_id'" read as a contradiction to a model that had put it one level too high
        const inside = path ? `${path}.` : "";
        if (e.keyword === "additionalProperties") return `unexpected argument '${inside}${(e.params as { additionalProperty: string }).additionalProperty}'`;
        if (e.keyword === "required") return `missing required argument '${inside}${(e.params as { missingProperty: string }).missingProperty}'`;
        return `${where} ${e.message ?? "is invalid"}`;
      })
      .join("; ");
  }
}
