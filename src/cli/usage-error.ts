import { HarnessError } from "../util/errors.js";

/** A usage mistake found after parsing (e.g. a flag that needs another): exit code 2. */
export class UsageError extends HarnessError {
  constructor(message: string) {
    super("usage", message);
  }
}
