/** A duration as people read it in a terminal or a comment: `850ms`, `12.3s`, `4m05s`. */
export function formatDuration(ms: number): string {
  if (ms < 1000) return `${String(Math.round(ms))}ms`;
  if (ms < 60_000) return `${(ms / 1000).toFixed(1)}s`;
  const minutes = Math.floor(ms / 60_000);
  return `${String(minutes)}m${String(Math.round((ms % 60_000) / 1000)).padStart(2, "0")}s`;
}
