// Development entry for the engine worker when the project runs from TypeScript sources (vitest,
// tsx): registers tsx inside this thread, then loads the real worker. The built package uses
// dist/bridge/engine/engine-worker.js directly.
import { register } from "tsx/esm/api";

register();
await import("./engine-worker.ts");
