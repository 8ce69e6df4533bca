import { expect, test } from "vitest";
import { ToolValidator } from "../../bridge/core/episode/tool-validator.js";
import type { ToolSchema } from "../../envs/format/bundle-schema.js";

const tool = (name: string, parameters: Record<string, unknown>): ToolSchema => ({ type: "function", function: { name, description: name, parameters: parameters as ToolSchema["function"]["parameters"] } });

test("schemas compile on a tool's first check; a schema that does not compile is a readable answer for that tool only, and compileAll throws it", () => {
  const tools = [
    tool("ok", { type: "object", properties: { id: { type: "string" } }, required: ["id"] }),
    tool("broken", { type: "object", properties: { n: { type: "integer", minimum: "zero" } } }),
  ];
  const v = new ToolValidator(tools);
  expect(v.names).toEqual(["ok", "broken"]);
  expect(v.check("ok", { id: "a" })).toBeNull();
  expect(v.check("ok", { id: 1 })).toBe("'id' must be string");
  expect(v.check("ok", { id: "a", x: 1 })).toBe("unexpected argument 'x'");
  expect(v.check("nope", {})).toBe("unknown tool nope");
  expect(v.check("broken", { n: 1 })).toMatch(/^the parameters schema of tool broken does not compile: /);
  expect(() => v.compileAll()).toThrow(/tool broken does not compile/);
  expect(() => new ToolValidator(tools.slice(0, 1)).compileAll()).not.toThrow();
  expect(ToolValidator.for(tools)).toBe(ToolValidator.for(tools));
});

test("a nested argument's error names its whole path (the real 0.5B put a line's location_id at the top)", () => {
  const v = new ToolValidator([
    tool("receive", {
      type: "object",
      properties: { lines: { type: "array", items: { type: "object", properties: { sku: { type: "string" }, location_id: { type: "string" } }, required: ["sku", "location_id"] } } },
      required: ["lines"],
    }),
  ]);
  expect(v.check("receive", { location_id: "L1", lines: [{ sku: "a" }, { sku: "b" }] })).toBe(
    "unexpected argument 'location_id'; missing required argument 'lines.0.location_id'; missing required argument 'lines.1.location_id'",
  );
});
