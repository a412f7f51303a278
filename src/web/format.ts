import type { RunState, RunSummary } from "../runs/journal/port.js";

/** "4.2 s", "3 min 05 s", "1 h 02 min". */
export function formatDuration(ms: number): string {
  if (!Number.isFinite(ms) || ms < 0) return "";
  if (ms < 60_000) return `${(ms / 1000).toFixed(1)} s`;
  const seconds = Math.floor(ms / 1000);
  if (seconds < 3600) return `${String(Math.floor(seconds / 60))} min ${String(seconds % 60).padStart(2, "0")} s`;
  return `${String(Math.floor(seconds / 3600))} h ${String(Math.floor((seconds % 3600) / 60)).padStart(2, "0")} min`;
}

/** "2026-11-22 10:04 UTC": unambiguous for readers in any time zone, without script. */
export function formatTime(iso: string | undefined): string {
  if (!iso) return "";
  const date = new Date(iso);
  if (Number.isNaN(date.getTime())) return "";
  return `${date.toISOString().slice(0, 16).replace("T", " ")} UTC`;
}

/** How long a run took, or has taken so far; empty before it started. */
export function runDuration(summary: RunSummary, now: Date): string {
  if (!summary.startedAt) return "";
  const end = summary.finishedAt ? Date.parse(summary.finishedAt) : now.getTime();
  return formatDuration(end - Date.parse(summary.startedAt));
}

export const STATE_LABELS: Readonly<Record<RunState, string>> = {
  queued: "Queued",
  running: "Running",
  succeeded: "Succeeded",
  failed: "Failed",
  cancelled: "Cancelled",
  interrupted: "Interrupted",
  paused: "Paused at its budget",
};

/** "1.5 MB", "812 KB", "300 bytes". */
export function formatBytes(bytes: number): string {
  if (bytes >= 1024 * 1024) return `${(bytes / (1024 * 1024)).toFixed(1)} MB`;
  if (bytes >= 1024) return `${String(Math.round(bytes / 1024))} KB`;
  return `${String(bytes)} bytes`;
}

/** The repository's web address, from its issue's (github.com or an Enterprise Server). */
export function repoUrl(summary: RunSummary): string | undefined {
  try {
    return (
      `${new URL(summary.issue.url).origin}/` +
      `${encodeURIComponent(summary.repo.owner)}/${encodeURIComponent(summary.repo.name)}`
    );
  } catch {
    return undefined;
  }
}
