/**
 * What the trust boundary costs. Two figures:
 *
 * 1. Per command on the local sandbox: `exec(['true'])` with a directory only, isolated with
 *    bubblewrap (network open, none) and with an allowlist (forwarder + proxy), median of N.
 * 2. Per run: the write path (bundle in the sandbox → download → base fetch → import and checks
 *    → host commit → secret scan → push) against the push it replaced (`git push` from the
 *    checkout), for a one-file change on a repository of `--files` files, against a local
 *    smart-HTTP server, alternating, median of N.
 *
 *   npx tsx bench/write-path.ts [--samples 20] [--files 2000]
 */
import { randomBytes } from "node:crypto";
import { mkdir, writeFile } from "node:fs/promises";
import { loadavg } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { deliverRun } from "../src/delivery/deliver.js";
import { commitRunChanges, headSha } from "../src/harness/git-steps.js";
import { gitCredentialEnv } from "../src/sandbox/environment.js";
import { createLocalSandbox } from "../src/sandbox/local/sandbox.js";
import type { Sandbox, SandboxOptions } from "../src/sandbox/types.js";
import { startGitHttpServer } from "../test/fakes/git-http-server.js";
import { git, makeRepo, scratchDir } from "../test/helpers/git.js";

const argValue = (name: string, fallback: number): number => {
  const index = process.argv.indexOf(`--${name}`);
  return index >= 0 ? Number(process.argv[index + 1]) : fallback;
};
const SAMPLES = argValue("samples", 20);
const FILES = argValue("files", 2000);
const median = (values: number[]): number => {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? (sorted[mid] ?? 0) : ((sorted[mid - 1] ?? 0) + (sorted[mid] ?? 0)) / 2;
};

const token = `ghs_${randomBytes(18).toString("hex")}`;
const root = await scratchDir("harness-bench-write-");
const server = await startGitHttpServer({ projectRoot: root.path, token });
const seed = await makeRepo(join(root.path, "seed"));
for (let i = 0; i < FILES; i++) {
  const dir = join(seed, "src", `m${String(i % 50)}`);
  await mkdir(dir, { recursive: true });
  await writeFile(
    join(dir, `f${String(i)}.ts`),
    `export const v${String(i)} = ${JSON.stringify(randomBytes(48).toString("base64"))};\n`,
  );
}
git(seed, "add", ".");
git(seed, "commit", "--quiet", "-m", "many files");
await mkdir(join(root.path, "acme"), { recursive: true });
git(root.path, "clone", "--quiet", "--bare", seed, join(root.path, "acme", "widgets.git"));

const base: Omit<SandboxOptions, "branch"> = { repo: "acme/widgets", githubToken: token, githubServerUrl: server.url };
const load = (): string =>
  loadavg()
    .map((value) => value.toFixed(2))
    .join(" ");
console.log(
  `node ${process.version}; ${String(SAMPLES)} samples; repository of ${String(FILES + 1)} files; ` +
    `load at start ${load()}`,
);

try {
  // 1. Per command.
  const modes: Array<[string, Partial<SandboxOptions>]> = [
    ["directory only (worktree-mode isolation)", {}],
    ["bubblewrap, network open", { localIsolation: { mode: "namespaces" } }],
    ["bubblewrap, network none", { localIsolation: { mode: "namespaces" }, network: { mode: "none" } }],
    [
      "bubblewrap, allowlist (forwarder + proxy)",
      {
        localIsolation: { mode: "namespaces" },
        network: { mode: "allowlist", allow: { operator: [], repository: ["registry.npmjs.org"] } },
      },
    ],
  ];
  const sandboxes: Array<[string, Sandbox]> = [];
  for (const [label, extra] of modes)
    sandboxes.push([
      label,
      await createLocalSandbox({ ...base, branch: `bench/${String(sandboxes.length)}`, ...extra }),
    ]);
  const times = new Map<string, number[]>(sandboxes.map(([label]) => [label, []]));
  for (const [, sandbox] of sandboxes) await sandbox.exec({ argv: ["true"], cwd: sandbox.workDir, timeout: 30_000 });
  for (let i = 0; i < SAMPLES; i++) {
    for (const [label, sandbox] of sandboxes) {
      const started = performance.now();
      await sandbox.exec({ argv: ["true"], cwd: sandbox.workDir, timeout: 30_000 });
      times.get(label)?.push(performance.now() - started);
    }
  }
  console.log("\n| exec(['true']) on the local sandbox | median ms |\n|---|---|");
  for (const [label] of sandboxes) console.log(`| ${label} | ${median(times.get(label) ?? []).toFixed(1)} |`);
  await Promise.all(sandboxes.map(([, sandbox]) => sandbox.teardown()));

  // 2. Per run: a fresh sandbox each time (as a run has), the change committed, then one of the two pushes.
  const delivered: number[] = [];
  const direct: number[] = [];
  for (let i = 0; i < SAMPLES; i++) {
    for (const path of ["write path", "direct push"] as const) {
      const sandbox = await createLocalSandbox({
        ...base,
        branch: `bench/run-${String(i)}-${path === "write path" ? "w" : "d"}`,
        runId: `bench${String(i)}`,
      });
      try {
        const baseSha = await headSha(sandbox);
        await sandbox.uploadFiles([{ path: "src/m0/changed.ts", content: `export const changed = ${String(i)};\n` }]);
        const commit = await commitRunChanges(sandbox, {
          baseSha,
          title: "Bench change",
          runId: `bench${String(i)}`,
          identity: { name: "harness", email: "harness@users.noreply.github.com" },
        });
        const started = performance.now();
        if (path === "write path") {
          const outcome = await deliverRun({
            sandbox,
            runId: `bench${String(i)}`,
            baseSha,
            commitSha: commit.sha ?? "",
            branch: `bench/run-${String(i)}-w`,
            pushUrl: `${server.url}/acme/widgets.git`,
            token,
            commit: {
              message: "Bench change\n",
              identity: { name: "harness", email: "harness@users.noreply.github.com" },
            },
            secrets: [{ name: "GITHUB_TOKEN", value: token }],
            redact: (text) => text,
          });
          if (!outcome.delivered) throw new Error(`delivery failed: ${outcome.error}`);
          delivered.push(performance.now() - started);
        } else {
          // The path this replaced: git push from the agent's checkout, token in the process env.
          const result = await sandbox.exec({
            argv: ["git", "push", "--quiet", "origin", `HEAD:refs/heads/bench/run-${String(i)}-d`],
            cwd: sandbox.workDir,
            timeout: 120_000,
            env: { ...gitCredentialEnv(token), GIT_TERMINAL_PROMPT: "0" },
          });
          if (result.exitCode !== 0) throw new Error(`push failed: ${result.stderr}`);
          direct.push(performance.now() - started);
        }
      } finally {
        await sandbox.teardown();
      }
    }
  }
  console.log("\n| one-file change, push stage | median ms | p90 ms |\n|---|---|---|");
  const p90 = (values: number[]): number => [...values].sort((a, b) => a - b)[Math.floor(values.length * 0.9)] ?? 0;
  console.log(
    `| write path (bundle, download, base fetch, checks, host commit, scan, push) | ` +
      `${median(delivered).toFixed(0)} | ${p90(delivered).toFixed(0)} |`,
  );
  console.log(
    `| direct \`git push\` from the checkout (before) | ${median(direct).toFixed(0)} | ${p90(direct).toFixed(0)} |`,
  );
  console.log(`\nload at end ${load()}`);
} finally {
  await server.close();
  await root.cleanup();
}
