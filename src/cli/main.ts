import { readFileSync } from "node:fs";
import { Command, CommanderError } from "commander";
import { describeError } from "../util/errors.js";
import { redact, secretsFromEnv } from "../util/redact.js";

/** Exit codes: 0 success, 1 the run failed, 2 the command line was wrong. */
export const EXIT_OK = 0;
export const EXIT_RUN_FAILED = 1;
export const EXIT_USAGE = 2;

/** The package version, read from package.json (two levels up from both src/cli and dist/cli). */
function packageVersion(): string {
  const raw: unknown = JSON.parse(readFileSync(new URL("../../package.json", import.meta.url), "utf8"));
  return typeof raw === "object" && raw !== null && "version" in raw && typeof raw.version === "string" ? raw.version : "unknown";
}

export function buildProgram(): Command {
  const program = new Command("harness")
    .description("Turn an intent into a pull request: run a blueprint in an isolated sandbox, push a branch, open a PR.")
    .version(packageVersion())
    .showHelpAfterError("(run `harness --help` for usage)")
    .exitOverride();
  return program;
}

export async function main(argv: readonly string[]): Promise<number> {
  const program = buildProgram();
  try {
    await program.parseAsync([...argv], { from: "user" });
    return EXIT_OK;
  } catch (error) {
    if (error instanceof CommanderError) {
      // Help and version are successful exits; anything else commander rejects is usage.
      return error.exitCode === 0 ? EXIT_OK : EXIT_USAGE;
    }
    process.stderr.write(`harness: ${redact(describeError(error), secretsFromEnv(process.env))}\n`);
    return EXIT_RUN_FAILED;
  }
}

