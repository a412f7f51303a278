import { randomBytes } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type Docker from "dockerode";
import type { MirrorLease } from "../types.js";
import { statusOf } from "./client.js";
import { containerSpec, VOLUME } from "./container-spec.js";
import { DOCKER_APP_LABEL, DOCKER_REPO_LABEL, DOCKER_VOLUME_LABEL } from "./labels.js";
import {
  fillCheckout,
  hostGit,
  objectFiles,
  refsOfMirror,
  repositoryTar,
  settleIndex,
  writeRepositorySkeleton,
} from "./mirror-repository.js";
import {
  readSpare,
  SPARE_KEY_LABEL,
  SPARE_LABEL,
  SPARE_STARTED_LABEL,
  SPARE_VOLUME_PREFIX,
  spareFits,
  spareKey,
  spareLabels,
  claimedName,
  spareName,
  staleSpares,
  type SpareFor,
  type SpareRecord,
} from "./spare-labels.js";
import { tarArchive } from "./tar.js";

/*
 * Spare containers: a repository's checkout written ahead, in the background, into a named
 * volume of a stopped container of the harness's own, for the next run of that repository in
 * the same installation, image and user to take over instead of writing the whole checkout
 * (and, for a large repository, streaming its whole history) while the run waits.
 *
 * A spare is written only by the harness: the installation's mirror's objects streamed in, refs
 * and config of the harness's, and `git reset --hard` inside as the sandbox's user with the
 * harness's git safety settings; nothing of the repository runs and no agent ever did. It is
 * taken once: a run claims it by renaming it (the engine lets one rename win), creates its own
 * container (its own labels, limits, network and socket binds, exactly as without a spare) with
 * the spare's volume as its volume, and removes the spare's container; the volume goes when
 * that run's container does. Labels say what it is for (see `spare-labels.ts`); a spare that is
 * not ready, not whole, too old, or for anything else is never taken. The reaper removes what a
 * crash leaves (`inventory.ts`).
 */

/** A run waits this long at most for the spare this process is writing for it. */
const MAX_WAIT_MS = 3_000;
/** Spares yield the CPU to the runs' own containers (the engine's default weight is 1024). */
const SPARE_CPU_SHARES = 128;
/** A claim or a build elsewhere may be under way: what this process removes of another's waits this long. */
const FOREIGN_GRACE_MS = 10 * 60_000;

export interface SpareContext {
  client: Docker;
  spare: SpareFor;
  /** The repository as operators read it (`owner/name`). */
  repo: string;
  limits: { memoryBytes: number; cpus: number; pidsLimit: number; tmpfsBytes: number };
  timeout: number;
}

/** A spare a run has claimed: its volume is the run's to mount. */
export interface TakenSpare {
  volume: string;
  /** The commit its checkout is of. */
  base: string;
  /** Removes the spare's own stopped container (the volume stays, for the run). */
  dropContainer(): Promise<void>;
  /** Removes it whole (the run could not use it). */
  discard(): Promise<void>;
}

const building = new Map<string, { done: Promise<void>; abort: AbortController }>();

/**
 * Claims the newest ready spare for `ctx.spare`, waiting a little for one this process is
 * writing; undefined when there is none.
 */
export async function takeSpare(ctx: SpareContext, now: () => number = Date.now): Promise<TakenSpare | undefined> {
  const key = spareKey(ctx.spare);
  const pending = building.get(key);
  if (pending) {
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([
      pending.done,
      new Promise<void>((resolve) => {
        timer = setTimeout(resolve, MAX_WAIT_MS);
      }),
    ]);
    clearTimeout(timer);
  }
  const found = await ctx.client.listContainers({ all: true, filters: { label: [`${SPARE_KEY_LABEL}=${key}`] } });
  const candidates = found
    .map((info) => ({ info, record: readSpare(info.Names[0] ?? "", info.Labels) }))
    .filter(
      (each): each is { info: Docker.ContainerInfo; record: SpareRecord } =>
        each.record !== undefined && spareFits(each.record, ctx.spare, now()),
    )
    .sort((a, b) => (b.record.startedAt ?? 0) - (a.record.startedAt ?? 0));
  for (const { info, record } of candidates) {
    const { volume, base } = record;
    if (volume === undefined || base === undefined) continue;
    // Its volume is the checkout, mounted where every sandbox's is; a stopped container only.
    const mounted = info.Mounts.some((mount) => mount.Name === volume && mount.Destination === VOLUME);
    if (!mounted || info.State !== "exited") continue;
    if (!(await claim(ctx.client, record))) continue;
    return {
      volume,
      base,
      dropContainer: () => removeQuietly(ctx.client, info.Id, undefined),
      discard: () => removeQuietly(ctx.client, info.Id, volume),
    };
  }
  return undefined;
}

/** Where a spare is written from: the run's mirror, leased until the spare is done. */
export interface SpareSource {
  mirror: MirrorLease;
  /** GitHub's address for the repository, as the spare's `origin` (never with a credential). */
  url: string;
  /** The default branch: the spare is of its head in the mirror. */
  defaultBranch: string;
}

/**
 * Writes a spare for the next run of this repository in the background, at a low priority,
 * unless this process is writing one already or the engine has one ready or under way. Always
 * releases the mirror's lease, once the spare no longer reads it.
 */
export function prepareSpare(ctx: SpareContext, source: SpareSource): void {
  const key = spareKey(ctx.spare);
  if (building.has(key)) {
    source.mirror.release();
    return;
  }
  const abort = new AbortController();
  const done = buildSpare(ctx, key, source, abort.signal)
    .catch(() => {
      // Only ever a faster start: without a spare, the next run writes its checkout itself.
    })
    .finally(() => {
      source.mirror.release();
      building.delete(key);
    });
  building.set(key, { done, abort });
}

/** Stops the spares this process is writing (each removes what it made) and waits for them. */
export async function stopSpareBuilds(): Promise<void> {
  for (const { abort } of building.values()) abort.abort();
  await settleSpareBuilds();
}

/** Waits for the spares this process is writing (tests, benchmarks). */
export async function settleSpareBuilds(): Promise<void> {
  while (building.size > 0) await Promise.allSettled([...building.values()].map((each) => each.done));
}

async function buildSpare(ctx: SpareContext, key: string, source: SpareSource, signal: AbortSignal): Promise<void> {
  const { client, spare } = ctx;
  // After the mirror's catch-up fetch: the spare is of the newest base this host knows.
  await source.mirror.refreshed();
  await sweepSpares(client);
  const existing = await client.listContainers({ all: true, filters: { label: [`${SPARE_KEY_LABEL}=${key}`] } });
  const now = Date.now();
  const records = existing.map((info) => readSpare(info.Names[0] ?? "", info.Labels));
  const stale = staleSpares(
    records.filter((record): record is SpareRecord => record !== undefined),
    now,
  );
  if (
    records.some(
      (record) =>
        record !== undefined &&
        !stale.has(record.name) &&
        (record.state === "building" || (record.state === "ready" && spareFits(record, spare, now))),
    )
  )
    return;
  const git = hostGit(ctx.timeout, true);
  const refs = await refsOfMirror(git, source.mirror.path, source.defaultBranch);
  // Read afresh after each step: a shutdown may stop the build while it waits.
  const stopped = (): boolean => signal.aborted;
  if (!refs || stopped()) return;
  // Not `harness-*`, which are sandboxes' folders to the local inventory.
  const stage = await mkdtemp(join(tmpdir(), "harness.docker-spare-"));
  const volume = `${SPARE_VOLUME_PREFIX}${randomBytes(8).toString("hex")}`;
  const suffix = randomBytes(4).toString("hex");
  let container: Docker.Container | undefined;
  let volumeMade = false;
  let ready = false;
  // Stopping mid-build (shutdown) removes the container under whatever step is waiting on it.
  let stopping: Promise<unknown> | undefined;
  const stop = (): void => {
    stopping = container?.remove({ force: true }).catch(() => undefined);
  };
  signal.addEventListener("abort", stop, { once: true });
  try {
    await writeRepositorySkeleton(git, stage, { url: source.url, refs, head: refs.head });
    const labels = {
      [DOCKER_APP_LABEL.key]: DOCKER_APP_LABEL.value,
      [DOCKER_REPO_LABEL]: ctx.repo,
      ...spareLabels(spare, { base: refs.head, volume, startedAt: now }),
    };
    await client.createVolume({ Name: volume, Labels: labels });
    volumeMade = true;
    container = await client.createContainer(
      containerSpec({
        name: spareName(key, "building", suffix),
        image: spare.image,
        labels,
        uid: spare.uid,
        gid: spare.gid,
        // As for a run's container: its own first process is not the commands' uid.
        initUid: spare.uid + 1,
        ...ctx.limits,
        network: "none",
        openNetwork: "none",
        socketBinds: [],
        cmd: ["sleep", "infinity"],
        volume,
        cpuShares: SPARE_CPU_SHARES,
      }),
    );
    if (stopped()) return;
    await container.start();
    await container.putArchive(
      tarArchive([{ name: "scratch", type: "directory", mode: 0o750, uid: 0, gid: spare.gid }]),
      { path: VOLUME },
    );
    const tar = repositoryTar(
      stage,
      [{ dir: source.mirror.path, files: await objectFiles(source.mirror.path) }],
      { uid: spare.uid, gid: spare.gid },
      true,
    );
    await container.putArchive(tar.stream, { path: VOLUME });
    await tar.done;
    if (stopped()) return;
    const step = { container, uid: spare.uid, gid: spare.gid, timeout: ctx.timeout };
    await fillCheckout(step);
    await settleIndex(step);
    if (stopped()) return;
    // Stopped: a spare holds no process, only its volume, until a run takes it.
    await container.kill().catch(() => undefined);
    await container.wait().catch(() => undefined);
    await container.rename({ name: spareName(key, "ready", suffix) });
    ready = true;
  } finally {
    signal.removeEventListener("abort", stop);
    if (!ready) {
      // The volume goes once no container holds it.
      await stopping;
      if (container) await container.remove({ force: true }).catch(() => undefined);
      if (volumeMade)
        await client
          .getVolume(volume)
          .remove()
          .catch(() => undefined);
    }
    await rm(stage, { recursive: true, force: true });
  }
  // The one before it, for the same repository, is behind this one now.
  await sweepSpares(client);
}

/**
 * Removes the stale spares on the engine (see `staleSpares`), and spares' volumes no container
 * holds. What another process may be using right now (a claim or a build of its own) is left
 * for `FOREIGN_GRACE_MS`, and the reaper's pass after.
 */
export async function sweepSpares(client: Docker, now: number = Date.now()): Promise<void> {
  const found = await client
    .listContainers({ all: true, filters: { label: [SPARE_LABEL] } })
    .catch(() => [] as Docker.ContainerInfo[]);
  const records = found.flatMap((info) => {
    const record = readSpare(info.Names[0] ?? "", info.Labels);
    return record ? [{ info, record }] : [];
  });
  const stale = staleSpares(
    records.map((each) => each.record),
    now,
  );
  for (const { info, record } of records) {
    if (!stale.has(record.name)) continue;
    if (record.state === "ready") {
      // Claimed first, as a run would: one a run took a moment ago is that run's.
      if (!(await claim(client, record))) continue;
    } else if (record.state !== "building" && now - info.Created * 1000 < FOREIGN_GRACE_MS) {
      continue;
    }
    await removeQuietly(client, info.Id, record.volume);
  }
  for (const volume of await danglingSpareVolumes(client).catch(() => [])) {
    if (now - volume.startedAt >= FOREIGN_GRACE_MS)
      await client
        .getVolume(volume.name)
        .remove()
        .catch(() => undefined);
  }
}

/**
 * Spares' volumes no container holds: one whose run's container was removed without it (a
 * crash), or made a moment ago for a spare whose container is not created yet.
 */
export async function danglingSpareVolumes(client: Docker): Promise<Array<{ name: string; startedAt: number }>> {
  const listed = await client.listVolumes({ filters: { label: [SPARE_LABEL], dangling: ["true"] } });
  return orNone(listed.Volumes)
    .filter((volume) => volume.Name.startsWith(SPARE_VOLUME_PREFIX))
    .map((volume) => ({ name: volume.Name, startedAt: Number(volume.Labels[SPARE_STARTED_LABEL]) || 0 }));
}

/**
 * Claims a ready spare: renamed by its ready name to the one name every claimer uses, so exactly
 * one rename succeeds (see `claimedName`). False when another claimed it first.
 */
export async function claim(client: Docker, record: SpareRecord): Promise<boolean> {
  const name = claimedName(record);
  if (name === undefined) return false;
  try {
    await client.getContainer(record.name).rename({ name });
    return true;
  } catch {
    return false;
  }
}

/** Removes a container and then the named volume it owned (gone already, or still held: left). */
export async function removeQuietly(client: Docker, id: string, volume: string | undefined): Promise<void> {
  try {
    await client.getContainer(id).remove({ force: true, v: true });
  } catch (error) {
    if (statusOf(error) !== 404) return;
  }
  if (volume !== undefined)
    await client
      .getVolume(volume)
      .remove()
      .catch(() => undefined);
}

/** The named volume a container owns, from its labels. */
export function ownedVolume(labels: Record<string, string> | undefined): string | undefined {
  const volume = labels?.[DOCKER_VOLUME_LABEL];
  return volume?.startsWith(SPARE_VOLUME_PREFIX) ? volume : undefined;
}

/** The engine answers null rather than an empty list. */
function orNone<T>(items: T[] | null): T[] {
  return items ?? [];
}
