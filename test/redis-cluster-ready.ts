import { untilClusterAgrees } from "./private-redis.js";

/**
 * Runs after the other set-up: the cluster test/prerequisites.ts started calls itself ready 2 s
 * after its nodes started at the earliest, and the set-up before this one fills that time.
 */
export default async function clusterReady(): Promise<void> {
  const nodes = (process.env["HARNESS_TEST_REDIS_CLUSTER_NODES"] ?? "")
    .split(",")
    .filter(Boolean)
    .map((entry) => {
      const [host = "", port = ""] = entry.split(/:(?=\d+$)/);
      return { host, port: Number(port) };
    });
  await untilClusterAgrees(nodes);
}
