import { probeIsolation } from "../src/sandbox/isolation.js";

/**
 * Runs once before the suite: a prerequisite the tests cannot bring themselves stops the run
 * at once with one line saying what to install, instead of dozens of failures that each say
 * something else. Bubblewrap isolates the local sandbox, which the App runs by default; it is a
 * Debian package, not an npm one.
 */
export default async function checkPrerequisites(): Promise<void> {
  const bwrapPath = process.env["HARNESS_BWRAP"];
  const isolation = await probeIsolation(bwrapPath ? { bwrapPath } : {});
  if (!isolation.available) {
    throw new Error(
      `The test suite needs bubblewrap for the local sandbox: ${isolation.reason}. Fix: ${isolation.fix} (bash .ci/run installs it when missing)`,
    );
  }
}
