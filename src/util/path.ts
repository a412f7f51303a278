import { isAbsolute, relative, resolve, sep } from "node:path";
import { PathConfinementError } from "./errors.js";

/**
 * Checks, lexically, that `target` stays inside `root` and returns it as an absolute path.
 * A relative `target` is taken relative to `root`. Comparing path segments (not string
 * prefixes) is what rejects siblings such as `/tmp/work-evil` next to `/tmp/work`.
 * Symlinks are not followed here; adapters with a real file system check them too.
 */
export function assertPathConfined(target: string, root: string): string {
  if (target.includes("\0") || root.includes("\0")) {
    throw new PathConfinementError("the path contains a NUL byte");
  }
  if (!isAbsolute(root)) {
    throw new PathConfinementError(`the sandbox root "${root}" is not an absolute path`);
  }
  if (target === "") throw new PathConfinementError("the path is empty");
  const absoluteRoot = resolve(root);
  const absoluteTarget = resolve(absoluteRoot, target);
  if (!isWithin(absoluteTarget, absoluteRoot)) {
    throw new PathConfinementError(`"${target}" is outside the sandbox (${absoluteRoot})`);
  }
  return absoluteTarget;
}

/** True when `absolutePath` is `absoluteRoot` or below it; both must already be resolved. */
export function isWithin(absolutePath: string, absoluteRoot: string): boolean {
  const rel = relative(absoluteRoot, absolutePath);
  if (rel === "") return true;
  return !isAbsolute(rel) && rel !== ".." && !rel.startsWith(`..${sep}`);
}
