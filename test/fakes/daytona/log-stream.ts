import type { Readable } from "node:stream";
import type { WebSocket } from "ws";

/** The daemon's stream markers (SDK Process.js STDOUT_PREFIX_BYTES / STDERR_PREFIX_BYTES). */
export const STDOUT_MARKER = Buffer.from([1, 1, 1]);
export const STDERR_MARKER = Buffer.from([2, 2, 2]);

type StreamName = "stdout" | "stderr";

interface LogEntry {
  stream: StreamName;
  data: Buffer;
}

/**
 * Largest WebSocket message the fake sends (pipe chunks are cut to this). Small on purpose: the SDK's demuxer
 * (utils/Stream.js stdDemuxStream → processChunk) copies its pending bytes through a plain JS array on every frame
 * (`buf.push(...chunk)`, `new Uint8Array(buf)`), and measured 2–2.5x slower with 32–64 KiB frames than with 4–8 KiB
 * (about 20 MB/s at best). The daemon's real frame size is unknown.
 */
const MAX_FRAME_BYTES = 8 * 1024;
/** Per-subscriber bytes handed to `ws.send` but not yet flushed, above which the child's pipes are paused. */
const HIGH_WATER_BYTES = 1024 * 1024;
const LOW_WATER_BYTES = 256 * 1024;

/**
 * A FIFO of buffers that keeps only the newest `cap` bytes (whole entries are dropped from the front; an
 * oversized entry is cut to its tail). Memory stays bounded however much a command prints.
 */
class BoundedEntries {
  /** Dropped slots before `head` are cleared at once, so their buffers are freed before the next compaction. */
  private entries: (LogEntry | undefined)[] = [];
  private head = 0;
  size = 0;
  droppedBytes = 0;

  constructor(private readonly cap: number) {}

  push(entry: LogEntry): void {
    let data = entry.data;
    if (data.length > this.cap) {
      this.droppedBytes += data.length - this.cap;
      data = data.subarray(data.length - this.cap);
    }
    this.entries.push({ stream: entry.stream, data });
    this.size += data.length;
    while (this.size > this.cap && this.head < this.entries.length) {
      const first = this.entries[this.head];
      if (first === undefined) break;
      this.size -= first.data.length;
      this.droppedBytes += first.data.length;
      this.entries[this.head] = undefined;
      this.head += 1;
    }
    // Compact occasionally so the array of dropped slots does not grow without bound.
    if (this.head > 1024 && this.head * 2 > this.entries.length) {
      this.entries = this.entries.slice(this.head);
      this.head = 0;
    }
  }

  list(): LogEntry[] {
    return this.entries.slice(this.head).filter((entry): entry is LogEntry => entry !== undefined);
  }
}

export interface OutputStats {
  /** Bytes the command wrote to stdout / stderr in total (including those no longer retained). */
  stdoutBytes: number;
  stderrBytes: number;
  /** Bytes currently retained for the HTTP logs endpoint (framed log + stdout + stderr). */
  retainedBytes: number;
  /** Largest amount of live WebSocket data ever queued-but-unflushed for one subscriber. */
  peakInFlightBytes: number;
  /** How many times a slow WebSocket reader paused the child's pipes. */
  pauses: number;
  /** Frames in which a stream marker was deliberately split across two WebSocket messages. */
  splitMarkers: number;
}

interface Subscriber {
  ws: WebSocket;
  inFlight: number;
}

/**
 * Output of one command: bounded retained logs for `GET …/logs` and `exec` responses, plus live fan-out to
 * WebSocket followers with back-pressure (a slow follower pauses the child's pipes instead of the fake
 * buffering without limit — the real daemon writes to a log file, so it never blocks the command; this fake
 * trades that for bounded memory).
 */
export class CommandOutput {
  private readonly framed: BoundedEntries;
  private readonly stdout: BoundedEntries;
  private readonly stderr: BoundedEntries;
  private readonly subscribers = new Set<Subscriber>();
  private readonly sources: Readable[] = [];
  private paused = false;
  private frameCounter = 0;
  private finished = false;
  readonly stats: OutputStats = {
    stdoutBytes: 0,
    stderrBytes: 0,
    retainedBytes: 0,
    peakInFlightBytes: 0,
    pauses: 0,
    splitMarkers: 0,
  };

  constructor(
    retentionBytes: number,
    private readonly splitMarkers: boolean,
  ) {
    this.framed = new BoundedEntries(retentionBytes);
    this.stdout = new BoundedEntries(retentionBytes);
    this.stderr = new BoundedEntries(retentionBytes);
  }

  /** Pipes whose flow is paused while a follower is slow. */
  attachSources(...streams: Readable[]): void {
    this.sources.push(...streams);
  }

  append(stream: StreamName, data: Buffer): void {
    if (data.length === 0) return;
    if (stream === "stdout") this.stats.stdoutBytes += data.length;
    else this.stats.stderrBytes += data.length;
    // Deviation: the real daemon prefixes every *line* with its marker; the fake prefixes every chunk it reads.
    // Both are valid for the SDK's demuxer, which only looks for marker switches.
    this.framed.push({ stream, data });
    (stream === "stdout" ? this.stdout : this.stderr).push({ stream, data });
    this.stats.retainedBytes = this.framed.size + this.stdout.size + this.stderr.size;
    for (const sub of this.subscribers) this.sendEntry(sub, { stream, data });
  }

  /** `output` as the daemon returns it: the raw marker-framed log (SDK ≥ 0.167 gets markers in `output`). */
  output(): string {
    return Buffer.concat(
      this.framed.list().flatMap((e) => [e.stream === "stdout" ? STDOUT_MARKER : STDERR_MARKER, e.data]),
    ).toString("utf8");
  }
  stdoutText(): string {
    return Buffer.concat(this.stdout.list().map((e) => e.data)).toString("utf8");
  }
  stderrText(): string {
    return Buffer.concat(this.stderr.list().map((e) => e.data)).toString("utf8");
  }
  /** stdout and stderr interleaved in arrival order, without markers (what `/process/execute` returns as `result`). */
  combinedText(): string {
    return Buffer.concat(this.framed.list().map((e) => e.data)).toString("utf8");
  }

  /**
   * Attaches a WebSocket follower: replays what is retained, then streams live output, then closes 1000 when
   * `finish()` is called. Replay and registration happen in the same tick, so nothing is lost or duplicated.
   */
  follow(ws: WebSocket): void {
    const sub: Subscriber = { ws, inFlight: 0 };
    for (const entry of this.framed.list()) this.sendEntry(sub, entry);
    if (this.finished) {
      this.closeWhenFlushed(sub);
      return;
    }
    this.subscribers.add(sub);
    ws.on("close", () => {
      this.subscribers.delete(sub);
      this.updateFlow();
    });
    ws.on("error", () => {
      this.subscribers.delete(sub);
      this.updateFlow();
    });
  }

  /** The command exited and its pipes are drained: close every follower normally. */
  finish(): void {
    if (this.finished) return;
    this.finished = true;
    for (const sub of this.subscribers) this.closeWhenFlushed(sub);
    this.subscribers.clear();
    this.updateFlow();
  }

  private closeWhenFlushed(sub: Subscriber): void {
    // ws queues close after pending sends, so a plain close keeps ordering.
    if (sub.ws.readyState === sub.ws.OPEN) sub.ws.close(1000, "command exited");
  }

  private sendEntry(sub: Subscriber, entry: LogEntry): void {
    const marker = entry.stream === "stdout" ? STDOUT_MARKER : STDERR_MARKER;
    const frames: Buffer[] = [];
    this.frameCounter += 1;
    if (this.splitMarkers && this.frameCounter % 3 === 0) {
      // Deliberately split the marker across two frames (1+2 or 2+1 bytes) to keep clients honest: the SDK's
      // demuxer must carry partial markers over frame boundaries (utils/Stream.js handles this).
      const cut = this.frameCounter % 2 === 0 ? 1 : 2;
      this.stats.splitMarkers += 1;
      frames.push(marker.subarray(0, cut));
      frames.push(Buffer.concat([marker.subarray(cut), entry.data.subarray(0, MAX_FRAME_BYTES)]));
    } else {
      frames.push(Buffer.concat([marker, entry.data.subarray(0, MAX_FRAME_BYTES)]));
    }
    for (let offset = MAX_FRAME_BYTES; offset < entry.data.length; offset += MAX_FRAME_BYTES) {
      frames.push(entry.data.subarray(offset, offset + MAX_FRAME_BYTES));
    }
    for (const frame of frames) this.sendFrame(sub, frame);
  }

  private sendFrame(sub: Subscriber, frame: Buffer): void {
    if (sub.ws.readyState !== sub.ws.OPEN) return;
    sub.inFlight += frame.length;
    if (sub.inFlight > this.stats.peakInFlightBytes) this.stats.peakInFlightBytes = sub.inFlight;
    sub.ws.send(frame, { binary: true }, () => {
      sub.inFlight -= frame.length;
      if (this.paused && sub.inFlight <= LOW_WATER_BYTES) this.updateFlow();
    });
    if (!this.paused && sub.inFlight > HIGH_WATER_BYTES) this.updateFlow();
  }

  private updateFlow(): void {
    let slow = false;
    for (const sub of this.subscribers) {
      if (sub.inFlight > (this.paused ? LOW_WATER_BYTES : HIGH_WATER_BYTES)) slow = true;
    }
    if (slow && !this.paused) {
      this.paused = true;
      this.stats.pauses += 1;
      for (const source of this.sources) source.pause();
    } else if (!slow && this.paused) {
      this.paused = false;
      for (const source of this.sources) source.resume();
    }
  }
}
