import { HarnessError } from "../util/errors.js";

/** The run store (the SQLite file or Redis) cannot be used: the message names it and what to do. */
export class RunStoreError extends HarnessError {
  constructor(message: string, options?: ErrorOptions) {
    super("run_store", message, options);
  }
}
