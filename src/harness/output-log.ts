import { REDACTED, type Redactor } from "../util/redact.js";

export interface OutputLogOptions {
  /** Receives each batch: whole lines, redacted. */
  emit: (text: string) => void;
  redactor: Redactor;
  /** Batching interval in ms: at most one batch per interval while output flows. */
  intervalMs: number;
  /**
   * A line longer than this without a newline (a progress bar, minified JSON) is let out in
   * pieces: waiting for its end could hold output back indefinitely.
   */
  maxLineChars?: number;
  /** Most text held for one batch; beyond it the oldest whole lines are skipped, and counted. */
  maxBatchChars?: number;
}

const DEFAULT_MAX_LINE_CHARS = 64 * 1024;
const DEFAULT_MAX_BATCH_CHARS = 1024 * 1024;
const PEM_BEGIN_ALL = /-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----/g;
const PEM_END = /-----END [A-Z0-9 ]*PRIVATE KEY-----/;

/**
 * Turns a process's raw output chunks into `node.log` batches. Chunks are cut wherever the pipe
 * cut them, so a secret can arrive in two halves that no pattern recognises: output is held back
 * until its line is complete and redacted a whole line at a time. A private key spans many
 * lines, so once one begins, every line up to its end is withheld, across batches.
 * A flood is bounded: at most `maxBatchChars` characters wait per interval, the rest is skipped with a note.
 */
export class OutputLog {
  private readonly partial = { stdout: "", stderr: "" };
  private pending: string[] = [];
  private pendingChars = 0;
  private skippedBytes = 0;
  private timer: NodeJS.Timeout | undefined;
  private insidePrivateKey = false;
  private readonly maxLineChars: number;
  private readonly maxBatchChars: number;

  constructor(private readonly options: OutputLogOptions) {
    this.maxLineChars = options.maxLineChars ?? DEFAULT_MAX_LINE_CHARS;
    this.maxBatchChars = options.maxBatchChars ?? DEFAULT_MAX_BATCH_CHARS;
  }

  push(stream: "stdout" | "stderr", chunk: string): void {
    const text = this.partial[stream] + chunk;
    const cut = Math.max(text.lastIndexOf("\n"), text.lastIndexOf("\r"));
    if (cut >= 0) {
      this.hold(text.slice(0, cut + 1));
      this.partial[stream] = text.slice(cut + 1);
    } else {
      this.partial[stream] = text;
    }
    if (this.partial[stream].length > this.maxLineChars) {
      this.hold(this.partial[stream]);
      this.partial[stream] = "";
    }
    if (this.pending.length > 0 && !this.timer) {
      this.timer = setTimeout(() => {
        this.flush();
      }, this.options.intervalMs);
    }
  }

  /** Lets out everything held, unfinished lines included: the process has ended. */
  stop(): void {
    for (const stream of ["stdout", "stderr"] as const) {
      if (this.partial[stream] !== "") this.hold(`${this.partial[stream]}\n`);
      this.partial[stream] = "";
    }
    this.flush();
  }

  private hold(text: string): void {
    this.pending.push(text);
    this.pendingChars += text.length;
    while (this.pendingChars > this.maxBatchChars && this.pending.length > 1) {
      const dropped = this.pending.shift() ?? "";
      this.pendingChars -= dropped.length;
      this.skippedBytes += Buffer.byteLength(dropped);
    }
    const only = this.pending[0];
    if (this.pendingChars > this.maxBatchChars && only !== undefined) {
      // One oversized piece: keep its tail from a line start, so no line is shown cut.
      const tail = only.slice(only.length - this.maxBatchChars);
      const lineStart = tail.search(/[\r\n]/);
      const kept = lineStart >= 0 && lineStart < tail.length - 1 ? tail.slice(lineStart + 1) : tail;
      this.skippedBytes += Buffer.byteLength(only) - Buffer.byteLength(kept);
      this.pending = [kept];
      this.pendingChars = kept.length;
    }
  }

  private flush(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    if (this.pending.length === 0 && this.skippedBytes === 0) return;
    const note =
      this.skippedBytes > 0
        ? `[… ${this.skippedBytes.toLocaleString("en")} bytes of output skipped: ` +
          `it came faster than it can be shown …]\n`
        : "";
    const text = this.withoutPrivateKeys(this.pending.join(""));
    this.pending = [];
    this.pendingChars = 0;
    this.skippedBytes = 0;
    const redacted = note + this.options.redactor(text);
    if (redacted !== "") this.options.emit(redacted);
  }

  /** Withholds the body of a private key that began in an earlier batch, up to its end line. */
  private withoutPrivateKeys(text: string): string {
    let out = text;
    if (this.insidePrivateKey) {
      const end = PEM_END.exec(out);
      if (!end) return "";
      this.insidePrivateKey = false;
      out = `${REDACTED}${out.slice(end.index + end[0].length)}`;
    }
    const begins = [...out.matchAll(PEM_BEGIN_ALL)];
    const last = begins.at(-1);
    if (last && !PEM_END.test(out.slice(last.index))) this.insidePrivateKey = true;
    return out;
  }
}
