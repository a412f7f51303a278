import { stat, statfs } from "node:fs/promises";
import { dirname } from "node:path";
import { failed, passed, skipped, type Check } from "../check.js";
import { appSettings, type DoctorContext } from "../context.js";

/**
 * Free space where the repository cache keeps its mirrors (HARNESS_REPO_CACHE): below the
 * doctor's floor the next clone may fail; below the cache's own cap it may fill the disk first.
 */
export function repoCacheDiskCheck(): Check<DoctorContext> {
  return {
    id: "repo-cache-disk",
    name: "repository cache disk",
    needs: ["settings"],
    async run(context) {
      const settings = appSettings(context);
      const cache = settings.repoCache;
      if (!cache) return skipped("no repository cache (HARNESS_REPO_CACHE=off, or the in-memory queue)");
      if (!settings.allowedSandboxes.includes("local")) return skipped("not used: runs go to Daytona");
      const folder = await nearestExisting(cache.root);
      const info = await statfs(folder);
      const free = info.bavail * info.bsize;
      const shown = `${gib(free)} free at ${cache.root}`;
      if (free < context.minFreeBytes)
        return failed(
          `only ${shown} (at least ${gib(context.minFreeBytes)} needed)`,
          "free space on that disk, or move HARNESS_REPO_CACHE to a larger one",
        );
      return passed(
        free < cache.maxBytes
          ? `${shown}; the cache may grow to ${gib(cache.maxBytes)} (HARNESS_REPO_CACHE_MAX_GB), more than is free`
          : `${shown} (the cache may grow to ${gib(cache.maxBytes)})`,
      );
    },
  };
}

/** The cache folder, or the folder it will be made in. */
async function nearestExisting(path: string): Promise<string> {
  let folder = path;
  while (
    !(await stat(folder).then(
      () => true,
      () => false,
    ))
  ) {
    const parent = dirname(folder);
    if (parent === folder) break;
    folder = parent;
  }
  return folder;
}

function gib(bytes: number): string {
  return `${(bytes / 1024 ** 3).toFixed(1)} GiB`;
}
