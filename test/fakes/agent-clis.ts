import { readFileSync } from "node:fs";
import { chmod, mkdir, readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import type { ExecResult, RunReport } from "../../src/contracts/types.js";
import type { AgentDriver } from "../../src/agents/types.js";
import { builtinBlueprint } from "../../src/harness/builtin-blueprints.js";
import { runHarness, type HarnessAgent, type HarnessRequest } from "../../src/harness/run.js";
import { sandboxBaseEnv } from "../../src/sandbox/environment.js";
import { createLocalSandbox } from "../../src/sandbox/local/sandbox.js";
import { makeRepo } from "../helpers/git.js";
import { fakeToken } from "../helpers/fake-secrets.js";

/**
 * Fake coding-agent CLIs for driver tests. Each fake is a small Node script written at test time
 * (so it is executable without committing a mode bit) that records what it was started with,
 * edits a file in its working directory and prints real captured output (see
 * `agent-clis/README.md`). Everything it needs, the record path included, is baked into the
 * script: the harness gives an agent only its driver's env plus the sandbox's base env, so an
 * env var from the test would never reach it.
 */

/** A captured output file from `test/fakes/agent-clis/`. */
export function capture(name: string): string {
  return readFileSync(new URL(`./agent-clis/${name}`, import.meta.url), "utf8");
}

/** An `ExecResult` as the sandbox would return it for this output. */
export function execResult(stdout: string, exitCode = 0, stderr = "", extra: Partial<ExecResult> = {}): ExecResult {
  return { exitCode, stdout, stderr, durationMs: 5, ...extra };
}

export interface FakeScenario {
  stdout: string;
  stderr?: string;
  exitCode?: number;
  /** A file the fake writes in its working directory, so the run has a change to commit. */
  edit?: { path: string; content: string };
}

/** What the fake CLI saw. */
export interface FakeRecord {
  args: string[];
  env: Record<string, string>;
  stdin: string;
  cwd: string;
}

export interface FakeCli {
  /** The executable to hand the driver as `executable`. */
  path: string;
  /** What the last start of the fake recorded; throws if it never ran. */
  record: () => Promise<FakeRecord>;
}

/** Writes an executable fake CLI named `name` into `dir` (created if needed). */
export async function writeFakeCli(dir: string, name: string, scenario: FakeScenario): Promise<FakeCli> {
  await mkdir(dir, { recursive: true });
  // The script is CommonJS whatever package.json sits above the temp dir.
  await writeFile(join(dir, "package.json"), '{ "type": "commonjs" }\n');
  const path = join(dir, name);
  const recordPath = join(dir, `${name}.record.json`);
  const baked = JSON.stringify({
    recordPath,
    stdout: scenario.stdout,
    stderr: scenario.stderr ?? "",
    exitCode: scenario.exitCode ?? 0,
    edit: scenario.edit ?? null,
  });
  const script =
    `#!${process.execPath}
"use strict";
const fs = require("node:fs");
const path = require("node:path");
const scenario = ${baked};
const stdin = fs.readFileSync(0, "utf8");
fs.writeFileSync(scenario.recordPath, JSON.stringify({ args: process.argv.slice(2), env: process.env, ` +
    `stdin, cwd: process.cwd() }));
if (scenario.edit) fs.writeFileSync(path.join(process.cwd(), scenario.edit.path), scenario.edit.content);
process.stdout.write(scenario.stdout);
process.stderr.write(scenario.stderr);
process.exitCode = scenario.exitCode;
`;
  await writeFile(path, script);
  await chmod(path, 0o755);
  return { path, record: async () => JSON.parse(await readFile(recordPath, "utf8")) as FakeRecord };
}

/**
 * Credentials offered to every driver test: each agent's keys, GitHub tokens and an unrelated
 * secret. Only the ones the driver declares may reach the agent.
 */
export const OFFERED_CREDENTIALS = {
  ANTHROPIC_API_KEY: fakeToken("sk-ant-api-", 32),
  CLAUDE_CODE_OAUTH_TOKEN: fakeToken("sk-ant-oat-", 32),
  CODEX_API_KEY: fakeToken("sk-", 32),
  OPENAI_API_KEY: fakeToken("sk-", 32),
  GEMINI_API_KEY: fakeToken("gemini-", 32),
  GITHUB_TOKEN: fakeToken("ghs_"),
  GH_TOKEN: fakeToken("ghs_"),
  SECRET: fakeToken("unrelated-", 24),
};

/** The variables the driver added to the agent's environment, beyond the sandbox's base env. */
export function addedEnv(record: FakeRecord): Record<string, string> {
  const base = sandboxBaseEnv();
  return Object.fromEntries(Object.entries(record.env).filter(([name]) => !(name in base)));
}

export interface AgentRun {
  report: RunReport;
  record: FakeRecord;
}

/** What a driver test may change: the agent's credentials, turns and model, and the issue. */
export type RunOverrides = Partial<Omit<HarnessAgent, "driver">> & Pick<HarnessRequest, "issue">;

/**
 * Runs the default blueprint on a fresh repository under `dir` with the local sandbox, offering
 * `OFFERED_CREDENTIALS` and a GitHub token.
 */
export async function runDefaultBlueprint(
  dir: string,
  agent: AgentDriver,
  overrides: RunOverrides = {},
): Promise<RunReport> {
  const repo = await makeRepo(join(dir, "repo"));
  const { issue, ...agentOverrides } = overrides;
  return runHarness({
    request: {
      runId: "agentrun1",
      repo,
      branch: "harness/agent-test",
      intent: "add a greeting",
      ...(issue ? { issue } : {}),
    },
    blueprint: builtinBlueprint("default"),
    agent: { driver: agent, credentials: OFFERED_CREDENTIALS, ...agentOverrides },
    sandbox: { create: createLocalSandbox },
    github: { token: OFFERED_CREDENTIALS.GITHUB_TOKEN },
    output: { throttleMs: 20 },
  });
}

/** `runDefaultBlueprint` with the driver `makeAgent` builds around a fake CLI playing `scenario`. */
export async function runWithFakeCli(
  dir: string,
  name: string,
  scenario: FakeScenario,
  makeAgent: (executable: string) => AgentDriver,
  overrides: RunOverrides = {},
): Promise<AgentRun> {
  const fake = await writeFakeCli(join(dir, "fake-clis"), name, scenario);
  const report = await runDefaultBlueprint(dir, makeAgent(fake.path), overrides);
  return { report, record: await fake.record() };
}
