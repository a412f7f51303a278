import { join } from "node:path";
import { SCRATCH_DIR, VOLUME, WORK_DIR } from "../../src/sandbox/docker/container-spec.js";
import { DEFAULT_SANDBOX_UID } from "../../src/sandbox/docker/options.js";
import { createDockerSandbox } from "../../src/sandbox/docker/sandbox.js";
import { remappingOf } from "../../src/sandbox/docker/user-namespaces.js";
import { probeIsolation } from "../../src/sandbox/local/isolation.js";
import { createLocalSandbox } from "../../src/sandbox/local/sandbox.js";
import { sandboxUserFor } from "../../src/sandbox/local/sandbox-user.js";
import type { Sandbox, SandboxOptions } from "../../src/sandbox/types.js";
import { testEngine, testImage } from "./docker-engine.js";

/*
 * The providers an isolation or write-path suite runs its cases on, each as the App runs it:
 * the local sandbox with namespaces (bubblewrap), and a container on a Docker Engine (the
 * suite's shared one, with the small image built from this machine's programs). A suite
 * parametrized over them asserts the same of both; a provider this machine cannot run has the
 * reason, which the suite prints as it skips that provider's cases.
 */

export type ProviderKind = "local" | "docker";

export interface IsolatedProvider {
  readonly kind: ProviderKind;
  /** Why this provider's cases skip on this machine; undefined when they run. */
  readonly unavailable: string | undefined;
  /** The uid its commands' processes, and the files they write, have on the host. */
  readonly hostUid: number | undefined;
  /**
   * An isolated sandbox for `options`, as `runHarness` would make it (so it serves as a
   * `sandbox.create`). `node`: commands need node inside (the Docker image then carries it).
   * Docker gets no network unless `options.network` says otherwise.
   */
  create(options: SandboxOptions, extra?: { node?: boolean }): Promise<Sandbox>;
  /** Where `relative` (in the checkout) is on the host, for the test to look at as root. */
  hostPath(sandbox: Sandbox, relative: string): Promise<string>;
  /**
   * Where `writeScratchFile(name)` puts a file inside, known before the sandbox exists (an
   * agent's argv names it), or undefined where that path is the sandbox's own choice.
   */
  scratchPathFor(name: string): string | undefined;
}

const localProbe = await probeIsolation();
const engine = await testEngine();

const local: IsolatedProvider = {
  kind: "local",
  unavailable: localProbe.available ? undefined : `${localProbe.reason}; fix: ${localProbe.fix}`,
  hostUid: sandboxUserFor()?.uid ?? process.getuid?.(),
  create: (options) =>
    createLocalSandbox({ ...options, localIsolation: options.localIsolation ?? { mode: "namespaces" } }),
  hostPath: (sandbox, relative) => Promise.resolve(join(sandbox.workDir, relative)),
  scratchPathFor: () => undefined,
};

const remapped = engine.available
  ? remappingOf((await engine.docker.info()) as { SecurityOptions?: unknown; DockerRootDir?: unknown })
  : undefined;

const images = new Map<string, Promise<string>>();
/** The test image on the shared engine, built once per file and variant. */
function image(node: boolean): Promise<string> {
  if (!engine.available) return Promise.reject(new Error(engine.reason));
  const key = node ? "node" : "plain";
  let made = images.get(key);
  if (!made) {
    made = testImage(engine.docker, { node });
    images.set(key, made);
  }
  return made;
}

const docker: IsolatedProvider = {
  kind: "docker",
  unavailable: engine.available ? undefined : engine.reason,
  // On an engine that remaps user namespaces the container's uid is another one on the host.
  hostUid: DEFAULT_SANDBOX_UID + (remapped?.uidBase ?? 0),
  async create(options, extra = {}) {
    if (!engine.available) throw new Error(engine.reason);
    return createDockerSandbox(
      { ...options, network: options.network ?? { mode: "none" } },
      {
        image: await image(extra.node ?? false),
        host: engine.host,
        nodePath: process.execPath,
        memoryBytes: 1024 ** 3,
        cpus: 1,
        pidsLimit: 256,
        tmpfsBytes: 64 * 1024 ** 2,
      },
    );
  },
  async hostPath(sandbox, relative) {
    if (!engine.available) throw new Error(engine.reason);
    // The container's volume is a folder of the engine's on this machine.
    const info = await engine.docker.getContainer(sandbox.id).inspect();
    const volume = info.Mounts.find((mount) => mount.Destination === VOLUME);
    if (!volume) throw new Error(`the container ${sandbox.id} has no volume at ${VOLUME}`);
    return join(volume.Source, WORK_DIR.slice(VOLUME.length), relative);
  },
  scratchPathFor: (name) => `${SCRATCH_DIR}/${name}`,
};

export const PROVIDERS: readonly IsolatedProvider[] = [local, docker];

/** Prints, once per file, why a provider's cases skip here. */
export function warnUnavailable(file: string): void {
  for (const provider of PROVIDERS)
    if (provider.unavailable) console.warn(`[${file}] ${provider.kind} sandbox cases skipped: ${provider.unavailable}`);
}

/** Stops an engine the helper started itself (none when the suite's global set-up shares one). */
export async function closeProviders(): Promise<void> {
  if (engine.available && engine.started) await engine.stop();
}
