import { createServer, type Server } from "node:net";
import { Cluster } from "ioredis";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { assertRedisReachable, openRedis, type RedisTarget } from "../../src/store/redis-connection.js";
import { RedisScript } from "../../src/store/redis-script.js";
import { RedisPendingRequestStore } from "../../src/runs/pending/redis.js";
import { deleteRedisKeys, testRedisTopologies } from "../helpers/redis.js";

const topologies = testRedisTopologies();
const cluster = topologies.find((topology) => topology.name === "Redis Cluster")?.target as RedisTarget;

const COPY = new RedisScript(`
redis.call('SET', KEYS[2], redis.call('GET', KEYS[1]) or '')
return 1
`);
const COPY_BUILT = new RedisScript(`
redis.call('SET', ARGV[1], redis.call('GET', KEYS[1]) or '')
return 1
`);

describe("the test run's Redis Cluster refuses what a cluster refuses", () => {
  // The stores' suites run on it to catch keys in two slots: it must be a real cluster, spread
  // over its masters, or they would pass whatever the keys. (Declared keys in two slots fail
  // always; a key a script builds, only when another master serves it: two times in three here.)
  const client = openRedis(cluster);
  afterAll(() => {
    client.disconnect();
  });

  test("its slots are spread over three masters", async () => {
    await client.ping();
    expect(client).toBeInstanceOf(Cluster);
    expect((client as Cluster).nodes("master")).toHaveLength(3);
  });

  test("a script whose keys lie in two slots fails; the same keys under one hash tag run", async () => {
    const tag = `topology-${String(process.pid)}`;
    await expect(COPY.run(client, [`${tag}:a`, `${tag}:b`], [])).rejects.toThrow(/CROSSSLOT/);
    expect(await COPY.run(client, [`{${tag}}:a`, `{${tag}}:b`], [])).toEqual(["1"]);
    await client.del(`{${tag}}:a`, `{${tag}}:b`);
  });

  test("a key a script builds itself, served by another master, is refused; under its KEYS' tag it runs", async () => {
    // Redis checks a key a script did not declare only against the node it runs on, so the key
    // is picked on another master than the script's.
    const tag = `topology-built-${String(process.pid)}`;
    const masterOf = async (key: string): Promise<number> => {
      const slot = Number(await client.call("CLUSTER", "KEYSLOT", key));
      const ranges = (await client.call("CLUSTER", "SLOTS")) as Array<[number, number, [string, number]]>;
      return ranges.find(([first, last]) => slot >= first && slot <= last)?.[2][1] ?? 0;
    };
    const home = await masterOf(`{${tag}}:a`);
    let elsewhere = `${tag}:elsewhere`;
    for (let attempt = 0; (await masterOf(elsewhere)) === home; attempt += 1)
      elsewhere = `${tag}:elsewhere-${String(attempt)}`;
    await expect(COPY_BUILT.run(client, [`{${tag}}:a`], [elsewhere])).rejects.toThrow(/non local key/i);
    expect(await COPY_BUILT.run(client, [`{${tag}}:a`], [`{${tag}}:b`])).toEqual(["1"]);
    await client.del(`{${tag}}:a`, `{${tag}}:b`);
  });
});

describe("writes that wait for replicas", () => {
  const sentinel = topologies.find((topology) => topology.name === "Redis Sentinel")?.target as RedisTarget;
  const prefix = `topology-wait-${String(process.pid)}`;
  afterAll(() => deleteRedisKeys(sentinel, prefix));

  test("a write its replicas do not all hold in time is refused, saying how many it reached and why", async () => {
    // The suite's group has one replica: asking for two can never be met.
    const store = new RedisPendingRequestStore({
      redis: { ...sentinel, waitReplicas: 2, waitTimeoutMs: 100 },
      prefix,
    });
    try {
      const put = store.put({ issueKey: "9#1", intent: "fix", requester: { login: "a", id: 1 }, commentId: 1 });
      await expect(put).rejects.toThrow(
        "Redis copied a write to 1 of the 2 replica(s) it must reach (REDIS_WAIT_REPLICAS) within 100 ms, " +
          "so it is not counted as done",
      );
      // Reads do not wait: what the store can tell is still told.
      expect(await store.list("9#2")).toEqual([]);
    } finally {
      await store.close();
    }
  });
});

describe("reaching Redis at start-up", () => {
  let silent: Server;
  let silentPort = 0;
  beforeAll(async () => {
    // Accepts connections and never answers: a Redis that hangs.
    silent = createServer(() => undefined);
    await new Promise<void>((resolve) => silent.listen(0, "127.0.0.1", resolve));
    const address = silent.address();
    silentPort = typeof address === "object" && address ? address.port : 0;
  });
  afterAll(async () => {
    silent.close();
    await new Promise((resolve) => setImmediate(resolve));
  });

  test.each(topologies.map((topology) => [topology.name, topology.target] as const))(
    "%s that answers passes",
    async (_name, target) => {
      await expect(assertRedisReachable(target, 2_000)).resolves.toBeUndefined();
    },
  );

  test("a cluster that does not answer fails at once, naming its nodes and the setting", async () => {
    const unreachable: RedisTarget = { mode: "cluster", nodes: [{ host: "127.0.0.1", port: silentPort }] };
    await expect(assertRedisReachable(unreachable, 500)).rejects.toThrow(
      new RegExp(
        `^Cannot reach the Redis Cluster at 127\\.0\\.0\\.1:${String(silentPort)} \\(REDIS_CLUSTER_NODES\\): .*` +
          "Start Redis, or fix REDIS_CLUSTER_NODES",
      ),
    );
  });

  test("sentinels that know no master by that name fail, naming the name and the settings", async () => {
    const sentinel = topologies.find((topology) => topology.name === "Redis Sentinel")?.target;
    if (sentinel?.mode !== "sentinel") throw new Error("the test run has no sentinel group");
    const unknown: RedisTarget = { ...sentinel, name: "no-such-master" };
    await expect(assertRedisReachable(unknown, 1_000)).rejects.toThrow(
      new RegExp(
        'Cannot reach the Redis master "no-such-master" through the sentinels at 127\\.0\\.0\\.1:\\d+ ' +
          "\\(REDIS_SENTINELS, REDIS_SENTINEL_NAME\\)",
      ),
    );
  });
});
