import type Docker from "dockerode";
import { InvalidInputError } from "../../util/errors.js";

/** The container's one writable volume: the checkout and the scratch folder beside it. */
export const VOLUME = "/harness";
export const WORK_DIR = `${VOLUME}/work`;
export const SCRATCH_DIR = `${VOLUME}/scratch`;
export const HOME_DIR = "/home/harness";
/** Where the run's own Unix sockets are bound in (read-only), outside the volume. */
export const RELAY_DIR = "/harness-relay";
/**
 * The harness's own bookkeeping for running commands (each one's process group id): a tmpfs of
 * its own, so it works whatever the image's /tmp looks like.
 */
export const EXEC_STATE_DIR = "/harness-exec";
/** The image's PATH may be missing (an imported root file system has none). */
export const CONTAINER_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

export interface ContainerSpecInput {
  name: string;
  image: string;
  labels: Record<string, string>;
  /** The sandbox's user: every command runs as it, and HOME is its. */
  uid: number;
  gid: number;
  /**
   * Who the container's own first process runs as (its init, the relay): not the sandbox's
   * user, so that nothing a command does can signal it, and the harness can end everything
   * of the sandbox's user a command left behind without ending the container.
   */
  initUid: number;
  memoryBytes: number;
  cpus: number;
  pidsLimit: number;
  tmpfsBytes: number;
  /** `none` also for an allowlist: the egress proxy's socket is then the only way out. */
  network: "open" | "none";
  openNetwork: string;
  /** Host folders holding the run's own sockets, bound read-only at `container`. */
  socketBinds: ReadonlyArray<{ host: string; container: string }>;
  /** The container's first process: it only keeps the container alive, or runs the relays. */
  cmd: readonly string[];
  /**
   * A named volume (a spare's, written by the harness alone) mounted as the container's one
   * writable volume instead of a fresh anonymous one. Never a host path.
   */
  volume?: string;
  /** CPU weight against other containers (default the engine's 1024): lower for the harness's background work. */
  cpuShares?: number;
}

/**
 * What the engine is asked to create: never root (fixed unprivileged uids, one for the commands
 * and another for the container's own first process, and no capability even for a root process
 * an image might start), a read-only root file system with only the volume, HOME and /tmp
 * writable, no privilege gain through setuid files, the engine's default seccomp profile, limits
 * on memory, CPU and processes, and no host path bound in but the folders of the run's own
 * sockets.
 */
export function containerSpec(input: ContainerSpecInput): Docker.ContainerCreateOptions {
  if (input.uid === 0 || input.gid === 0 || input.initUid === 0)
    throw new InvalidInputError("The Docker sandbox's user must not be root (uid or gid 0)");
  if (input.initUid === input.uid)
    throw new InvalidInputError("The Docker container's own processes must run as another uid than its commands");
  if (input.volume !== undefined && !/^[A-Za-z0-9][A-Za-z0-9_.-]*$/.test(input.volume))
    throw new InvalidInputError(`A sandbox's volume must be a volume's name, not a path: ${input.volume}`);
  for (const bind of input.socketBinds) {
    if (!bind.host.startsWith("/") || bind.host.includes(":") || bind.host.includes("\0"))
      throw new InvalidInputError(`A socket folder to bind must be an absolute path without ':', got ${bind.host}`);
    if (!bind.container.startsWith(`${RELAY_DIR}/`))
      throw new InvalidInputError(`Sockets are bound under ${RELAY_DIR} only, not at ${bind.container}`);
  }
  const tmpfs = (extra: string): string => `rw,exec,nosuid,nodev,size=${String(input.tmpfsBytes)},${extra}`;
  return {
    name: input.name,
    Image: input.image,
    Cmd: [...input.cmd],
    // Commands name their user on each exec; this is the first process's (in the sandbox's group,
    // which the run's sockets are shared with).
    User: `${String(input.initUid)}:${String(input.gid)}`,
    Env: [`PATH=${CONTAINER_PATH}`, `HOME=${HOME_DIR}`],
    Labels: input.labels,
    Hostname: "harness-sandbox",
    // An anonymous volume: removed with the container, and never a host path. A named one is
    // removed by whoever removes the container (its `harness-volume` label names it).
    ...(input.volume === undefined ? { Volumes: { [VOLUME]: {} } } : {}),
    NetworkDisabled: input.network === "none",
    HostConfig: {
      NetworkMode: input.network === "none" ? "none" : input.openNetwork,
      ReadonlyRootfs: true,
      CapDrop: ["ALL"],
      SecurityOpt: ["no-new-privileges:true"],
      Privileged: false,
      IpcMode: "private",
      // A real init as pid 1 (the engine's docker-init): it reaps what a killed command's
      // group leaves, which would otherwise linger as zombies that still answer `kill -0`.
      Init: true,
      PidsLimit: input.pidsLimit,
      Memory: input.memoryBytes,
      MemorySwap: input.memoryBytes,
      NanoCpus: Math.round(input.cpus * 1e9),
      ...(input.cpuShares !== undefined ? { CpuShares: input.cpuShares } : {}),
      ...(input.volume !== undefined
        ? { Mounts: [{ Type: "volume" as const, Source: input.volume, Target: VOLUME }] }
        : {}),
      Tmpfs: {
        [HOME_DIR]: tmpfs(`uid=${String(input.uid)},gid=${String(input.gid)},mode=0700`),
        "/tmp": tmpfs("mode=1777"),
        // Sticky and open to all: the harness's few commands as the container's uid 0 (which
        // holds no capability to write another's folder) keep their pid files here too.
        [EXEC_STATE_DIR]: `rw,noexec,nosuid,nodev,size=8m,mode=1777`,
      },
      Binds: input.socketBinds.map((bind) => `${bind.host}:${bind.container}:ro`),
      // Its first process writes nothing worth keeping; commands' output comes back through exec.
      LogConfig: { Type: "none", Config: {} },
      RestartPolicy: { Name: "no" },
    },
  };
}
