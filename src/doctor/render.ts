import type { CheckReport, CheckStatus } from "./runner.js";

const MARK: Record<CheckStatus, string> = { ok: "✓", fail: "✗", skip: "–" };

/** True when no check failed (a skipped one is not a failure). */
export function allPassed(reports: readonly CheckReport[]): boolean {
  return reports.every((report) => report.status !== "fail");
}

/**
 * One line per check, `✓`/`✗`/`–` then its name and what was found; a failure (or a skipped
 * check that says how it would apply) has its fix on the next line, indented. Then a total.
 */
export function renderText(reports: readonly CheckReport[]): string {
  const lines: string[] = [];
  for (const report of reports) {
    lines.push(`${MARK[report.status]} ${report.name}: ${report.detail}`);
    if (report.fix && report.status !== "ok") lines.push(`    fix: ${report.fix}`);
  }
  const failures = reports.filter((report) => report.status === "fail").length;
  lines.push(
    "",
    failures === 0
      ? `All ${String(reports.length)} checks passed or do not apply.`
      : `${String(failures)} of ${String(reports.length)} checks failed.`,
  );
  return `${lines.join("\n")}\n`;
}

/** One check as one line, its fix on the same line: for a log. */
export function renderLine(report: CheckReport): string {
  const fix = report.fix && report.status !== "ok" ? ` — fix: ${report.fix}` : "";
  return `${MARK[report.status]} ${report.name}: ${report.detail}${fix}`;
}

/** `{ ok, checks: [{ id, name, status, detail, fix?, durationMs }] }`, for scripts and monitoring. */
export function renderJson(reports: readonly CheckReport[]): string {
  return `${JSON.stringify({ ok: allPassed(reports), checks: reports }, null, 2)}\n`;
}
