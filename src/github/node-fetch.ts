import { Agent as HttpAgent, request as httpRequest, type IncomingHttpHeaders, type IncomingMessage } from "node:http";
import { Agent as HttpsAgent, request as httpsRequest } from "node:https";

/** An answer as it came off the socket, before any `Response` is made of it. */
export interface RawResponse {
  status: number;
  statusText: string;
  url: string;
  /** Node's parsed headers: names in lower case, repeated ones joined (set-cookie an array). */
  headers: IncomingHttpHeaders;
  /** Null when the answer has no body (HEAD, 204, 205, 304). */
  body: Buffer | null;
}

export type RawFetch = (input: string | URL, init?: RequestInit) => Promise<RawResponse>;

/** The same requests as `createNodeFetch`, answered without building a WHATWG `Response`. */
export function createRawFetch(options: { maxSockets?: number } = {}): RawFetch {
  const agents = {
    "http:": new HttpAgent({ keepAlive: true, maxSockets: options.maxSockets ?? 64 }),
    "https:": new HttpsAgent({ keepAlive: true, maxSockets: options.maxSockets ?? 64 }),
  };

  const send = (url: URL, init: RequestInit, redirectsLeft: number, retriedStaleSocket = false): Promise<RawResponse> =>
    new Promise<RawResponse>((resolve, reject) => {
      if (url.protocol !== "http:" && url.protocol !== "https:") {
        reject(new TypeError(`fetch: unsupported protocol ${url.protocol}`));
        return;
      }
      const method = (init.method ?? "GET").toUpperCase();
      const body = init.body;
      if (body !== undefined && body !== null && typeof body !== "string" && !(body instanceof Uint8Array)) {
        reject(new TypeError("fetch: only string and byte bodies are supported"));
        return;
      }
      const headers = plainHeaders(init.headers);
      if (body !== undefined && body !== null && headers["content-length"] === undefined)
        headers["content-length"] = String(Buffer.byteLength(body));
      const request = (url.protocol === "https:" ? httpsRequest : httpRequest)(url, {
        method,
        agent: agents[url.protocol],
        headers,
        ...(init.signal ? { signal: init.signal } : {}),
      });
      let answered = false;
      request.on("error", (error: NodeJS.ErrnoException) => {
        // A kept-alive socket the server closed while idle fails the next request before the
        // server read it (Node's documented keep-alive race): send it once more on a new socket.
        if (!answered && !retriedStaleSocket && request.reusedSocket && error.code === "ECONNRESET") {
          resolve(send(url, init, redirectsLeft, true));
          return;
        }
        reject(error);
      });
      request.on("response", (response: IncomingMessage) => {
        answered = true;
        const status = response.statusCode ?? 0;
        const location = response.headers.location;
        if ([301, 302, 303, 307, 308].includes(status) && location && init.redirect !== "manual" && redirectsLeft > 0) {
          response.resume();
          const next = new URL(location, url);
          const keepBody = status === 307 || status === 308;
          resolve(
            send(
              next,
              {
                ...init,
                ...(keepBody ? {} : { method: method === "HEAD" ? "HEAD" : "GET", body: null }),
                ...(next.origin === url.origin ? {} : { headers: withoutCredentials(init.headers) }),
              },
              redirectsLeft - 1,
            ),
          );
          return;
        }
        const chunks: Buffer[] = [];
        response.on("data", (chunk: Buffer) => chunks.push(chunk));
        response.on("error", reject);
        response.on("end", () => {
          const noBody = method === "HEAD" || status === 204 || status === 205 || status === 304 || status < 200;
          resolve({
            status: status < 200 ? 200 : status,
            statusText: response.statusMessage ?? "",
            url: url.href,
            headers: response.headers,
            body: noBody ? null : chunks.length === 1 ? (chunks[0] as Buffer) : Buffer.concat(chunks),
          });
        });
      });
      request.end(body ?? undefined);
    });

  return (input, init = {}) => send(typeof input === "string" ? new URL(input) : input, init, 5);
}

/**
 * A `fetch` for Octokit built on `node:http` with keep-alive agents. Node 20's built-in fetch
 * (undici's WHATWG layer) costs about twice the CPU per request, and the webhook handler makes
 * a few GitHub calls per delivery, so under load this is the difference between keeping up
 * and queueing (see docs/benchmarks.md, webhook acknowledgement). Octokit sends string bodies
 * only; streams are not supported here.
 */
export function createNodeFetch(options: { maxSockets?: number } = {}): typeof globalThis.fetch {
  const raw = createRawFetch(options);
  const nodeFetch = async (input: string | URL | Request, init: RequestInit = {}): Promise<Response> => {
    if (input instanceof Request) return globalThis.fetch(input, init);
    const answer = await raw(input, init);
    const responseHeaders = new Headers();
    for (const [name, value] of Object.entries(answer.headers)) {
      if (Array.isArray(value)) for (const item of value) responseHeaders.append(name, item);
      else if (value !== undefined) responseHeaders.set(name, value);
    }
    return new Response(answer.body, {
      status: answer.status,
      statusText: answer.statusText,
      headers: responseHeaders,
    });
  };
  return nodeFetch;
}

/**
 * The headers minus credentials, for a redirect to another origin (scheme, host and port), as the
 * WHATWG fetch standard drops them: GitHub redirects downloads to storage hosts that must not see
 * the installation token.
 */
function withoutCredentials(init: RequestInit["headers"]): Record<string, string> {
  const headers = plainHeaders(init);
  delete headers["authorization"];
  delete headers["cookie"];
  return headers;
}

/** Request headers as a plain object with lower-case names, from any form `fetch` accepts. */
function plainHeaders(init: RequestInit["headers"]): Record<string, string> {
  const out: Record<string, string> = {};
  if (init === undefined) return out;
  if (init instanceof Headers || Array.isArray(init)) {
    for (const [name, value] of init instanceof Headers ? init : (init as Array<[string, string]>))
      out[name.toLowerCase()] = value;
    return out;
  }
  for (const [name, value] of Object.entries(init as Record<string, string>)) out[name.toLowerCase()] = value;
  return out;
}
