import { probeIsolation } from "../src/sandbox/local/isolation.js";
import { chromiumPath } from "./helpers/chromium-path.js";
import { testEngine } from "./helpers/docker-engine.js";
import { installDebianPackage, onPath } from "./debian-package.js";
import { startPrivateRedis, startPrivateRedisCluster, startPrivateRedisSentinel } from "./private-redis.js";

/**
 * Runs once before the suite. Bubblewrap isolates the local sandbox, which the App runs by
 * default; `redis-server` backs the BullMQ queue and the Redis stores. Both are Debian packages,
 * not npm ones: when one is missing the suite installs it where it may (root with apt-get), and
 * otherwise stops at once with one line saying what to install, instead of dozens of failures
 * that each say something else.
 *
 * The Redis servers are the run's own, on free ports, handed to every test file in the
 * environment and stopped at the end: a developer's Redis is never written to. Setting
 * HARNESS_TEST_REDIS_URL (or the cluster's and sentinels' variables below) yourself points the
 * tests at another Redis on purpose.
 */
export default async function checkPrerequisites(): Promise<() => Promise<void>> {
  const bwrapPath = process.env["HARNESS_BWRAP"];
  if (!bwrapPath && !onPath("bwrap"))
    await installDebianPackage("bubblewrap", "the local sandbox's isolation, which the App runs by default");
  if (!process.env["HARNESS_TEST_REDIS_SERVER"] && !onPath("redis-server"))
    await installDebianPackage("redis-server", "the binary only: the tests start their own on a free port");
  // The Redis servers start while the rest is set up: a cluster calls itself ready 2 s after it
  // started at the earliest, which test/redis-cluster-ready.ts, the last set-up, waits for.
  const redis = startPrivateRedises();
  let stopDocker: () => Promise<void>;
  try {
    const isolation = await probeIsolation(bwrapPath ? { bwrapPath } : {});
    if (!isolation.available) {
      throw new Error(
        `The test suite needs bubblewrap for the local sandbox: ${isolation.reason}. ` +
          `Fix: ${isolation.fix} (bash .ci/run installs it when missing)`,
      );
    }
    // Chosen (and, for the bundled one, unpacked) once here: test files running at once would
    // otherwise race to unpack it.
    process.env["HARNESS_TEST_CHROMIUM"] = await chromiumPath();
    stopDocker = await shareDockerEngine();
  } catch (error) {
    await redis.then(
      (stop) => stop(),
      () => undefined,
    );
    throw error;
  }
  let stopRedis: () => Promise<void>;
  try {
    stopRedis = await redis;
  } catch (error) {
    await stopDocker();
    throw new Error(
      `The test suite needs redis-server for the BullMQ queue and the Redis stores: ` +
        `${error instanceof Error ? error.message : String(error)}. ` +
        `Fix: apt-get install redis-server (bash .ci/run installs it when missing); ` +
        `the tests start their own on free ports`,
    );
  }
  return async () => {
    await stopRedis();
    await stopDocker();
  };
}

/**
 * The run's own Redis in each topology the stores support, unless the environment names one:
 * one node (HARNESS_TEST_REDIS_URL), a 3-master cluster (HARNESS_TEST_REDIS_CLUSTER_NODES) and a
 * master with one replica behind one sentinel (HARNESS_TEST_REDIS_SENTINELS, with
 * HARNESS_TEST_REDIS_SENTINEL_NAME). One sentinel is enough here: nothing fails over in this
 * group (the failover test starts its own), and clients treat one sentinel as they treat a list.
 * Test files run in worker processes started after this, which inherit the environment.
 */
async function startPrivateRedises(): Promise<() => Promise<void>> {
  const env = process.env;
  const started = await Promise.allSettled([
    env["HARNESS_TEST_REDIS_URL"] ? undefined : startPrivateRedis(),
    env["HARNESS_TEST_REDIS_CLUSTER_NODES"] ? undefined : startPrivateRedisCluster(3),
    env["HARNESS_TEST_REDIS_SENTINELS"] ? undefined : startPrivateRedisSentinel({ replicas: 1, sentinels: 1 }),
  ]);
  const running = started.flatMap((outcome) =>
    outcome.status === "fulfilled" && outcome.value ? [outcome.value] : [],
  );
  const stop = async (): Promise<void> => {
    await Promise.all(running.map((server) => server.stop()));
  };
  const failure = started.find((outcome) => outcome.status === "rejected");
  if (failure) {
    await stop();
    throw failure.reason;
  }
  const [node, cluster, sentinel] = started.map((outcome) =>
    outcome.status === "fulfilled" ? outcome.value : undefined,
  );
  if (node && "url" in node) env["HARNESS_TEST_REDIS_URL"] = node.url;
  if (cluster && "nodes" in cluster) env["HARNESS_TEST_REDIS_CLUSTER_NODES"] = hostList(cluster.nodes);
  if (sentinel && "sentinels" in sentinel) {
    env["HARNESS_TEST_REDIS_SENTINELS"] = hostList(sentinel.sentinels);
    env["HARNESS_TEST_REDIS_SENTINEL_NAME"] = sentinel.name;
  }
  return stop;
}

function hostList(hosts: ReadonlyArray<{ host: string; port: number }>): string {
  return hosts.map((item) => `${item.host}:${String(item.port)}`).join(",");
}

/**
 * One Docker Engine for every file that needs one (the running one, else a daemon of the
 * suite's own), so files do not each start a daemon and build its image; or the reason there
 * is none, which those files print as they skip.
 */
async function shareDockerEngine(): Promise<() => Promise<void>> {
  const engine = await testEngine();
  if (!engine.available) {
    process.env["HARNESS_TEST_DOCKER_UNAVAILABLE"] = engine.reason;
    return () => Promise.resolve();
  }
  process.env["HARNESS_TEST_DOCKER_HOST"] = engine.host;
  return () => engine.stop();
}
