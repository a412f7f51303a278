import { randomBytes } from "node:crypto";
import { InvalidInputError } from "../util/errors.js";

/** A named sandbox's name: what people type and agents pass, and part of its branch and container. */
export const SANDBOX_NAME = /^[a-z0-9](?:[a-z0-9-]{0,38}[a-z0-9])?$/;

/** Refuses a name that could not be a branch segment, a container name or a label as it is. */
export function assertSandboxName(name: unknown): asserts name is string {
  if (typeof name !== "string" || !SANDBOX_NAME.test(name)) {
    throw new InvalidInputError(
      `A sandbox name is 1 to 40 lower-case letters, digits and '-', starting and ending with a letter or ` +
        `digit; got ${JSON.stringify(typeof name === "string" ? name.slice(0, 60) : name)}`,
    );
  }
}

/** `<repository's name>-<4 random hex digits>`, e.g. `hello-world-3fa9`. */
export function defaultSandboxName(repo: string, random: () => string = () => randomBytes(2).toString("hex")): string {
  const last =
    repo
      .replace(/\.git\/?$/, "")
      .replace(/\/+$/, "")
      .split(/[/:\\]/)
      .pop() ?? "";
  const slug = last
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, "-")
    .replace(/^-+|-+$/g, "")
    .slice(0, 30)
    .replace(/-+$/, "");
  return `${slug || "sandbox"}-${random()}`;
}

/** Each sandbox works on a branch of its own, named for it. */
export function sandboxBranch(name: string): string {
  return `harness/sandbox/${name}`;
}

/** The Docker container of a named sandbox. */
export function sandboxContainerName(name: string): string {
  return `harness-sandbox-${name}`;
}
