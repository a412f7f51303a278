import { probeIsolation } from "../src/sandbox/local/isolation.js";
import { chromiumPath } from "./helpers/chromium-path.js";
import { testEngine } from "./helpers/docker-engine.js";
import { installDebianPackage, onPath } from "./debian-package.js";
import { startPrivateRedis } from "./private-redis.js";

/**
 * Runs once before the suite. Bubblewrap isolates the local sandbox, which the App runs by
 * default; `redis-server` backs the BullMQ queue and the Redis stores. Both are Debian packages,
 * not npm ones: when one is missing the suite installs it where it may (root with apt-get), and
 * otherwise stops at once with one line saying what to install, instead of dozens of failures
 * that each say something else.
 *
 * The Redis is the run's own, on a free port, handed to every test file as
 * HARNESS_TEST_REDIS_URL and stopped at the end: a developer's Redis is never written to.
 * Setting HARNESS_TEST_REDIS_URL yourself points the tests at another Redis on purpose.
 */
export default async function checkPrerequisites(): Promise<(() => Promise<void>) | undefined> {
  const bwrapPath = process.env["HARNESS_BWRAP"];
  if (!bwrapPath && !onPath("bwrap"))
    await installDebianPackage("bubblewrap", "the local sandbox's isolation, which the App runs by default");
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
  const stopDocker = await shareDockerEngine();
  if (process.env["HARNESS_TEST_REDIS_URL"]) return stopDocker;
  if (!process.env["HARNESS_TEST_REDIS_SERVER"] && !onPath("redis-server"))
    await installDebianPackage("redis-server", "the binary only: the tests start their own on a free port");
  let redis;
  try {
    redis = await startPrivateRedis();
  } catch (error) {
    throw new Error(
      `The test suite needs redis-server for the BullMQ queue and the Redis stores: ` +
        `${error instanceof Error ? error.message : String(error)}. ` +
        `Fix: apt-get install redis-server (bash .ci/run installs it when missing); ` +
        `the tests start their own on a free port`,
    );
  }
  // Test files run in worker processes started after this, which inherit the environment.
  process.env["HARNESS_TEST_REDIS_URL"] = redis.url;
  return async () => {
    await redis.stop();
    await stopDocker();
  };
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
