import { constants as fsConstants } from "node:fs";
import { access, stat } from "node:fs/promises";
import { dirname, resolve } from "node:path";
import { assertRedisReachable, describeRedisTarget, redisSettingNames } from "../../store/redis-connection.js";
import { hasKeysBeforeHashTags, OLD_LAYOUT_FIX, OLD_LAYOUT_PROBLEM } from "../../store/redis-key-migration.js";
import { describeError } from "../../util/errors.js";
import { failed, passed, type Check } from "../check.js";
import { appSettings, type DoctorContext } from "../context.js";

/**
 * Where runs wait and what must outlive a restart: the SQLite file (its folder writable, or
 * creatable, and the file writable when it exists), or the Redis BullMQ shares, answering a PING.
 * Nothing is written: the doctor leaves no database behind.
 */
export function queueStoreCheck(): Check<DoctorContext> {
  return {
    id: "queue-store",
    name: "queue store",
    needs: ["settings"],
    timeoutMs: 8_000,
    async run(context) {
      const queue = appSettings(context).queue ?? { kind: "sqlite", path: "./data/harness.db" };
      if (queue.kind === "memory") return passed("in memory (HARNESS_QUEUE=memory): queued runs are lost on restart");
      if (queue.kind === "bullmq") {
        const shown = describeRedisTarget(queue.redis);
        try {
          await assertRedisReachable(queue.redis, 5_000);
        } catch (error) {
          const cause = error instanceof Error && error.cause !== undefined ? error.cause : error;
          return failed(
            `${capitalised(shown)} does not answer: ${describeError(cause)}`,
            `start Redis, or correct ${redisSettingNames(queue.redis)}, ` +
              "or use HARNESS_QUEUE=sqlite on a single machine",
          );
        }
        if (await hasKeysBeforeHashTags(queue.redis, queue.prefix).catch(() => false))
          return failed(`${capitalised(shown)} answers, but ${OLD_LAYOUT_PROBLEM}`, OLD_LAYOUT_FIX);
        return passed(`${capitalised(shown)} answers (key prefix ${queue.prefix})`);
      }
      return sqliteWritable(resolve(queue.path));
    },
  };
}

function capitalised(text: string): string {
  return text.charAt(0).toUpperCase() + text.slice(1);
}

async function sqliteWritable(path: string): Promise<ReturnType<typeof passed>> {
  const fix = `make ${path}'s folder writable by this user, or point HARNESS_DB at a writable path`;
  const existing = await stat(path).catch(() => undefined);
  if (existing) {
    if (!existing.isFile()) return failed(`HARNESS_DB ${path} is not a file`, fix);
    try {
      await access(path, fsConstants.R_OK | fsConstants.W_OK);
    } catch {
      return failed(`SQLite file ${path} (HARNESS_DB) is not writable by this user`, fix);
    }
  }
  // SQLite writes its journal beside the file, so the folder must be writable too; a folder
  // that does not exist yet is made at start, so its nearest existing ancestor must be.
  let folder = dirname(path);
  for (;;) {
    const found = await stat(folder).catch(() => undefined);
    if (found) {
      if (!found.isDirectory()) return failed(`${folder}, on the way to HARNESS_DB ${path}, is not a folder`, fix);
      break;
    }
    const parent = dirname(folder);
    if (parent === folder) break;
    folder = parent;
  }
  try {
    await access(folder, fsConstants.W_OK | fsConstants.X_OK);
  } catch {
    return failed(`${folder} is not writable by this user, so SQLite cannot write ${path} (HARNESS_DB)`, fix);
  }
  return passed(`SQLite at ${path} is writable${existing ? "" : " (made at start)"}`);
}
