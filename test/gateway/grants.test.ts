import { randomBytes } from "node:crypto";
import { afterAll, afterEach, describe, expect, test } from "vitest";
import { MemoryGrantStore, type Grant, type GrantStore } from "../../src/gateway/grants.js";
import { RedisGrantStore } from "../../src/gateway/redis-grants.js";
import { mintRunToken, runTokenHash } from "../../src/gateway/run-token.js";
import { deleteRedisKeys, testRedisTopologies } from "../helpers/redis.js";

const prefixRoot = `test-grants-${String(process.pid)}-${randomBytes(4).toString("hex")}`;
const topologies = testRedisTopologies();
for (const { target } of topologies) afterAll(() => deleteRedisKeys(target, prefixRoot));

interface Stores {
  store: GrantStore;
  /** A second handle on the same grants, as another process would have (the same one for memory). */
  another: () => GrantStore;
}

let redisCase = 0;
const adapters: Array<[string, () => Stores]> = [
  [
    "memory",
    () => {
      const store = new MemoryGrantStore();
      return { store, another: () => store };
    },
  ],
  ...topologies.map(({ name, target }): [string, () => Stores] => [
    name,
    () => {
      redisCase += 1;
      const prefix = `${prefixRoot}:${String(redisCase)}`;
      return {
        store: new RedisGrantStore({ redis: target, prefix }),
        another: () => new RedisGrantStore({ redis: target, prefix }),
      };
    },
  ]),
];

function grant(runId: string, expiresAt: number, upstream: Grant["upstream"] = "anthropic"): Grant {
  return {
    runId,
    agent: "claude-code",
    upstream,
    expiresAt,
    scope: { repoId: 1, installationId: 2 },
    limits: { runUsd: 2 },
  };
}

describe.each(adapters)("%s grant store", (_name, open) => {
  const closers: GrantStore[] = [];
  afterEach(async () => {
    for (const store of closers.splice(0)) await store.close();
  });
  function stores(): Stores {
    const opened = open();
    const another = opened.another();
    closers.push(opened.store, ...(another !== opened.store ? [another] : []));
    return { store: opened.store, another: () => another };
  }

  test("a grant is found by its token's hash, from another handle too, and never by the token itself", async () => {
    const { store, another } = stores();
    const token = mintRunToken();
    const now = Date.now();
    await store.put(runTokenHash(token), grant("r1", now + 60_000));
    expect(await another().get(runTokenHash(token), now)).toEqual(grant("r1", now + 60_000));
    expect(await store.get(token, now)).toBeUndefined();
    expect(await store.get(runTokenHash(mintRunToken()), now)).toBeUndefined();
  });

  test("a grant past its expiry is gone", async () => {
    const { store } = stores();
    const token = mintRunToken();
    const now = Date.now();
    await store.put(runTokenHash(token), grant("r2", now + 60_000));
    expect(await store.get(runTokenHash(token), now + 60_000)).toBeUndefined();
  });

  test("revoking a run ends each of its tokens and no other run's", async () => {
    const { store, another } = stores();
    const now = Date.now();
    const mine = [mintRunToken(), mintRunToken()];
    const theirs = mintRunToken();
    await store.put(runTokenHash(mine[0] ?? ""), grant("r3", now + 60_000));
    await store.put(runTokenHash(mine[1] ?? ""), grant("r3", now + 60_000, "openai"));
    await store.put(runTokenHash(theirs), grant("r4", now + 60_000));
    expect(await another().revokeRun("r3")).toBe(2);
    for (const token of mine) expect(await store.get(runTokenHash(token), now)).toBeUndefined();
    expect(await store.get(runTokenHash(theirs), now)).toMatchObject({ runId: "r4" });
    expect(await store.revokeRun("r3")).toBe(0);
  });
});
