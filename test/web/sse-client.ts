import { request, type IncomingHttpHeaders } from "node:http";

export interface SseMessage {
  id?: string;
  event: string;
  data: string;
}

/** A server-sent-events reader over real HTTP, for tests and the bench. */
export interface SseStream {
  status: number;
  headers: IncomingHttpHeaders;
  /** The next message; undefined once the server closed the stream. */
  next(): Promise<SseMessage | undefined>;
  /** Every message until the server closes the stream. */
  rest(): Promise<SseMessage[]>;
  /** Raw bytes received so far. */
  readonly bytes: number;
  close(): void;
}

export function openSse(
  url: string,
  headers: Record<string, string> = {},
  onMessage?: (message: SseMessage) => void,
): Promise<SseStream> {
  return new Promise((resolve, reject) => {
    const req = request(url, { headers: { accept: "text/event-stream", ...headers } }, (res) => {
      res.setEncoding("utf8");
      const queue: SseMessage[] = [];
      const waiters: Array<(message: SseMessage | undefined) => void> = [];
      let buffer = "";
      let ended = false;
      let bytes = 0;
      const deliver = (message: SseMessage): void => {
        onMessage?.(message);
        const waiter = waiters.shift();
        if (waiter) waiter(message);
        else if (!onMessage) queue.push(message);
      };
      res.on("data", (chunk: string) => {
        bytes += Buffer.byteLength(chunk);
        buffer += chunk;
        let cut = buffer.indexOf("\n\n");
        while (cut >= 0) {
          const block = buffer.slice(0, cut);
          buffer = buffer.slice(cut + 2);
          cut = buffer.indexOf("\n\n");
          const message: SseMessage = { event: "message", data: "" };
          const data: string[] = [];
          let any = false;
          for (const line of block.split("\n")) {
            if (line.startsWith(":")) continue;
            const colon = line.indexOf(":");
            const field = colon >= 0 ? line.slice(0, colon) : line;
            const value = colon >= 0 ? line.slice(colon + 1).replace(/^ /, "") : "";
            if (field === "data") {
              data.push(value);
              any = true;
            } else if (field === "event") {
              message.event = value;
              any = true;
            } else if (field === "id") {
              message.id = value;
              any = true;
            }
          }
          if (!any || data.length === 0) continue;
          message.data = data.join("\n");
          deliver(message);
        }
      });
      const finish = (): void => {
        ended = true;
        for (const waiter of waiters.splice(0)) waiter(undefined);
      };
      res.on("end", finish);
      res.on("close", finish);
      const stream: SseStream = {
        status: res.statusCode ?? 0,
        headers: res.headers,
        get bytes() {
          return bytes;
        },
        next: () => {
          const queued = queue.shift();
          if (queued) return Promise.resolve(queued);
          if (ended) return Promise.resolve(undefined);
          return new Promise((done) => waiters.push(done));
        },
        rest: async () => {
          const out: SseMessage[] = [];
          for (let message = await stream.next(); message; message = await stream.next()) out.push(message);
          return out;
        },
        close: () => {
          req.destroy();
        },
      };
      resolve(stream);
    });
    req.on("error", reject);
    req.end();
  });
}
