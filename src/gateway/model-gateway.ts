import { randomUUID } from "node:crypto";
import { Agent as HttpAgent, request as httpRequest, type IncomingMessage, type ServerResponse } from "node:http";
import { Agent as HttpsAgent, request as httpsRequest } from "node:https";
import type { TokenUsage } from "../contracts/types.js";
import { priceOf, usdOf, type ModelPrice, type PriceTable } from "../agents/prices.js";
import type { Grant, GrantLimits, GrantScope, GrantStore } from "./grants.js";
import { providerError, providerStreamError, type GatewayErrorKind } from "./provider-errors.js";
import { runTokenHash } from "./run-token.js";
import type { Upstream, UpstreamName } from "./upstreams.js";
import { UsageMeter, type ApiKind } from "./usage-meter.js";

/** Largest request body forwarded: far above a long conversation, far below what would strain the host. */
export const MAX_GATEWAY_BODY_BYTES = 32 * 1024 * 1024;

/** How long an unsettled reservation counts: a call that outlives this was lost with its process. */
const RESERVATION_TTL_MS = 30 * 60_000;

/**
 * Bytes of request per input token, rounded down so the worst case is an upper bound: no
 * tokenizer produces more tokens than bytes of JSON holding the text.
 */
const BYTES_PER_INPUT_TOKEN = 1;

/** Output tokens a call is assumed to ask for when it names no `max_tokens`. */
const DEFAULT_MAX_OUTPUT_TOKENS = 32_000;

/** The scope of a run no installation asked for: its daily totals are never read. */
const NO_SCOPE: GrantScope = { repoId: 0, installationId: 0 };

/** Smallest amount worth reserving: below it a budget counts as spent. */
const MIN_RESERVATION_USD = 0.0001;

/** A call's hold on the budgets; `upTo` when it holds only what a budget had left, and is cut there. */
interface Reservation {
  id: string;
  amountUsd: number;
  upTo?: BudgetStop;
}

/** The spend store's reservation calls, as the gateway uses them (the runtime passes the store). */
export interface GatewaySpend {
  reserve(request: {
    reservationId: string;
    runId: string;
    scope: GrantScope;
    amountUsd: number;
    limits: GrantLimits;
    at: Date;
    ttlMs: number;
  }): Promise<
    | { granted: true }
    | { granted: false; limit: "run" | "repository" | "installation"; limitUsd: number; committedUsd: number }
  >;
  settle(reservationId: string, actual: { runId: string; scope: GrantScope; usd: number; at: Date }): Promise<void>;
  release(reservationId: string): Promise<void>;
  runSpend(runId: string, at: Date): Promise<{ spentUsd: number; reservedUsd: number }>;
}

/** What the gateway tells the rest of Harness, for metrics, the audit trail and the run itself. */
export interface GatewayEvents {
  /** Every answered call, after it ended. */
  call?(call: GatewayCall): void;
  /** A call refused for its token: never the token, only why. */
  refusedToken?(refusal: { reason: string; upstream?: UpstreamName; path: string }): void;
  /** A call refused, or a stream cut, because a budget is spent: the run should stop its agent. */
  budgetReached?(runId: string, stop: BudgetStop): void;
}

export interface BudgetStop {
  limit: "run" | "repository" | "installation";
  limitUsd: number;
  spentUsd: number;
}

export interface GatewayCall {
  runId: string;
  agent: string;
  upstream: UpstreamName;
  model: string;
  status: number;
  tokens?: TokenUsage;
  costUsd?: number;
  /** ms from the request's arrival to the first byte of the answer sent back. */
  firstByteMs: number;
  durationMs: number;
}

export interface ModelGatewayOptions {
  upstreams: readonly Upstream[];
  grants: GrantStore;
  spend: GatewaySpend;
  prices: PriceTable;
  events?: GatewayEvents;
  now?: () => number;
}

interface Route {
  upstream: UpstreamName;
  /** The path after the upstream's base URL. */
  upstreamPath: string;
  api?: ApiKind;
}

/**
 * The model gateway: the only thing that holds the model keys. Agents call it with a run token
 * as their key; it checks the token, reserves the call's worst-case cost against the run's and
 * the day's budgets, forwards the call with the real credential, passes the answer back as it
 * arrives, reads the provider's own token counts from it and settles the reservation at their
 * price. A call that cannot be covered is refused in the provider's shape; a stream that
 * outgrows its reservation is cut at an event boundary.
 */
export class ModelGateway {
  private readonly upstreams: Map<UpstreamName, Upstream>;
  private readonly httpAgent = new HttpAgent({ keepAlive: true, maxSockets: 256 });
  private readonly httpsAgent = new HttpsAgent({ keepAlive: true, maxSockets: 256 });
  private readonly now: () => number;
  private readonly priceCache = new Map<string, ModelPrice | undefined>();

  constructor(private readonly options: ModelGatewayOptions) {
    this.upstreams = new Map(options.upstreams.map((upstream) => [upstream.name, upstream]));
    this.now = options.now ?? Date.now;
  }

  /** The upstreams it can forward to. */
  get upstreamNames(): UpstreamName[] {
    return [...this.upstreams.keys()];
  }

  /** Answers one HTTP request. Never throws: every failure is an answer in the provider's shape. */
  handle(request: IncomingMessage, response: ServerResponse): void {
    this.serve(request, response).catch(() => {
      if (!response.headersSent) send(response, providerError(undefined, "unavailable", "the model gateway failed"));
      else response.destroy();
    });
  }

  close(): void {
    this.httpAgent.destroy();
    this.httpsAgent.destroy();
  }

  private async serve(request: IncomingMessage, response: ServerResponse): Promise<void> {
    const started = this.now();
    const raw = request.url ?? "/";
    const query = raw.indexOf("?");
    const url = { pathname: query === -1 ? raw : raw.slice(0, query), search: query === -1 ? "" : raw.slice(query) };
    const route = this.route(request.method ?? "GET", url.pathname);
    if (!route) {
      request.resume();
      const upstream = /\/openai(\/|$)/.test(url.pathname) ? "openai" : "anthropic";
      const shown = JSON.stringify(url.pathname.slice(0, 200));
      send(response, providerError(upstream, "not_found", `Harness's model gateway does not serve ${shown}`));
      return;
    }
    const grant = await this.grantFor(request, route, url.pathname);
    if (!grant) {
      request.resume();
      send(response, providerError(route.upstream, "unauthorized", "invalid run token for Harness's model gateway"));
      return;
    }
    const upstream = this.upstreams.get(route.upstream);
    if (!upstream) {
      request.resume();
      send(response, providerError(route.upstream, "unavailable", `no ${route.upstream} upstream is configured`));
      return;
    }
    const body = await readBounded(request, MAX_GATEWAY_BODY_BYTES);
    if (body === "too large") {
      send(
        response,
        providerError(
          route.upstream,
          "too_large",
          `the request is over Harness's model gateway limit of ${String(MAX_GATEWAY_BODY_BYTES / 1024 / 1024)} MiB`,
        ),
      );
      return;
    }
    if (body === "aborted") return;

    const call = route.api ? this.meteredCall(route, grant, body) : { body, streaming: false, model: "" };
    if ("error" in call) {
      send(response, providerError(route.upstream, call.error.kind, call.error.message));
      return;
    }
    const reservation = route.api ? await this.reserve(grant, call.worstUsd ?? 0, call.metered === true) : undefined;
    if (reservation && "refused" in reservation) {
      this.options.events?.budgetReached?.(grant.runId, reservation.refused);
      send(response, providerError(route.upstream, "budget", budgetMessage(reservation.refused)));
      this.report(grant, route.upstream, call.model, 400, started, started);
      return;
    }
    await this.forward({ request, response, route, upstream, grant, call, reservation, started, url });
  }

  private route(method: string, path: string): Route | undefined {
    const anthropic = /^\/anthropic(\/v1\/.*)$/.exec(path);
    if (anthropic?.[1]) {
      const rest = anthropic[1];
      if (method === "POST" && rest === "/v1/messages")
        return { upstream: "anthropic", upstreamPath: rest, api: "messages" };
      if (method === "POST" && rest === "/v1/messages/count_tokens")
        return { upstream: "anthropic", upstreamPath: rest };
      if (method === "GET" && /^\/v1\/models(\/[A-Za-z0-9][A-Za-z0-9._:@-]{0,199})?$/.test(rest))
        return { upstream: "anthropic", upstreamPath: rest };
      return undefined;
    }
    const openai = /^\/openai\/v1(\/.*)$/.exec(path);
    if (openai?.[1]) {
      const rest = openai[1];
      if (method === "POST" && rest === "/responses")
        return { upstream: "openai", upstreamPath: rest, api: "responses" };
      if (method === "POST" && rest === "/chat/completions")
        return { upstream: "openai", upstreamPath: rest, api: "chat" };
      if (method === "GET" && /^\/models(\/[A-Za-z0-9][A-Za-z0-9._:@-]{0,199})?$/.test(rest))
        return { upstream: "openai", upstreamPath: rest };
    }
    return undefined;
  }

  private async grantFor(request: IncomingMessage, route: Route, path: string): Promise<Grant | undefined> {
    const token = presentedToken(request);
    const grant = token === undefined ? undefined : await this.options.grants.get(runTokenHash(token), this.now());
    const reason =
      token === undefined
        ? "no run token"
        : !grant
          ? "unknown, expired or revoked run token"
          : grant.upstream !== route.upstream
            ? `a run token for ${grant.upstream} used for ${route.upstream}`
            : undefined;
    if (reason === undefined) return grant;
    this.options.events?.refusedToken?.({ reason, upstream: route.upstream, path });
    return undefined;
  }

  /** The body to forward, with what the call may cost at most. */
  private meteredCall(
    route: Route,
    grant: Grant,
    raw: Buffer,
  ):
    | { body: Buffer; streaming: boolean; model: string; worstUsd?: number; metered?: boolean }
    | { error: { kind: GatewayErrorKind; message: string } } {
    let parsed: unknown;
    try {
      parsed = JSON.parse(raw.toString("utf8"));
    } catch {
      return { error: { kind: "bad_request", message: "the request body is not JSON" } };
    }
    if (parsed === null || typeof parsed !== "object" || Array.isArray(parsed))
      return { error: { kind: "bad_request", message: "the request body is not a JSON object" } };
    const json = parsed as Record<string, unknown>;
    const model = typeof json["model"] === "string" ? json["model"] : "";
    const streaming = json["stream"] === true;
    let body = raw;
    if (route.api === "chat" && streaming) {
      // Without it a streamed chat completion reports no usage at all.
      const options = json["stream_options"];
      json["stream_options"] = {
        ...(options !== null && typeof options === "object" ? options : {}),
        include_usage: true,
      };
      body = Buffer.from(JSON.stringify(json), "utf8");
    }
    const budgeted = hasLimits(grant.limits);
    const price = model !== "" ? this.priceFor(model) : undefined;
    if (!price) {
      if (budgeted)
        return {
          error: {
            kind: "bad_request",
            message:
              `Harness has no price for model ${modelShown(model)}, so it cannot hold this run to its ` +
              "budget: the operator can price it in HARNESS_PRICES",
          },
        };
      return { body, streaming, model };
    }
    const maxOutput = outputCap(json, route.api ?? "messages");
    const inputTokens = Math.ceil(body.length / BYTES_PER_INPUT_TOKEN);
    const worstUsd = (inputTokens * Math.max(price.input, price.cacheWrite) + maxOutput * price.output) / 1e6;
    return { body, streaming, model, worstUsd, metered: true };
  }

  /**
   * Reserves the call's worst case; when that is more than a budget has left, what is left, so
   * the call still runs and is cut where the budget ends rather than refused while money remains.
   */
  private async reserve(
    grant: Grant,
    worstUsd: number,
    metered: boolean,
  ): Promise<Reservation | { refused: BudgetStop } | undefined> {
    if (!metered) return undefined;
    // A run outside any installation (the CLI) still has its own budget to hold.
    const scope = grant.scope ?? NO_SCOPE;
    const attempt = async (amountUsd: number) => {
      const id = randomUUID();
      const result = await this.options.spend.reserve({
        reservationId: id,
        runId: grant.runId,
        scope,
        amountUsd,
        limits: grant.limits,
        at: new Date(this.now()),
        ttlMs: RESERVATION_TTL_MS,
      });
      return result.granted
        ? { id, amountUsd }
        : { refused: { limit: result.limit, limitUsd: result.limitUsd, spentUsd: result.committedUsd } };
    };
    const whole = await attempt(Math.max(worstUsd, MIN_RESERVATION_USD));
    if (!("refused" in whole)) return whole;
    const left = whole.refused.limitUsd - whole.refused.spentUsd;
    if (left < MIN_RESERVATION_USD) return whole;
    const partial = await attempt(left);
    if ("refused" in partial) return partial;
    return { ...partial, upTo: { ...whole.refused, spentUsd: whole.refused.limitUsd } };
  }

  private async forward(call: {
    request: IncomingMessage;
    response: ServerResponse;
    route: Route;
    upstream: Upstream;
    grant: Grant;
    call: { body: Buffer; streaming: boolean; model: string; worstUsd?: number };
    reservation: Reservation | undefined;
    started: number;
    url: { pathname: string; search: string };
  }): Promise<void> {
    const { request, response, route, upstream, grant, reservation } = call;
    const target = upstream.baseUrl;
    const path = `${target.pathname.replace(/\/+$/, "")}${route.upstreamPath}${call.url.search}`;
    const headers = forwardedHeaders(request, upstream, call.call.body.length);
    const meter = route.api ? new UsageMeter(route.api, call.call.streaming) : undefined;
    const requestUpstream = target.protocol === "https:" ? httpsRequest : httpRequest;
    const agent = target.protocol === "https:" ? this.httpsAgent : this.httpAgent;
    let firstByte: number | undefined;
    let cut: BudgetStop | undefined;
    let status = 502;

    await new Promise<void>((resolve) => {
      let settled = false;
      const finish = (): void => {
        if (settled) return;
        settled = true;
        resolve();
      };
      const upstreamRequest = requestUpstream(
        {
          protocol: target.protocol,
          hostname: target.hostname.replace(/^\[|\]$/g, ""),
          port: target.port,
          path,
          method: request.method ?? "POST",
          headers,
          agent,
        },
        (answer) => {
          status = answer.statusCode ?? 502;
          response.writeHead(status, answerHeaders(answer));
          firstByte = this.now();
          answer.on("data", (chunk: Buffer) => {
            // Passed on first, read after: the agent waits for no parsing.
            if (!cut) response.write(chunk);
            meter?.feed(chunk);
            if (cut) return;
            // Only a call that holds what a budget had left is cut: one that outgrows a whole
            // worst case (the provider counted more than its size allows) is let finish and
            // settled at its cost, and the budgets then refuse the next call.
            const over =
              reservation?.upTo && meter ? this.overReservation(meter, call.call.model, reservation.amountUsd) : false;
            if (over && call.call.streaming) {
              cut = reservation?.upTo ?? { limit: "run", limitUsd: 0, spentUsd: 0 };
              response.end(providerStreamError(route.upstream, "budget", budgetMessage(cut)));
              answer.destroy();
              upstreamRequest.destroy();
              finish();
            }
          });
          answer.on("end", () => {
            meter?.end();
            response.end();
            finish();
          });
          // Once the gateway cut the answer itself, its end is already written: the upstream's
          // connection going away after that is no failure of the agent's call.
          const broken = (): void => {
            if (!cut) response.destroy();
            finish();
          };
          answer.on("error", broken);
          answer.on("aborted", broken);
        },
      );
      upstreamRequest.on("error", (error) => {
        if (cut) return;
        if (!response.headersSent) {
          status = 502;
          send502(response, route.upstream, error);
        } else response.destroy();
        finish();
      });
      response.on("close", () => {
        // The agent went away (killed, or its own timeout): the provider's work stops too.
        if (!response.writableFinished) upstreamRequest.destroy();
        finish();
      });
      upstreamRequest.end(call.call.body);
    });

    const tokens = meter?.reported;
    const model = meter?.model ?? call.call.model;
    const price = tokens ? this.priceFor(model) : undefined;
    const costUsd = tokens && price ? usdOf(tokens, price) : undefined;
    if (reservation) {
      // A cut call costs what the provider had counted by then (its input, and the output so far);
      // an answer without usage is charged its whole reservation, never nothing.
      const spentUsd = cut
        ? (this.measuredUsd(meter, model) ?? reservation.amountUsd)
        : (costUsd ?? (status >= 400 ? 0 : reservation.amountUsd));
      const at = new Date(this.now());
      if (spentUsd > 0)
        await this.options.spend.settle(reservation.id, {
          runId: grant.runId,
          scope: grant.scope ?? NO_SCOPE,
          usd: spentUsd,
          at,
        });
      else await this.options.spend.release(reservation.id);
    }
    if (cut) {
      const run = await this.options.spend.runSpend(grant.runId, new Date(this.now()));
      this.options.events?.budgetReached?.(grant.runId, { ...cut, spentUsd: Math.max(cut.spentUsd, run.spentUsd) });
    }
    this.report(grant, route.upstream, model, status, call.started, firstByte ?? this.now(), tokens, costUsd);
  }

  private overReservation(meter: UsageMeter, model: string, reservedUsd: number): boolean {
    const measured = this.measuredUsd(meter, model);
    return measured !== undefined && measured > reservedUsd;
  }

  /** A model's price, looked up once per name: the answer's chunks ask for it again and again. */
  private priceFor(model: string): ModelPrice | undefined {
    if (this.priceCache.has(model)) return this.priceCache.get(model);
    const price = priceOf(model, this.options.prices);
    // Names come from agents' requests: the cache stays small whatever they send.
    if (this.priceCache.size < 256) this.priceCache.set(model, price);
    return price;
  }

  /** What the answer has cost so far: the input the provider counted, and the output as generated. */
  private measuredUsd(meter: UsageMeter | undefined, model: string): number | undefined {
    const price = meter ? this.priceFor(meter.model ?? model) : undefined;
    if (!meter || !price) return undefined;
    const usage = meter.reported ?? { input: 0, output: 0, cacheRead: 0, cacheWrite: 0 };
    return usdOf({ ...usage, output: meter.outputSoFar }, price);
  }

  private report(
    grant: Grant,
    upstream: UpstreamName,
    model: string,
    status: number,
    started: number,
    firstByte: number,
    tokens?: TokenUsage,
    costUsd?: number,
  ): void {
    this.options.events?.call?.({
      runId: grant.runId,
      agent: grant.agent,
      upstream,
      model,
      status,
      ...(tokens ? { tokens } : {}),
      ...(costUsd !== undefined ? { costUsd } : {}),
      firstByteMs: firstByte - started,
      durationMs: this.now() - started,
    });
  }
}

/** `Reached the run's $0.50 budget ($0.49 spent or reserved)`. */
export function budgetMessage(stop: BudgetStop): string {
  const which =
    stop.limit === "run"
      ? "the run's budget"
      : stop.limit === "repository"
        ? "the repository's daily budget"
        : "the installation's daily budget";
  return (
    `Harness refused this call: ${which} of $${stop.limitUsd.toFixed(2)} is spent ` +
    `($${stop.spentUsd.toFixed(2)} spent or reserved)`
  );
}

/** A model name from the agent's request, bounded and quoted for an error message. */
function modelShown(model: string): string {
  return model === "" ? "(none named)" : JSON.stringify(model.slice(0, 100));
}

function hasLimits(limits: GrantLimits): boolean {
  return (
    limits.runUsd !== undefined || limits.repositoryDailyUsd !== undefined || limits.installationDailyUsd !== undefined
  );
}

/** The most output a call may produce: what it asks for, else a generous default. */
function outputCap(json: Record<string, unknown>, api: ApiKind): number {
  const keys =
    api === "messages"
      ? ["max_tokens"]
      : api === "responses"
        ? ["max_output_tokens"]
        : ["max_completion_tokens", "max_tokens"];
  for (const key of keys) {
    const value = json[key];
    if (typeof value === "number" && Number.isFinite(value) && value > 0) return Math.min(value, 1_000_000);
  }
  return DEFAULT_MAX_OUTPUT_TOKENS;
}

/** The run token, from wherever the CLI puts its key. */
function presentedToken(request: IncomingMessage): string | undefined {
  const apiKey = request.headers["x-api-key"];
  if (typeof apiKey === "string" && apiKey !== "") return apiKey.trim();
  const authorization = request.headers.authorization;
  const bearer = authorization !== undefined ? /^Bearer\s+(\S+)\s*$/i.exec(authorization) : null;
  return bearer?.[1];
}

/** Headers never forwarded: the agent's credentials, and what belongs to one connection. */
const DROPPED_REQUEST_HEADERS = new Set([
  "authorization",
  "x-api-key",
  "cookie",
  "proxy-authorization",
  "host",
  "connection",
  "keep-alive",
  "transfer-encoding",
  "te",
  "trailer",
  "upgrade",
  "content-length",
  "accept-encoding",
  "forwarded",
  "x-forwarded-for",
  "x-forwarded-host",
  "x-forwarded-proto",
]);

function forwardedHeaders(
  request: IncomingMessage,
  upstream: Upstream,
  length: number,
): Record<string, string | string[]> {
  const headers: Record<string, string | string[]> = {};
  for (const [name, value] of Object.entries(request.headers)) {
    if (value === undefined || DROPPED_REQUEST_HEADERS.has(name)) continue;
    headers[name] = value;
  }
  for (const [name, value] of Object.entries(upstream.extraHeaders)) {
    const existing = headers[name];
    // Beta flags add up: the CLI's own and the one the upstream's credential needs.
    headers[name] = name === "anthropic-beta" && typeof existing === "string" ? `${existing},${value}` : value;
  }
  Object.assign(headers, upstream.authHeaders);
  // The answer is read for its usage on the way through: it must arrive uncompressed.
  headers["accept-encoding"] = "identity";
  headers["content-length"] = String(length);
  return headers;
}

const DROPPED_ANSWER_HEADERS = new Set([
  "connection",
  "keep-alive",
  "transfer-encoding",
  "set-cookie",
  "content-length",
]);

function answerHeaders(answer: IncomingMessage): Record<string, string | string[]> {
  const headers: Record<string, string | string[]> = {};
  for (const [name, value] of Object.entries(answer.headers)) {
    if (value === undefined || DROPPED_ANSWER_HEADERS.has(name)) continue;
    headers[name] = value;
  }
  return headers;
}

function send(response: ServerResponse, error: { status: number; body: string }): void {
  if (response.headersSent) {
    response.destroy();
    return;
  }
  response.writeHead(error.status, {
    "content-type": "application/json",
    "content-length": Buffer.byteLength(error.body),
  });
  response.end(error.body);
}

function send502(response: ServerResponse, upstream: UpstreamName, error: Error): void {
  const code = (error as NodeJS.ErrnoException).code;
  send(
    response,
    providerError(
      upstream,
      "unavailable",
      `Harness's model gateway could not reach the ${upstream} upstream (${code ?? "connection failed"})`,
    ),
  );
}

/** The whole body, or why not: over `limit` (the rest is not read) or the client went away. */
async function readBounded(request: IncomingMessage, limit: number): Promise<Buffer | "too large" | "aborted"> {
  const declared = Number(request.headers["content-length"]);
  if (Number.isFinite(declared) && declared > limit) {
    request.resume();
    return "too large";
  }
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let size = 0;
    let done = false;
    request.on("data", (chunk: Buffer) => {
      if (done) return;
      size += chunk.length;
      if (size > limit) {
        done = true;
        chunks.length = 0;
        request.resume();
        resolve("too large");
        return;
      }
      chunks.push(chunk);
    });
    request.on("end", () => {
      if (!done) resolve(Buffer.concat(chunks, size));
      done = true;
    });
    request.on("error", () => {
      if (!done) resolve("aborted");
      done = true;
    });
    request.on("aborted", () => {
      if (!done) resolve("aborted");
      done = true;
    });
  });
}
