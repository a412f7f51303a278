/** Settings for the Docker sandbox (ignored by the other providers). */
export interface DockerOptions {
  /** The image every sandbox is created from; it must hold `sh`, git and coreutils. */
  image: string;
  /**
   * The container's name; by default `harness-<run id>-<random>`. A name the engine already has
   * is refused (`SandboxNameTakenError`) rather than replaced.
   */
  containerName?: string;
  /** The engine: `unix:///path` or `tcp://host:port` (default DOCKER_HOST, else the local socket). */
  host?: string;
  /**
   * The unprivileged user commands run as inside the container (default 10001:10001); never 0.
   * The container's own first process (its init, the relay) runs as uid + 1, in the same group.
   */
  uid?: number;
  gid?: number;
  /** Memory limit in bytes, swap included (default 4 GiB); the tmpfs HOME and /tmp count towards it. */
  memoryBytes?: number;
  /** CPUs (default 2). */
  cpus?: number;
  /** Most processes at once (default 1024): a fork bomb stops there. */
  pidsLimit?: number;
  /** Size of the tmpfs HOME and of the tmpfs /tmp, each (default 512 MiB). */
  tmpfsBytes?: number;
  /** The Docker network a run with network `open` joins (default `bridge`). */
  openNetwork?: string;
  /**
   * Node inside the image (default /usr/local/bin/node, where the node images put it): it runs
   * the relay to the model gateway's and the egress proxy's Unix sockets when the run's network
   * is none or an allowlist. Not needed for other runs.
   */
  nodePath?: string;
  /** How long the relay may take to listen inside a new container (default 10 s). */
  startTimeoutMs?: number;
}

export const DEFAULT_SANDBOX_UID = 10001;
export const DEFAULT_SANDBOX_GID = 10001;
export const DEFAULT_MEMORY_BYTES = 4 * 1024 ** 3;
export const DEFAULT_CPUS = 2;
export const DEFAULT_PIDS_LIMIT = 1024;
export const DEFAULT_TMPFS_BYTES = 512 * 1024 ** 2;
export const DEFAULT_NODE_PATH = "/usr/local/bin/node";
