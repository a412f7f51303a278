import { truncateBytes } from "./sanitize.js";

/**
 * Collects a stream's output while holding at most `maxBytes` of it (the tail), so a command
 * that prints gigabytes costs a bounded amount of memory. `text()` renders it with the same
 * truncation marker as `truncate`.
 */
export class TailBuffer {
  private chunks: Buffer[] = [];
  private held = 0;
  private total = 0;

  constructor(private readonly maxBytes: number) {}

  push(chunk: Buffer): void {
    this.total += chunk.length;
    this.chunks.push(chunk);
    this.held += chunk.length;
    // Drop whole chunks from the front while what remains still covers maxBytes.
    while (this.chunks.length > 1 && this.held - (this.chunks[0]?.length ?? 0) >= this.maxBytes) {
      this.held -= this.chunks.shift()?.length ?? 0;
    }
    // One oversized chunk: copy out its tail so the large buffer can be freed.
    if (this.held > 2 * this.maxBytes) {
      const all = Buffer.concat(this.chunks);
      this.chunks = [Buffer.from(all.subarray(all.length - this.maxBytes))];
      this.held = this.maxBytes;
    }
  }

  /** Bytes seen in total, including those no longer held. */
  get totalBytes(): number {
    return this.total;
  }

  get truncated(): boolean {
    return this.total > this.maxBytes;
  }

  text(): string {
    return truncateBytes(Buffer.concat(this.chunks), this.maxBytes, this.total);
  }
}
