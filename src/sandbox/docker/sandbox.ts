import { randomBytes } from "node:crypto";
import { chmod, chown, mkdir, mkdtemp, open, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { basename, dirname, join, posix } from "node:path";
import { performance } from "node:perf_hooks";
import { StringDecoder } from "node:string_decoder";
import type Docker from "dockerode";
import type { ExecOptions, ExecResult } from "../../contracts/types.js";
import { snapshotCheckout } from "../checkout-commit.js";
import {
  describeError,
  InvalidInputError,
  PathConfinementError,
  SandboxError,
  SandboxFileTooLargeError,
  SandboxNameTakenError,
  SandboxPausedError,
} from "../../util/errors.js";
import { assertPathConfined } from "../../util/path.js";
import { createRedactor } from "../../util/redact.js";
import { MAX_OUTPUT_BYTES } from "../../util/sanitize.js";
import { TailBuffer } from "../../util/tail-buffer.js";
import { allowlistOf } from "../egress/allowlist.js";
import {
  forwarderCommand,
  FORWARDER_SOURCE,
  GATEWAY_PORT,
  PROXY_PORT,
  proxyEnvironment,
  type Relay,
} from "../egress/forwarder.js";
import { startEgressProxy, type EgressProxy } from "../egress/proxy.js";
import { EXIT_CANCELLED, EXIT_TIMED_OUT } from "../process.js";
import {
  assertScratchFileContent,
  assertScratchFileName,
  DEFAULT_OPERATION_TIMEOUT,
  type Sandbox,
  type SandboxOptions,
} from "../types.js";
import { validateExecOptions } from "../validate.js";
import { dockerClient, dockerHost, engineMessage, statusOf, translateDockerError } from "./client.js";
import {
  CONTAINER_PATH,
  containerSpec,
  EXEC_STATE_DIR,
  HOME_DIR,
  RELAY_DIR,
  SCRATCH_DIR,
  VOLUME,
  WORK_DIR,
} from "./container-spec.js";
import { hostGid, remappedIds } from "./user-namespaces.js";
import { endProcessesOf, runInContainer } from "./exec.js";
import { CommandLauncher } from "./launcher.js";
import { createContainerPulling } from "./image-pull.js";
import {
  DEFAULT_CPUS,
  DEFAULT_MEMORY_BYTES,
  DEFAULT_NODE_PATH,
  DEFAULT_PIDS_LIMIT,
  DEFAULT_SANDBOX_GID,
  DEFAULT_SANDBOX_UID,
  DEFAULT_TMPFS_BYTES,
  type DockerOptions,
} from "./options.js";
import { assertValidBranchName } from "../branch-name.js";
import { prepareCheckout, resolveSource, tarStream } from "./checkout.js";
import { tarArchive } from "./tar.js";

import {
  DOCKER_APP_LABEL,
  DOCKER_BRANCH_LABEL,
  DOCKER_REPO_LABEL,
  DOCKER_RUN_LABEL,
  DOCKER_USER_LABEL,
  DOCKER_VOLUME_LABEL,
} from "./labels.js";
import { ownedVolume, removeQuietly } from "./spare-container.js";
import { startWarmCheckout, type WarmCheckout } from "./warm-checkout.js";

export {
  DOCKER_APP_LABEL,
  DOCKER_BRANCH_LABEL,
  DOCKER_REPO_LABEL,
  DOCKER_RUN_LABEL,
  DOCKER_USER_LABEL,
} from "./labels.js";
/** Prefix of every container name this provider makes. */
export const DOCKER_NAME_PREFIX = "harness-";

/** The relay's readiness mark: the forwarder starts its command only once it listens. */
const RELAY_READY = `${EXEC_STATE_DIR}/relay-ready`;
const RELAY_POLL_MS = 25;
/** Commands the harness itself runs in the container (checks, reads, writes). */
const HOUSEKEEPING_TIMEOUT_MS = 120_000;
/** Launchers in a row that never said they were ready before the sandbox stops asking for one. */
const MAX_LAUNCH_FAILURES = 3;
/** What the launcher can export: the names the exec options' check lets through. */
const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

/**
 * A sandbox in a container on a Docker Engine. The host prepares the checkout (clones it, with
 * the read-only token only in that one host git process's environment) and streams it into the
 * container's own volume as a tar owned by the container's user: nothing is bind-mounted from
 * the host but the folders of the run's own sockets, and the container never sees a token.
 * Commands run as an unprivileged uid (started by a long-lived launcher of that uid in the
 * container, `launcher.ts`, or else each by the engine's exec API), with no capabilities, a
 * read-only root file system, the engine's default seccomp profile and limits on memory, CPU
 * and processes; nothing a command starts outlives it (once no other command is under way,
 * whatever is left of that uid is ended), as nothing outlives a command of the local sandbox.
 * Without a network (none, or an allowlist), the container has none at all and reaches the
 * model gateway and the egress proxy through a relay inside it to their Unix sockets, as the
 * isolated local sandbox does (which needs node in the image).
 *
 * With the installation's warm mirrors (`opts.repoCache`, a repository from GitHub) the host
 * clones only what the mirror lacks, and a large repository's next run takes over the spare
 * container written for it in the background (`warm-checkout.ts`, `spare-container.ts`): its
 * own new container mounts the spare's volume, and only what changed since is streamed in.
 */
export async function createDockerSandbox(opts: SandboxOptions, docker: DockerOptions): Promise<DockerSandbox> {
  const host = dockerHost(docker.host);
  const client = dockerClient(host);
  const uid = docker.uid ?? DEFAULT_SANDBOX_UID;
  const gid = docker.gid ?? DEFAULT_SANDBOX_GID;
  if (uid === 0 || gid === 0) throw new InvalidInputError("The Docker sandbox's user must not be root (uid or gid 0)");
  // The container's own processes: never the commands' uid (see containerSpec).
  const initUid = uid + 1;
  const network = opts.network ?? { mode: "open" };
  const allowlist = allowlistOf(network);
  await assertValidBranchName(opts.branch);
  const source = resolveSource(opts);
  const redactToken = createRedactor([opts.githubToken]);
  const operationTimeout = opts.operationTimeout ?? DEFAULT_OPERATION_TIMEOUT;
  const name = docker.containerName ?? `${DOCKER_NAME_PREFIX}${safeId(opts.runId)}-${randomBytes(4).toString("hex")}`;
  // The run's own choice (a repository's `sandbox.image`) over the operator's.
  const image = opts.dockerImage ?? docker.image;

  // The run's sockets and the host's copy of the checkout live here until the container has them.
  const base = await mkdtemp(join(tmpdir(), `harness-docker-${safeId(opts.runId)}-`));
  let egress: EgressProxy | undefined;
  let container: Docker.Container | undefined;
  let prepared: Promise<unknown> | undefined;
  let warm: WarmCheckout | undefined;
  const limits = {
    memoryBytes: docker.memoryBytes ?? DEFAULT_MEMORY_BYTES,
    cpus: docker.cpus ?? DEFAULT_CPUS,
    pidsLimit: docker.pidsLimit ?? DEFAULT_PIDS_LIMIT,
    tmpfsBytes: docker.tmpfsBytes ?? DEFAULT_TMPFS_BYTES,
  };
  const cleanUp = async (): Promise<void> => {
    await container?.remove({ force: true, v: true }).catch(() => undefined);
    // The clone may still be writing into base.
    await prepared?.catch(() => undefined);
    await warm?.abandon();
    await egress?.close().catch(() => undefined);
    await rm(base, { recursive: true, force: true, maxRetries: 3 });
  };
  try {
    // Looked up while the checkout is prepared, so a retry costs no extra wait.
    const earlier =
      opts.replaceEarlierAttempts && opts.runId
        ? removeEarlierAttempts(client, opts.runId).catch(() => undefined)
        : Promise.resolve();
    if (source.kind === "remote" && opts.repoCache && !docker.containerName) {
      warm = await startWarmCheckout({
        client,
        host,
        source,
        opts,
        repoCache: opts.repoCache,
        image,
        uid,
        gid,
        limits,
        dir: base,
        timeout: operationTimeout,
        redact: redactToken,
      });
    }
    const preparing = warm
      ? undefined
      : prepareCheckout(source, join(base, "checkout"), opts, operationTimeout, redactToken);
    prepared = preparing;
    // Awaited below or in cleanUp: never an unhandled rejection when creating the container failed first.
    preparing?.catch(() => undefined);

    const relays: Relay[] = [];
    const socketBinds: Array<{ host: string; container: string }> = [];
    const offline = network.mode !== "open";
    let proxy: Relay | undefined;
    if (offline && (allowlist || opts.modelGateway?.socketPath)) {
      const relayDir = join(base, "relay");
      // On an engine that remaps user namespaces the container's group is another gid on the host.
      const sharedGid = hostGid(gid, await remappedIds(client, host));
      await mkdir(relayDir, { mode: 0o750 });
      await writeFile(join(relayDir, "forwarder.mjs"), FORWARDER_SOURCE, { mode: 0o640 });
      await shareWithContainer(relayDir, sharedGid, 0o750);
      await shareWithContainer(join(relayDir, "forwarder.mjs"), sharedGid, 0o640);
      socketBinds.push({ host: relayDir, container: `${RELAY_DIR}/relay` });
      if (allowlist) {
        const socketPath = join(relayDir, "proxy.sock");
        egress = await startEgressProxy({ socketPath, allowlist });
        // Connecting to a Unix socket takes write permission on it: the container's group gets it.
        await shareWithContainer(socketPath, sharedGid, 0o660);
        proxy = { port: PROXY_PORT, socketPath: `${RELAY_DIR}/relay/proxy.sock` };
      }
      const gatewaySocket = opts.modelGateway?.socketPath;
      if (gatewaySocket) {
        socketBinds.push({ host: dirname(gatewaySocket), container: `${RELAY_DIR}/gateway` });
        relays.push({ port: GATEWAY_PORT, socketPath: `${RELAY_DIR}/gateway/${basename(gatewaySocket)}` });
      }
    }
    const relayed = proxy !== undefined || relays.length > 0;
    const keepAlive = ["sleep", "infinity"];
    const cmd = relayed
      ? forwarderCommand({
          forwarderPath: `${RELAY_DIR}/relay/forwarder.mjs`,
          ...(proxy ? { proxy } : {}),
          relays,
          argv: ["sh", "-c", `: >${RELAY_READY} && exec sleep infinity`],
          nodePath: docker.nodePath ?? DEFAULT_NODE_PATH,
        })
      : keepAlive;

    const volume = warm?.volume;
    const labels = {
      ...opts.labels,
      [DOCKER_APP_LABEL.key]: DOCKER_APP_LABEL.value,
      [DOCKER_REPO_LABEL]: source.display,
      [DOCKER_BRANCH_LABEL]: opts.branch,
      [DOCKER_USER_LABEL]: `${String(uid)}:${String(gid)}`,
      ...(opts.runId ? { [DOCKER_RUN_LABEL]: opts.runId } : {}),
      // The spare's volume is this run's now: removed with its container.
      ...(volume !== undefined ? { [DOCKER_VOLUME_LABEL]: volume } : {}),
    };
    const spec = containerSpec({
      name,
      image,
      labels,
      uid,
      gid,
      initUid,
      ...limits,
      network: offline ? "none" : "open",
      openNetwork: docker.openNetwork ?? "bridge",
      socketBinds,
      cmd,
      ...(volume !== undefined ? { volume } : {}),
    });
    await earlier;
    try {
      container = await createContainerPulling(client, spec, { host, image, timeoutMs: operationTimeout });
    } catch (error) {
      if (docker.containerName && /already in use/i.test(describeError(error)))
        throw new SandboxNameTakenError(
          `A container named ${docker.containerName} already exists on the Docker Engine at ${host}: ` +
            `choose another name, or delete that sandbox first`,
        );
      throw error;
    }
    try {
      await container.start();
    } catch (error) {
      throw translateDockerError(error, { host, during: "starting the sandbox's container", image });
    }
    let clonedFrom: { path: string; origin: string | undefined } | undefined;
    try {
      // The scratch folder: the harness's (uid 0 of the container, which holds no capability),
      // readable by the sandbox's group, so commands read what is put there but change nothing.
      // A spare's volume has it already, as empty.
      if (volume === undefined)
        await container.putArchive(tarArchive([{ name: "scratch", type: "directory", mode: 0o750, uid: 0, gid }]), {
          path: VOLUME,
        });
    } catch (error) {
      throw translateDockerError(error, { host, during: "copying the checkout into the sandbox" });
    }
    if (warm) {
      await warm.writeInto(container);
    } else if (preparing) {
      const checkout = await preparing;
      clonedFrom = checkout.clonedFrom;
      try {
        await container.putArchive(tarStream(dirname(checkout.path), basename(checkout.path), WORK_NAME, uid, gid), {
          path: VOLUME,
        });
      } catch (error) {
        throw translateDockerError(error, { host, during: "copying the checkout into the sandbox" });
      }
      await rm(checkout.path, { recursive: true, force: true, maxRetries: 3 });
    }
    // Without relayed sockets nothing of the sandbox is left on the host: one that outlives this
    // process (a named sandbox) leaves no folder behind.
    if (!relayed) await rm(base, { recursive: true, force: true, maxRetries: 3 });
    const sandbox = new DockerSandbox(client, container, host, {
      name,
      uid,
      gid,
      proxied: proxy !== undefined,
      branch: opts.branch,
      modelGatewayUrl:
        relays.length > 0 ? `http://127.0.0.1:${String(GATEWAY_PORT)}` : offline ? undefined : opts.modelGateway?.url,
      clonedFrom,
      volume,
      release: async () => {
        await egress?.close().catch(() => undefined);
        await rm(base, { recursive: true, force: true, maxRetries: 3 }).catch(() => undefined);
      },
    });
    if (relayed) await sandbox.waitForRelay(docker.startTimeoutMs ?? 10_000, docker.nodePath ?? DEFAULT_NODE_PATH);
    // While this run's agent works: the spare for the next run of this repository.
    warm?.ready();
    return sandbox;
  } catch (error) {
    await cleanUp();
    throw error;
  }
}

/**
 * A sandbox this provider made earlier, possibly in another process, found again by its
 * container name: running or paused as the engine has it. Only a sandbox made without a relay
 * can be opened again (the relay's sockets belonged to the process that made it); resolves to
 * undefined when the engine has no such container of this app.
 */
export async function openDockerSandbox(
  containerName: string,
  docker: Pick<DockerOptions, "host">,
): Promise<DockerSandbox | undefined> {
  const host = dockerHost(docker.host);
  const client = dockerClient(host);
  const container = client.getContainer(containerName);
  let info: Docker.ContainerInspectInfo;
  try {
    info = await container.inspect();
  } catch (error) {
    if (statusOf(error) === 404) return undefined;
    throw translateDockerError(error, { host, during: `finding the sandbox ${containerName}` });
  }
  const labels = info.Config.Labels;
  if (labels[DOCKER_APP_LABEL.key] !== DOCKER_APP_LABEL.value) return undefined;
  const [uid, gid] = (labels[DOCKER_USER_LABEL] ?? "").split(":").map(Number);
  if (uid === undefined || gid === undefined || !(uid > 0) || !(gid > 0))
    throw new SandboxError(`The container ${containerName} does not run as an unprivileged user: delete it`);
  if (!info.State.Running)
    throw new SandboxError(
      `The sandbox ${containerName} has stopped (exit ${String(info.State.ExitCode)}): ` +
        `delete it and create it again`,
    );
  return new DockerSandbox(client, container, host, {
    name: containerName,
    uid,
    gid,
    proxied: false,
    branch: labels[DOCKER_BRANCH_LABEL] ?? "",
    modelGatewayUrl: undefined,
    clonedFrom: undefined,
    volume: ownedVolume(labels),
    release: () => Promise.resolve(),
    paused: info.State.Paused,
  });
}

/** Name of the checkout inside the volume (so WORK_DIR is VOLUME/WORK_NAME). */
const WORK_NAME = posix.basename(WORK_DIR);

interface SandboxState {
  name: string;
  uid: number;
  gid: number;
  proxied: boolean;
  branch: string;
  modelGatewayUrl: string | undefined;
  clonedFrom: { path: string; origin: string | undefined } | undefined;
  /** The named volume (a spare's, taken) the container mounts: removed with it. */
  volume: string | undefined;
  /** Frees what the sandbox holds on the host (the egress proxy, its socket folder). */
  release: () => Promise<void>;
  /** Opened again while the engine had it paused. */
  paused?: boolean;
}

export class DockerSandbox implements Sandbox {
  readonly id: string;
  readonly workDir = WORK_DIR;
  readonly modelGatewayUrl: string | undefined;
  readonly clonedFrom: { readonly path: string; readonly origin: string | undefined } | undefined;
  private tornDown = false;
  private paused = false;
  private readonly user: string;
  /** Commands under way, the harness's own among them. */
  private running = 0;
  /** A command of the run's ended since the last sweep: what it left may still be running. */
  private leftovers = false;
  /** The sweep of what commands left, which every new command waits for. */
  private sweeping: Promise<void> = Promise.resolve();
  /** The long-lived launcher that starts commands without an engine exec each (`launcher.ts`). */
  private launcher: CommandLauncher | undefined;
  private launching: Promise<CommandLauncher | undefined> | undefined;
  private launchFailures = 0;

  constructor(
    private readonly docker: Docker,
    private readonly container: Docker.Container,
    private readonly host: string,
    private readonly state: SandboxState,
  ) {
    this.id = state.name;
    this.modelGatewayUrl = state.modelGatewayUrl;
    this.clonedFrom = state.clonedFrom;
    this.user = `${String(state.uid)}:${String(state.gid)}`;
    this.paused = state.paused === true;
  }

  /** The branch the checkout was made on. */
  get branch(): string {
    return this.state.branch;
  }

  async exec(execOpts: ExecOptions): Promise<ExecResult> {
    this.assertUsable();
    const cwd = validateExecOptions(execOpts, WORK_DIR);
    const maxOutput = execOpts.maxOutput ?? MAX_OUTPUT_BYTES;
    const stdout = new TailBuffer(maxOutput);
    const stderr = new TailBuffer(maxOutput);
    const decoders = { stdout: new StringDecoder("utf8"), stderr: new StringDecoder("utf8") };
    const started = performance.now();
    const sink =
      (name: "stdout" | "stderr", buffer: TailBuffer) =>
      (chunk: Buffer): void => {
        buffer.push(chunk);
        if (execOpts.onOutput) {
          const text = decoders[name].write(chunk);
          if (text !== "") execOpts.onOutput(name, text);
        }
      };
    const exit = await this.run({
      endsLeftovers: true,
      argv: execOpts.argv,
      confineTo: WORK_DIR,
      cwd,
      env: { ...this.baseEnv(), ...execOpts.env },
      timeout: execOpts.timeout,
      stdin: execOpts.stdin,
      signal: execOpts.signal,
      stdout: sink("stdout", stdout),
      stderr: sink("stderr", stderr),
    });
    return {
      exitCode: exit.timedOut ? EXIT_TIMED_OUT : exit.cancelled ? EXIT_CANCELLED : exit.exitCode,
      stdout: stdout.text(),
      stderr: stderr.text(),
      durationMs: performance.now() - started,
      ...(exit.timedOut ? { timedOut: true } : {}),
      ...(exit.cancelled ? { cancelled: true } : {}),
      ...(stdout.truncated || stderr.truncated ? { truncated: true } : {}),
    };
  }

  async uploadFiles(files: Array<{ path: string; content: string | Uint8Array }>): Promise<void> {
    this.assertUsable();
    const targets = files.map((file) => ({ target: assertPathConfined(file.path, WORK_DIR), content: file.content }));
    if (targets.length === 0) return;
    // Every path checked inside before any is written, so a bad batch writes nothing. Written as
    // the sandbox's user: a symlink a command planted leads only where that user may write anyway.
    const checked = await this.housekeeping([
      "sh",
      "-c",
      CHECK_UPLOADS,
      "sh",
      WORK_DIR,
      ...targets.map((t) => t.target),
    ]);
    if (checked.exitCode !== 0) throw new PathConfinementError(checked.stderr.trim() || "an upload path is refused");
    for (const { target, content } of targets) {
      const written = await this.housekeeping(["sh", "-c", WRITE_FILE, "sh", WORK_DIR, target], content);
      if (written.exitCode !== 0)
        throw new SandboxError(`Could not write ${target} in the sandbox: ${written.stderr.trim()}`);
    }
  }

  async downloadFile(path: string): Promise<string> {
    return (await this.downloadBytes(path, MAX_DOWNLOAD_TEXT_BYTES)).toString("utf8");
  }

  async downloadBytes(path: string, maxBytes: number): Promise<Buffer> {
    const chunks: Buffer[] = [];
    await this.readFile(path, maxBytes, (chunk) => {
      chunks.push(chunk);
      return Promise.resolve();
    });
    return Buffer.concat(chunks);
  }

  async downloadToFile(path: string, destination: string, maxBytes: number): Promise<number> {
    this.assertUsable();
    const sink = await open(destination, "wx", 0o600);
    try {
      return await this.readFile(path, maxBytes, async (chunk) => {
        await sink.write(chunk);
      });
    } catch (error) {
      await sink.close().catch(() => undefined);
      await rm(destination, { force: true });
      throw error;
    } finally {
      await sink.close().catch(() => undefined);
    }
  }

  async writeScratchFile(name: string, content: string): Promise<string> {
    this.assertUsable();
    assertScratchFileName(name);
    assertScratchFileContent(content);
    try {
      // Through the engine's archive API, as the container's uid 0: the folder is not the
      // sandbox user's to write, so a command can neither change the file nor plant a link there.
      await this.container.putArchive(
        tarArchive([
          { name, type: "file", mode: 0o640, uid: 0, gid: this.state.gid, content: Buffer.from(content, "utf8") },
        ]),
        { path: SCRATCH_DIR },
      );
    } catch (error) {
      throw translateDockerError(error, { host: this.host, during: `writing the scratch file ${name}` });
    }
    return posix.join(SCRATCH_DIR, name);
  }

  async removeScratchFile(name: string): Promise<void> {
    assertScratchFileName(name);
    if (this.tornDown) return;
    this.assertUsable();
    // The container's uid 0 owns the folder; it holds no capability, so it can do no more than this.
    const removed = await this.housekeeping(["rm", "-f", "--", posix.join(SCRATCH_DIR, name)], undefined, "0:0");
    if (removed.exitCode !== 0)
      throw new SandboxError(`Could not remove the scratch file ${name}: ${removed.stderr.trim()}`);
  }

  /** Freezes every process of the sandbox (memory and all kept) until `resume`. */
  async pause(): Promise<void> {
    this.assertUsable();
    // No engine exec is left half started as the container freezes: the launcher's start ends first.
    await this.launching;
    try {
      await this.container.pause();
    } catch (error) {
      throw translateDockerError(error, { host: this.host, during: "pausing the sandbox" });
    }
    this.paused = true;
  }

  async resume(): Promise<void> {
    if (this.tornDown) throw new SandboxError("This sandbox has been torn down");
    if (!this.paused) return;
    try {
      await this.container.unpause();
    } catch (error) {
      throw translateDockerError(error, { host: this.host, during: "resuming the sandbox" });
    }
    this.paused = false;
  }

  /**
   * Commits the checkout as it is onto the sandbox's branch, inside the container, with the
   * checkout's hooks, filters and credential helpers off, and returns the commit: HEAD itself
   * when nothing changed since it.
   */
  async snapshot(message?: string): Promise<string> {
    this.assertUsable();
    // The same commit as every adapter's: it runs through this container's own exec.
    return snapshotCheckout((opts) => this.exec(opts), this.workDir, message);
  }

  async teardown(): Promise<void> {
    if (this.tornDown) return;
    this.tornDown = true;
    this.launcher?.close();
    // Force removes a running or paused container; its anonymous volume goes with it, a named
    // one (a spare's it took) right after.
    await removeQuietly(this.docker, this.container.id, this.state.volume);
    await this.state.release().catch(() => undefined);
  }

  /** Waits until the relay inside listens (it starts its command only then). */
  async waitForRelay(timeoutMs: number, nodePath: string): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      // Refused outright once the relay has exited and the container with it: said below.
      const probe = await this.housekeeping(["cat", RELAY_READY]).catch(() => undefined);
      if (probe?.exitCode === 0) return;
      const info = await this.container.inspect().catch(() => undefined);
      if (info && !info.State.Running)
        throw new SandboxError(
          `The sandbox's relay to the model gateway and egress proxy stopped (exit ${String(info.State.ExitCode)}): ` +
            `the image needs node at ${nodePath} for a run without a network (set the Docker nodePath)`,
        );
      if (Date.now() > deadline)
        throw new SandboxError(`The sandbox's relay did not start within ${String(timeoutMs / 1000)} s`);
      await new Promise((resolve) => setTimeout(resolve, RELAY_POLL_MS));
    }
  }

  private baseEnv(): Record<string, string> {
    return {
      PATH: CONTAINER_PATH,
      HOME: HOME_DIR,
      TMPDIR: "/tmp",
      USER: "harness",
      LOGNAME: "harness",
      LANG: "C.UTF-8",
      GIT_TERMINAL_PROMPT: "0",
      ...(this.state.proxied
        ? { ...proxyEnvironment(`http://127.0.0.1:${String(PROXY_PORT)}`), NODE_USE_ENV_PROXY: "1" }
        : {}),
    };
  }

  private assertUsable(): void {
    if (this.tornDown) throw new SandboxError("This sandbox has been torn down");
    if (this.paused) throw new SandboxPausedError(this.id);
  }

  /**
   * Runs one command. One of the run's (`endsLeftovers`) may leave processes behind, which a
   * command of the local sandbox never can (its namespace goes with it): once no command is
   * under way any more, every process of the sandbox's user still running is ended, before this
   * resolves and before any new command starts. Commands running side by side keep theirs.
   */
  private async run(
    command: Omit<Parameters<typeof runInContainer>[1], "user"> & { user?: string; endsLeftovers?: boolean },
  ) {
    await this.sweeping;
    this.running += 1;
    try {
      // The launcher serves a command of the sandbox's own user without stdin, and only when no
      // other process of that user is there (no command under way, nothing left unswept) to
      // read the requests it is sent; else, and whenever it is not there, the engine's exec.
      const alone = (): boolean => this.running === 1 && !this.leftovers;
      const eligible =
        command.user === undefined &&
        command.stdin === undefined &&
        Object.keys(command.env).every((key) => ENV_NAME.test(key)) &&
        alone();
      const launcher = eligible ? await this.readyLauncher() : undefined;
      if (launcher && alone()) {
        const exit = await launcher.run(command);
        // Undefined: the launcher was gone before it started the command, which never ran.
        if (exit) return exit;
      } else if (command.endsLeftovers && alone() && this.launcher?.usable && !this.launcher.armed) {
        // The sweep after this command can then still go through the launcher, sparing it.
        await this.launcher.arm();
      }
      return await runInContainer(this.container, { ...command, user: command.user ?? this.user });
    } catch (error) {
      if (statusOf(error) === 409 && /paused/i.test(engineMessage(error))) throw new SandboxPausedError(this.id);
      throw translateDockerError(error, { host: this.host, during: `running ${command.argv[0] ?? ""} in the sandbox` });
    } finally {
      this.running -= 1;
      if (command.endsLeftovers) this.leftovers = true;
      if (this.running === 0 && this.leftovers && !this.tornDown) {
        this.leftovers = false;
        // A container paused meanwhile cannot be asked: the next command to end asks again.
        this.sweeping = this.endLeftovers().catch(() => {
          this.leftovers = true;
        });
        await this.sweeping;
      }
    }
  }

  /**
   * Ends every process of the sandbox's user: through the launcher, which `kill -1` spares, or
   * else through an engine exec, which ends a launcher too.
   */
  private async endLeftovers(): Promise<void> {
    const launcher = this.launcher;
    if (launcher?.usable && (await launcher.sweep())) return;
    this.launcher?.close();
    this.launcher = undefined;
    await endProcessesOf(this.container, this.user);
  }

  /**
   * Starts the launcher unless one is running or starting, when a command first needs it (a
   * sandbox opened again by name, as the named sandboxes' tools do for every call, starts none
   * it does not use); one that ran on through a pause goes on after resume. A sandbox whose
   * image cannot run it stops asking after a few tries and keeps the engine's exec.
   */
  private startLauncher(): void {
    if (this.tornDown || this.paused || this.launching || (this.launcher && !this.launcher.gone)) return;
    if (this.launchFailures >= MAX_LAUNCH_FAILURES) return;
    const starting = CommandLauncher.start(this.container, this.user).then((launcher) => {
      this.launching = undefined;
      this.launchFailures = launcher ? 0 : this.launchFailures + 1;
      if (launcher && this.tornDown) launcher.close();
      else this.launcher = launcher;
      return launcher;
    });
    this.launching = starting;
  }

  /** The launcher when it can take a request now: one that died is replaced first. */
  private async readyLauncher(): Promise<CommandLauncher | undefined> {
    if (this.launcher?.gone) this.launcher = undefined;
    if (!this.launcher) this.startLauncher();
    if (this.launching) await this.launching;
    return this.launcher?.usable ? this.launcher : undefined;
  }

  /** One of the harness's own commands in the checkout, output bounded. */
  private async housekeeping(
    argv: string[],
    stdin?: string | Uint8Array,
    user?: string,
    env: Record<string, string> = {},
  ): Promise<{ exitCode: number; stdout: string; stderr: string }> {
    const stdout = new TailBuffer(MAX_OUTPUT_BYTES);
    const stderr = new TailBuffer(64 * 1024);
    const exit = await this.run({
      argv,
      cwd: WORK_DIR,
      env: { ...this.baseEnv(), ...env },
      timeout: HOUSEKEEPING_TIMEOUT_MS,
      stdin,
      ...(user ? { user } : {}),
      stdout: (chunk) => {
        stdout.push(chunk);
      },
      stderr: (chunk) => {
        stderr.push(chunk);
      },
    });
    return { exitCode: exit.timedOut ? EXIT_TIMED_OUT : exit.exitCode, stdout: stdout.text(), stderr: stderr.text() };
  }

  /**
   * One read of a file the run produced, inside the container as the sandbox's user (so it can
   * reach nothing that user could not), resolved there and refused unless it is a regular file
   * in the checkout within `maxBytes`; copied out with `head -c maxBytes+1` and counted as it
   * arrives, so a file that grows meanwhile is cut and refused, never read whole.
   */
  private async readFile(path: string, maxBytes: number, consume: (chunk: Buffer) => Promise<void>): Promise<number> {
    this.assertUsable();
    if (!Number.isSafeInteger(maxBytes) || maxBytes < 0)
      throw new InvalidInputError(`maxBytes must be a non-negative whole number, got ${String(maxBytes)}`);
    const target = assertPathConfined(path, WORK_DIR);
    const cut = new AbortController();
    let received = 0;
    let pending = Promise.resolve();
    let failure: unknown;
    const stderr = new TailBuffer(4096);
    const exit = await this.run({
      argv: ["sh", "-c", READ_FILE, "sh", WORK_DIR, target, String(maxBytes)],
      cwd: WORK_DIR,
      env: this.baseEnv(),
      timeout: HOUSEKEEPING_TIMEOUT_MS,
      signal: cut.signal,
      stdout: (chunk) => {
        if (cut.signal.aborted) return;
        received += chunk.length;
        if (received > maxBytes) {
          cut.abort();
          return;
        }
        pending = pending
          .then(() => consume(chunk))
          .catch((error: unknown) => {
            failure ??= error;
            cut.abort();
          });
      },
      stderr: (chunk) => {
        stderr.push(chunk);
      },
    });
    await pending;
    if (failure !== undefined) throw failure instanceof Error ? failure : new SandboxError("the copy failed");
    if (received > maxBytes)
      throw new SandboxFileTooLargeError(
        `${path} in the sandbox grew past the ${String(maxBytes)}-byte limit while it was read`,
        maxBytes,
      );
    const said = stderr.text().trim();
    switch (exit.exitCode) {
      case 0:
        return received;
      case READ_OUTSIDE:
        throw new PathConfinementError(`"${path}" resolves through a symlink to ${said}, outside the sandbox`);
      case READ_NOT_FILE:
        throw new SandboxError(`${path} in the sandbox is not a regular file`);
      case READ_TOO_LARGE:
        throw new SandboxFileTooLargeError(
          `${path} in the sandbox is ${said} bytes, over the ${String(maxBytes)}-byte limit`,
          maxBytes,
        );
      default:
        throw new SandboxError(`Could not read ${path} from the sandbox: ${said || `exit ${String(exit.exitCode)}`}`);
    }
  }
}

const MAX_DOWNLOAD_TEXT_BYTES = 64 * 1024 * 1024;
const READ_OUTSIDE = 3;
const READ_NOT_FILE = 4;
const READ_TOO_LARGE = 5;

/**
 * `$1` the checkout, `$2` the file, `$3` the limit. Exit 3: it resolves outside the checkout;
 * 4: not a regular file (a symlink, even to a file inside, is refused as the local sandbox's
 * O_NOFOLLOW refuses it); 5: over the limit; else head's.
 */
const READ_FILE =
  'r=$(realpath -e -- "$2") || exit 2; ' +
  'case "$r" in "$1"|"$1"/*) ;; *) printf %s "$r" >&2; exit 3;; esac; ' +
  '{ [ -L "$2" ] || [ ! -f "$r" ]; } && exit 4; s=$(stat -c %s -- "$r") || exit 2; ' +
  'if [ "$s" -gt "$3" ]; then printf %s "$s" >&2; exit 5; fi; ' +
  'exec head -c "$(($3 + 1))" -- "$r"';

/**
 * `$1` the checkout, then the targets: each must resolve (its nearest existing folder) inside
 * it and not be a symlink.
 */
const CHECK_UPLOADS =
  'w=$1; shift; for t do d=$t; while [ ! -e "$d" ]; do d=$(dirname -- "$d"); done; ' +
  'r=$(realpath -e -- "$d") || exit 2; case "$r" in "$w"|"$w"/*) ;; ' +
  '*) echo "\\"$t\\" resolves through a symlink to $r, outside the sandbox" >&2; exit 3;; esac; ' +
  'if [ -L "$t" ]; then echo "\\"$t\\" is a symlink; refusing to write through it" >&2; exit 3; fi; done';

/** `$1` the checkout, `$2` the file: its folders made, then stdin written to it. */
const WRITE_FILE = 'mkdir -p -- "$(dirname -- "$2")" && [ ! -L "$2" ] && cat >"$2"';

/** Makes a host path the run's sockets live in reachable by the container's group, and no one else. */
async function shareWithContainer(path: string, gid: number, mode: number): Promise<void> {
  try {
    if (process.getuid?.() === 0) {
      await chown(path, 0, gid);
      await chmod(path, mode);
      return;
    }
  } catch {
    // Fall through: without root, the group cannot be given.
  }
  // Not root: nobody else's group can be named, so the container's user reaches it as "other".
  await chmod(path, mode | ((mode & 0o070) >> 3));
}

async function removeEarlierAttempts(client: Docker, runId: string): Promise<void> {
  const found = await client.listContainers({
    all: true,
    filters: { label: [`${DOCKER_APP_LABEL.key}=${DOCKER_APP_LABEL.value}`, `${DOCKER_RUN_LABEL}=${runId}`] },
  });
  await Promise.all(found.map((info) => removeQuietly(client, info.Id, ownedVolume(info.Labels))));
}

function safeId(runId: string | undefined): string {
  const cleaned = (runId ?? "").replace(/[^A-Za-z0-9_-]/g, "").slice(0, 40);
  return cleaned !== "" ? cleaned : randomBytes(4).toString("hex");
}
