import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["tests/**/*.test.ts"],
    // the native zmq addon and wasm instances are happier in processes than in shared threads
    pool: "forks",
    testTimeout: 60_000,
    hookTimeout: 60_000,
    env: { TZ: "UTC" },
    // every connect and bind of a test process stays on loopback (tests/loopback-guard.ts); every
    // test file ends holding no QuickJS instance and no undisposed SandboxHost (tests/sandbox-leak-check.ts)
    setupFiles: ["tests/loopback-guard.ts", "tests/sandbox-leak-check.ts"],
  },
});
