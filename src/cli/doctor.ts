import type { Command } from "commander";
import { allPassed, renderJson, renderText } from "../doctor/render.js";
import { runDoctor } from "../doctor/doctor.js";

/** `harness doctor [--json]`: what is wrong with this set-up, one line per check; exit 1 when something is. */
export function registerDoctorCommand(
  program: Command,
  io: { env: NodeJS.ProcessEnv; stdout: NodeJS.WritableStream },
  setExitCode: (code: number) => void,
): void {
  program
    .command("doctor")
    .description("Check this set-up before a real run: tools, settings, sandbox, queue store, GitHub App, agents")
    .option("--json", "print the result as JSON")
    .action(async (flags: { json?: boolean }) => {
      const reports = await runDoctor(io.env);
      io.stdout.write(flags.json ? renderJson(reports) : renderText(reports));
      setExitCode(allPassed(reports) ? 0 : 1);
    });
}
