import { readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { sandboxBaseEnv } from "../../sandbox/environment.js";
import { runProcess } from "../../sandbox/process.js";
import { failed, passed, type Check } from "../check.js";
import type { DoctorContext } from "../context.js";
import { compareVersions, parseVersion, satisfiesRange } from "../versions.js";

/**
 * The oldest git Harness is built and tested against (Debian 12's): the write path's checks of
 * a result bundle are written for how 2.39 imports one (delivery/result-fsck.ts).
 */
export const MIN_GIT_VERSION = "2.39.0";

/** package.json's `engines.node`: the one statement of which Node.js versions Harness supports. */
export function nodeEngineRange(): string {
  const raw: unknown = JSON.parse(readFileSync(new URL("../../../package.json", import.meta.url), "utf8"));
  const engines = typeof raw === "object" && raw !== null && "engines" in raw ? raw.engines : undefined;
  const node = typeof engines === "object" && engines !== null && "node" in engines ? engines.node : undefined;
  return typeof node === "string" ? node : ">=20";
}

export function nodeCheck(
  version: string = process.versions.node,
  range: string = nodeEngineRange(),
): Check<DoctorContext> {
  return {
    id: "node",
    name: "Node.js",
    run() {
      return Promise.resolve(
        satisfiesRange(version, range)
          ? passed(`${version} (package.json asks for ${range})`)
          : failed(
              `${version} is not one package.json supports (${range})`,
              `install a supported Node.js (22 LTS is the simplest) and run Harness with it`,
            ),
      );
    },
  };
}

/** The git on the PATH Harness's own git processes use (the write path runs on the host). */
export function gitCheck(): Check<DoctorContext> {
  return {
    id: "git",
    name: "git",
    timeoutMs: 10_000,
    async run(context, signal) {
      const result = await runProcess({
        argv: ["git", "--version"],
        cwd: tmpdir(),
        env: sandboxBaseEnv(context.env),
        timeout: 9_000,
        signal,
      });
      if (result.exitCode !== 0)
        return failed(
          `\`git --version\` failed (exit ${String(result.exitCode)}): ${result.stderr.trim() || "no output"}`,
          `install git ${MIN_GIT_VERSION} or newer (apt-get install git) on the PATH Harness runs with`,
        );
      const version = parseVersion(result.stdout);
      const minimum = parseVersion(MIN_GIT_VERSION) ?? [0, 0, 0];
      if (!version) return failed(`could not read a version in "${result.stdout.trim()}"`, "reinstall git");
      const shown = version.join(".");
      return compareVersions(version, minimum) >= 0
        ? passed(`${shown} (at least ${MIN_GIT_VERSION})`)
        : failed(`${shown} is older than ${MIN_GIT_VERSION}`, `upgrade git to ${MIN_GIT_VERSION} or newer`);
    },
  };
}
