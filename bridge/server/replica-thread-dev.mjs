// Development entry for the replica's serving thread when the project runs from TypeScript sources
// (vitest, tsx): registers tsx inside this thread, then loads the real module. The built package
// uses dist/bridge/server/replica-thread.js directly.
import { register } from "tsx/esm/api";

register();
await import("./replica-thread.ts");
