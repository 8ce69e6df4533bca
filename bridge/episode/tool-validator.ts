import { Ajv, type ValidateFunction } from "ajv";
import type { ToolSchema } from "../../envs/bundle-schema.js";

/**
 * Validates tool arguments against each tool's JSON Schema. Parameters are closed by default
 * (`additionalProperties: false` unless the schema says otherwise): a misspelt argument is an error
 * the agent can read and fix, not a silently ignored key.
 */
export class ToolValidator {
  private readonly validators = new Map<string, ValidateFunction>();
  // compiling a schema costs ~1 ms; an env's tools are compiled once, not per episode
  private static readonly cache = new WeakMap<readonly ToolSchema[], ToolValidator>();

  /** The validator of a tool list, compiled on first use and shared by every episode of the env. */
  static for(tools: readonly ToolSchema[]): ToolValidator {
    let v = ToolValidator.cache.get(tools);
    if (!v) ToolValidator.cache.set(tools, (v = new ToolValidator(tools)));
    return v;
  }

  constructor(tools: readonly ToolSchema[]) {
    // OpenAPI's numeric formats (BFCL marks floats with format: "float") describe, not constrain: accept them silently
    const ajv = new Ajv({ allErrors: true, strict: false, formats: { float: true, double: true, int32: true, int64: true } });
    for (const t of tools) {
      const params = t.function.parameters as Record<string, unknown>;
      const schema = "additionalProperties" in params ? params : { ...params, additionalProperties: false };
      this.validators.set(t.function.name, ajv.compile(schema));
    }
  }

  has(name: string): boolean {
    return this.validators.has(name);
  }

  get names(): string[] {
    return [...this.validators.keys()];
  }

  /** null when valid, else a readable message naming every problem. */
  check(name: string, args: Record<string, unknown>): string | null {
    const v = this.validators.get(name);
    if (!v) return `unknown tool ${name}`;
    if (v(args)) return null;
    return (v.errors ?? [])
      .map((e) => {
        const where = e.instancePath ? `'${e.instancePath.slice(1).replace(/\//g, ".")}'` : "arguments";
        if (e.keyword === "additionalProperties") return `unexpected argument '${(e.params as { additionalProperty: string }).additionalProperty}'`;
        if (e.keyword === "required") return `missing required argument '${(e.params as { missingProperty: string }).missingProperty}'`;
        return `${where} ${e.message ?? "is invalid"}`;
      })
      .join("; ");
  }
}
