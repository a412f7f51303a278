/*
 * Every route the fake Daytona serves. A described route's request and response models are not written
 * here: they are looked up in Daytona's generated clients (client-models.ts) by method and path, so a
 * client bump that moves or retypes a route shows up as a failed test set-up, not as a silent drift.
 * Paths use the clients' own templates under the fake's prefixes: `/api` for the control plane (the SDK's
 * `apiUrl`) and `/toolbox/{sandboxId}` for the toolbox (the sandbox's `toolboxProxyUrl` + its id).
 */

export interface FakeRoute {
  method: string;
  /** `{name}` matches one path segment, `{name*}` the rest of the path. */
  path: string;
}

/** Routes whose models the clients describe. */
export const DESCRIBED_ROUTES: readonly FakeRoute[] = [
  // Control plane.
  { method: "GET", path: "/api/config" },
  { method: "POST", path: "/api/sandbox" },
  { method: "GET", path: "/api/sandbox" },
  { method: "GET", path: "/api/sandbox/{sandboxIdOrName}" },
  { method: "DELETE", path: "/api/sandbox/{sandboxIdOrName}" },
  { method: "PUT", path: "/api/sandbox/{sandboxIdOrName}/labels" },
  { method: "POST", path: "/api/sandbox/{sandboxIdOrName}/autostop/{interval}" },
  { method: "POST", path: "/api/sandbox/{sandboxIdOrName}/autoarchive/{interval}" },
  { method: "POST", path: "/api/sandbox/{sandboxIdOrName}/autodelete/{interval}" },
  { method: "POST", path: "/api/sandbox/{sandboxIdOrName}/autopause/{interval}" },
  { method: "POST", path: "/api/sandbox/{sandboxIdOrName}/ttl/{ttlMinutes}" },
  { method: "POST", path: "/api/sandbox/{sandboxId}/last-activity" },
  { method: "POST", path: "/api/sandbox/{sandboxIdOrName}/start" },
  { method: "POST", path: "/api/sandbox/{sandboxIdOrName}/stop" },
  { method: "GET", path: "/api/sandbox/{sandboxId}/toolbox-proxy-url" },
  { method: "PUT", path: "/api/sandbox/{sandboxIdOrName}/secrets" },
  { method: "POST", path: "/api/snapshots" },
  { method: "GET", path: "/api/snapshots" },
  { method: "GET", path: "/api/snapshots/{id}" },
  { method: "DELETE", path: "/api/snapshots/{id}" },
  { method: "POST", path: "/api/secret" },
  { method: "GET", path: "/api/secret" },
  { method: "GET", path: "/api/secret/paginated" },
  { method: "GET", path: "/api/secret/{secretId}" },
  { method: "DELETE", path: "/api/secret/{secretId}" },
  // Toolbox: info and env.
  { method: "GET", path: "/toolbox/{sandboxId}/work-dir" },
  { method: "GET", path: "/toolbox/{sandboxId}/user-home-dir" },
  { method: "GET", path: "/toolbox/{sandboxId}/version" },
  { method: "POST", path: "/toolbox/{sandboxId}/env" },
  // Toolbox: git.
  { method: "POST", path: "/toolbox/{sandboxId}/git/clone" },
  { method: "POST", path: "/toolbox/{sandboxId}/git/branches" },
  { method: "GET", path: "/toolbox/{sandboxId}/git/branches" },
  { method: "DELETE", path: "/toolbox/{sandboxId}/git/branches" },
  { method: "POST", path: "/toolbox/{sandboxId}/git/checkout" },
  { method: "POST", path: "/toolbox/{sandboxId}/git/add" },
  { method: "POST", path: "/toolbox/{sandboxId}/git/commit" },
  { method: "POST", path: "/toolbox/{sandboxId}/git/push" },
  { method: "POST", path: "/toolbox/{sandboxId}/git/pull" },
  { method: "GET", path: "/toolbox/{sandboxId}/git/status" },
  { method: "POST", path: "/toolbox/{sandboxId}/git/init" },
  // Toolbox: processes and sessions.
  { method: "POST", path: "/toolbox/{sandboxId}/process/execute" },
  { method: "POST", path: "/toolbox/{sandboxId}/process/session" },
  { method: "GET", path: "/toolbox/{sandboxId}/process/session" },
  { method: "GET", path: "/toolbox/{sandboxId}/process/session/{sessionId}" },
  { method: "DELETE", path: "/toolbox/{sandboxId}/process/session/{sessionId}" },
  { method: "POST", path: "/toolbox/{sandboxId}/process/session/{sessionId}/exec" },
  { method: "GET", path: "/toolbox/{sandboxId}/process/session/{sessionId}/command/{commandId}" },
  { method: "GET", path: "/toolbox/{sandboxId}/process/session/{sessionId}/command/{commandId}/logs" },
  { method: "POST", path: "/toolbox/{sandboxId}/process/session/{sessionId}/command/{commandId}/input" },
  // Toolbox: files. The SDK posts bulk-upload itself (multipart, by fetch); the client describes only its
  // (empty) answer. bulk-download and download answer multipart and bytes, which are not JSON to check.
  { method: "POST", path: "/toolbox/{sandboxId}/files/bulk-upload" },
  { method: "POST", path: "/toolbox/{sandboxId}/files/bulk-download" },
  { method: "POST", path: "/toolbox/{sandboxId}/files/folder" },
  { method: "POST", path: "/toolbox/{sandboxId}/files/permissions" },
  { method: "GET", path: "/toolbox/{sandboxId}/files" },
  { method: "GET", path: "/toolbox/{sandboxId}/files/info" },
  { method: "GET", path: "/toolbox/{sandboxId}/files/download" },
  { method: "DELETE", path: "/toolbox/{sandboxId}/files" },
];

export interface UndescribedRoute extends FakeRoute {
  /** `*` for any method. */
  method: string;
  /** True when this is a WebSocket upgrade, not a plain request. */
  upgrade: boolean;
  /** Why the generated clients do not describe it. */
  reason: string;
}

/** Routes the fake serves that the generated clients do not describe; nothing is checked on them. */
export const NOT_DESCRIBED: readonly UndescribedRoute[] = [
  {
    method: "*",
    path: "/api/socket.io/{rest*}",
    upgrade: false,
    reason:
      "the SDK's socket.io event stream (sandbox state events) is opened by socket.io-client, outside the generated " +
      "clients; the fake refuses it with 404 so the SDK falls back to polling",
  },
  {
    method: "GET",
    path: "/api/socket.io/{rest*}",
    upgrade: true,
    reason: "the same socket.io event stream, asked for as a WebSocket upgrade",
  },
  {
    method: "GET",
    path: "/toolbox/{sandboxId}/process/session/{sessionId}/command/{commandId}/logs",
    upgrade: true,
    reason:
      "the SDK follows a command's log by opening this path as a WebSocket itself (Process.js, `?follow=true`); " +
      "the client describes only the plain GET, and the frames are log text, not JSON",
  },
];
