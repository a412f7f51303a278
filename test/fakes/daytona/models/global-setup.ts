import { prepareModelCache } from "./validator.js";

/**
 * Reads Daytona's generated clients once, before the test workers start, so they do not each run the
 * TypeScript compiler over ~900 declaration files or compile the schemas; it also fails the run at
 * once when the fake's route table names a route the clients do not have.
 */
export default function setup(): void {
  prepareModelCache();
}
