/**
 * Typed errors whose messages are written for the person who will read them (in the CLI, the
 * log or an issue comment). `code` is stable, for callers that branch on the kind of failure.
 */
export class HarnessError extends Error {
  readonly code: string;

  constructor(code: string, message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = new.target.name;
    this.code = code;
  }
}

/** A path, working directory or upload target that would leave the sandbox. */
export class PathConfinementError extends HarnessError {
  constructor(message: string) {
    super("path_confinement", `path confinement: ${message}`);
  }
}

/** Input that cannot be run as given: empty argv, NUL bytes, a malformed env key, a bad timeout. */
export class InvalidInputError extends HarnessError {
  constructor(message: string) {
    super("invalid_input", message);
  }
}

/** A repository reference that is neither a local path nor a GitHub repository. */
export class RepoRefError extends HarnessError {
  constructor(message: string) {
    super("invalid_repo", message);
  }
}

/** A sandbox could not be created, used or torn down. */
export class SandboxError extends HarnessError {
  constructor(message: string, options?: ErrorOptions) {
    super("sandbox", message, options);
  }
}

/**
 * The service a sandbox provider runs on (the Docker Engine) cannot be reached at all: what it
 * holds is unknown, not absent, so other providers' sandboxes are still usable.
 */
export class SandboxBackendUnreachableError extends SandboxError {
  constructor(
    readonly backend: "docker",
    message: string,
  ) {
    super(message);
  }
}

/** A file read out of a sandbox that is, or grew while read, past the caller's limit. */
export class SandboxFileTooLargeError extends SandboxError {
  constructor(
    message: string,
    readonly limitBytes: number,
  ) {
    super(message);
  }
}

/** A command or snapshot asked of a paused sandbox (`Sandbox.pause`): it runs nothing until resumed. */
export class SandboxPausedError extends HarnessError {
  constructor(sandboxId: string) {
    super("sandbox_paused", `The sandbox ${sandboxId} is paused: resume it before running anything in it`);
  }
}

/** A named sandbox asked for that does not exist (never made, or deleted). */
export class SandboxNotFoundError extends HarnessError {
  constructor(message: string) {
    super("sandbox_not_found", message);
  }
}

/** A sandbox name already in use. */
export class SandboxNameTakenError extends HarnessError {
  constructor(message: string) {
    super("sandbox_name_taken", message);
  }
}

/** A setting that stops the process from starting; the message says what to change. */
export class SettingsError extends HarnessError {
  constructor(message: string) {
    super("settings", message);
  }
}

/** Renders any thrown value as one readable line, never a stack trace. */
export function describeError(error: unknown): string {
  if (error instanceof Error) return error.message;
  if (typeof error === "string") return error;
  return "unknown error";
}
