import { readFile } from "node:fs/promises";

/** Linux's clock ticks per second for /proc times (USER_HZ, 100 on every common kernel). */
const TICKS_PER_SECOND = 100;

/** CPU seconds (user + system) `pid` has used so far, or undefined when it is gone or not Linux. */
export async function processCpuSeconds(pid: number): Promise<number | undefined> {
  const stat = await readFile(`/proc/${String(pid)}/stat`, "utf8").catch(() => undefined);
  if (stat === undefined) return undefined;
  // Fields after the command name (which may hold spaces, inside parentheses): utime is the 14th
  // field of the line, stime the 15th; cutime and cstime (children waited for) the 16th and 17th.
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  const ticks = [11, 12, 13, 14].reduce((sum, index) => sum + Number(fields[index] ?? 0), 0);
  return ticks / TICKS_PER_SECOND;
}

/** The whole machine's CPU time so far, busy and in all, in seconds (every core). */
export async function machineCpuSeconds(): Promise<{ busy: number; total: number } | undefined> {
  const stat = await readFile("/proc/stat", "utf8").catch(() => undefined);
  const line = stat?.split("\n").find((each) => each.startsWith("cpu "));
  if (!line) return undefined;
  const values = line.trim().split(/\s+/).slice(1).map(Number);
  const total = values.reduce((sum, value) => sum + value, 0);
  // idle and iowait are the 4th and 5th columns.
  const idle = (values[3] ?? 0) + (values[4] ?? 0);
  return { busy: (total - idle) / TICKS_PER_SECOND, total: total / TICKS_PER_SECOND };
}
