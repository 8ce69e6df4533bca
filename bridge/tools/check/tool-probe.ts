type Schema = Record<string, unknown>;

/**
 * The simplest arguments a JSON Schema accepts (required properties only; the first enum value,
 * the minimum, an empty or minimal array), so `envscaler check` can call a tool that no reference
 * solution calls. undefined: the schema uses something this does not build (the tool is skipped).
 */
export function probeValue(schema: Schema): unknown {
  if (Array.isArray(schema.enum) && schema.enum.length) return schema.enum[0];
  if ("const" in schema) return schema.const;
  if (schema.default !== undefined) return schema.default;
  for (const k of ["anyOf", "oneOf"] as const) if (Array.isArray(schema[k]) && schema[k].length) return probeValue(schema[k][0] as Schema);
  const type: unknown = Array.isArray(schema.type) ? schema.type[0] : schema.type;
  switch (type) {
    case "string": {
      const min = typeof schema.minLength === "number" ? schema.minLength : 1;
      return "x".repeat(Math.max(1, min));
    }
    case "integer":
    case "number":
      return typeof schema.minimum === "number" ? schema.minimum : typeof schema.exclusiveMinimum === "number" ? Math.floor(schema.exclusiveMinimum) + 1 : 1;
    case "boolean":
      return false;
    case "null":
      return null;
    case "array": {
      const min = typeof schema.minItems === "number" ? schema.minItems : 0;
      if (min === 0) return [];
      const item = probeValue((schema.items as Schema | undefined) ?? {});
      return item === undefined ? undefined : Array.from({ length: min }, () => item);
    }
    case "object":
    case undefined: {
      const props = (schema.properties ?? {}) as Record<string, Schema>;
      const out: Record<string, unknown> = {};
      for (const name of (schema.required as string[] | undefined) ?? []) {
        const v = probeValue(props[name] ?? {});
        if (v === undefined) return undefined;
        out[name] = v;
      }
      return type === undefined && !schema.properties ? "x" : out;
    }
    default:
      return undefined;
  }
}

/** Errors a tool throws because its code is wrong, not because the input was: a tool answers bad input with {success: false}. */
export const PROGRAMMING_ERRORS = new Set(["TypeError", "ReferenceError", "SyntaxError", "InternalError"]);
