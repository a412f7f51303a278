import { basename, dirname, join, posix } from "node:path";
import { rm } from "node:fs/promises";
import type Docker from "dockerode";
import type { SandboxOptions } from "../types.js";
import { translateDockerError } from "./client.js";
import { prepareCheckout, tarStream, type Source } from "./checkout.js";
import { VOLUME, WORK_DIR } from "./container-spec.js";
import {
  clearCheckout,
  cloneBesideMirror,
  fillCheckout,
  filesTar,
  hostGit,
  objectFiles,
  refsOfClone,
  repositoryTar,
  updateSpareCheckout,
  writeRepositorySkeleton,
  writeSpareUpdate,
  type ContainerRefs,
} from "./mirror-repository.js";
import { prepareSpare, takeSpare, type SpareContext, type TakenSpare } from "./spare-container.js";

/*
 * A Docker run's checkout when the installation has warm mirrors (`SandboxOptions.repoCache`):
 * the host never clones the whole history again, and the run takes over the spare container
 * written for it when there is one (`spare-container.ts`), so only what changed since crosses
 * into the container. Any failure of the cache falls back to the plain clone: the cache can
 * make a run faster, never wrong.
 */

/** Failures a mirror cannot have caused: with them, a plain clone working says nothing about the mirror. */
const NETWORK_FAILURE = /unable to access|could not resolve|connection|timed out|RPC failed|HTTP [0-9]{3}/i;
const WORK_NAME = posix.basename(WORK_DIR);

export interface WarmCheckout {
  /** The taken spare's volume, for the run's container to mount instead of a fresh one. */
  readonly volume: string | undefined;
  /** Writes the run's checkout into its started container. */
  writeInto(container: Docker.Container): Promise<void>;
  /**
   * The sandbox is ready: the spare's own container goes, and a spare for the next run is
   * written in the background (which frees the mirror once done).
   */
  ready(): void;
  /** The sandbox failed: after its container is gone, the taken spare goes whole, and the mirror is freed. */
  abandon(): Promise<void>;
}

export interface WarmCheckoutInput {
  client: Docker;
  host: string;
  source: Extract<Source, { kind: "remote" }>;
  opts: SandboxOptions;
  repoCache: NonNullable<SandboxOptions["repoCache"]>;
  image: string;
  uid: number;
  gid: number;
  limits: SpareContext["limits"];
  /** The run's host folder: the clone and what is streamed in are written here. */
  dir: string;
  timeout: number;
  redact: (text: string) => string;
}

/**
 * Leases the repository's mirror, starts cloning GitHub's current refs beside it, and claims a
 * spare; undefined when there is no mirror (the caller clones as without a cache).
 */
export async function startWarmCheckout(input: WarmCheckoutInput): Promise<WarmCheckout | undefined> {
  const { client, source, opts, repoCache, uid, gid, dir, timeout, redact } = input;
  const token = opts.githubToken;
  const lease = await repoCache.mirrors.lease(repoCache.scope, { id: repoCache.repositoryId, url: source.url }, token);
  if (!lease) return undefined;
  const git = hostGit(timeout);
  const clone = join(dir, "clone");
  const cloning = cloneBesideMirror(git, lease.path, source.url, clone, dir, token);
  const ctx: SpareContext = {
    client,
    spare: { scope: repoCache.scope, repositoryId: repoCache.repositoryId, image: input.image, uid, gid },
    repo: source.display,
    limits: input.limits,
    timeout,
  };
  let spare: TakenSpare | undefined;
  try {
    spare = await takeSpare(ctx);
  } catch {
    // An engine that cannot list its containers will say so when the run's is created.
  }
  let refs: ContainerRefs | undefined;
  let mirrorUsable = true;
  let finished = false;

  const step = (container: Docker.Container) => ({ container, uid, gid, timeout });
  const put = async (container: Docker.Container, stream: NodeJS.ReadableStream, done?: Promise<void>) => {
    try {
      await container.putArchive(stream, { path: VOLUME });
      await done;
    } catch (error) {
      throw translateDockerError(error, { host: input.host, during: "copying the checkout into the sandbox" });
    }
  };
  /** The run's branch: the one GitHub has already, else a new one at the default branch's head. */
  const branchStart = (known: ContainerRefs): { name: string; start: string; commit: string } => {
    const existing = known.refs.get(`refs/remotes/origin/${opts.branch}`);
    return existing !== undefined
      ? { name: opts.branch, start: `origin/${opts.branch}`, commit: existing }
      : { name: opts.branch, start: known.head, commit: known.head };
  };

  /** The whole repository from the mirror and the clone, checked out inside. */
  const fill = async (container: Docker.Container, known: ContainerRefs): Promise<void> => {
    const stage = join(dir, "stage");
    const branch = branchStart(known);
    await writeRepositorySkeleton(git, stage, { url: source.url, refs: known, head: branch.commit });
    const tar = repositoryTar(
      stage,
      [
        { dir: join(clone, ".git"), files: await objectFiles(join(clone, ".git")) },
        { dir: lease.path, files: await objectFiles(lease.path) },
      ],
      { uid, gid },
      false,
    );
    await put(container, tar.stream, tar.done);
    await rm(stage, { recursive: true, force: true });
    await fillCheckout(step(container), branch);
  };

  /** The spare's checkout brought up to the run's base with a bundle of what it lacks. */
  const update = async (container: Docker.Container, taken: TakenSpare, known: ContainerRefs): Promise<void> => {
    const stage = join(dir, "update");
    const { files, bundle } = await writeSpareUpdate(git, stage, clone, taken.base, known);
    const tar = filesTar(stage, files, { uid, gid });
    await put(container, tar.stream, tar.done);
    await rm(stage, { recursive: true, force: true });
    await updateSpareCheckout(step(container), branchStart(known), bundle);
  };

  /** Without the mirror: the plain clone, streamed in whole. */
  const plain = async (container: Docker.Container): Promise<void> => {
    const checkout = await prepareCheckout(source, join(dir, "checkout"), opts, timeout, redact);
    await put(container, tarStream(dirname(checkout.path), basename(checkout.path), WORK_NAME, uid, gid));
    await rm(checkout.path, { recursive: true, force: true, maxRetries: 3 });
  };

  return {
    get volume() {
      return spare?.volume;
    },

    async writeInto(container) {
      const cloned = await cloning;
      if (cloned.exitCode !== 0) {
        mirrorUsable = false;
        if (spare) await clearCheckout(step(container));
        await plain(container);
        // The plain clone worked where the one beside the mirror did not: the mirror is damaged.
        if (!NETWORK_FAILURE.test(cloned.stderr)) lease.discard();
        return;
      }
      // At once: the token it fetches with is revoked as soon as the sandbox is ready.
      lease.refresh(token);
      refs = await refsOfClone(git, clone).catch(() => undefined);
      if (!refs) {
        // An empty repository (nothing to check out, as the plain clone has it), or refs past
        // what is read whole.
        mirrorUsable = false;
        if (spare) await clearCheckout(step(container));
        await plain(container);
        return;
      }
      if (spare) {
        try {
          await update(container, spare, refs);
          return;
        } catch {
          // History rewritten since the spare was written, or a spare that is not what it
          // says: the run's checkout is written afresh into the same volume.
          await clearCheckout(step(container));
        }
      }
      try {
        await fill(container, refs);
      } catch {
        mirrorUsable = false;
        await clearCheckout(step(container));
        await plain(container);
        // The plain clone worked where the mirror's objects did not.
        lease.discard();
      }
    },

    ready() {
      if (finished) return;
      finished = true;
      void spare?.dropContainer();
      void rm(clone, { recursive: true, force: true, maxRetries: 3 }).catch(() => undefined);
      const defaultBranch = refs?.defaultBranch;
      if (mirrorUsable && defaultBranch !== undefined)
        prepareSpare(ctx, { mirror: lease, url: source.url, defaultBranch });
      else lease.release();
    },

    async abandon() {
      if (finished) return;
      finished = true;
      await cloning.catch(() => undefined);
      await spare?.discard();
      lease.release();
    },
  };
}
