import { SandboxError } from "../util/errors.js";
import type { Sandbox, SandboxOptions } from "./types.js";

/**
 * The Daytona sandbox. Not built yet: the Daytona issue replaces this with the real adapter on
 * `@daytonaio/sdk`. Until then choosing it fails with a message that says so.
 */
export function createDaytonaSandbox(_opts: SandboxOptions): Promise<Sandbox> {
  return Promise.reject(new SandboxError("Daytona sandbox not yet implemented: use the local sandbox (--sandbox local) for now"));
}
