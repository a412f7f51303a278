import { chmod, readdir, readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import type { GitHubClient, NewPullRequest } from "../../src/github/client.js";
import type { Sandbox, SandboxOptions } from "../../src/sandbox/types.js";
import { startGitHubLikeServer, type GitHubLikeServer } from "../fakes/github-git-rejections.js";
import { shellQuote } from "../../src/util/shell.js";
import { git, makeBareRepo, scratchDir } from "../helpers/git.js";
import { overriding } from "../helpers/sandbox-overrides.js";

/*
 * Agents that attack the write path. Each is a shell script run as the `command` agent in the
 * checkout: it plants something git would execute or consult (a hook, fsmonitor, a filter, a
 * URL rewrite, a credential helper, a new origin), then makes an ordinary change so the run has
 * something to push. Whatever the plant runs writes what it saw (its environment, its stdin)
 * into `leakDir`, outside the checkout, so a test can read it after the sandbox is gone.
 */

export interface Attack {
  name: string;
  /** Shell lines run in the checkout before the ordinary change. */
  plant: (ctx: { leakDir: string; evilRoot: string; serverUrl: string }) => string;
}

/**
 * Where a plant writes what it saw: `leakDir` when it can (a plant that runs on the host), else
 * `$HOME/.leaks` (inside an isolated sandbox, where the host directory is read-only; the test
 * copies that folder out before the sandbox is removed).
 */
const leakTarget = (leakDir: string): string =>
  `D=${shellQuote([leakDir])}; [ -w "$D" ] || D="$HOME/.leaks"; mkdir -p "$D"`;

const spy = (leakDir: string, name: string): string =>
  `#!/bin/sh\n${leakTarget(leakDir)}\n{ echo "argv: $*"; env; cat 2>/dev/null; } > "$D/${name}.leak" 2>&1\nexit 0\n`;

/** Writes executable `content` to `path` from inside a shell script. */
const plantScript = (path: string, content: string): string =>
  `cat > ${path} <<'HARNESS_EOF'\n${content}HARNESS_EOF\nchmod +x ${path}`;

export const ATTACKS: readonly Attack[] = [
  {
    name: "pre-push, post-commit, reference-transaction and pre-commit hooks",
    plant: ({ leakDir }) =>
      ["pre-push", "post-commit", "reference-transaction", "pre-commit", "commit-msg", "post-checkout"]
        .map((hook) => plantScript(`.git/hooks/${hook}`, spy(leakDir, `hook-${hook}`)))
        .join("\n"),
  },
  {
    name: "core.hooksPath pointing at the agent's own hooks",
    plant: ({ leakDir }) =>
      [
        "mkdir -p .evil-hooks",
        ...["pre-push", "post-commit", "reference-transaction", "pre-commit"].map((hook) =>
          plantScript(`.evil-hooks/${hook}`, spy(leakDir, `hookspath-${hook}`)),
        ),
        'git config core.hooksPath "$PWD/.evil-hooks"',
      ].join("\n"),
  },
  {
    name: "core.fsmonitor",
    plant: ({ leakDir }) =>
      [
        plantScript(".git/fsmonitor-spy", spy(leakDir, "fsmonitor")),
        'git config core.fsmonitor "$PWD/.git/fsmonitor-spy"',
      ].join("\n"),
  },
  {
    name: "a clean/smudge filter in .gitattributes and config",
    plant: ({ leakDir }) =>
      [
        plantScript(".git/filter-spy", `#!/bin/sh\n${leakTarget(leakDir)}\nenv > "$D/filter.leak"\ncat\n`),
        "printf '* filter=evil\\n' > .gitattributes",
        'git config filter.evil.clean "$PWD/.git/filter-spy"',
        'git config filter.evil.smudge "$PWD/.git/filter-spy"',
        "git config filter.evil.required true",
      ].join("\n"),
  },
  {
    name: "url.<x>.insteadOf and pushInsteadOf rewriting GitHub to the agent's server",
    plant: ({ evilRoot, serverUrl }) =>
      [
        `git config url.${shellQuote([`file://${evilRoot}/`])}.insteadOf ${shellQuote([`${serverUrl}/`])}`,
        `git config url.${shellQuote([`file://${evilRoot}/`])}.pushInsteadOf ${shellQuote([`${serverUrl}/`])}`,
      ].join("\n"),
  },
  {
    name: "a credential helper",
    plant: ({ leakDir }) =>
      [
        plantScript(".git/cred-spy", spy(leakDir, "credential-helper")),
        'git config credential.helper "$PWD/.git/cred-spy"',
        "git config credential.useHttpPath true",
      ].join("\n"),
  },
  {
    name: "origin changed to the agent's server",
    plant: ({ evilRoot }) =>
      [
        `git remote set-url origin ${shellQuote([`file://${evilRoot}/acme/widgets.git`])}`,
        `git remote set-url --push origin ${shellQuote([`file://${evilRoot}/acme/widgets.git`])}`,
      ].join("\n"),
  },
  {
    name: "its own commits with a forged author, and a push of its own to main",
    plant: ({ leakDir }) =>
      [
        "echo forged > forged.txt",
        "git add forged.txt",
        "git -c user.name='Linus Torvalds' -c user.email=torvalds@example.com commit -q -m 'Totally legit'",
        leakTarget(leakDir),
        `if git push origin HEAD:refs/heads/main > "$D/self-push.out" 2>&1; ` +
          `then echo "exit 0"; else echo "exit $?"; fi >> "$D/self-push.out"`,
        `if git fetch origin > "$D/self-fetch.out" 2>&1; ` +
          `then echo "exit 0"; else echo "exit $?"; fi >> "$D/self-fetch.out"`,
      ].join("\n"),
  },
];

/** The agent script for `attack`: the plant, then an ordinary change to `hello.txt`. */
export async function hostileAgent(
  dir: string,
  attack: Attack,
  ctx: { leakDir: string; evilRoot: string; serverUrl: string },
): Promise<string> {
  const script = join(dir, `agent-${String(ATTACKS.indexOf(attack))}.sh`);
  await writeFile(
    script,
    `#!/bin/sh\nset -e\n${attack.plant(ctx)}\n` +
      `echo 'hello from the agent' > hello.txt\necho 'planted and changed hello.txt'\n`,
  );
  await chmod(script, 0o755);
  return script;
}

/** Every leak file the plants wrote, with its content. */
export async function leaks(leakDir: string): Promise<Array<{ name: string; content: string }>> {
  const names = (await readdir(leakDir).catch(() => [])).filter((name) => name.endsWith(".leak"));
  return Promise.all(names.map(async (name) => ({ name, content: await readFile(join(leakDir, name), "utf8") })));
}

/** All refs of a bare repository with their shas, to compare before and after a run. */
export function refsOf(bare: string): Record<string, string> {
  const out = git(bare, "for-each-ref", "--format=%(refname) %(objectname)");
  return Object.fromEntries(
    out
      .split("\n")
      .filter((line) => line !== "")
      .map((line) => line.split(" ") as [string, string]),
  );
}

/**
 * Wraps a sandbox factory so that, before a sandbox is removed, what plants wrote into an
 * isolated sandbox's HOME (`.leaks`) is copied to `leakDir` for the test to read: read out by a
 * command inside, so it works whatever the sandbox's HOME is on the host (if anything).
 */
export function keepingLeaks(
  create: (options: SandboxOptions) => Promise<Sandbox>,
  leakDir: string,
): (options: SandboxOptions) => Promise<Sandbox> {
  return async (options) => {
    const sandbox = await create(options);
    return overriding(sandbox, {
      teardown: async () => {
        await copyLeaks(sandbox, leakDir).catch(() => undefined);
        await sandbox.teardown();
      },
    });
  };
}

/** Each file of `$HOME/.leaks` inside, as its name and content, each ended by a NUL. */
const LIST_LEAKS =
  'cd "$HOME/.leaks" 2>/dev/null || exit 0; for f in *; do [ -f "$f" ] || continue; ' +
  'printf "%s\\0" "$f"; cat -- "$f"; printf "\\0"; done';

async function copyLeaks(sandbox: Sandbox, leakDir: string): Promise<void> {
  const listed = await sandbox.exec({ argv: ["sh", "-c", LIST_LEAKS], cwd: sandbox.workDir, timeout: 30_000 });
  const parts = listed.stdout.split("\0");
  for (let index = 0; index + 1 < parts.length; index += 2) {
    const name = parts[index] ?? "";
    if (name !== "" && !name.includes("/")) await writeFile(join(leakDir, name), parts[index + 1] ?? "");
  }
}

/** The bot identity the attack tests' runs commit as. */
export const BOT_IDENTITY = { name: "harness-app[bot]", email: "41+harness-app[bot]@users.noreply.github.com" };

/**
 * Where an attack plays out: acme/widgets behind a GitHub-like smart-HTTP server that accepts
 * `token`, the attacker's own copy of it (`evilRoot/acme/widgets.git`) to redirect pushes to,
 * and a folder for what plants see.
 */
export interface AttackWorld {
  root: { path: string; cleanup: () => Promise<void> };
  bare: string;
  evilRoot: string;
  evilBare: string;
  leakDir: string;
  server: GitHubLikeServer;
  close(): Promise<void>;
}

export async function startAttackWorld(prefix: string, token: string): Promise<AttackWorld> {
  const root = await scratchDir(prefix);
  const bare = await makeBareRepo(root.path, "acme", "widgets");
  const evilRoot = join(root.path, "evil");
  const evilBare = await makeBareRepo(evilRoot, "acme", "widgets");
  const leakDir = join(root.path, "leaks");
  git(root.path, "init", "--quiet", leakDir);
  const server = await startGitHubLikeServer({ projectRoot: root.path, token });
  return {
    root,
    bare,
    evilRoot,
    evilBare,
    leakDir,
    server,
    close: async () => {
      await server.close();
      await root.cleanup();
    },
  };
}

/** A GitHub API stand-in that opens PR `number` and records what it was asked to open. */
export function recordingPullRequests(number: number): GitHubClient & { created: NewPullRequest[] } {
  const created: NewPullRequest[] = [];
  return {
    created,
    getDefaultBranch: () => Promise.resolve("main"),
    findOpenPullRequest: () => Promise.resolve(undefined),
    createPullRequest: (_repo, pr) => {
      created.push(pr);
      return Promise.resolve({ number, url: `https://github.com/acme/widgets/pull/${String(number)}` });
    },
  };
}
