import { createWriteStream, type WriteStream } from "node:fs";
import type { HarnessEvent, Reporter } from "../../contracts/events.js";

/**
 * Appends each event as one JSON line to a file (`harness run --report run.jsonl`), so a run
 * can be followed with `tail -f` and processed with `jq`.
 */
export class JsonLinesReporter implements Reporter {
  private readonly stream: WriteStream;
  private failure: Error | undefined;

  constructor(path: string) {
    this.stream = createWriteStream(path, { flags: "a", encoding: "utf8" });
    this.stream.on("error", (error) => {
      this.failure = error;
    });
  }

  emit(event: HarnessEvent): void {
    if (this.failure) return;
    this.stream.write(`${JSON.stringify(event)}\n`);
  }

  /** Flushes and closes the file; rejects with a readable error if it could not be written. */
  async close(): Promise<void> {
    await new Promise<void>((resolve) => this.stream.end(resolve));
    if (this.failure) throw new Error(`Could not write the run report: ${this.failure.message}`);
  }
}
