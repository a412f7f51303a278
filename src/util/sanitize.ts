/** Default cap on each of a command's stdout and stderr, in bytes: 1 MiB. */
export const MAX_OUTPUT_BYTES = 1024 * 1024;

/**
 * Cuts `text` to at most `maxBytes` UTF-8 bytes, keeping its *tail* (the end of a log is where
 * the error is) behind a one-line marker that says how many bytes were cut. The result never
 * exceeds `maxBytes`, marker included, and never splits a code point.
 */
export function truncate(text: string, maxBytes: number = MAX_OUTPUT_BYTES): string {
  if (!Number.isInteger(maxBytes) || maxBytes < 0) {
    throw new RangeError(`maxBytes must be a non-negative integer, got ${String(maxBytes)}`);
  }
  const bytes = Buffer.from(text, "utf8");
  if (bytes.length <= maxBytes) return text;
  return truncateBytes(bytes, maxBytes);
}

/**
 * `truncate` for output already held as UTF-8 bytes. `bytes` may itself be only the tail of a
 * longer stream whose full length was `totalBytes` (see `TailBuffer`).
 */
export function truncateBytes(bytes: Buffer, maxBytes: number, totalBytes = bytes.length): string {
  if (totalBytes <= maxBytes) return bytes.toString("utf8");
  // Reserve room for the widest marker this stream could need, so the result never exceeds
  // maxBytes whatever the exact count turns out to be.
  const keep = maxBytes - Buffer.byteLength(truncationMarker(totalBytes));
  if (keep <= 0) return utf8Tail(bytes, maxBytes);
  const tail = utf8Tail(bytes, keep);
  return truncationMarker(totalBytes - Buffer.byteLength(tail)) + tail;
}

function truncationMarker(cutBytes: number): string {
  return `[… ${String(cutBytes)} bytes truncated …]\n`;
}

/** The last at most `maxBytes` bytes of `bytes`, starting on a code point boundary. */
function utf8Tail(bytes: Buffer, maxBytes: number): string {
  let start = Math.max(0, bytes.length - maxBytes);
  // Skip UTF-8 continuation bytes (10xxxxxx) so the tail starts at a character.
  while (start < bytes.length && ((bytes[start] ?? 0) & 0xc0) === 0x80) start++;
  return bytes.subarray(start).toString("utf8");
}
