/**
 * The viewers of `bench/run-stream.ts`, in their own process so their memory is not counted as
 * the server's: N clients follow one run's event stream over HTTP, like the run page's script.
 * Each output line carries `#<n> @<epoch ms>`; a viewer records which lines it got and, for the
 * last line of each message, how long after it was written it arrived.
 * Reports `{ ready: true }` once every stream is open, then the figures when all have closed.
 */
import { openSse, type SseMessage } from "../../test/web/sse-client.js";

interface Setup {
  url: string;
  viewers: number;
}

const setup = JSON.parse(process.argv[2] ?? "{}") as Setup;
const send = (message: unknown): void => {
  process.send?.(message);
};
const LINE = /#(\d+) @(\d+)/g;

interface ViewerStats {
  lines: number;
  maxLine: number;
  messages: number;
  bytes: number;
  lags: number[];
}

try {
  const stats: ViewerStats[] = [];
  const streams = await Promise.all(
    Array.from({ length: setup.viewers }, async () => {
      const seen = new Set<number>();
      const mine: ViewerStats = { lines: 0, maxLine: 0, messages: 0, bytes: 0, lags: [] };
      stats.push(mine);
      const onMessage = (message: SseMessage): void => {
        mine.messages += 1;
        if (message.event !== "output") return;
        const { segments } = JSON.parse(message.data) as { segments: Array<[string, string]> };
        const text = segments.map(([, segment]) => segment).join("");
        let last = 0;
        for (const match of text.matchAll(LINE)) {
          const line = Number(match[1]);
          seen.add(line);
          mine.maxLine = Math.max(mine.maxLine, line);
          last = Number(match[2]);
        }
        mine.lines = seen.size;
        if (last > 0) mine.lags.push(Date.now() - last);
      };
      const stream = await openSse(setup.url, {}, onMessage);
      if (stream.status !== 200) throw new Error(`viewer got HTTP ${String(stream.status)}`);
      return { stream, mine };
    }),
  );
  send({ ready: true });
  await Promise.all(streams.map(({ stream }) => stream.rest()));
  for (const { stream, mine } of streams) mine.bytes = stream.bytes;
  send({ stats });
} catch (error) {
  send({ error: error instanceof Error ? error.message : String(error) });
}
if (process.connected) process.disconnect();
