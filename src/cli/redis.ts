import type { Command } from "commander";
import { renameToTaggedKeys } from "../store/redis-key-migration.js";
import { redisPrefixFromEnv, redisTargetFromEnv } from "../store/redis-settings.js";

/**
 * `harness redis rename-keys [--dry-run]`: once, after upgrading a deployment whose Redis holds
 * keys from before they carried hash tags, renames them to the names this version reads. Reads
 * the same settings as the App (REDIS_URL, HARNESS_REDIS_PREFIX).
 */
export function registerRedisCommand(
  program: Command,
  io: { env: NodeJS.ProcessEnv; stdout: NodeJS.WritableStream },
): void {
  const redis = program.command("redis").description("Maintenance of the Redis the queue and stores share");
  redis
    .command("rename-keys")
    .description("Rename keys written before hash tags (<prefix>:<store>:…) to {<prefix>:<store>}:…, once")
    .option("--dry-run", "count and show what would be renamed, change nothing")
    .action(async (flags: { dryRun?: boolean }) => {
      const prefix = redisPrefixFromEnv(io.env);
      const result = await renameToTaggedKeys(redisTargetFromEnv(io.env), prefix, { dryRun: flags.dryRun ?? false });
      for (const [from, to] of result.examples) io.stdout.write(`${from} -> ${to}\n`);
      io.stdout.write(
        `${flags.dryRun ? "would rename" : "renamed"} ${String(result.renamed)} key(s) under ${prefix}` +
          (result.kept.length > 0
            ? `; kept ${String(result.kept.length)} whose new name exists already (written since the upgrade), ` +
              `e.g. ${result.kept[0] ?? ""}`
            : "") +
          "\n",
      );
    });
}
