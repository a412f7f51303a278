import { randomBytes } from "node:crypto";
import { constants as fsConstants } from "node:fs";
import { lstat, mkdir, mkdtemp, open, readFile, realpath, rename, rm, stat, writeFile } from "node:fs/promises";
import { homedir, tmpdir } from "node:os";
import { basename, dirname, join, resolve } from "node:path";
import type { ExecOptions, ExecResult } from "../../contracts/types.js";
import {
  describeError,
  PathConfinementError,
  RepoRefError,
  SandboxError,
  SandboxFileTooLargeError,
  SandboxPausedError,
} from "../../util/errors.js";
import { classifyRepoRef, githubCloneUrl } from "../../util/github.js";
import { assertPathConfined, isWithin } from "../../util/path.js";
import { createRedactor } from "../../util/redact.js";
import { assertValidBranchName } from "../branch-name.js";
import { gitEnv, sandboxBaseEnv } from "../environment.js";
import { allowlistOf, type EgressAllowlist } from "../egress/allowlist.js";
import { forwarderCommand, FORWARDER_SOURCE, GATEWAY_PORT, PROXY_PORT, type Relay } from "../egress/forwarder.js";
import { startEgressProxy, type EgressProxy } from "../egress/proxy.js";
import { snapshotCheckout } from "../checkout-commit.js";
import { ProcessFreezer } from "./freezer.js";
import { isolatedCommand } from "./isolation.js";
import { giveToSandbox, handOverTree, letSandboxRead, letSandboxTraverse } from "./sandbox-access.js";
import { sandboxUserFor, type SandboxUser } from "./sandbox-user.js";
import { prepareSpare, takeSpare, type SpareSource } from "./spare-checkout.js";
import { runProcess } from "../process.js";
import {
  assertScratchFileContent,
  assertScratchFileName,
  DEFAULT_OPERATION_TIMEOUT,
  type MirrorLease,
  type Sandbox,
  type SandboxOptions,
} from "../types.js";
import { validateExecOptions } from "../validate.js";

/** Prefix of every local sandbox's temp directory; the orphan reaper looks for it. */
export const LOCAL_SANDBOX_PREFIX = "harness-";
/** File beside the checkout recording who owns the sandbox (labels, repo, branch, pid). */
export const LOCAL_SANDBOX_MANIFEST = "harness-sandbox.json";

/**
 * A sandbox on this machine: a clone of a GitHub repository (or, in worktree mode, a git
 * worktree of a local repository) in its own temp directory. Commands run as argv in their own
 * process group with a minimal environment. With `localIsolation.mode: "namespaces"` each
 * command also runs under bubblewrap: it sees its checkout and a fresh HOME (both writable),
 * the host's toolchains read-only, its own /proc and /tmp, the run's scratch folder read-only
 * (files the harness hands it, such as the agent's prompt), and nothing else of the host — not
 * the harness's environment or data, the real HOME, or other runs; and nothing it starts
 * outlives the command. Without it, isolation is only a directory: a developer's own machine.
 */
export async function createLocalSandbox(opts: SandboxOptions): Promise<Sandbox> {
  const operationTimeout = opts.operationTimeout ?? DEFAULT_OPERATION_TIMEOUT;
  const redactToken = createRedactor([opts.githubToken]);
  const isolation = opts.localIsolation?.mode === "namespaces" ? opts.localIsolation : undefined;
  // Who the commands run as on the host when the harness is root; none otherwise (or unisolated).
  const user = isolation ? sandboxUserFor(isolation.sandboxUser) : undefined;
  const network = opts.network ?? { mode: "open" };
  if (!isolation && network.mode !== "open") {
    throw new SandboxError(
      `The local sandbox cannot enforce network ${network.mode} without isolation: ` +
        `run it isolated (bubblewrap), or on Daytona`,
    );
  }
  const allowlist = allowlistOf(network);
  await assertValidBranchName(opts.branch);

  const source = resolveSource(opts, isolation !== undefined);
  if (source.kind !== "remote") await assertDirectory(source.path);
  // Real paths: bubblewrap binds them at the same place inside, and a symlinked temp dir
  // would otherwise leave the command outside its checkout.
  const base = await realpath(await mkdtemp(join(tmpdir(), `${LOCAL_SANDBOX_PREFIX}${safeId(opts.runId)}-`)));
  const workDir = join(base, "work");
  const homeDir = join(base, "home");
  // The sandbox user passes through to its checkout, HOME and what is bound in; nobody else does.
  await letSandboxTraverse(base, user);
  if (isolation) {
    await mkdir(homeDir, { mode: 0o700 });
    await giveToSandbox(homeDir, user);
  }
  // Beside the checkout, not in it: repository scripts searching the checkout, and the commit,
  // never see what the harness puts here.
  const scratchDir = join(base, "scratch");
  await mkdir(scratchDir, { mode: 0o700 });
  await letSandboxTraverse(scratchDir, user);
  // An allowlist: commands get a network namespace with nothing in it but a forwarder to this
  // proxy, which lets through only the listed destinations (and never the host's own services).
  const egressDir = join(base, "egress");
  const egress = allowlist ? await startEgress(egressDir, allowlist, user) : undefined;
  // Without a network of its own beyond loopback, a command reaches the model gateway through a
  // relay to its Unix socket, the same way it reaches the egress proxy.
  const commandNetwork = isolation ? (network.mode === "open" ? (isolation.network ?? "open") : "none") : "open";
  const gatewaySocket = commandNetwork === "none" ? opts.modelGateway?.socketPath : undefined;
  const gatewayRelay: Relay | undefined =
    gatewaySocket !== undefined ? { port: GATEWAY_PORT, socketPath: gatewaySocket } : undefined;
  const relayFiles = gatewayRelay && !egress ? await writeForwarder(join(base, "relay"), user) : undefined;
  const forwarderPath = egress?.forwarderPath ?? relayFiles?.forwarderPath;
  const relayReadOnly = gatewayRelay ? [dirname(gatewayRelay.socketPath), ...(relayFiles?.readOnlyPaths ?? [])] : [];
  await writeFile(
    join(base, LOCAL_SANDBOX_MANIFEST),
    JSON.stringify(
      {
        repo: source.display,
        branch: opts.branch,
        runId: opts.runId,
        labels: opts.labels ?? {},
        pid: process.pid,
        createdAt: new Date().toISOString(),
      },
      null,
      2,
    ),
  );

  const git = async (args: string[], cwd: string, token?: string): Promise<ExecResult> =>
    runProcess({ argv: ["git", ...args], cwd, env: gitEnv(token), timeout: operationTimeout });
  /**
   * The harness's git in the checkout once it is the sandbox user's (after the clone, before any
   * command ran): as that user, so what it writes is that user's without another walk of the
   * checkout, and since git as root refuses a repository another user owns. Never with a token.
   */
  const checkoutGit: Git = async (args, cwd) =>
    runProcess({
      argv: ["git", ...args],
      cwd,
      // Its HOME, not the harness's: git looks there for ignore and attribute files.
      env: { ...gitEnv(), ...(user ? { HOME: homeDir } : {}) },
      timeout: operationTimeout,
      ...(user ? { uid: user.uid, gid: user.gid } : {}),
    });
  const gitOrThrow = async (what: string, args: string[], cwd: string, run: Git = git): Promise<string> => {
    const result = await run(args, cwd);
    if (result.exitCode !== 0) {
      const detail = redactToken((result.stderr || result.stdout).trim().split("\n").slice(-3).join(" "));
      throw new SandboxError(`${what} failed${result.timedOut ? " (timed out)" : ""}: ${detail}`);
    }
    return result.stdout.trim();
  };

  let mirror: MirrorLease | undefined;
  /** The base the clone checked out, for the next run's spare checkout. */
  let spareSource: SpareSource | undefined;
  /** The branch this sandbox made in the user's repository, and where: removed again if it stays there. */
  let createdBranch: { ref: string; at: string } | undefined;
  /** The repository on this machine the checkout was cloned from, as read before anything ran. */
  let clonedFrom: LocalClone | undefined;
  try {
    if (source.kind === "local-clone") {
      clonedFrom = await cloneLocal(source, workDir, base, { host: git, checkout: checkoutGit }, user);
      await checkOutRunBranch(workDir, opts.branch, clonedFrom.head, checkoutGit, gitOrThrow);
    } else if (source.kind === "worktree") {
      const branchExists =
        (await git(["show-ref", "--verify", "--quiet", `refs/heads/${opts.branch}`], source.path)).exitCode === 0;
      if (branchExists) {
        await gitOrThrow(
          `Creating a worktree of ${source.path}`,
          ["worktree", "add", workDir, opts.branch],
          source.path,
        );
      } else {
        const at = await gitOrThrow(
          `Reading the current commit of ${source.path}`,
          ["rev-parse", "--verify", "HEAD^{commit}"],
          source.path,
        );
        await gitOrThrow(
          `Creating a worktree of ${source.path}`,
          ["worktree", "add", "-b", opts.branch, workDir, at],
          source.path,
        );
        createdBranch = { ref: `refs/heads/${opts.branch}`, at };
      }
    } else {
      ({ mirror, spareSource } = await cloneRemote(
        source,
        workDir,
        base,
        opts,
        { host: git, checkout: checkoutGit },
        user,
      ));
      await checkOutRunBranch(workDir, opts.branch, undefined, checkoutGit, gitOrThrow);
    }
  } catch (error) {
    await egress?.proxy.close();
    await removeSandboxDir(base, source);
    mirror?.release();
    throw error;
  }

  // Written while this run's agent works, for the next run of this repository to take over.
  if (mirror && spareSource) prepareSpare(mirror.path, spareSource, mirror.refreshed(), user);
  const realWorkDir = await realpath(workDir);
  const id = basename(base);
  let tornDown = false;
  /** Set from the moment a pause begins until its resume: commands are refused meanwhile. */
  let paused = false;
  const freezer = new ProcessFreezer();
  /** Pauses and resumes, one after another. */
  let lifecycle: Promise<void> = Promise.resolve();
  /** Read through a call: `paused` may change while `exec` awaits. */
  const isPaused = (): boolean => paused;
  const inTurn = (step: () => Promise<void> | void): Promise<void> => {
    const next = lifecycle.then(step);
    lifecycle = next.catch(() => undefined);
    return next;
  };

  /** Lexical confinement, then the same check on the real path, so symlinks cannot escape. */
  const confine = async (path: string): Promise<string> => {
    const target = assertPathConfined(path, workDir);
    let existing = target;
    for (;;) {
      try {
        const real = await realpath(existing);
        if (!isWithin(real, realWorkDir))
          throw new PathConfinementError(`"${path}" resolves through a symlink to ${real}, outside the sandbox`);
        return target;
      } catch (error) {
        if (error instanceof PathConfinementError) throw error;
        if (existing === workDir) return target;
        existing = dirname(existing);
      }
    }
  };

  const sandbox: Sandbox = {
    id,
    workDir,
    ...(clonedFrom ? { clonedFrom: { path: clonedFrom.path, origin: clonedFrom.origin } } : {}),
    ...(gatewayRelay
      ? { modelGatewayUrl: `http://127.0.0.1:${String(GATEWAY_PORT)}` }
      : opts.modelGateway
        ? { modelGatewayUrl: opts.modelGateway.url }
        : {}),

    async exec(execOpts: ExecOptions): Promise<ExecResult> {
      if (tornDown) throw new SandboxError("This sandbox has been torn down");
      if (paused) throw new SandboxPausedError(id);
      const cwd = validateExecOptions(execOpts, workDir);
      await confine(cwd);
      // Checked again with nothing awaited between here and the spawn: a pause that began
      // meanwhile either refuses this command or learns of its process before it can fork.
      if (isPaused()) throw new SandboxPausedError(id);
      let leader: number | undefined;
      try {
        return await runProcess({
          ...(isolation
            ? isolatedCommand(
                {
                  workDir: realWorkDir,
                  homeDir,
                  scratchDir,
                  network: commandNetwork,
                  readOnlyPaths: [
                    ...(isolation.readOnlyPaths ?? []),
                    ...(egress ? egress.readOnlyPaths : []),
                    ...relayReadOnly,
                    // The checkout's alternates: its own repository's mirror, read-only, nothing else of the cache.
                    ...(mirror ? [mirror.path] : []),
                  ],
                },
                forwarderPath !== undefined
                  ? forwarderCommand({
                      forwarderPath,
                      ...(egress ? { proxy: { socketPath: egress.socketPath, port: PROXY_PORT } } : {}),
                      relays: gatewayRelay ? [gatewayRelay] : [],
                      argv: execOpts.argv,
                    })
                  : execOpts.argv,
                { ...(isolation.bwrapPath ? { bwrapPath: isolation.bwrapPath } : {}), ...(user ? { user } : {}) },
              )
            : { argv: execOpts.argv }),
          cwd,
          // Inside, the host's TMPDIR does not exist and HOME is the run's own.
          env: isolation
            ? {
                ...sandboxBaseEnv(),
                HOME: homeDir,
                TMPDIR: "/tmp",
                USER: "harness",
                LOGNAME: "harness",
                ...(egress ? { NODE_USE_ENV_PROXY: "1" } : {}),
                ...execOpts.env,
              }
            : { ...sandboxBaseEnv(), ...execOpts.env },
          timeout: execOpts.timeout,
          ...(execOpts.maxOutput !== undefined ? { maxOutput: execOpts.maxOutput } : {}),
          ...(execOpts.stdin !== undefined ? { stdin: execOpts.stdin } : {}),
          ...(execOpts.signal ? { signal: execOpts.signal } : {}),
          ...(execOpts.onOutput ? { onOutput: execOpts.onOutput } : {}),
          onSpawn: (pid) => {
            leader = pid;
            freezer.add(pid);
          },
        });
      } finally {
        if (leader !== undefined) freezer.remove(leader);
      }
    },

    async snapshot(message) {
      if (tornDown) throw new SandboxError("This sandbox has been torn down");
      return snapshotCheckout((opts) => sandbox.exec(opts), workDir, message);
    },

    /**
     * Freezes every process the running commands started (SIGSTOP; see freezer.ts for what that
     * reaches and why not the cgroup freezer): memory, open files and the checkout stay as they
     * are. A frozen command's timeout keeps counting.
     */
    async pause() {
      if (tornDown) throw new SandboxError("This sandbox has been torn down");
      await inTurn(async () => {
        if (paused) return;
        paused = true;
        try {
          await freezer.freeze();
        } catch (error) {
          freezer.thaw();
          paused = false;
          throw error;
        }
      });
    },

    async resume() {
      if (tornDown) throw new SandboxError("This sandbox has been torn down");
      await inTurn(() => {
        if (!paused) return;
        freezer.thaw();
        paused = false;
      });
    },

    async uploadFiles(files) {
      // Check every path before writing any file, so a bad batch writes nothing.
      const targets = await Promise.all(
        files.map(async (file) => ({ target: await confine(file.path), content: file.content })),
      );
      for (const { target } of targets) {
        const stat = await lstat(target).catch(() => undefined);
        if (stat?.isSymbolicLink())
          throw new PathConfinementError(`"${target}" is a symlink; refusing to write through it`);
      }
      for (const { target, content } of targets) {
        const created = await mkdir(dirname(target), { recursive: true });
        await writeFile(target, content);
        // Files the harness puts in the checkout are the commands' to change, like the rest of it.
        if (created !== undefined) await handOverTree(created, user);
        await giveToSandbox(target, user);
      }
    },

    async downloadFile(path) {
      return readFile(await confine(path), "utf8");
    },

    async downloadBytes(path, maxBytes) {
      const target = await confine(path);
      // O_NOFOLLOW: a symlink swapped in after the check is refused, not followed.
      const handle = await open(target, fsConstants.O_RDONLY | fsConstants.O_NOFOLLOW).catch((error: unknown) => {
        throw new SandboxError(`Could not read ${path} from the sandbox: ${describeError(error)}`);
      });
      try {
        const info = await handle.stat();
        if (!info.isFile()) throw new SandboxError(`${path} in the sandbox is not a regular file`);
        if (info.size > maxBytes)
          throw new SandboxFileTooLargeError(
            `${path} in the sandbox is ${String(info.size)} bytes, over the ${String(maxBytes)}-byte limit`,
            maxBytes,
          );
        // A file still being written (an agent's session record) may grow while it is read: read
        // on to its end, up to one byte past the limit, so only a file over the limit is refused.
        let buffer = Buffer.alloc(Math.min(maxBytes + 1, info.size + 1));
        let length = 0;
        for (;;) {
          if (length === buffer.length) {
            if (length > maxBytes) break;
            const grown = Buffer.alloc(Math.min(maxBytes + 1, buffer.length * 2));
            buffer.copy(grown, 0, 0, length);
            buffer = grown;
          }
          const { bytesRead } = await handle.read(buffer, length, buffer.length - length, length);
          if (bytesRead === 0) break;
          length += bytesRead;
        }
        if (length > maxBytes)
          throw new SandboxFileTooLargeError(
            `${path} in the sandbox grew past the ${String(maxBytes)}-byte limit while it was read`,
            maxBytes,
          );
        return buffer.subarray(0, length);
      } finally {
        await handle.close();
      }
    },

    async downloadToFile(path, destination, maxBytes) {
      const target = await confine(path);
      // O_NOFOLLOW: a symlink swapped in is refused, not followed; O_NONBLOCK: a named pipe put
      // in the file's place cannot hold the open until someone writes to it.
      const flags = fsConstants.O_RDONLY | fsConstants.O_NOFOLLOW | fsConstants.O_NONBLOCK;
      const source = await open(target, flags).catch((error: unknown) => {
        throw new SandboxError(`Could not read ${path} from the sandbox: ${describeError(error)}`);
      });
      let created = false;
      try {
        const info = await source.stat();
        if (!info.isFile()) throw new SandboxError(`${path} in the sandbox is not a regular file`);
        if (info.size > maxBytes)
          throw new SandboxFileTooLargeError(
            `${path} in the sandbox is ${String(info.size)} bytes, over the ${String(maxBytes)}-byte limit`,
            maxBytes,
          );
        const sink = await open(destination, "wx", 0o600);
        created = true;
        try {
          // Copied as it is read, counted as it goes: a file that grows past the limit is refused.
          const chunk = Buffer.alloc(Math.min(1024 * 1024, maxBytes + 1));
          let copied = 0;
          for (;;) {
            const { bytesRead } = await source.read(chunk, 0, chunk.length, copied);
            if (bytesRead === 0) return copied;
            copied += bytesRead;
            if (copied > maxBytes)
              throw new SandboxFileTooLargeError(
                `${path} in the sandbox grew past the ${String(maxBytes)}-byte limit while it was read`,
                maxBytes,
              );
            await sink.write(chunk, 0, bytesRead);
          }
        } finally {
          await sink.close();
        }
      } catch (error) {
        if (created) await rm(destination, { force: true });
        throw error;
      } finally {
        await source.close();
      }
    },

    async writeScratchFile(name, content) {
      if (tornDown) throw new SandboxError("This sandbox has been torn down");
      assertScratchFileName(name);
      assertScratchFileContent(content);
      const target = join(scratchDir, name);
      // Removed first and then created exclusively: a file or symlink left in its place (an
      // unisolated command can write here) is replaced, never written through, and the mode
      // is the one given here rather than the old file's.
      await rm(target, { force: true });
      await writeFile(target, content, { mode: 0o600, flag: "wx" });
      // Readable by the sandbox user's group once it is whole; still only the harness's to change.
      await letSandboxRead(target, user);
      return target;
    },

    async removeScratchFile(name) {
      assertScratchFileName(name);
      await rm(join(scratchDir, name), { force: true });
    },

    async teardown() {
      if (tornDown) return;
      tornDown = true;
      await lifecycle;
      // Frozen commands would never end on their own: they are killed, not left stopped.
      if (paused) freezer.kill();
      paused = false;
      await egress?.proxy.close().catch(() => undefined);
      await removeSandboxDir(base, source);
      mirror?.release();
      if (createdBranch && source.kind === "worktree") await removeUnusedBranch(source.path, createdBranch);
    },
  };
  return sandbox;
}

interface Egress {
  proxy: EgressProxy;
  socketPath: string;
  forwarderPath: string;
  /** What the sandbox must see: the socket's folder and, when node lives outside /usr, node's. */
  readOnlyPaths: string[];
}

async function startEgress(dir: string, allowlist: EgressAllowlist, user: SandboxUser | undefined): Promise<Egress> {
  const { forwarderPath, readOnlyPaths } = await writeForwarder(dir, user);
  const socketPath = join(dir, "proxy.sock");
  const proxy = await startEgressProxy({ socketPath, allowlist });
  // Connecting to a Unix socket takes write permission on it: the sandbox user's group gets it.
  await letSandboxRead(socketPath, user, 0o660).catch(async (error: unknown) => {
    await proxy.close();
    throw error;
  });
  return { proxy, socketPath, forwarderPath, readOnlyPaths };
}

/** The forwarder's program in a folder of its own, and what the sandbox must see to run it. */
async function writeForwarder(
  dir: string,
  user: SandboxUser | undefined,
): Promise<{ forwarderPath: string; readOnlyPaths: string[] }> {
  await mkdir(dir, { mode: 0o700 });
  await letSandboxTraverse(dir, user);
  const forwarderPath = join(dir, "forwarder.mjs");
  await writeFile(forwarderPath, FORWARDER_SOURCE, { mode: 0o600 });
  await letSandboxRead(forwarderPath, user);
  const nodeDir = dirname(process.execPath);
  return { forwarderPath, readOnlyPaths: [dir, ...(nodeDir.startsWith("/usr/") ? [] : [nodeDir])] };
}

type Git = (args: string[], cwd: string, token?: string) => Promise<ExecResult>;
/** The harness's git on the host (the clone, with its token), and in a checkout handed to the sandbox user. */
interface Gits {
  host: Git;
  checkout: Git;
}

/** A repository on this machine, cloned into the sandbox: what the host read of it first. */
interface LocalClone {
  path: string;
  /** The commit its HEAD named when the run started: the run's base when its branch is new. */
  head: string;
  /** Its push address for `origin`, if it has one. */
  origin: string | undefined;
}

/**
 * Clones a repository on this machine into the sandbox. `--no-local` copies objects through
 * git's transport instead of hard-linking its files: the checkout is handed to the sandbox user,
 * and a hard link would hand over the user's own object files with it. Its HEAD and origin are
 * read here, on the host, since nothing in the clone can be trusted once a command has run.
 */
async function cloneLocal(
  source: Extract<Source, { kind: "local-clone" }>,
  workDir: string,
  base: string,
  gits: Gits,
  user: SandboxUser | undefined,
): Promise<LocalClone> {
  const { host: git, checkout: checkoutGit } = gits;
  const head = await git(["rev-parse", "--verify", "--quiet", "HEAD^{commit}"], source.path);
  if (head.exitCode !== 0)
    throw new RepoRefError(`The repository at ${source.path} has no commit to start from (commit something first)`);
  const origin = (await git(["remote", "get-url", "--push", "origin"], source.path)).stdout.trim();
  const cloned = await git(
    [
      "-c",
      `checkout.workers=${String(CHECKOUT_WORKERS)}`,
      "clone",
      "--quiet",
      "--no-local",
      "--",
      source.path,
      workDir,
    ],
    base,
  );
  if (cloned.exitCode !== 0) {
    const detail = (cloned.stderr || cloned.stdout).trim().split("\n").slice(-3).join(" ");
    throw new SandboxError(`Cloning ${source.path} failed${cloned.timedOut ? " (timed out)" : ""}: ${detail}`);
  }
  await handOverTree(workDir, user);
  await settleStatCheck(workDir, checkoutGit);
  return { path: source.path, head: head.stdout.trim(), origin: origin !== "" ? origin : undefined };
}

/**
 * The run's branch in a fresh clone: the one its origin already has, else a new one at `start`
 * (the default branch's head when not given). The clone brought every branch of its origin, so
 * whether it exists is known without another round trip.
 */
async function checkOutRunBranch(
  workDir: string,
  branch: string,
  start: string | undefined,
  checkoutGit: Git,
  gitOrThrow: (what: string, args: string[], cwd: string, run: Git) => Promise<string>,
): Promise<void> {
  const existing = await checkoutGit(["show-ref", "--verify", "--quiet", `refs/remotes/origin/${branch}`], workDir);
  await gitOrThrow(
    `Checking out ${branch}`,
    existing.exitCode === 0
      ? ["checkout", "--quiet", "-B", branch, `origin/${branch}`]
      : ["checkout", "--quiet", "-b", branch, ...(start ? [start] : [])],
    workDir,
    checkoutGit,
  );
}

/** Parallel checkout workers for a clone; more than the cores, since they mostly wait on the disk. */
const CHECKOUT_WORKERS = 8;

/** Failures a mirror cannot have caused: with them, a plain clone working says nothing about the mirror. */
const NETWORK_FAILURE = /unable to access|could not resolve|connection|timed out|RPC failed|HTTP [0-9]{3}/i;

/**
 * Clones from GitHub, with the repository's warm mirror as a reference when there is one, so
 * only what the mirror lacks is fetched and the base is still GitHub's current head. A clone
 * the mirror broke is done again without it, and the mirror rebuilt. Returns the mirror the
 * checkout now reads objects from, and (with a mirror) the base it checked out.
 */
async function cloneRemote(
  source: Extract<Source, { kind: "remote" }>,
  workDir: string,
  base: string,
  opts: SandboxOptions,
  gits: Gits,
  user: SandboxUser | undefined,
): Promise<{ mirror?: MirrorLease; spareSource?: SpareSource }> {
  const { host: git, checkout: checkoutGit } = gits;
  const token = opts.githubToken;
  const redactToken = createRedactor([token]);
  const clone = (reference: string | undefined, target = workDir, extra: string[] = []): Promise<ExecResult> =>
    git(
      [
        // Checkout's writes overlap in parallel workers: on 50,000 files measured 0.8 s, against
        // 10 s one file after another (git 2.39, ext4), a gap that is I/O waits, not CPU.
        "-c",
        `checkout.workers=${String(CHECKOUT_WORKERS)}`,
        "clone",
        "--quiet",
        ...extra,
        ...(reference ? ["--reference", reference] : []),
        "--",
        source.url,
        target,
      ],
      base,
      token,
    );
  const cache = opts.repoCache;
  const mirror = cache
    ? await cache.mirrors.lease(cache.scope, { id: cache.repositoryId, url: source.url }, token)
    : undefined;
  if (mirror) {
    const tree = await cloneOntoSpare(mirror.path, workDir, base, gits, user, async (target) => {
      const cloned = await clone(mirror.path, target, ["--no-checkout"]);
      // At once: the token it fetches with is revoked as soon as the sandbox is ready.
      if (cloned.exitCode === 0) mirror.refresh(token);
      return cloned;
    });
    if (tree) {
      await settleStatCheck(workDir, checkoutGit);
      return { mirror, spareSource: { tree, branchRef: await headRef(workDir) } };
    }
  }
  let result = await clone(mirror?.path);
  if (result.exitCode === 0) {
    mirror?.refresh(token);
    // Every file of a fresh checkout is the harness's: the whole tree goes to the sandbox user.
    await handOverTree(workDir, user);
    await settleStatCheck(workDir, checkoutGit);
    if (!mirror) return {};
    const tree = await checkoutGit(["rev-parse", "--verify", "--quiet", "HEAD^{tree}"], workDir);
    return {
      mirror,
      ...(tree.exitCode === 0 ? { spareSource: { tree: tree.stdout.trim(), branchRef: await headRef(workDir) } } : {}),
    };
  }
  if (mirror) {
    await rm(workDir, { recursive: true, force: true });
    const withMirror = result;
    result = await clone(undefined);
    if (result.exitCode === 0 && !NETWORK_FAILURE.test(withMirror.stderr)) mirror.discard();
    mirror.release();
  }
  if (result.exitCode === 0) {
    await handOverTree(workDir, user);
    await settleStatCheck(workDir, checkoutGit);
  }
  if (result.exitCode !== 0) {
    const detail = redactToken((result.stderr || result.stdout).trim().split("\n").slice(-3).join(" "));
    throw new SandboxError(`Cloning ${source.display} failed${result.timedOut ? " (timed out)" : ""}: ${detail}`);
  }
  return {};
}

/**
 * The clone's `.git` (from GitHub, without a checkout) over the spare work tree written for this
 * mirror, if there is one: `git reset --hard` then writes only what differs from GitHub's head,
 * and checks every other file against the spare's index by its stat data. Returns the checked
 * out tree, or undefined when there was no spare or it could not be used (the caller then
 * clones as usual, and any error is that clone's to report).
 */
async function cloneOntoSpare(
  mirror: string,
  workDir: string,
  base: string,
  gits: Gits,
  user: SandboxUser | undefined,
  cloneWithoutCheckout: (target: string) => Promise<ExecResult>,
): Promise<string | undefined> {
  const { host: git, checkout: checkoutGit } = gits;
  const claimed = join(base, "spare");
  const fresh = join(base, "clone");
  const spare = await takeSpare(mirror, claimed, user);
  if (!spare) return undefined;
  let tree: string | undefined;
  try {
    if ((await cloneWithoutCheckout(fresh)).exitCode !== 0) return undefined;
    // An empty repository has nothing to check out.
    const head = await git(["rev-parse", "--verify", "--quiet", "HEAD^{tree}"], fresh);
    if (head.exitCode !== 0) return undefined;
    await rename(join(spare, ".git", "index"), join(fresh, ".git", "index"));
    await rm(join(spare, ".git"), { recursive: true, force: true });
    await rename(join(fresh, ".git"), join(spare, ".git"));
    await rename(spare, workDir);
    // The spare's files are the sandbox user's already (handed over as it was written): only
    // its folder and the fresh .git are not, and the reset, run as that user, writes as it.
    await giveToSandbox(workDir, user);
    await handOverTree(join(workDir, ".git"), user);
    const reset = await checkoutGit(
      ["-c", `checkout.workers=${String(CHECKOUT_WORKERS)}`, "reset", "--quiet", "--hard", "HEAD"],
      workDir,
    );
    if (reset.exitCode !== 0) return undefined;
    tree = head.stdout.trim();
    return tree;
  } finally {
    await rm(claimed, { recursive: true, force: true });
    await rm(fresh, { recursive: true, force: true });
    if (tree === undefined) await rm(workDir, { recursive: true, force: true });
  }
}

/** The branch a fresh clone checked out (`ref: refs/heads/main`), read before anything ran in it. */
async function headRef(workDir: string): Promise<string | undefined> {
  const head = await readFile(join(workDir, ".git", "HEAD"), "utf8").catch(() => "");
  return /^ref: (refs\/heads\/\S+)\s*$/.exec(head)?.[1];
}

/**
 * Inside the isolated sandbox owners and inodes read differently from here, so with git's full
 * stat check every file of the checkout would look changed to git there and be hashed again
 * (and, with a mirror, written again). Set after the clone: during it, second-granular stat
 * checks would make every file just written "racy" and hashed at once.
 */
async function settleStatCheck(workDir: string, git: Git): Promise<void> {
  await git(["config", "core.checkStat", "minimal"], workDir);
  // Handing the files to the sandbox user (a chown) changes their ctime after the index
  // recorded it: with ctime trusted, git inside would hash the whole checkout again.
  await git(["config", "core.trustCtime", "false"], workDir);
}

/**
 * A repository on this machine is shared as a worktree when commands run unisolated, and cloned
 * when they are isolated: a worktree's `.git` is its repository's, which would have to be
 * visible and writable inside, making the user's own repository the agent's to change.
 */
type Source =
  | { kind: "worktree"; path: string; display: string }
  | { kind: "local-clone"; path: string; display: string }
  | { kind: "remote"; url: string; display: string };

function resolveSource(opts: SandboxOptions, isolated: boolean): Source {
  const ref = classifyRepoRef(opts.repo, opts.githubServerUrl ? { serverUrl: opts.githubServerUrl } : {});
  if (ref.kind === "local") {
    const path = ref.path.startsWith("~") ? join(homedir(), ref.path.slice(1)) : resolve(ref.path);
    return isolated ? { kind: "local-clone", path, display: path } : { kind: "worktree", path, display: path };
  }
  return {
    kind: "remote",
    url: githubCloneUrl(ref.repo, opts.githubServerUrl),
    display: `${ref.repo.owner}/${ref.repo.name}`,
  };
}

async function assertDirectory(path: string): Promise<void> {
  const stats = await stat(path).catch(() => undefined);
  if (!stats) throw new RepoRefError(`The repository path ${path} does not exist`);
  if (!stats.isDirectory()) throw new RepoRefError(`The repository path ${path} is not a directory`);
}

/**
 * A run that made no commit (it failed, or changed nothing) leaves no empty branch in the user's
 * repository. Compare-and-delete: a branch that moved — the run's commit, or the user's own work
 * since — stays.
 */
async function removeUnusedBranch(repository: string, branch: { ref: string; at: string }): Promise<void> {
  await runProcess({
    argv: ["git", "update-ref", "-d", branch.ref, branch.at],
    cwd: repository,
    env: gitEnv(),
    timeout: 60_000,
  });
}

/** Removes the temp directory and, for worktrees, the source repository's registration of it. */
async function removeSandboxDir(base: string, source: Source): Promise<void> {
  if (source.kind === "worktree") {
    await runProcess({
      argv: ["git", "worktree", "remove", "--force", "--force", join(base, "work")],
      cwd: source.path,
      env: gitEnv(),
      timeout: 60_000,
    });
  }
  await rm(base, { recursive: true, force: true, maxRetries: 3 });
  if (source.kind === "worktree") {
    await runProcess({ argv: ["git", "worktree", "prune"], cwd: source.path, env: gitEnv(), timeout: 60_000 });
  }
}

function safeId(runId: string | undefined): string {
  const cleaned = (runId ?? "").replace(/[^A-Za-z0-9_-]/g, "").slice(0, 40);
  return cleaned !== "" ? cleaned : randomBytes(4).toString("hex");
}
