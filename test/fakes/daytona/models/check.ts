import type { ServerResponse } from "node:http";
import { checkResponsesOf } from "../http-util.js";
import type { DaytonaModelValidator } from "./validator.js";
import { recordViolation } from "./violations.js";

/*
 * Where the fake Daytona meets its model check: one call per request (or WebSocket upgrade) records
 * every problem as a violation, which the test set-up turns into a failure of the test that caused it.
 */

function unknownRoute(method: string, path: string, upgrade: boolean): string {
  return (
    `${method} ${path}${upgrade ? " (WebSocket upgrade)" : ""}: the fake Daytona has no such route: it is neither ` +
    "in DESCRIBED_ROUTES nor in NOT_DESCRIBED (test/fakes/daytona/models/routes.ts)"
  );
}

/** Checks the request body now and has every JSON or empty answer to it checked as it is sent. */
export function checkExchange(
  validator: DaytonaModelValidator,
  source: number,
  call: { method: string; path: string; body: unknown; res: ServerResponse },
): void {
  const match = validator.match(call.method, call.path, false);
  if (!match) {
    recordViolation(source, unknownRoute(call.method, call.path, false));
    return;
  }
  if (!match.described) return;
  const route = match.route;
  for (const problem of validator.checkRequest(route, call.body)) recordViolation(source, problem);
  checkResponsesOf(call.res, (status, body) => {
    for (const problem of validator.checkResponse(route, status, body)) recordViolation(source, problem);
  });
}

/** A WebSocket upgrade must be one the table lists; its frames are not JSON models. */
export function checkUpgrade(validator: DaytonaModelValidator, source: number, method: string, path: string): void {
  if (!validator.match(method, path, true)) recordViolation(source, unknownRoute(method, path, true));
}
