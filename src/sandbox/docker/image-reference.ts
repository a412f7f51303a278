/*
 * Docker image references (`name[:tag][@sha256:digest]`) as repositories, organisations and
 * operators write them, and lists of allowed ones. The grammar is Docker's own (the
 * distribution project's reference grammar), less digests other than sha256, so a reference
 * refused here is one the engine would refuse too, or one no registry serves.
 */

import { InvalidInputError } from "../../util/errors.js";

/** Longest reference accepted: Docker's 255 for the name, a 128-character tag and a digest fit. */
export const MAX_IMAGE_REFERENCE_LENGTH = 512;
/** Docker's own limit on a name (registry and path). */
const MAX_NAME_LENGTH = 255;

const DOMAIN_COMPONENT = "(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])";
const DOMAIN = `(?:${DOMAIN_COMPONENT}(?:\\.${DOMAIN_COMPONENT})*|\\[[a-fA-F0-9:]+\\])(?::[0-9]+)?`;
const PATH_COMPONENT = "[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*";
const TAG = "[\\w][\\w.-]{0,127}";
const DIGEST = "sha256:[a-f0-9]{64}";
const REFERENCE = new RegExp(
  `^(?<name>(?:${DOMAIN}/)?${PATH_COMPONENT}(?:/${PATH_COMPONENT})*)(?::(?<tag>${TAG}))?(?:@(?<digest>${DIGEST}))?$`,
);

/** What a reference says, split. */
export interface ImageReference {
  /** The registry (`docker.io` for Docker Hub's short names), lower-cased. */
  domain: string;
  /** The repository's path on it (`library/node` for Docker Hub's official images). */
  path: string;
  tag?: string;
  digest?: string;
}

/** An example for messages: what a valid reference looks like. */
export const IMAGE_REFERENCE_SHAPE = "name[:tag][@sha256:digest], e.g. ghcr.io/acme/runner:1.4";

/** Why `text` is not a Docker image reference, or undefined when it is one. */
export function imageReferenceProblem(text: string): string | undefined {
  if (text.length > MAX_IMAGE_REFERENCE_LENGTH)
    return `is longer than ${String(MAX_IMAGE_REFERENCE_LENGTH)} characters, too long for a Docker image reference`;
  const match = REFERENCE.exec(text);
  const name = match?.groups?.["name"];
  if (name === undefined && text.includes("://"))
    return `is an address, not a Docker image reference (${IMAGE_REFERENCE_SHAPE}): leave out the scheme`;
  if (name === undefined && REFERENCE.test(lowerCaseName(text)))
    return `has upper-case letters in its name: Docker image names are lower case (${IMAGE_REFERENCE_SHAPE})`;
  if (name === undefined)
    return (
      `is not a Docker image reference (${IMAGE_REFERENCE_SHAPE}): a lower-case name of letters, ` +
      `digits and . _ - separated by /, after an optional registry host[:port]`
    );
  if (name.length > MAX_NAME_LENGTH) return `has a name longer than Docker's ${String(MAX_NAME_LENGTH)} characters`;
  return undefined;
}

/** The reference split into registry, path, tag and digest; throws on text that is not one. */
export function parseImageReference(text: string): ImageReference {
  const problem = imageReferenceProblem(text);
  const groups = REFERENCE.exec(text)?.groups;
  const name = groups?.["name"];
  if (problem !== undefined || name === undefined)
    throw new InvalidInputError(`The image "${text.slice(0, 80)}" ${problem ?? "is not an image reference"}`);
  const tag = groups?.["tag"];
  const digest = groups?.["digest"];
  return { ...splitName(name), ...(tag !== undefined ? { tag } : {}), ...(digest !== undefined ? { digest } : {}) };
}

/**
 * The reference as the engine resolves it: the registry and path in full (`node` is
 * `docker.io/library/node`), and `latest` when it names neither tag nor digest.
 */
export function canonicalImage(text: string): string {
  const ref = parseImageReference(text);
  const tag = ref.tag ?? (ref.digest === undefined ? "latest" : undefined);
  const tagged = tag !== undefined ? `:${tag}` : "";
  return `${ref.domain}/${ref.path}${tagged}${ref.digest !== undefined ? `@${ref.digest}` : ""}`;
}

/**
 * Why `entry` cannot be in a list of allowed images, or undefined. An entry is a reference, or
 * the start of one followed by `*` (`ghcr.io/acme/*`, `node:*`, or `*` alone for any image).
 */
export function imagePatternProblem(entry: string): string | undefined {
  if (!entry.endsWith("*")) return imageReferenceProblem(entry);
  const prefix = entry.slice(0, -1);
  if (prefix.length > MAX_IMAGE_REFERENCE_LENGTH)
    return `is longer than ${String(MAX_IMAGE_REFERENCE_LENGTH)} characters`;
  if (!/^[A-Za-z0-9._:/@\-[\]]*$/.test(prefix))
    return (
      "is neither an image reference nor the start of one followed by `*` (e.g. `ghcr.io/acme/*`, `node:*`): " +
      "only letters, digits, `.`, `_`, `-`, `/`, `:` and `@` may come before the one `*` at its end"
    );
  return undefined;
}

/**
 * True when `image` (a valid reference) is one `allowed` admits: an entry that is a reference
 * names the same image as `image`, both resolved the way the engine does (`node` is
 * `docker.io/library/node:latest`); an entry ending in `*` admits every image whose resolved
 * reference starts with the entry's resolved start (`node:*` is `docker.io/library/node:*`,
 * which `node.evil.example/x` is not).
 */
export function imageAllowed(image: string, allowed: readonly string[]): boolean {
  if (imageReferenceProblem(image) !== undefined) return false;
  const resolved = canonicalImage(image);
  return allowed.some((entry) => {
    if (!entry.endsWith("*")) return imageReferenceProblem(entry) === undefined && canonicalImage(entry) === resolved;
    const prefix = entry.slice(0, -1);
    return prefix === "" || resolved.startsWith(canonicalPrefix(prefix));
  });
}

/**
 * The start of a reference, resolved as far as it goes: a first part before `/` that is a
 * registry stays one; anything else is on Docker Hub, its official images under `library/`.
 */
function canonicalPrefix(prefix: string): string {
  const slash = prefix.indexOf("/");
  if (slash < 0) return `docker.io/library/${prefix}`;
  const first = prefix.slice(0, slash);
  if (!isRegistry(first)) return `docker.io/${prefix}`;
  const domain = registryName(first);
  const rest = prefix.slice(slash + 1);
  return domain === "docker.io" && rest !== "" && !rest.includes("/")
    ? `docker.io/library/${rest}`
    : `${domain}/${rest}`;
}

/** Docker's rule: the first part of a name is a registry when it has `.` or `:`, is localhost, or is not lower case. */
function isRegistry(first: string): boolean {
  return first.includes(".") || first.includes(":") || first === "localhost" || first !== first.toLowerCase();
}

function registryName(first: string): string {
  const lower = first.toLowerCase();
  return lower === "index.docker.io" ? "docker.io" : lower;
}

/** The text with its name part (before a tag or digest) lower-cased, registry aside. */
function lowerCaseName(text: string): string {
  const slash = text.indexOf("/");
  const first = slash < 0 ? "" : text.slice(0, slash);
  const start = slash >= 0 && isRegistry(first) ? slash + 1 : 0;
  const end = text.slice(start).search(/[:@]/);
  const stop = end < 0 ? text.length : start + end;
  return text.slice(0, start) + text.slice(start, stop).toLowerCase() + text.slice(stop);
}

function splitName(name: string): { domain: string; path: string } {
  const slash = name.indexOf("/");
  const first = slash < 0 ? "" : name.slice(0, slash);
  if (slash < 0 || !isRegistry(first)) {
    return { domain: "docker.io", path: slash < 0 ? `library/${name}` : name };
  }
  const domain = registryName(first);
  const path = name.slice(slash + 1);
  return { domain, path: domain === "docker.io" && !path.includes("/") ? `library/${path}` : path };
}
