import { execFile } from "node:child_process";
import { accessSync, constants } from "node:fs";
import { delimiter, join } from "node:path";
import { promisify } from "node:util";

const run = promisify(execFile);

/** The program's path on PATH, if any. */
export function onPath(program: string, path = process.env["PATH"] ?? ""): string | undefined {
  for (const dir of path.split(delimiter)) {
    if (!dir) continue;
    try {
      accessSync(join(dir, program), constants.X_OK);
      return join(dir, program);
    } catch {
      // Not in this directory.
    }
  }
  return undefined;
}

/**
 * Brings a Debian package the test suite needs and npm cannot ship (bubblewrap, redis-server),
 * so `npm ci && npm test` works on a fresh Debian machine with nothing installed by hand. Only
 * where installing is ours to do — as root with apt-get, and not turned off with
 * HARNESS_TEST_NO_APT=1; anywhere else the caller fails with one line naming the package. Says
 * what it does on one line, since it takes a few seconds and changes the machine.
 */
export async function installDebianPackage(pkg: string, why: string): Promise<boolean> {
  if (process.env["HARNESS_TEST_NO_APT"] === "1") return false;
  if (process.getuid?.() !== 0 || !onPath("apt-get")) return false;
  process.stderr.write(`test set-up: installing the Debian package ${pkg} (${why})\n`);
  const env = { ...process.env, DEBIAN_FRONTEND: "noninteractive" };
  const install = () => run("apt-get", ["install", "-y", "-qq", pkg], { env, timeout: 300_000 });
  try {
    await install();
  } catch {
    // A fresh container has no package lists yet.
    try {
      await run("apt-get", ["update", "-qq"], { env, timeout: 300_000 });
      await install();
    } catch {
      return false;
    }
  }
  return true;
}
