import { expect, test } from "vitest";
import { inheritedNodeFlags } from "../../bridge/fronts/zmq/supervisor.js";

test("replicas take the command's node flags (a profiler, a heap limit) but not its debugger port", () => {
  const flags = ["--cpu-prof", "--cpu-prof-dir=/tmp/p", "--max-old-space-size=4096", "--inspect", "--inspect=9229", "--inspect-brk=0", "--inspect-port=9230", "--inspect-wait", "--debug-port=1", "--enable-source-maps"];
  expect(inheritedNodeFlags(flags)).toEqual(["--cpu-prof", "--cpu-prof-dir=/tmp/p", "--max-old-space-size=4096", "--enable-source-maps"]);
  expect(inheritedNodeFlags([])).toEqual([]);
});
