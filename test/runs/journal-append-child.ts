/**
 * A second process appending to a SQLite journal, for the cross-process test: appends `count`
 * log lines to `runId` as fast as it can, then reports.
 */
import { SqliteRunJournal } from "../../src/runs/journal/sqlite.js";

const [path = "", runId = "", count = "0", tag = ""] = process.argv.slice(2);
const journal = new SqliteRunJournal({ path });
try {
  for (let i = 0; i < Number(count); i++) {
    await journal.append(runId, {
      type: "node.log",
      runId,
      nodeId: "n",
      attempt: 1,
      text: `${tag} ${String(i)}\n`,
      at: new Date().toISOString(),
    });
  }
  process.send?.({ done: true });
} catch (error) {
  process.send?.({ error: error instanceof Error ? error.message : String(error) });
} finally {
  await journal.close();
}
