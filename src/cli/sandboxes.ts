import { type Command, Option } from "commander";
import { daytonaOptionsFromEnv } from "../runtime/app-settings.js";
import { sandboxManagerFor } from "../runtime/sandbox-manager.js";
import { activeRunIds } from "../runs/queue/sqlite.js";
import { reapOrphans } from "../runs/reaper.js";
import { daytonaInventory } from "../sandbox/daytona/inventory.js";
import { dockerInventory } from "../sandbox/docker/inventory.js";
import type { SandboxRecord } from "../sandbox/inventory.js";
import { localInventory } from "../sandbox/local/inventory.js";
import { applySandbox } from "../sandboxes/apply.js";
import type { SandboxManager } from "../sandboxes/manager.js";
import type { NamedSandboxInfo } from "../sandboxes/provider.js";
import { defaultCommitIdentity } from "../github/bot-identity.js";
import { createRedactor, secretsFromEnv } from "../util/redact.js";
import { terminalText } from "../util/terminal-text.js";
import { positiveInteger, positiveNumber } from "./arguments.js";

interface SandboxesIo {
  env: NodeJS.ProcessEnv;
  stdout: NodeJS.WritableStream & { isTTY?: boolean };
  stderr: NodeJS.WritableStream & { isTTY?: boolean };
  signal?: AbortSignal;
}

type RunSandboxKind = "local" | "daytona" | "docker";

/**
 * `harness sandboxes …`: the sandboxes runs left behind (list, reap), and named sandboxes that a
 * person makes and drives by hand (create, exec, diff, pause, resume, delete, apply). Named
 * sandboxes made here live on the Docker Engine, so they outlast the command that made them.
 */
export function registerSandboxesCommand(program: Command, io: SandboxesIo, setExitCode: (code: number) => void): void {
  const sandboxes = program
    .command("sandboxes")
    .description("Named sandboxes you drive by hand (on Docker), and the sandboxes runs left behind");
  const kindOption = (): Option =>
    new Option(
      "--sandbox <kind>",
      "which run sandboxes (default: daytona when DAYTONA_API_KEY is set, else local)",
    ).choices(["local", "daytona", "docker"]);

  sandboxes
    .command("list")
    .description("Named sandboxes, then the sandboxes runs created (active, or orphaned)")
    .addOption(kindOption())
    .action(async (flags: { sandbox?: RunSandboxKind }) => {
      const kind = flags.sandbox ?? defaultKind(io.env);
      const named = await withManager(io.env, (manager) => manager.list());
      for (const info of named.sandboxes) io.stdout.write(`${namedLine(info)}\n`);
      // Only a missing engine the person asked about is worth a word; otherwise Docker may just not be here.
      if (kind === "docker") for (const problem of named.unavailable) io.stderr.write(`harness: ${problem}\n`);
      await withInventory(io.env, kind, async (inventory, active) => {
        for (const record of await inventory.list()) {
          // Named sandboxes were listed above; spares are no run's.
          if (record.name !== undefined || record.spare) continue;
          io.stdout.write(`${recordLine(record, active)}\n`);
        }
      });
    });

  sandboxes
    .command("reap")
    .description("Delete the run sandboxes no queued or running run owns (named sandboxes are kept)")
    .addOption(kindOption())
    .option(
      "--min-age <minutes>",
      "only sandboxes older than this (one being created has no run yet)",
      positiveNumber,
      10,
    )
    .action(async (flags: { sandbox?: RunSandboxKind; minAge: number }) => {
      await withInventory(io.env, flags.sandbox ?? defaultKind(io.env), async (inventory, active) => {
        const reaped = await reapOrphans(inventory, (runId) => active.has(runId), {
          minAgeMs: flags.minAge * 60_000,
        });
        for (const record of reaped)
          io.stdout.write(`reaped ${record.kind} ${record.id}${record.runId ? ` (run ${record.runId})` : ""}\n`);
        io.stderr.write(`${String(reaped.length)} sandbox${reaped.length === 1 ? "" : "es"} reaped\n`);
      });
    });

  sandboxes
    .command("create")
    .description("Make a named sandbox: a copy of the repository on its own branch, in a container without a network")
    .requiredOption("--repo <repo>", "a path on this machine, owner/name, or an https URL")
    .option("--name <name>", "its name (default: the repository's name and four random hex digits)")
    .option("--image <ref>", "the image it runs (default HARNESS_DOCKER_IMAGE)")
    .action(async (flags: { repo: string; name?: string; image?: string }) => {
      const info = await withManager(io.env, (manager) =>
        manager.create({
          repo: flags.repo,
          provider: "docker",
          ...(flags.name !== undefined ? { name: flags.name } : {}),
          ...(flags.image !== undefined ? { image: flags.image } : {}),
        }),
      );
      io.stdout.write(`${info.name}\n`);
      io.stderr.write(
        `Sandbox ${info.name} is ready on branch ${info.branch}: ` +
          `harness sandboxes exec ${info.name} -- <command>, then harness sandboxes apply ${info.name}\n`,
      );
    });

  sandboxes
    .command("exec")
    .description("Run a command in a named sandbox; its output and exit code are the command's")
    .argument("<name>")
    .argument("<command...>", "the program and its arguments (put -- before them)")
    .option("--cwd <path>", "where it runs, relative to the checkout", ".")
    .option("--timeout <seconds>", "stop it after this long", positiveInteger(false), 600)
    .action(async (name: string, command: string[], flags: { cwd: string; timeout: number }) => {
      const result = await withManager(io.env, (manager) =>
        manager.exec(name, { argv: command, cwd: flags.cwd, timeoutSeconds: flags.timeout }),
      );
      io.stdout.write(shown(result.stdout, io.stdout));
      io.stderr.write(shown(result.stderr, io.stderr));
      if (result.timedOut) io.stderr.write(`harness: stopped after ${String(flags.timeout)} s\n`);
      setExitCode(result.exitCode);
    });

  sandboxes
    .command("diff")
    .description("What a named sandbox changed since it was made")
    .argument("<name>")
    .action(async (name: string) => {
      const diff = await withManager(io.env, (manager) => manager.diff(name));
      if (diff.truncated) io.stderr.write("harness: the diff is long; only its end is shown\n");
      io.stdout.write(terminalText(diff.text));
    });

  for (const [verb, description] of [
    ["pause", "Freeze a named sandbox's processes, memory kept, until resumed"],
    ["resume", "Let a paused sandbox run again"],
    ["delete", "Delete a named sandbox and everything it ran"],
  ] as const) {
    sandboxes
      .command(verb)
      .description(description)
      .argument("<name>")
      .action(async (name: string) => {
        await withManager(io.env, (manager) => manager[verb](name));
        io.stderr.write(`${name}: ${verb === "pause" ? "paused" : verb === "resume" ? "running" : "deleted"}\n`);
      });
  }

  sandboxes
    .command("apply")
    .description("Bring a named sandbox's change into a repository on this machine as a branch (never the current one)")
    .argument("<name>")
    .option("--repo <path>", "the repository to write the branch to", ".")
    .option("--branch <name>", "the branch to write (default harness/sandbox/<name>)")
    .action(async (name: string, flags: { repo: string; branch?: string }) => {
      const redact = createRedactor(secretsFromEnv(io.env));
      const result = await withManager(io.env, (manager) =>
        applySandbox(manager, name, {
          repository: flags.repo,
          ...(flags.branch !== undefined ? { branch: flags.branch } : {}),
          identity: defaultCommitIdentity(io.env["GITHUB_SERVER_URL"] || undefined),
          now: new Date(),
          secrets: secretsFromEnv(io.env).map((value) => ({ name: "a secret the operator configured", value })),
          redact,
          signal: io.signal ?? new AbortController().signal,
        }),
      );
      if (result.applied) {
        io.stdout.write(`${result.branch}\n`);
        io.stderr.write(`Wrote ${result.commitSha.slice(0, 12)} to ${result.branch} in ${flags.repo}\n`);
        return;
      }
      io.stderr.write(`harness: ${result.error}${result.remedy ? ` — ${result.remedy}` : ""}\n`);
      if (result.patch) io.stdout.write(terminalText(result.patch));
      setExitCode(1);
    });
}

function defaultKind(env: NodeJS.ProcessEnv): RunSandboxKind {
  return env["DAYTONA_API_KEY"] ? "daytona" : "local";
}

/** A manager for one command, closed after it (named Docker sandboxes stay). */
async function withManager<T>(env: NodeJS.ProcessEnv, use: (manager: SandboxManager) => Promise<T>): Promise<T> {
  const manager = await sandboxManagerFor(env, { allowLocalRepositories: true, local: false });
  try {
    return await use(manager);
  } finally {
    await manager.close();
  }
}

async function withInventory(
  env: NodeJS.ProcessEnv,
  kind: RunSandboxKind,
  use: (inventory: ReturnType<typeof localInventory>, active: Set<string>) => Promise<void>,
): Promise<void> {
  const inventory =
    kind === "daytona"
      ? daytonaInventory(daytonaOptionsFromEnv(env))
      : kind === "docker"
        ? dockerInventory(env["DOCKER_HOST"] ? { host: env["DOCKER_HOST"] } : {})
        : localInventory(env["TMPDIR"] || undefined);
  try {
    await use(inventory, activeRunIds(env["HARNESS_DB"] || "./data/harness.db"));
  } finally {
    await inventory.close?.();
  }
}

function namedLine(info: NamedSandboxInfo): string {
  return [info.name, info.provider, info.state, info.branch, info.repo ?? "-", info.createdAt ?? "-"]
    .map((field) => terminalText(field).replace(/\s/g, " "))
    .join("\t");
}

function recordLine(record: SandboxRecord, active: Set<string>): string {
  return (
    `${record.kind}\t${record.id}\t${record.runId ?? "-"}\t${record.repo ?? "-"}\t` +
    `${record.createdAt ?? "-"}\t${record.runId && active.has(record.runId) ? "active" : "orphan"}`
  );
}

/** A command's output as it came, unless it goes to a terminal, which gets no control characters. */
function shown(text: string, stream: { isTTY?: boolean }): string {
  return stream.isTTY ? terminalText(text) : text;
}
