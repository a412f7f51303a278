/** The sandbox providers: the local one (bubblewrap), Daytona, and a Docker Engine. */
export type SandboxKind = "local" | "daytona" | "docker";

import type { ExecOptions, ExecResult } from "../contracts/types.js";
import { InvalidInputError } from "../util/errors.js";

/**
 * The Sandbox port: an isolated working copy of a repository where a run's commands execute.
 * Adapters: `local/sandbox.ts` (a git worktree or clone in a temp directory) and
 * `daytona/sandbox.ts`.
 */
export interface Sandbox {
  /** Identifies the sandbox to operators and the orphan reaper (Daytona id, or temp dir name). */
  readonly id: string;

  /** Absolute path to the sandbox working directory (the repository's checkout). */
  readonly workDir: string;

  /** Execute a command inside the sandbox. `cwd` must be inside `workDir`. */
  exec(opts: ExecOptions): Promise<ExecResult>;

  /**
   * Write files into the sandbox (text as UTF-8, or bytes as they are); paths are relative to
   * `workDir` and must stay inside it.
   */
  uploadFiles(files: Array<{ path: string; content: string | Uint8Array }>): Promise<void>;

  /** Read a UTF-8 file from the sandbox; the path is relative to `workDir` and confined to it. */
  downloadFile(path: string): Promise<string>;

  /**
   * Read a file the run produced, as bytes, refusing one larger than `maxBytes` before reading
   * it whole. The path is relative to `workDir` and confined to it; the content is untrusted.
   */
  downloadBytes(path: string, maxBytes: number): Promise<Buffer>;

  /**
   * Copy a file the run produced to `destination` on the host, a new file this call creates
   * (mode 0600), counting bytes as they arrive and stopping with an error past `maxBytes`: one
   * read, never a size check followed by a second read, and never the whole file in memory.
   * The path is relative to `workDir` and confined to it; the content is untrusted. On error no
   * partial copy is left. Resolves to the number of bytes copied.
   */
  downloadToFile(path: string, destination: string, maxBytes: number): Promise<number>;

  /**
   * Write a private file (mode 0600, in a 0700 folder) outside `workDir`, for what commands in
   * the sandbox must read but the checkout must never hold (an agent's prompt): nothing the
   * repository runs finds it by searching the checkout, and it cannot end up in a commit.
   * `name` is a plain file name (see `assertScratchFileName`); writing it again replaces it.
   * Returns its absolute path as commands in the sandbox see it. Commands may only be able to
   * read it: remove it with `removeScratchFile`, not from inside.
   */
  writeScratchFile(name: string, content: string): Promise<string>;

  /** Remove a file `writeScratchFile` wrote; one that is already gone is no error. */
  removeScratchFile(name: string): Promise<void>;

  /**
   * Records the checkout as it stands as a git commit (not a Daytona image snapshot) on the
   * sandbox's branch (`git add --all`, then
   * a commit by the harness, inside the sandbox, with the checkout's hooks, filters, fsmonitor and
   * credential helpers off) and resolves to that commit's id (40 or 64 hex digits, checked, since
   * the sandbox says it). When nothing changed since the last snapshot, no commit is made and the
   * current commit's id is the answer. The write path's own commit is the same step
   * (`sandbox/checkout-commit.ts`). Refused with `SandboxPausedError` while paused.
   */
  snapshot(message?: string): Promise<string>;

  /**
   * Stops the sandbox's commands where they are, until `resume`. While paused, `exec` and
   * `snapshot` are refused with `SandboxPausedError` (and file transfers too where the machine
   * itself is stopped). Pausing a paused sandbox is no error. What survives a pause is the
   * adapter's to say: the local sandbox freezes its processes, Daytona stops the machine (files
   * kept, processes and memory lost).
   */
  pause(): Promise<void>;

  /** Lets a paused sandbox run again; resuming one that is not paused is no error. */
  resume(): Promise<void>;

  /**
   * Destroy the sandbox and clean up all its resources, a paused one included (nothing it ran is
   * left, frozen or not). Idempotent; never throws.
   */
  teardown(): Promise<void>;

  /**
   * Where commands in this sandbox reach Harness's model gateway (`http://127.0.0.1:3129` inside
   * an isolated sandbox without a network, the host's loopback address, or Harness's public
   * address for a remote sandbox); undefined when the run was given no gateway.
   */
  readonly modelGatewayUrl?: string | undefined;

  /**
   * Set when the run's repository is one on this machine that the sandbox cloned rather than
   * shares (the isolated local sandbox): its path, and its `origin` push address as the host
   * read it before any command ran. The run's result reaches it only through the write path.
   */
  readonly clonedFrom?: { readonly path: string; readonly origin: string | undefined } | undefined;
}

/** Longest scratch file name accepted. */
export const MAX_SCRATCH_NAME_LENGTH = 128;
/** Largest scratch file accepted: far above any prompt, far below what would strain a sandbox's disk. */
export const MAX_SCRATCH_FILE_BYTES = 8 * 1024 * 1024;

/**
 * Checks a scratch file's name and content before anything is written: a plain name (letters,
 * digits, `.`, `_`, `-`; not starting with `.`; no `..`) can never address another folder,
 * whatever the adapter joins it to. Shared by every adapter so they refuse the same inputs.
 */
export function assertScratchFileName(name: string): void {
  if (typeof name !== "string" || name.length === 0 || name.length > MAX_SCRATCH_NAME_LENGTH) {
    throw new InvalidInputError(`A scratch file name must be 1 to ${String(MAX_SCRATCH_NAME_LENGTH)} characters long`);
  }
  if (!/^[A-Za-z0-9_-][A-Za-z0-9._-]*$/.test(name) || name.includes("..")) {
    throw new InvalidInputError(
      `"${name}" is not a plain file name: ` +
        `use letters, digits, '.', '_' and '-', not starting with '.' and without '..'`,
    );
  }
}

/** Refuses content over `MAX_SCRATCH_FILE_BYTES` before any of it crosses into a sandbox. */
export function assertScratchFileContent(content: string): void {
  const bytes = Buffer.byteLength(content, "utf8");
  if (bytes > MAX_SCRATCH_FILE_BYTES) {
    throw new InvalidInputError(
      `A scratch file of ${bytes.toLocaleString("en-US")} bytes is over the ` +
        `${MAX_SCRATCH_FILE_BYTES.toLocaleString("en-US")}-byte limit`,
    );
  }
}

/** Settings for a Daytona sandbox; ignored by the local sandbox. */
export interface DaytonaOptions {
  /** Daytona API key (default: the `DAYTONA_API_KEY` env var). */
  apiKey?: string;
  /** Daytona API URL without a trailing slash (default: `https://app.daytona.io/api`). */
  apiUrl?: string;
  /** Daytona target region (default: the `DAYTONA_TARGET` env var, else `us`). */
  target?: string;
  /** Snapshot the sandbox is created from (default: `daytona-medium`). */
  snapshot?: string;
  /** Resource limits, applied when the snapshot supports resizing: vCPUs, GiB, GiB. */
  resources?: { cpu?: number | undefined; memory?: number | undefined; disk?: number | undefined };
  /**
   * Credentials held as Daytona organisation secrets: env var name → secret name. The sandbox
   * then holds only a placeholder and Daytona substitutes the real value on outbound requests,
   * so the harness never sends that credential's value into the sandbox.
   */
  secrets?: Record<string, string>;
  /** Minutes of inactivity before Daytona stops the sandbox (default 75, above the 60 min run budget). */
  autoStopMinutes?: number;
  /** Clone depth: 1 by default (the host fetches the base itself); 0 for the full history. */
  cloneDepth?: number;
  /** Seconds to wait for the sandbox to start (default 60). */
  startTimeoutSeconds?: number;
  /**
   * Debugging only: run commands with Daytona's one-shot `executeCommand` (stdout and stderr
   * merged). Default: the `DAYTONA_SIMPLE_EXEC=1` env var.
   */
  simpleExec?: boolean;
}

/**
 * How the local sandbox contains its commands. `namespaces`: every command runs under
 * bubblewrap in its own user, PID, mount and IPC namespaces (see isolation.ts), with only the
 * checkout and a fresh HOME writable; what the App uses. `none`: a directory and a minimal
 * environment only, for a developer's own machine and repository (the CLI's worktree mode).
 */
export interface LocalIsolation {
  mode: "namespaces" | "none";
  /** `open` (default): the host's network; `none`: loopback only. */
  network?: "open" | "none";
  /** Host paths the commands may read (where an operator installed agent CLIs, say). */
  readOnlyPaths?: readonly string[];
  /** Where bubblewrap is, when not on the harness's PATH or in /usr/bin. */
  bwrapPath?: string;
  /**
   * HARNESS_SANDBOX_USER: the host user (a name, or uid[:gid]) commands run as when the harness
   * is root; by default `harness-sandbox`, else uid and gid 99999. Never root.
   */
  sandboxUser?: string;
}

/**
 * The network a run's commands get. `open`: whatever the sandbox has; `none`: nothing beyond
 * itself; `allowlist`: only the listed domains (`example.com`, `*.example.com`) and CIDRs.
 * A sandbox that cannot enforce the mode it is given refuses to start.
 */
export type NetworkPolicy =
  | { mode: "open" }
  | { mode: "none" }
  | {
      mode: "allowlist";
      /**
       * Kept by who wrote them: the operator's entries (with the agent's model API) may open
       * internal addresses, the repository's never do.
       */
      allow: { operator: readonly string[]; repository: readonly string[] };
    };

/** One run's use of a warm mirror of its repository (see `local/repo-cache.ts`). */
export interface MirrorLease {
  /** The bare mirror, named by `git clone --reference` (git reads its objects as alternates). */
  readonly path: string;
  /** Fetches what is new into the mirror, off the run's critical path. */
  refresh(token: string | undefined): void;
  /** Resolves once no refresh of this mirror is under way. */
  refreshed(): Promise<void>;
  /** The clone with this mirror failed where one without it worked: rebuild it. */
  discard(): void;
  /** The checkout that used the mirror is gone. */
  release(): void;
}

/** Warm mirrors of repositories, per scope (an installation); none is shared across scopes. */
export interface RepositoryMirrors {
  /**
   * A mirror of the repository for `scope`, keyed by its GitHub id (a rename or transfer keeps
   * it; a new repository under an old name never gets it), fetched from `url`; or undefined to
   * clone without one.
   */
  lease(
    scope: string,
    repository: { id: string; url: string },
    token: string | undefined,
  ): Promise<MirrorLease | undefined>;
  /**
   * Resolves once no refresh of that mirror is under way. A refresh fetches with the token of the
   * run that leased it, so that token must not be revoked before this.
   */
  refreshed?(scope: string, repositoryId: string): Promise<void>;
}

export interface SandboxOptions {
  /**
   * Source repository: a local path (the local sandbox makes a worktree of it), or a GitHub
   * reference (`owner/name`, an https or SSH URL) that is cloned.
   */
  repo: string;
  /** Branch to create (or check out, when it already exists) for this run. */
  branch: string;
  /** Per-operation timeout for the sandbox's own git work, in ms (default 600_000 = 10 min). */
  operationTimeout?: number;
  /** The run's network (default open). */
  network?: NetworkPolicy;
  /** How the local sandbox isolates commands (ignored by Daytona). Default: `{ mode: "none" }`. */
  localIsolation?: LocalIsolation;
  /** Daytona-specific options (ignored by the local sandbox). */
  daytona?: DaytonaOptions;
  /**
   * The image a Docker sandbox starts from, over the provider's own (a repository's
   * `sandbox.image`); pulled when the engine does not have it. Ignored by the other providers.
   */
  dockerImage?: string;
  /**
   * Warm mirrors the local sandbox clones with and the Docker sandbox's host streams into its
   * container, where a spare checkout written from them waits for the repository's next run
   * (ignored by Daytona and by worktree mode), and the scope whose mirrors and spares this run
   * may use: its installation, never another's.
   */
  repoCache?: { mirrors: RepositoryMirrors; scope: string; repositoryId: string };
  /**
   * Read-only GitHub token for the clone. Handed to git only through an environment-scoped
   * credential for the one git process that needs it; never written to disk or a remote URL.
   * No write credential is ever given to a sandbox: the harness pushes from the host.
   */
  githubToken?: string;
  /** Web URL of a GitHub Enterprise Server, when the repository lives on one. */
  githubServerUrl?: string;
  /**
   * Harness's model gateway: `url` where a command can reach it over the network it has (the
   * host's loopback for a local sandbox that shares the host's network, Harness's public
   * address for Daytona), and `socketPath`, its Unix socket, relayed into an isolated local
   * sandbox whose network has only loopback.
   */
  modelGateway?: { url: string; socketPath?: string };
  /** Run id, used to name the sandbox so operators can match it to a run. */
  runId?: string;
  /** Labels that identify the sandbox's owner (app, run, repo, issue) for orphan reaping. */
  labels?: Record<string, string>;
  /**
   * This run (same `runId`) may have been attempted before by a worker that died, leaving its
   * sandbox behind: find it and delete it. The app sets it, because its runs are retried; a
   * CLI run never is, and skips the lookup.
   */
  replaceEarlierAttempts?: boolean;
  /**
   * The branch already exists on the remote (follow-up commits to a pull request): check it
   * out instead of creating it. The local sandbox detects this itself.
   */
  checkoutExisting?: boolean;
}

/** Default per-operation timeout: 10 minutes. */
export const DEFAULT_OPERATION_TIMEOUT = 600_000;

/** Default per-run timeout: 60 minutes. */
export const DEFAULT_RUN_TIMEOUT = 3_600_000;
