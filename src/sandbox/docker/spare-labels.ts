import { createHash } from "node:crypto";
import { isCommitId } from "../../util/commit-id.js";
import { DOCKER_VOLUME_LABEL } from "./labels.js";

/*
 * What a spare container says about itself, and which spares are stale: shared by the sandbox
 * that builds and takes spares and by the inventory the orphan reaper reads.
 *
 * A spare is a stopped container of the harness's own whose named volume holds a repository's
 * checkout, written by the harness alone (no agent and no command of the repository ever ran in
 * it), for the next run of that repository in the same installation to take over. The engine
 * never changes a container's labels once it is made, so the labels say only what the spare is
 * for (installation, repository, image, user, the commit it holds, its volume, when its build
 * began), fixed when it is created; its state is its name, which the engine renames atomically:
 * `harness-spare-<key>-building-<random>` while it is written, `…-ready-…` once complete, and
 * `…-taken-…` the moment one run claims it (a second claimer finds the ready name gone).
 */

/** On every spare: the format of its labels; a spare of another format is never taken. */
export const SPARE_LABEL = "harness-spare";
export const SPARE_FORMAT = "1";
/** A hash of installation, repository, image and user: what a run must match to take the spare. */
export const SPARE_KEY_LABEL = "harness-spare-key";
export const SPARE_SCOPE_LABEL = "harness-spare-scope";
export const SPARE_REPOSITORY_LABEL = "harness-spare-repository";
export const SPARE_IMAGE_LABEL = "harness-spare-image";
export const SPARE_USER_LABEL = "harness-spare-user";
/** The commit the spare's checkout is of (its HEAD, detached). */
export const SPARE_BASE_LABEL = "harness-spare-base";
/** When its build began, in ms since the epoch. */
export const SPARE_STARTED_LABEL = "harness-spare-started";

export const SPARE_NAME_PREFIX = "harness-spare-";
export const SPARE_VOLUME_PREFIX = "harness-spare-volume-";

/** A build not finished within this is a builder that died: its spare is removed. */
export const SPARE_BUILD_DEADLINE_MS = 30 * 60_000;
/** A ready spare older than this is removed rather than taken (its update would be large). */
export const SPARE_MAX_AGE_MS = 24 * 3_600_000;
/** Ready spares kept on one engine, newest first: each holds a repository's whole history. */
export const MAX_READY_SPARES = 4;

export type SpareState = "building" | "ready" | "taken";

/** What a spare is for: a run takes only a spare whose key is its own. */
export interface SpareFor {
  scope: string;
  repositoryId: string;
  image: string;
  uid: number;
  gid: number;
}

export interface SpareRecord {
  /** The container's name, without the engine's leading slash. */
  name: string;
  /** Undefined when the name or the labels are not a spare's of this format: never taken. */
  state: SpareState | undefined;
  key: string | undefined;
  base: string | undefined;
  volume: string | undefined;
  startedAt: number | undefined;
  labels: Record<string, string>;
}

const NAME = /^harness-spare-([0-9a-f]{16})-(building|ready|taken)-[0-9a-f]{8}$/;
const VOLUME_NAME = /^harness-spare-volume-[0-9a-f]{16}$/;

export function spareKey(spare: SpareFor): string {
  return createHash("sha256")
    .update(JSON.stringify([spare.scope, spare.repositoryId, spare.image, spare.uid, spare.gid]))
    .digest("hex")
    .slice(0, 16);
}

export function spareName(key: string, state: SpareState, suffix: string): string {
  return `${SPARE_NAME_PREFIX}${key}-${state}-${suffix}`;
}

/**
 * The name a ready spare is claimed under: the same for every claimer, so the engine lets only
 * one rename win (a second finds the ready name gone, or the container already bearing it).
 */
export function claimedName(record: SpareRecord): string | undefined {
  const match = NAME.exec(record.name);
  return record.state === "ready" && match ? record.name.replace(/-ready-([0-9a-f]{8})$/, "-taken-$1") : undefined;
}

/** The labels a spare for `spare` is made with. */
export function spareLabels(
  spare: SpareFor,
  fields: { base: string; volume: string; startedAt: number },
): Record<string, string> {
  return {
    [SPARE_LABEL]: SPARE_FORMAT,
    [SPARE_KEY_LABEL]: spareKey(spare),
    [SPARE_SCOPE_LABEL]: spare.scope,
    [SPARE_REPOSITORY_LABEL]: spare.repositoryId,
    [SPARE_IMAGE_LABEL]: spare.image,
    [SPARE_USER_LABEL]: `${String(spare.uid)}:${String(spare.gid)}`,
    [SPARE_BASE_LABEL]: fields.base,
    [DOCKER_VOLUME_LABEL]: fields.volume,
    [SPARE_STARTED_LABEL]: String(fields.startedAt),
  };
}

/** A container's spare record, or undefined when it is not a spare at all. */
export function readSpare(name: string, labels: Record<string, string>): SpareRecord | undefined {
  if (labels[SPARE_LABEL] === undefined) return undefined;
  const bare = name.replace(/^\//, "");
  const match = NAME.exec(bare);
  const base = labels[SPARE_BASE_LABEL];
  const volume = labels[DOCKER_VOLUME_LABEL];
  const started = Number(labels[SPARE_STARTED_LABEL]);
  const whole =
    labels[SPARE_LABEL] === SPARE_FORMAT &&
    match !== null &&
    labels[SPARE_KEY_LABEL] === match[1] &&
    base !== undefined &&
    isCommitId(base) &&
    volume !== undefined &&
    VOLUME_NAME.test(volume) &&
    Number.isSafeInteger(started) &&
    started > 0;
  return {
    name: bare,
    state: whole ? (match[2] as SpareState) : undefined,
    key: whole ? match[1] : undefined,
    base: whole ? base : undefined,
    volume: volume !== undefined && VOLUME_NAME.test(volume) ? volume : undefined,
    startedAt: whole ? started : undefined,
    labels,
  };
}

/** Whether a ready spare may be taken by a run for `spare` (its labels, not only its key, agree). */
export function spareFits(record: SpareRecord, spare: SpareFor, now: number): boolean {
  return (
    record.state === "ready" &&
    record.key === spareKey(spare) &&
    record.labels[SPARE_SCOPE_LABEL] === spare.scope &&
    record.labels[SPARE_REPOSITORY_LABEL] === spare.repositoryId &&
    record.labels[SPARE_IMAGE_LABEL] === spare.image &&
    record.labels[SPARE_USER_LABEL] === `${String(spare.uid)}:${String(spare.gid)}` &&
    record.startedAt !== undefined &&
    now - record.startedAt <= SPARE_MAX_AGE_MS
  );
}

/**
 * The spares to remove: one that is not whole, a claimed one (its run holds the volume now, or
 * died before it could), a build past its deadline, a ready one past its age, behind a newer one
 * for the same key, or beyond the engine's bound. Callers add their own grace for claims and
 * builds under way elsewhere (the reaper's minimum age).
 */
export function staleSpares(records: readonly SpareRecord[], now: number): Set<string> {
  const stale = new Set<string>();
  const ready: SpareRecord[] = [];
  for (const record of records) {
    if (record.state === undefined || record.state === "taken" || record.startedAt === undefined) {
      stale.add(record.name);
    } else if (record.state === "building") {
      if (now - record.startedAt > SPARE_BUILD_DEADLINE_MS) stale.add(record.name);
    } else if (now - record.startedAt > SPARE_MAX_AGE_MS) {
      stale.add(record.name);
    } else {
      ready.push(record);
    }
  }
  ready.sort((a, b) => (b.startedAt ?? 0) - (a.startedAt ?? 0));
  const newestPerKey = new Set<string>();
  let kept = 0;
  for (const record of ready) {
    if (record.key === undefined || newestPerKey.has(record.key) || kept >= MAX_READY_SPARES) {
      stale.add(record.name);
      continue;
    }
    newestPerKey.add(record.key);
    kept += 1;
  }
  return stale;
}
