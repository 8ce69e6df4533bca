#!/usr/bin/env node
import yargs from "yargs";
import { hideBin } from "yargs/helpers";
import { checkCommand } from "./commands/check.js";
import { demoCommand } from "./commands/demo.js";
import { evalCommand } from "./commands/eval.js";
import { importCommand } from "./commands/import.js";
import { mcpCommand } from "./commands/mcp.js";
import { listCommand } from "./commands/list.js";
import { rolloutCommand } from "./commands/rollout.js";
import { serveCommand } from "./commands/serve.js";
import { synthCommand } from "./commands/synth.js";
import { exportCommand, replayCommand, viewCommand } from "./commands/trajectories.js";
import { uiCommand } from "./commands/ui.js";
import { npmChain, watchProcesses } from "./parent-watch.js";

// the sandbox's Date reads the host time zone through emscripten; pin it so episodes replay anywhere
process.env.TZ = "UTC";

// run by npm/npx: end with it. npm passes a SIGTERM only to the `sh -c` it runs us under, which
// dies without passing it on, so without this a stopped `npx envscaler serve` (or ui, rollout…)
// would keep running, orphaned. Each command stops on SIGTERM as it does when signalled directly.
watchProcesses(npmChain(), () => process.kill(process.pid, "SIGTERM"));

await yargs(hideBin(process.argv))
  .scriptName("envscaler")
  .command(checkCommand)
  .command(demoCommand)
  .command(serveCommand)
  .command(mcpCommand)
  .command(importCommand)
  .command(listCommand)
  .command(synthCommand)
  .command(replayCommand)
  .command(viewCommand)
  .command(exportCommand)
  .command(rolloutCommand)
  .command(evalCommand)
  .command(uiCommand)
  .demandCommand(1, "name a command; see --help")
  .strict()
  .help()
  .fail((message, error, y) => {
    // a usage mistake gets the help; a command that failed (an unknown scenario, a missing file)
    // gets its message, not a stack trace under the help text
    if (error) console.error(`envscaler: ${error.message}`);
    else {
      y.showHelp();
      console.error(`\n${message}`);
    }
    process.exit(1);
  })
  .parseAsync();
