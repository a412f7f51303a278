import { hostGit } from "./safe-git.js";

/**
 * The sizes of what a result adds, read from object headers alone. A bundle is compressed: a
 * megabyte can hold a gigabyte of zeros, and the diff that the secret scan reads would load
 * every such blob whole. So before any command reads a blob's contents, the new objects are
 * listed (`rev-list --objects`, which reads commits and trees only) and their sizes asked of
 * `cat-file --batch-check` (which reads an object's header, never its data, delta or not).
 */
export interface ObjectLimits {
  /** Largest single new object (a file's contents, usually). */
  maxObjectBytes: number;
  /** Most bytes all new objects may come to together. */
  maxTotalBytes: number;
}

export type ObjectCheck =
  { ok: true; objects: number; totalBytes: number } | { ok: false; tooLarge: boolean; problem: string };

/** Output of the listing, at most: about 200,000 objects with short paths. */
const MAX_LISTING_BYTES = 16 * 1024 * 1024;

/**
 * Lists the objects reachable from `resultRef` and not from `baseSha`, with their sizes, and
 * refuses one over `maxObjectBytes` or all of them over `maxTotalBytes`. No transport is
 * allowed: every object it names must already be here (the import checked that), so nothing is
 * fetched on demand and no blob is read.
 */
export async function checkObjectSizes(
  gitDir: string,
  baseSha: string,
  resultRef: string,
  limits: ObjectLimits,
): Promise<ObjectCheck> {
  const listed = await hostGit(gitDir, ["rev-list", "--objects", resultRef, `^${baseSha}`], {
    maxOutput: MAX_LISTING_BYTES,
    timeout: 120_000,
  });
  if (listed.truncated) return { ok: false, tooLarge: true, problem: "it adds too many objects to list" };
  if (listed.exitCode !== 0) return { ok: false, tooLarge: false, problem: "its objects could not be listed" };

  // `%(rest)` echoes what follows the name on each input line: the path rev-list found it at.
  const sized = await hostGit(gitDir, ["cat-file", "--batch-check=%(objecttype) %(objectsize) %(rest)"], {
    stdin: listed.stdout,
    maxOutput: MAX_LISTING_BYTES * 2,
    timeout: 120_000,
  });
  if (sized.exitCode !== 0 || sized.truncated)
    return { ok: false, tooLarge: false, problem: "its objects' sizes could not be read" };

  let objects = 0;
  let totalBytes = 0;
  for (const line of sized.stdout.split("\n")) {
    if (line === "") continue;
    const match = /^(blob|tree|commit|tag) (\d+)(?: (.*))?$/s.exec(line);
    if (!match) return { ok: false, tooLarge: false, problem: "it names an object that is not there" };
    const [, type, size, path] = match;
    const bytes = Number(size);
    objects += 1;
    totalBytes += bytes;
    if (bytes > limits.maxObjectBytes) {
      const what = type === "blob" && path ? JSON.stringify(path.slice(0, 200)) : `a ${String(type)}`;
      return {
        ok: false,
        tooLarge: true,
        problem: `${what} is ${formatSize(bytes)}, over the ${formatSize(limits.maxObjectBytes)} limit for one file`,
      };
    }
    if (totalBytes > limits.maxTotalBytes)
      return {
        ok: false,
        tooLarge: true,
        problem:
          `its new files come to more than the ${formatSize(limits.maxTotalBytes)} ` +
          "that can be checked for secrets",
      };
  }
  return { ok: true, objects, totalBytes };
}

/** "1.0 GiB", "16 MiB", "812 KiB", "90 bytes" */
export function formatSize(bytes: number): string {
  const units: Array<[string, number]> = [
    ["GiB", 1024 ** 3],
    ["MiB", 1024 ** 2],
    ["KiB", 1024],
  ];
  for (const [unit, scale] of units) {
    if (bytes < scale) continue;
    const value = bytes / scale;
    return `${Number.isInteger(value) ? String(value) : value.toFixed(1)} ${unit}`;
  }
  return `${String(bytes)} bytes`;
}
