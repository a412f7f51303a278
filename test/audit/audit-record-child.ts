/**
 * Another process recording into a SQLite audit trail, for the cross-process test: records
 * `count` entries for `runId` as fast as it can, then reports.
 */
import { SqliteAuditLog } from "../../src/audit/sqlite-audit-log.js";

const [path = "", runId = "", count = "0", tag = ""] = process.argv.slice(2);
const log = new SqliteAuditLog({ path });
try {
  for (let i = 0; i < Number(count); i++)
    await log.record({ action: "token.minted", repo: "acme/widgets", runId, actor: tag, details: { n: i } });
  process.send?.({ done: true });
} catch (error) {
  process.send?.({ error: error instanceof Error ? error.message : String(error) });
} finally {
  await log.close();
}
