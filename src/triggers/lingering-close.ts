import type { IncomingMessage, ServerResponse } from "node:http";
import type { Socket } from "node:net";

/** How long a refused request's socket stays open, discarding its body, after the answer. */
export const LINGER_MS = 2_000;
/** How much of a refused body is read and dropped; past it the socket is left unread until it closes. */
export const LINGER_BYTES = 8 * 1024 * 1024;
/** Sockets lingering at once; past this a refused request's socket is closed at once. */
export const LINGER_SOCKETS = 32;

export interface LingeringCloseOptions {
  maxMs?: number;
  maxBytes?: number;
  maxSockets?: number;
}

/**
 * Closing a connection whose request body is still arriving, so that the client reads the
 * answer. Closing with the body unread makes Linux answer the client's next segment with a
 * reset, and a client still writing then drops the answer it had not yet read. Instead, once
 * the answer is flushed the socket is half-closed (the client sees the end of the answer and
 * stops), and what the client still has in flight is read and dropped, neither hashed nor
 * kept, up to `maxBytes`; past that the socket is no longer read (the client's writes stall,
 * which does not keep it from reading the answer). The socket is destroyed when the client
 * closes its end or `maxMs` after the answer, whichever comes first.
 *
 * The bounds: a client that reads while it writes (Node, curl, Go) has the answer within a
 * few milliseconds and stops; what it had sent by then is its socket buffers and ours, a few
 * MB on Linux, hence `maxBytes` of 8 MB read, at no more CPU than parsing 8 MB. A client
 * slow to get to its answer (a loaded machine, a slow link) still has two seconds before the
 * reset. Each lingering socket costs a file descriptor and, once reading stops, what Node had
 * read into the request's buffer (its high-water mark, 64 KB at most), so at most
 * `maxSockets` linger at once; a refused request beyond them is closed at once, as if there
 * were no lingering.
 */
export function createLingeringClose(options: LingeringCloseOptions = {}) {
  const maxMs = options.maxMs ?? LINGER_MS;
  const maxBytes = options.maxBytes ?? LINGER_BYTES;
  const maxSockets = options.maxSockets ?? LINGER_SOCKETS;
  let lingering = 0;
  let discardedInAll = 0;

  function linger(req: IncomingMessage, socket: Socket): void {
    lingering++;
    let discarded = 0;
    let over = false;
    const close = (): void => {
      if (over) return;
      over = true;
      lingering--;
      clearTimeout(timer);
      req.off("data", count);
      socket.destroy();
    };
    const count = (chunk: Buffer): void => {
      discarded += chunk.length;
      discardedInAll += chunk.length;
      if (discarded < maxBytes) return;
      // Enough read: the request's buffer fills and Node stops reading the socket.
      req.off("data", count);
      req.pause();
    };
    const timer = setTimeout(close, maxMs);
    timer.unref();
    // Node's HTTP parser goes on parsing the body and hands it to the request, flowing with no
    // one keeping it: nothing is kept but this count. (A listener on the socket itself would
    // take the socket from the parser and leave it unread.)
    req.on("data", count);
    socket.once("end", close);
    socket.once("close", close);
    // The whole body has arrived: nothing is left to drain.
    req.once("end", close);
    req.resume();
    if (!socket.writableEnded) socket.end();
  }

  return {
    /**
     * Answers `status` with `connection: close` and closes the connection once the answer is
     * flushed, lingering first if the request body has not all been read.
     */
    refuse(
      req: IncomingMessage,
      res: ServerResponse,
      status: number,
      headers: Record<string, string>,
      body: string,
    ): void {
      if (!res.headersSent) res.writeHead(status, { ...headers, connection: "close" });
      res.end(body);
      req.resume();
      res.once("finish", () => {
        const socket = req.socket;
        // Node half-closes a `connection: close` answer's socket and destroys it once that end
        // is flushed: right when the whole body has been read or too many sockets linger.
        if (socket.destroyed || req.complete || lingering >= maxSockets) return;
        // Otherwise that destroy would reset a connection whose body is still arriving. Node
        // registered the method itself (`once("finish", this.destroy)`), so it is unregistered
        // by the same reference; nothing calls it through this one.
        // eslint-disable-next-line @typescript-eslint/unbound-method -- see above
        socket.off("finish", socket.destroy);
        linger(req, socket);
      });
    },
    /** Sockets lingering now. */
    lingering: (): number => lingering,
    /** Bytes of refused bodies read and dropped, in all. */
    discarded: (): number => discardedInAll,
  };
}

export type LingeringClose = ReturnType<typeof createLingeringClose>;
