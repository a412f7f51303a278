import type { IncomingMessage, ServerResponse } from "node:http";
import type { RecordedRequest } from "./http-util.js";
import type { FakeSandbox, FakeSnapshot, OrgSecret } from "./state.js";

/** Settings fixed at start (some adjustable at runtime through the FakeDaytona handle). */
export interface FakeConfig {
  apiKey: string;
  organizationId: string;
  /** Bytes of each command's output kept for the HTTP logs endpoint (per stream + framed log). */
  retentionBytes: number;
  splitMarkers: boolean;
  /** Env every sandbox process starts from (before the sandbox's own env). */
  baseEnv: Record<string, string>;
  startDelayMs: number;
  /** How long a stop spends `stopping` and a start `starting` before it settles. */
  stateChangeMs: number;
  includeToolboxProxyUrl: boolean;
  snapshotPendingPolls: number;
  defaultSnapshot: string;
}

/** Everything the handlers share. */
export interface FakeWorld {
  config: FakeConfig;
  rootDir: string;
  apiUrl: string;
  toolboxUrl: string;
  sandboxes: Map<string, FakeSandbox>;
  snapshots: Map<string, FakeSnapshot>;
  secrets: Map<string, OrgSecret>;
  /** The most sandboxes that were live (created, not yet deleted) at one time. */
  maxLiveSandboxes: number;
}

export interface RequestContext {
  world: FakeWorld;
  req: IncomingMessage;
  res: ServerResponse;
  method: string;
  /** Full request path (no query). */
  path: string;
  /** Path segments after the `/api` or `/toolbox/{id}` prefix, URL-decoded. */
  segments: string[];
  query: URLSearchParams;
  /** Parsed JSON body (`undefined` when absent, non-JSON or multipart). */
  body: unknown;
  record: RecordedRequest;
}

export interface ToolboxContext extends RequestContext {
  sandbox: FakeSandbox;
}
