import { randomBytes } from "node:crypto";
import { writeFile } from "node:fs/promises";
import { join } from "node:path";
import type Docker from "dockerode";
import { afterAll, afterEach, beforeAll, describe, expect, test } from "vitest";
import { reapOrphans } from "../../src/runs/reaper.js";
import { VOLUME } from "../../src/sandbox/docker/container-spec.js";
import { dockerInventory } from "../../src/sandbox/docker/inventory.js";
import { createDockerSandbox, type DockerSandbox } from "../../src/sandbox/docker/sandbox.js";
import { settleSpareBuilds, takeSpare } from "../../src/sandbox/docker/spare-container.js";
import {
  MAX_READY_SPARES,
  readSpare,
  SPARE_KEY_LABEL,
  SPARE_LABEL,
  SPARE_REPOSITORY_LABEL,
  SPARE_VOLUME_PREFIX,
  spareKey,
  spareLabels,
  spareName,
  staleSpares,
  type SpareFor,
  type SpareRecord,
  type SpareState,
} from "../../src/sandbox/docker/spare-labels.js";
import { RepoCache } from "../../src/sandbox/local/repo-cache.js";
import type { SandboxRecord } from "../../src/sandbox/inventory.js";
import type { SandboxOptions } from "../../src/sandbox/types.js";
import { startGitHttpServer, type GitHttpServer } from "../fakes/git-http-server.js";
import { testEngine, testImage, type TestEngine } from "../helpers/docker-engine.js";
import { fakeToken } from "../helpers/fake-secrets.js";
import { git, makeBareRepo, scratchDir } from "../helpers/git.js";

/*
 * Spare containers on a real Docker Engine: the checkout of a repository written ahead, by the
 * harness alone, for its next run in the same installation to take over. What a run must get
 * from one is exactly what a fresh clone at GitHub's current head gives it; what it must never
 * get is a volume an agent worked in, another installation's spare, or one a crash left half
 * written.
 */

const engine: TestEngine = await testEngine();
if (!engine.available) console.warn(`Docker spare container tests skipped: ${engine.reason}`);
const live = engine.available ? engine : undefined;

const token = fakeToken("ghs_", 37);
/** This file's repository id: its spares are told apart from any other on the engine by it. */
const REPOSITORY_ID = `spare-test-${randomBytes(4).toString("hex")}`;
const SCOPE = "installation-1";
const UID = 10001;

let image = "";
let root: { path: string; cleanup: () => Promise<void> };
let cacheRoot: { path: string; cleanup: () => Promise<void> };
let server: GitHttpServer;
let upstream = "";
let cache: RepoCache;
const made: DockerSandbox[] = [];

function docker(): Docker {
  if (!live) throw new Error("no engine");
  return live.docker;
}

async function run(scope = SCOPE, overrides: Partial<SandboxOptions> = {}): Promise<DockerSandbox> {
  if (!live) throw new Error("no engine");
  const sandbox = await createDockerSandbox(
    {
      repo: "acme/widgets",
      branch: `harness/${randomBytes(3).toString("hex")}`,
      githubToken: token,
      githubServerUrl: server.url,
      network: { mode: "none" },
      runId: `spare-run-${randomBytes(3).toString("hex")}`,
      repoCache: { mirrors: cache, scope, repositoryId: REPOSITORY_ID },
      ...overrides,
    },
    { image, host: live.host, memoryBytes: 512 * 1024 ** 2, cpus: 1, pidsLimit: 256, tmpfsBytes: 64 * 1024 ** 2 },
  );
  made.push(sandbox);
  return sandbox;
}

const spareFor = (scope = SCOPE): SpareFor => ({ scope, repositoryId: REPOSITORY_ID, image, uid: UID, gid: UID });

/** This file's spares on the engine, by state. */
async function spares(): Promise<Array<{ id: string; name: string; labels: Record<string, string> }>> {
  const found = await docker().listContainers({
    all: true,
    filters: { label: [`${SPARE_REPOSITORY_LABEL}=${REPOSITORY_ID}`] },
  });
  return found.map((info) => ({ id: info.Id, name: info.Names[0]?.slice(1) ?? "", labels: info.Labels }));
}

const ready = async (scope = SCOPE) =>
  (await spares()).filter((spare) => spare.name.startsWith(`harness-spare-${spareKey(spareFor(scope))}-ready-`));

/** The named volume a sandbox's container mounts, if it took a spare's. */
async function volumeOf(sandbox: DockerSandbox): Promise<string | undefined> {
  const info = await docker().getContainer(sandbox.id).inspect();
  return info.Mounts.find(
    (mount) => mount.Destination === VOLUME && mount.Type === "volume" && mount.Name?.startsWith(SPARE_VOLUME_PREFIX),
  )?.Name;
}

async function exists(kind: "container" | "volume", id: string): Promise<boolean> {
  try {
    await (kind === "container" ? docker().getContainer(id).inspect() : docker().getVolume(id).inspect());
    return true;
  } catch {
    return false;
  }
}

/** The engine answers null rather than an empty list. */
const orNone = <T>(items: T[] | null): T[] => items ?? [];

const sh = async (sandbox: DockerSandbox, script: string) => {
  const result = await sandbox.exec({ argv: ["sh", "-c", script], cwd: sandbox.workDir, timeout: 30_000 });
  return result;
};

/** Commits on upstream's main as another contributor would: a file added, one changed, one deleted. */
async function pushChange(label: string): Promise<string> {
  const work = await scratchDir("harness-spare-work-");
  try {
    git(work.path, "clone", "--quiet", upstream, "w");
    const checkout = join(work.path, "w");
    await writeFile(join(checkout, `${label}.txt`), `${label}\n`);
    await writeFile(join(checkout, "README.md"), `# test repo, ${label}\n`);
    git(checkout, "rm", "--quiet", "-r", "--ignore-unmatch", "doomed.txt");
    git(checkout, "add", "--all");
    git(checkout, "commit", "--quiet", "-m", label);
    git(checkout, "push", "--quiet", "origin", "HEAD:main");
    return git(checkout, "rev-parse", "HEAD");
  } finally {
    await work.cleanup();
  }
}

/** A spare made by hand, as a crash or another version might leave one. */
async function plantSpare(
  state: "building" | "ready" | "taken",
  options: { startedAt: number; scope?: string; base?: string; blankLabel?: string },
): Promise<{ container: string; volume: string }> {
  const key = spareKey(spareFor(options.scope));
  const volume = `${SPARE_VOLUME_PREFIX}${randomBytes(8).toString("hex")}`;
  const labels: Record<string, string> = {
    app: "harness",
    ...spareLabels(spareFor(options.scope), {
      base: options.base ?? git(upstream, "rev-parse", "main"),
      volume,
      startedAt: options.startedAt,
    }),
  };
  if (options.blankLabel !== undefined) labels[options.blankLabel] = "";
  await docker().createVolume({ Name: volume, Labels: labels });
  const container = await docker().createContainer({
    name: spareName(key, state, randomBytes(4).toString("hex")),
    Image: image,
    Cmd: ["true"],
    User: `${String(UID)}:${String(UID)}`,
    Labels: labels,
    HostConfig: { Mounts: [{ Type: "volume", Source: volume, Target: VOLUME }], NetworkMode: "none" },
  });
  await container.start();
  await container.wait();
  return { container: container.id, volume };
}

beforeAll(async () => {
  if (!live) return;
  image = await testImage(live.docker);
  root = await scratchDir("harness-spare-upstream-");
  cacheRoot = await scratchDir("harness-spare-cache-");
  upstream = await makeBareRepo(root.path, "acme", "widgets");
  // A file no later commit touches, and one a later commit deletes (the spare holds it, the
  // next run must not).
  await pushChange("stable");
  await pushChange("doomed");
  server = await startGitHttpServer({ projectRoot: root.path, token });
  cache = new RepoCache({ root: cacheRoot.path, refreshIntervalMs: 0 });
}, 300_000);

afterEach(async () => {
  if (!live) return;
  await Promise.all(made.splice(0).map((sandbox) => sandbox.teardown()));
  await settleSpareBuilds();
  await cache.settle();
}, 120_000);

afterAll(async () => {
  if (!live) return;
  for (const spare of await spares()) {
    await docker()
      .getContainer(spare.id)
      .remove({ force: true })
      .catch(() => undefined);
  }
  const volumes = await docker().listVolumes({ filters: { label: [`${SPARE_REPOSITORY_LABEL}=${REPOSITORY_ID}`] } });
  for (const volume of orNone(volumes.Volumes))
    await docker()
      .getVolume(volume.Name)
      .remove()
      .catch(() => undefined);
  await server.close();
  await root.cleanup();
  await cacheRoot.cleanup();
  await live.stop();
}, 120_000);

describe("which spares are stale", () => {
  const now = 1_800_000_000_000;
  let made = 0;
  /** A whole spare record of `key` in `state`, begun at `startedAt`. */
  const record = (state: SpareState, key: string, startedAt: number): SpareRecord => {
    made += 1;
    const labels = {
      ...spareLabels(spareFor(), {
        base: "a".repeat(40),
        volume: `${SPARE_VOLUME_PREFIX}${"0".repeat(16)}`,
        startedAt,
      }),
      [SPARE_KEY_LABEL]: key,
    };
    const read = readSpare(spareName(key, state, made.toString(16).padStart(8, "0")), labels);
    if (read?.state !== state) throw new Error("not a whole spare");
    return read;
  };

  test("a spare's labels and name must agree, or it is no spare a run takes", () => {
    const labels = spareLabels(spareFor(), {
      base: "a".repeat(40),
      volume: `${SPARE_VOLUME_PREFIX}${"0".repeat(16)}`,
      startedAt: now,
    });
    const key = spareKey(spareFor());
    expect(readSpare(`/${spareName(key, "ready", "0123abcd")}`, labels)).toMatchObject({ state: "ready", key });
    // Another key's name, a missing base, an unknown format: whole by neither.
    expect(readSpare(spareName("f".repeat(16), "ready", "0123abcd"), labels)?.state).toBeUndefined();
    expect(
      readSpare(spareName(key, "ready", "0123abcd"), { ...labels, "harness-spare-base": "HEAD" })?.state,
    ).toBeUndefined();
    expect(readSpare(spareName(key, "ready", "0123abcd"), { ...labels, [SPARE_LABEL]: "2" })?.state).toBeUndefined();
    expect(readSpare("anything", {})).toBeUndefined();
  });

  test("stale: claimed, unfinished past the deadline, too old, behind a newer one, or beyond the bound", () => {
    const key = "0000000000000001";
    const building = record("building", key, now - 60_000);
    const abandoned = record("building", key, now - 2 * 3_600_000);
    const taken = record("taken", key, now);
    const tooOld = record("ready", key, now - 2 * 24 * 3_600_000);
    const newest = record("ready", key, now - 10_000);
    const behind = record("ready", key, now - 20_000);
    const others = ["2", "3", "4", "5"].map((last, index) =>
      record("ready", `00000000000000${last}0`, now - 30_000 - index),
    );
    const stale = staleSpares([building, abandoned, taken, tooOld, newest, behind, ...others], now);
    expect([building, newest, ...others.slice(0, 3)].filter((each) => stale.has(each.name))).toEqual([]);
    // Four ready spares at most on one engine, the newest first: the fifth key's goes.
    expect([abandoned, taken, tooOld, behind, others[3]].filter((each) => !stale.has(each?.name ?? ""))).toEqual([]);
    expect(MAX_READY_SPARES).toBe(4);
  });
});

describe.skipIf(!live)("spare containers", () => {
  test("the next run takes the spare, and its checkout is a fresh clone's at the new base", async () => {
    const first = await run();
    expect(await volumeOf(first)).toBeUndefined();
    expect((await sh(first, "git branch --show-current; cat README.md")).stdout).toBe(
      `${first.branch}\n# test repo, doomed\n`,
    );
    await first.teardown();
    await settleSpareBuilds();
    const [spare] = await ready();
    expect(spare).toBeDefined();

    // Pushed between the runs: the spare does not have it, the next run must.
    const head = await pushChange("between-runs");
    const secondStarted = Date.now();
    const second = await run();
    const volume = await volumeOf(second);
    expect(volume).toBe(spare?.labels["harness-volume"]);
    // Taken once: the spare's own container is gone, its volume is the run's.
    expect((await ready()).some((each) => each.id === spare?.id)).toBe(false);

    const inside = await sh(
      second,
      "git rev-parse HEAD; git branch --show-current; git status --porcelain --untracked-files=all; " +
        "cat between-runs.txt README.md; ls doomed.txt 2>/dev/null; git ls-files -s; " +
        "git for-each-ref --format='%(objectname) %(refname)' refs/remotes",
    );
    expect(inside.exitCode).toBe(0);
    const fresh = await scratchDir("harness-spare-fresh-");
    try {
      git(fresh.path, "clone", "--quiet", upstream, "c");
      const clone = join(fresh.path, "c");
      const index = git(clone, "ls-files", "-s");
      const refs = git(clone, "for-each-ref", "--format=%(objectname) %(refname)", "refs/remotes");
      expect(inside.stdout).toBe(
        `${head}\n${second.branch}\nbetween-runs\n# test repo, between-runs\n${index}\n${refs}\n`,
      );
    } finally {
      await fresh.cleanup();
    }
    // The spare's files were taken over, not written again: one no commit touched is as old as the spare.
    const written = (await sh(second, "stat -c %y stable.txt")).stdout.trim();
    expect(Date.parse(written.replace(/^(\S+) (\S+?)(\.\d{1,3})\d* ([+-]\d\d)(\d\d)$/, "$1T$2$3$4:$5"))).toBeLessThan(
      secondStarted,
    );
    // The token reached only the host's git: nothing in the container holds it.
    expect((await sh(second, `grep -rl ${token} /harness /home/harness /tmp || true`)).stdout).toBe("");
  }, 120_000);

  test("a spare is never reused after an agent ran in it", async () => {
    const first = await run();
    await settleSpareBuilds();
    const second = await run();
    const used = await volumeOf(second);
    expect(used).toBeDefined();
    // The agent's work, and a trap for whoever comes next.
    await sh(second, "echo agent > AGENT.txt && printf '#!/bin/sh\\necho hooked\\n' > .git/hooks/post-checkout");
    await settleSpareBuilds();
    await second.teardown();
    await first.teardown();
    expect(await exists("volume", used ?? "")).toBe(false);

    const third = await run();
    const volume = await volumeOf(third);
    expect(volume).toBeDefined();
    expect(volume).not.toBe(used);
    const inside = await sh(third, "ls AGENT.txt .git/hooks/post-checkout 2>&1; git status --porcelain");
    expect(inside.stdout).toMatch(/AGENT\.txt'?: No such file/);
    expect(inside.stdout).toMatch(/post-checkout'?: No such file/);
  }, 120_000);

  test("a stale or half-written spare is never taken, and goes", async () => {
    await settleSpareBuilds();
    for (const spare of await spares()) await docker().getContainer(spare.id).remove({ force: true });
    const halfWritten = await plantSpare("building", { startedAt: Date.now() - 2 * 3_600_000 });
    const old = await plantSpare("ready", { startedAt: Date.now() - 2 * 24 * 3_600_000 });
    const unlabelled = await plantSpare("ready", { startedAt: Date.now(), blankLabel: "harness-spare-base" });
    const sandbox = await run();
    const volume = await volumeOf(sandbox);
    expect([halfWritten.volume, old.volume, unlabelled.volume]).not.toContain(volume);
    expect(volume).toBeUndefined();
    await settleSpareBuilds();
    // The run's own spare, once written, swept what is past its deadline or age.
    for (const planted of [halfWritten, old]) {
      expect(await exists("container", planted.container)).toBe(false);
      expect(await exists("volume", planted.volume)).toBe(false);
    }
    // One whose labels are not whole may be another process's, mid-claim: the reaper's to remove.
    expect((await ready()).filter((each) => each.id !== unlabelled.container)).toHaveLength(1);
    await docker().getContainer(unlabelled.container).remove({ force: true });
  }, 120_000);

  test("a spare that is not what its labels say is written afresh, never trusted", async () => {
    await settleSpareBuilds();
    // The newest ready spare, whole by its labels, but of a commit nobody has and with nothing in it.
    const planted = await plantSpare("ready", { startedAt: Date.now(), base: "1".repeat(40) });
    const sandbox = await run();
    expect(await volumeOf(sandbox)).toBe(planted.volume);
    const inside = await sh(sandbox, "git rev-parse HEAD; git status --porcelain; cat stable.txt");
    expect(inside.stdout).toBe(`${git(upstream, "rev-parse", "main")}\nstable\n`);
  }, 120_000);

  test("another installation's spare is never taken", async () => {
    await settleSpareBuilds();
    const [ours] = await ready();
    expect(ours).toBeDefined();
    const other = await run("installation-2");
    expect(await volumeOf(other)).toBeUndefined();
    expect((await ready()).map((each) => each.id)).toContain(ours?.id);
  }, 120_000);

  test("a follow-up run on a branch GitHub has starts from it, tracking it", async () => {
    await settleSpareBuilds();
    expect(await ready()).not.toHaveLength(0);
    const work = await scratchDir("harness-spare-branch-");
    let tip = "";
    try {
      git(work.path, "clone", "--quiet", upstream, "w");
      const checkout = join(work.path, "w");
      git(checkout, "checkout", "--quiet", "-b", "harness/follow-up");
      await writeFile(join(checkout, "FOLLOW-UP.md"), "earlier round\n");
      git(checkout, "add", "FOLLOW-UP.md");
      git(checkout, "commit", "--quiet", "-m", "earlier round");
      git(checkout, "push", "--quiet", "origin", "harness/follow-up");
      tip = git(checkout, "rev-parse", "HEAD");
    } finally {
      await work.cleanup();
    }
    const sandbox = await run(SCOPE, { branch: "harness/follow-up", checkoutExisting: true });
    expect(await volumeOf(sandbox)).toBeDefined();
    const inside = await sh(sandbox, "git rev-parse HEAD @{upstream}; cat FOLLOW-UP.md; git status --porcelain");
    expect(inside.stdout).toBe(`${tip}\n${tip}\nearlier round\n`);
  }, 120_000);

  test("the reaper removes stale spares and orphaned spare volumes, and keeps a ready spare", async () => {
    await settleSpareBuilds();
    const [kept] = await ready();
    expect(kept).toBeDefined();
    const halfWritten = await plantSpare("building", { startedAt: Date.now() - 2 * 3_600_000 });
    const claimed = await plantSpare("taken", { startedAt: Date.now() });
    const orphanVolume = `${SPARE_VOLUME_PREFIX}${randomBytes(8).toString("hex")}`;
    await docker().createVolume({
      Name: orphanVolume,
      Labels: spareLabels(spareFor(), { base: git(upstream, "rev-parse", "main"), volume: orphanVolume, startedAt: 1 }),
    });
    if (!live) return;
    // The engine is shared: the reaper is shown only this file's spares and volumes.
    const engineWide = dockerInventory({ host: live.host });
    const ours = async (): Promise<Set<string>> => {
      const volumes = await docker().listVolumes({
        filters: { label: [`${SPARE_REPOSITORY_LABEL}=${REPOSITORY_ID}`] },
      });
      return new Set([
        ...(await spares()).map((each) => each.name),
        ...orNone(volumes.Volumes).map((each) => each.Name),
      ]);
    };
    const inventory = {
      list: async () => {
        const known = await ours();
        return (await engineWide.list()).filter((record) => known.has(record.id));
      },
      remove: (record: SandboxRecord) => engineWide.remove(record),
    };
    const listed = await inventory.list();
    const ofKept = listed.find((record) => record.id === kept?.name);
    expect(ofKept).toMatchObject({ spare: { stale: false } });
    expect(ofKept?.runId).toBeUndefined();

    const reaped = await reapOrphans(inventory, () => false, { minAgeMs: 0 });
    expect(reaped.every((record) => record.spare?.stale === true)).toBe(true);
    for (const planted of [halfWritten, claimed]) {
      expect(await exists("container", planted.container)).toBe(false);
      expect(await exists("volume", planted.volume)).toBe(false);
    }
    expect(await exists("volume", orphanVolume)).toBe(false);
    expect(await exists("container", kept?.id ?? "")).toBe(true);
    expect(SPARE_LABEL in (kept?.labels ?? {})).toBe(true);
  }, 120_000);

  test("two runs racing for one spare: exactly one gets it", async () => {
    await settleSpareBuilds();
    expect(await ready()).toHaveLength(1);
    const ctx = {
      client: docker(),
      spare: spareFor(),
      repo: "acme/widgets",
      limits: { memoryBytes: 512 * 1024 ** 2, cpus: 1, pidsLimit: 256, tmpfsBytes: 64 * 1024 ** 2 },
      timeout: 60_000,
    };
    const taken = await Promise.all([takeSpare(ctx), takeSpare(ctx), takeSpare(ctx)]);
    const winners = taken.filter((each) => each !== undefined);
    expect(winners).toHaveLength(1);
    await winners[0]?.discard();
    expect(await exists("volume", winners[0]?.volume ?? "")).toBe(false);
  }, 120_000);
});
