import { readFileSync } from "node:fs";
import { Command, CommanderError, Option } from "commander";
import { AGENTS, createAgent } from "../agents/registry.js";
import type { RunReport } from "../contracts/types.js";
import { agentEnvFrom, daytonaOptionsFromEnv, maxCostFrom, pricesFrom } from "../runtime/app-settings.js";
import { DEFAULT_PRICES, type PriceTable } from "../agents/prices.js";
import { createOctokitClient, createTokenOctokit } from "../github/octokit-client.js";
import type { Blueprint } from "../harness/blueprint.js";
import { BlueprintError, loadBlueprintFile } from "../harness/blueprint-file.js";
import { BUILTIN_BLUEPRINTS, builtinBlueprint, DEFAULT_MAX_FIX_ROUNDS } from "../harness/builtin-blueprints.js";
import { fanOut, type Reporter } from "../contracts/events.js";
import { ConsoleReporter } from "../harness/reporters/console.js";
import { JsonLinesReporter } from "../harness/reporters/jsonl.js";
import { lowestBudget } from "../harness/cost-budget.js";
import { newRunId, runHarness } from "../harness/run.js";
import { startGateway, type RunningGateway } from "../gateway/local-gateway.js";
import type { BudgetStop } from "../gateway/model-gateway.js";
import { upstreamsFromEnvironment } from "../gateway/upstreams.js";
import { MemorySpendStore } from "../runs/spend/memory.js";
import { createDockerSandbox } from "../sandbox/docker/sandbox.js";
import { createDaytonaSandbox } from "../sandbox/daytona/sandbox.js";
import { createRecommendedSnapshot, RECOMMENDED_SNAPSHOT } from "../sandbox/daytona/snapshot.js";
import { probeIsolation } from "../sandbox/local/isolation.js";
import { createLocalSandbox } from "../sandbox/local/sandbox.js";
import type { LocalIsolation } from "../sandbox/types.js";
import type { AgentDriver } from "../agents/types.js";
import { parseCommandLine } from "../util/command-line.js";
import { describeError, HarnessError } from "../util/errors.js";
import { classifyRepoRef, isLocalPath, parseGitHubRepo } from "../util/github.js";
import { createRedactor, secretsFromEnv } from "../util/redact.js";
import { positiveInteger, positiveNumber, runIdArgument } from "./arguments.js";
import { registerDoctorCommand } from "./doctor.js";
import { registerMcpCommand } from "./mcp.js";
import { registerRedisCommand } from "./redis.js";
import { registerSandboxesCommand } from "./sandboxes.js";
import { closeSessionRecords, openSessionRecords, sessionRecordsFile, sessionToContinue } from "./session-records.js";
import { UsageError } from "./usage-error.js";

/** Exit codes: 0 success, 1 the run failed, 2 the command line was wrong. */
export const EXIT_OK = 0;
export const EXIT_RUN_FAILED = 1;
export const EXIT_USAGE = 2;

/** What the CLI reads and writes, injectable so tests need no globals. */
export interface CliIo {
  env: NodeJS.ProcessEnv;
  stdout: NodeJS.WritableStream;
  stderr: NodeJS.WritableStream & { isTTY?: boolean; columns?: number };
  /** Aborted on Ctrl-C: the run is cancelled and its sandbox torn down. */
  signal?: AbortSignal;
}

interface RunFlags {
  repo: string;
  intent: string;
  blueprint: string;
  /** Unset: the agent of the run `--continue` names, else claude-code. */
  agent?: string;
  agentCommand?: string;
  setup?: string;
  verify?: string;
  command?: string;
  maxFixRounds: number;
  maxTurns?: number;
  model?: string;
  sandbox?: "local" | "worktree" | "daytona" | "docker";
  /** `--sandbox docker`: the image the run's container starts from (default HARNESS_DOCKER_IMAGE). */
  image?: string;
  push?: boolean;
  githubRepo?: string;
  branch?: string;
  report?: string;
  timeout: number;
  maxCost?: number;
  json?: boolean;
  /** The earlier run whose agent session this run continues. */
  continue?: string;
}

/** Errors that mean the command asked for something wrong (exit 2), not that doing it failed. */
const USAGE_CODES = new Set(["invalid_input", "path_confinement", "sandbox_not_found", "sandbox_name_taken"]);

export async function main(
  argv: readonly string[],
  io: CliIo = { env: process.env, stdout: process.stdout, stderr: process.stderr },
): Promise<number> {
  const redact = createRedactor(secretsFromEnv(io.env));
  let exitCode = EXIT_OK;
  const program = buildProgram(io, (code) => {
    exitCode = code;
  });
  try {
    await program.parseAsync([...argv], { from: "user" });
    return exitCode;
  } catch (error) {
    if (error instanceof CommanderError) {
      // Help and version are successful exits; anything else commander rejects is usage.
      return error.exitCode === 0 ? EXIT_OK : EXIT_USAGE;
    }
    io.stderr.write(`harness: ${redact(describeError(error))}\n`);
    return error instanceof UsageError ||
      error instanceof BlueprintError ||
      (error instanceof HarnessError && USAGE_CODES.has(error.code)) ||
      (error instanceof HarnessError && (error.code === "invalid_repo" || error.code === "settings"))
      ? EXIT_USAGE
      : EXIT_RUN_FAILED;
  }
}

function buildProgram(io: CliIo, setExitCode: (code: number) => void): Command {
  const program = new Command("harness")
    .description(
      "Turn an intent into a pull request: run a blueprint in an isolated sandbox, push a branch, open a PR.",
    )
    .version(packageVersion())
    .configureOutput({
      writeOut: (text) => io.stdout.write(text),
      writeErr: (text) => io.stderr.write(text),
    })
    .showHelpAfterError("(run `harness --help` for usage)")
    .exitOverride();

  program
    .command("run")
    .description("Run a blueprint against a repository and, with --push, open a pull request")
    .requiredOption("--repo <repo>", "local path, owner/name, or https/SSH URL of the repository")
    .requiredOption("--intent <text>", "what should change, in plain words")
    .option(
      "--blueprint <name|file>",
      `built-in blueprint (${Object.keys(BUILTIN_BLUEPRINTS).join(", ")}) or a YAML file`,
      "default",
    )
    .option(
      "--agent <name>",
      `coding agent: ${Object.keys(AGENTS).join(", ")} ` +
        "(default: claude-code, or with --continue the earlier run's agent)",
    )
    .option("--agent-command <command>", "the program the `command` agent runs")
    .option("--setup <command>", 'default blueprint: command to run before the agent (e.g. "npm ci")')
    .option("--verify <command>", 'default blueprint: command that proves the change (e.g. "npm test")')
    .option("--command <command>", "command blueprint: the one command to run")
    .option(
      "--max-fix-rounds <n>",
      "default blueprint: fix-agent rounds after a failed verify",
      positiveInteger(true),
      DEFAULT_MAX_FIX_ROUNDS,
    )
    .option("--max-turns <n>", "cap on the agent's conversation turns", positiveInteger(false))
    .option("--model <name>", "model for the agent, when it supports choosing")
    .addOption(
      new Option(
        "--sandbox <kind>",
        "where to run: daytona; local (a clone, isolated with bubblewrap; a local path's result " +
          "comes back as its branch); " +
          "docker (a container from --image on the Docker Engine at DOCKER_HOST, without a network " +
          "but the model gateway; a local path's result comes back as its branch); " +
          "worktree (a worktree of a local repository, NOT isolated). " +
          "Default: daytona when DAYTONA_API_KEY is set, " +
          "else worktree for a local path and local for a GitHub repository",
      ).choices(["local", "worktree", "daytona", "docker"]),
    )
    .option("--image <ref>", "with --sandbox docker: the image to run in (default HARNESS_DOCKER_IMAGE)")
    .option("--push", "push the branch and open a pull request (needs GITHUB_TOKEN)")
    .option(
      "--github-repo <owner/name>",
      "the GitHub repository for the PR, when --repo is a local path whose origin is not GitHub",
    )
    .option("--branch <name>", "branch to commit to (default: harness/<intent>-<run id>)")
    .option("--report <file>", "append every event to this file as JSON lines")
    .option("--timeout <minutes>", "run budget in minutes", positiveNumber, 60)
    .option(
      "--max-cost <usd>",
      "what the run's agents may spend, in US dollars (within HARNESS_MAX_COST_USD); the agent is stopped there",
      positiveNumber,
    )
    .option("--json", "print the final report as JSON on stdout")
    .option(
      "--continue <run id>",
      `continue the agent session an earlier run kept (in ${sessionRecordsFile(io.env)}) with this intent`,
      runIdArgument,
    )
    .action(async (flags: RunFlags) => {
      setExitCode(await runCommand(flags, io));
    });

  program
    .command("blueprints")
    .description("List the built-in blueprints and their steps")
    .action(() => {
      for (const [name, description] of Object.entries(BUILTIN_BLUEPRINTS)) {
        io.stdout.write(`${name}\n  ${description}\n`);
        const sample = builtinBlueprint(name, { setup: ["<setup>"], verify: ["<verify>"], command: ["<command>"] });
        for (const node of sample.nodes) {
          io.stdout.write(
            `    - ${node.id} (${node.kind}${node.runs === "on-failure" ? ", on failure" : ""}): ${node.title}\n`,
          );
        }
      }
      io.stdout.write("\nA blueprint can also be a YAML file: harness run --blueprint ./my-blueprint.yml …\n");
    });

  registerSandboxesCommand(program, io, setExitCode);

  const daytonaCommand = program.command("daytona").description("Daytona helpers");
  daytonaCommand
    .command("snapshot")
    .description("Manage the Daytona snapshot runs start from")
    .command("create")
    .description("Build the recommended snapshot (Node 22, git, Claude Code, Codex, pi) in Daytona")
    .option("--name <name>", "snapshot name", RECOMMENDED_SNAPSHOT)
    .action(async (flags: { name: string }) => {
      const daytona = daytonaOptionsFromEnv(io.env);
      if (!daytona.apiKey) throw new UsageError("Set DAYTONA_API_KEY to build a snapshot in Daytona");
      io.stderr.write(`Building snapshot '${flags.name}' in Daytona…\n`);
      const snapshot = await createRecommendedSnapshot({
        name: flags.name,
        daytona,
        onProgress: (line) => io.stderr.write(`  ${line}\n`),
      });
      io.stdout.write(`${snapshot.name} (${snapshot.state})\n`);
      io.stderr.write(`Use it with DAYTONA_SNAPSHOT=${snapshot.name}\n`);
    });

  registerDoctorCommand(program, io, setExitCode);
  registerMcpCommand(program, io);
  registerRedisCommand(program, io);

  return program;
}

async function runCommand(flags: RunFlags, io: CliIo): Promise<number> {
  const env = io.env;
  const blueprint = await chooseBlueprint(flags);
  const needsAgent = blueprint.nodes.some((node) => node.kind === "agent");
  if (flags.continue && !needsAgent)
    throw new UsageError(`--continue needs a blueprint with an agent step; ${blueprint.name} has none`);
  // Looked up before anything is made: a run with no kept session stops here.
  const resume = flags.continue ? await sessionToContinue(flags.continue, env) : undefined;
  const agentName =
    flags.agent ?? (resume && Object.hasOwn(AGENTS, resume.record.agent) ? resume.record.agent : "claude-code");
  if (agentName === "command" && needsAgent && !flags.agentCommand)
    throw new UsageError('--agent command needs --agent-command "<program> <args…>"');
  const agent = needsAgent
    ? createAgent(
        agentName,
        flags.agentCommand ? { command: parseCommandLine(flags.agentCommand, "--agent-command") } : {},
      )
    : undefined;
  // Checked before a sandbox exists: only the chosen agent's settings matter here.
  const passEnv = agent ? agentEnvFrom(env, [agent]) : [];
  const { prices } = pricesFrom(env);
  const maxCostUsd = lowestBudget(flags.maxCost, maxCostFrom(env).maxCostUsd);

  const serverUrl = env["GITHUB_SERVER_URL"] || undefined;
  classifyRepoRef(flags.repo, serverUrl ? { serverUrl } : {});
  const githubRepo = flags.githubRepo ? parseGitHubRepo(flags.githubRepo, serverUrl ? { serverUrl } : {}) : undefined;
  const sandboxKind =
    flags.sandbox ?? (env["DAYTONA_API_KEY"] ? "daytona" : isLocalPath(flags.repo) ? "worktree" : "local");
  const localIsolation = sandboxKind === "local" ? await cliIsolation(env, agent) : undefined;
  const dockerImage = flags.image ?? (env["HARNESS_DOCKER_IMAGE"]?.trim() || undefined);
  if (sandboxKind === "docker" && !dockerImage)
    throw new UsageError("--sandbox docker needs an image: --image <ref> (or HARNESS_DOCKER_IMAGE)");
  if (flags.image && sandboxKind !== "docker") throw new UsageError("--image is for --sandbox docker");
  if (sandboxKind === "worktree")
    io.stderr.write(
      "harness: worktree mode — the agent runs on this machine without isolation, in a worktree of your repository " +
        "(--sandbox local runs it isolated)\n",
    );
  const token = env["GITHUB_TOKEN"] || undefined;
  const runId = newRunId();
  const branch = flags.branch ?? defaultBranchName(flags.intent, runId);

  const reporters: Reporter[] = [new ConsoleReporter({ stream: io.stderr })];
  if (flags.report) reporters.push(new JsonLinesReporter(flags.report));
  const reporter = fanOut(...reporters);

  // Local runs call their model through a gateway in this process: the agent holds a run token,
  // never the key. A Daytona sandbox cannot reach this process, so there the key goes as before.
  const gateway = sandboxKind !== "daytona" ? await startCliGateway(env, prices) : undefined;
  // Kept under this run's id for a later `--continue`; a session to continue needs the store too,
  // even for an agent that keeps none, so that the run says why it starts afresh.
  const sessions =
    resume || agent?.sessionFacts
      ? openSessionRecords(env, (line) => io.stderr.write(`harness: ${line}\n`))
      : undefined;
  const kept = { session: false };
  const report = await runHarness({
    request: { runId, repo: flags.repo, branch, intent: flags.intent },
    blueprint,
    ...(agent
      ? {
          agent: {
            driver: agent,
            credentials: env,
            ...(passEnv.length > 0 ? { passEnv } : {}),
            ...(flags.maxTurns !== undefined ? { maxTurns: flags.maxTurns } : {}),
            ...(flags.model ? { model: flags.model } : {}),
          },
        }
      : {}),
    sandbox: {
      create:
        sandboxKind === "daytona"
          ? createDaytonaSandbox
          : sandboxKind === "docker" && dockerImage
            ? (options) =>
                createDockerSandbox(options, {
                  image: dockerImage,
                  ...(env["DOCKER_HOST"] ? { host: env["DOCKER_HOST"] } : {}),
                })
            : createLocalSandbox,
      options: {
        ...(serverUrl ? { githubServerUrl: serverUrl } : {}),
        ...(sandboxKind === "daytona" ? { daytona: daytonaOptionsFromEnv(env) } : {}),
        // A container reaches this process's model gateway only through its relayed socket, which
        // it has when it has no network of its own.
        ...(sandboxKind === "docker" ? { network: { mode: "none" as const } } : {}),
        ...(localIsolation ? { localIsolation } : {}),
      },
    },
    github: {
      ...(token ? { token, client: createOctokitClient(createTokenOctokit(token, serverUrl)) } : {}),
      push: flags.push === true,
      ...(githubRepo ? { repo: githubRepo } : {}),
    },
    output: { reporter, secrets: secretsFromEnv(env) },
    ...(io.signal ? { signal: io.signal } : {}),
    budgetMs: flags.timeout * 60_000,
    ...(maxCostUsd !== undefined ? { maxCostUsd } : {}),
    ...(prices ? { prices } : {}),
    ...(gateway
      ? {
          gateway: {
            grants: gateway.grants,
            upstreams: gateway.upstreams,
            address: { url: gateway.listeners.url, socketPath: gateway.listeners.socketPath },
            onBudgetReached: (id: string, listener: (stop: BudgetStop) => void) =>
              gateway.signals.subscribe(id, listener),
          },
        }
      : {}),
    ...(sessions ? { sessions: { store: sessions, ...(resume ? { resume } : {}) } } : {}),
  }).finally(async () => {
    await gateway?.close();
    if (sessions) kept.session = await closeSessionRecords(sessions, runId);
  });
  await reporter.close?.();
  if (kept.session) io.stderr.write(`harness: the agent's session is kept: go on from it with --continue ${runId}\n`);

  if (flags.json) io.stdout.write(`${JSON.stringify(report, null, 2)}\n`);
  else if (report.pushResult?.prUrl) io.stdout.write(`${report.pushResult.prUrl}\n`);
  return exitCodeFor(report, flags.push === true, io);
}

/** The model gateway for one CLI run, when a model key is set; its socket in a folder of its own. */
async function startCliGateway(
  env: NodeJS.ProcessEnv,
  prices: PriceTable | undefined,
): Promise<RunningGateway | undefined> {
  const upstreams = upstreamsFromEnvironment(env);
  if (upstreams.length === 0) return undefined;
  return startGateway({
    upstreams,
    prices: prices ?? DEFAULT_PRICES,
    spend: new MemorySpendStore(),
  });
}

function exitCodeFor(report: RunReport, pushRequested: boolean, io: CliIo): number {
  if (report.status !== "succeeded") {
    io.stderr.write(`harness: run ${report.status.replace("_", " ")}: ${report.error ?? "see the steps above"}\n`);
    return EXIT_RUN_FAILED;
  }
  const push = report.pushResult;
  if (pushRequested && push && (!push.pushed || !push.prUrl)) {
    io.stderr.write(`harness: ${push.error ?? "push failed"}${push.remedy ? ` — ${push.remedy}` : ""}\n`);
    return EXIT_RUN_FAILED;
  }
  return EXIT_OK;
}

async function chooseBlueprint(flags: RunFlags): Promise<Blueprint> {
  if (flags.blueprint in BUILTIN_BLUEPRINTS) {
    return builtinBlueprint(flags.blueprint, {
      ...(flags.setup ? { setup: parseCommandLine(flags.setup, "--setup") } : {}),
      ...(flags.verify ? { verify: parseCommandLine(flags.verify, "--verify") } : {}),
      ...(flags.command ? { command: parseCommandLine(flags.command, "--command") } : {}),
      maxFixRounds: flags.maxFixRounds,
    });
  }
  if (/\.(ya?ml|json)$/i.test(flags.blueprint) || flags.blueprint.includes("/"))
    return loadBlueprintFile(flags.blueprint);
  return builtinBlueprint(flags.blueprint);
}

/** `harness/<slug of the intent>-<run id>`: readable in the PR list, unique per run. */
export function defaultBranchName(intent: string, runId: string): string {
  const slug = intent
    .toLowerCase()
    .normalize("NFKD")
    .replace(/[^a-z0-9]+/g, "-")
    .replace(/^-+|-+$/g, "")
    .slice(0, 40)
    .replace(/-+$/, "");
  return `harness/${slug || "change"}-${runId}`;
}

/** The package version, read from package.json (two levels up from both src/cli and dist/cli). */
function packageVersion(): string {
  const raw: unknown = JSON.parse(readFileSync(new URL("../../package.json", import.meta.url), "utf8"));
  return typeof raw === "object" && raw !== null && "version" in raw && typeof raw.version === "string"
    ? raw.version
    : "unknown";
}

/**
 * The isolated local sandbox for a CLI run: bubblewrap must work here (else the error says how
 * to fix it, or to choose another sandbox), and the program of `--agent-command`, which the
 * developer chose on their own machine, is made readable inside.
 */
async function cliIsolation(env: NodeJS.ProcessEnv, agent: AgentDriver | undefined): Promise<LocalIsolation> {
  const bwrapPath = env["HARNESS_BWRAP"] || undefined;
  const sandboxUser = env["HARNESS_SANDBOX_USER"] || undefined;
  const probe = await probeIsolation({
    ...(bwrapPath ? { bwrapPath } : {}),
    ...(sandboxUser ? { sandboxUser } : {}),
  });
  if (!probe.available) {
    throw new UsageError(
      `The local sandbox cannot isolate the agent on this machine: ${probe.reason}. Fix: ${probe.fix}; ` +
        `or use --sandbox daytona, or --sandbox worktree on a local clone (not isolated)`,
    );
  }
  const readOnlyPaths = (env["HARNESS_SANDBOX_READONLY_PATHS"] ?? "")
    .split(",")
    .map((item) => item.trim())
    .filter((item) => item.startsWith("/"));
  const program = agent?.name === "command" ? agent.program : undefined;
  if (program?.startsWith("/")) readOnlyPaths.push(program);
  return {
    mode: "namespaces",
    ...(readOnlyPaths.length > 0 ? { readOnlyPaths } : {}),
    ...(bwrapPath ? { bwrapPath } : {}),
    ...(sandboxUser ? { sandboxUser } : {}),
  };
}
