import { posix } from "node:path";
import type { ExecResult } from "../contracts/types.js";
import { diffCheckout, type CheckoutDiff } from "../sandbox/checkout-diff.js";
import { SANDBOX_NAME_LABEL } from "../sandbox/inventory.js";
import type { Sandbox } from "../sandbox/types.js";
import {
  describeError,
  InvalidInputError,
  SandboxBackendUnreachableError,
  SandboxNameTakenError,
  SandboxNotFoundError,
} from "../util/errors.js";
import { classifyRepoRef, isLocalPath } from "../util/github.js";
import { assertSandboxName, defaultSandboxName, sandboxBranch } from "./names.js";
import type { NamedSandboxInfo, NamedSandboxProvider } from "./provider.js";

export type NamedSandboxKind = NamedSandboxInfo["provider"];

/** Largest file written into or read out of a named sandbox in one call. */
export const MAX_TRANSFER_BYTES = 16 * 1024 * 1024;
/** Output kept of one command, per stream. */
export const MAX_EXEC_OUTPUT_BYTES = 1024 * 1024;
/** Longest a command may run (default 10 minutes). */
export const MAX_EXEC_TIMEOUT_SECONDS = 60 * 60;
export const DEFAULT_EXEC_TIMEOUT_SECONDS = 10 * 60;
/** Longest diff shown. */
export const MAX_DIFF_BYTES = 1024 * 1024;

export interface SandboxManagerOptions {
  providers: Partial<Record<NamedSandboxKind, NamedSandboxProvider>>;
  /** Where `create` makes a sandbox when not told. */
  defaultProvider: NamedSandboxKind;
  /**
   * Whether a repository may be a path on this machine: yes for the CLI and the MCP server over
   * stdio (the person who started them chose the machine), never for the MCP server over HTTP,
   * whose callers must not name the server's own files.
   */
  allowLocalRepositories: boolean;
  githubServerUrl?: string;
  /** Random suffix of default names (injected so tests name them). */
  random?: () => string;
}

export interface CreateSandboxRequest {
  repo: string;
  name?: string;
  provider?: NamedSandboxKind;
  image?: string;
}

export interface ExecRequest {
  argv: string[];
  /** Relative to the checkout. */
  cwd?: string;
  timeoutSeconds?: number;
  stdin?: string;
}

/**
 * Sandboxes that people (the CLI) and agents (the MCP server) make by name and drive one call at
 * a time: each a copy of a repository on a branch of its own (`harness/sandbox/<name>`), without
 * a network, found again by name. Every path is confined to the checkout, every transfer and
 * every output bounded, and what comes out of a sandbox is its own word: a diff is shown, never
 * built on, and `apply` takes the change through the same verified write path as a run.
 */
export class SandboxManager {
  constructor(private readonly options: SandboxManagerOptions) {}

  /** Providers this manager may use, in the order a name is looked up. */
  get kinds(): NamedSandboxKind[] {
    return this.providers().map((provider) => provider.kind);
  }

  private providers(): NamedSandboxProvider[] {
    return (["local", "docker"] as const).flatMap((kind) => this.options.providers[kind] ?? []);
  }

  async create(request: CreateSandboxRequest): Promise<NamedSandboxInfo> {
    const kind = request.provider ?? this.options.defaultProvider;
    const provider = this.options.providers[kind];
    if (!provider)
      throw new InvalidInputError(
        `The ${kind} sandbox is not available here; use ${this.kinds.join(" or ") || "another provider"}`,
      );
    const repo = this.checkRepo(request.repo);
    const name = request.name ?? defaultSandboxName(repo, this.options.random);
    assertSandboxName(name);
    // A Docker Engine that is down does not stop a local sandbox being made: names are looked up
    // in local sandboxes first, so a container of the same name there is shadowed, never touched.
    if ((await this.find(name)).found !== undefined)
      throw new SandboxNameTakenError(`A sandbox named ${name} already exists: choose another name, or delete it`);
    const branch = sandboxBranch(name);
    const sandbox = await provider.create({
      name,
      repo,
      branch,
      labels: { [SANDBOX_NAME_LABEL]: name },
      ...(request.image !== undefined ? { image: request.image } : {}),
      ...(this.options.githubServerUrl ? { githubServerUrl: this.options.githubServerUrl } : {}),
    });
    try {
      // Nothing has run in the checkout yet: its commit is the base diffs and apply measure from.
      await provider.rememberBase(sandbox, await sandbox.snapshot());
    } catch (error) {
      await provider.remove(name).catch(() => undefined);
      throw error;
    }
    const info = (await provider.list()).find((entry) => entry.name === name);
    return (
      info ?? {
        name,
        provider: kind,
        state: "running",
        repo,
        branch,
        createdAt: undefined,
        ...(request.image ? { image: request.image } : {}),
      }
    );
  }

  /** Every named sandbox; a provider that cannot answer is named in `unavailable`, not fatal. */
  async list(): Promise<{ sandboxes: NamedSandboxInfo[]; unavailable: string[] }> {
    const sandboxes: NamedSandboxInfo[] = [];
    const unavailable: string[] = [];
    for (const provider of this.providers()) {
      try {
        sandboxes.push(...(await provider.list()));
      } catch (error) {
        unavailable.push(`${provider.kind}: ${describeError(error)}`);
      }
    }
    return { sandboxes: sandboxes.sort((a, b) => a.name.localeCompare(b.name)), unavailable };
  }

  async exec(name: string, request: ExecRequest): Promise<ExecResult> {
    const argv = request.argv;
    if (!Array.isArray(argv) || argv.length === 0 || argv.some((arg) => typeof arg !== "string"))
      throw new InvalidInputError('A command is a non-empty list of strings (argv), e.g. ["npm", "test"]');
    const timeout = request.timeoutSeconds ?? DEFAULT_EXEC_TIMEOUT_SECONDS;
    if (!(timeout > 0) || timeout > MAX_EXEC_TIMEOUT_SECONDS)
      throw new InvalidInputError(`A timeout is 1 to ${String(MAX_EXEC_TIMEOUT_SECONDS)} seconds`);
    const { sandbox } = await this.open(name);
    return sandbox.exec({
      argv,
      cwd: this.inside(sandbox, request.cwd ?? "."),
      timeout: timeout * 1000,
      maxOutput: MAX_EXEC_OUTPUT_BYTES,
      ...(request.stdin !== undefined ? { stdin: request.stdin } : {}),
    });
  }

  /** A file's bytes, refused past `maxBytes` (at most `MAX_TRANSFER_BYTES`). */
  async readFile(name: string, path: string, maxBytes = MAX_TRANSFER_BYTES): Promise<Buffer> {
    const { sandbox } = await this.open(name);
    return sandbox.downloadBytes(this.relative(path), Math.min(maxBytes, MAX_TRANSFER_BYTES));
  }

  /** Copies a file out to a new file on this machine; returns its size. */
  async download(name: string, path: string, destination: string): Promise<number> {
    const { sandbox } = await this.open(name);
    return sandbox.downloadToFile(this.relative(path), destination, MAX_TRANSFER_BYTES);
  }

  async writeFile(name: string, path: string, content: string | Uint8Array): Promise<void> {
    const size = typeof content === "string" ? Buffer.byteLength(content, "utf8") : content.byteLength;
    if (size > MAX_TRANSFER_BYTES)
      throw new InvalidInputError(
        `${path} is ${size.toLocaleString("en-US")} bytes, over the ` +
          `${MAX_TRANSFER_BYTES.toLocaleString("en-US")}-byte limit of one transfer`,
      );
    const { sandbox } = await this.open(name);
    await sandbox.uploadFiles([{ path: this.relative(path), content }]);
  }

  /** What the sandbox changed since it was made, untracked files included. */
  async diff(name: string): Promise<CheckoutDiff> {
    const { sandbox, provider } = await this.open(name);
    const base = await provider.readBase(sandbox);
    if (!base) throw new InvalidInputError(`The sandbox ${name} does not know the commit it started from`);
    return diffCheckout((opts) => sandbox.exec(opts), sandbox.workDir, base, MAX_DIFF_BYTES);
  }

  async pause(name: string): Promise<void> {
    const { sandbox, provider } = await this.open(name);
    await sandbox.pause();
    provider.noteState?.(name, "paused");
  }

  async resume(name: string): Promise<void> {
    const { sandbox, provider } = await this.open(name);
    await sandbox.resume();
    provider.noteState?.(name, "running");
  }

  /** Deletes the sandbox and everything it ran, whatever its state. */
  async delete(name: string): Promise<void> {
    assertSandboxName(name);
    let unreachable: SandboxBackendUnreachableError | undefined;
    for (const provider of this.providers()) {
      try {
        if (await provider.remove(name)) return;
      } catch (error) {
        if (!(error instanceof SandboxBackendUnreachableError)) throw error;
        unreachable ??= error;
      }
    }
    throw unreachable ?? this.notFound(name);
  }

  /** The sandbox, its base commit and provider, for `apply`. */
  async open(name: string): Promise<{ sandbox: Sandbox; provider: NamedSandboxProvider }> {
    assertSandboxName(name);
    const { found, unreachable } = await this.find(name);
    if (found) return found;
    // Not here, and a provider that might hold it could not be asked: say that, not "no such sandbox".
    throw unreachable ?? this.notFound(name);
  }

  /** Tears down what lives only as long as this process (local sandboxes); Docker's stay. */
  async close(): Promise<void> {
    await Promise.all(this.providers().map((provider) => provider.close()));
  }

  private async find(name: string): Promise<{
    found?: { sandbox: Sandbox; provider: NamedSandboxProvider };
    unreachable?: SandboxBackendUnreachableError;
  }> {
    let unreachable: SandboxBackendUnreachableError | undefined;
    for (const provider of this.providers()) {
      try {
        const sandbox = await provider.open(name);
        if (sandbox) return { found: { sandbox, provider } };
      } catch (error) {
        if (!(error instanceof SandboxBackendUnreachableError)) throw error;
        unreachable ??= error;
      }
    }
    return unreachable ? { unreachable } : {};
  }

  private notFound(name: string): SandboxNotFoundError {
    return new SandboxNotFoundError(`No sandbox is named ${name}: \`harness sandboxes list\` shows them`);
  }

  private checkRepo(repo: string): string {
    if (typeof repo !== "string" || repo.trim() === "" || repo.length > 4096)
      throw new InvalidInputError("Name a repository: a path on this machine, owner/name, or an https URL");
    if (isLocalPath(repo)) {
      if (!this.options.allowLocalRepositories)
        throw new InvalidInputError(
          "This server does not make sandboxes from paths on its machine: name a GitHub repository (owner/name)",
        );
      return repo;
    }
    classifyRepoRef(repo, this.options.githubServerUrl ? { serverUrl: this.options.githubServerUrl } : {});
    return repo;
  }

  /** A path relative to the checkout, as the port's file calls take it (confined there by each adapter). */
  private relative(path: string): string {
    if (typeof path !== "string" || path === "" || path.includes("\0"))
      throw new InvalidInputError("A path in the sandbox is a non-empty string, relative to its checkout");
    return path;
  }

  /** A working directory as an absolute path inside the checkout (the adapter confines it again). */
  private inside(sandbox: Sandbox, path: string): string {
    return posix.resolve(sandbox.workDir, this.relative(path));
  }
}
