import { Composer, isAlias, isMap, isScalar, isSeq, Lexer, LineCounter, Parser, type Document, type Node } from "yaml";
import { HarnessError } from "../util/errors.js";

/*
 * YAML from repositories is written by strangers and parsed on a webhook path anyone can trigger
 * by commenting, so its cost must stay linear in its size and small at the size cap. The yaml
 * package's own duplicate-key check compares every key with every earlier one (quadratic: 0.26 MB
 * of keys took 3.6 s), so it is off and duplicates are found here with a set per map. Lexing is
 * driven one lexeme at a time so oversized, over-deep or multi-document input is refused as soon
 * as it shows, before the parse tree is built or composed.
 */

export interface YamlLimits {
  /** Lexemes (keys, values, punctuation, comments, line breaks): bounds all later work. */
  maxTokens: number;
  /** Collections nested inside one another; composing and converting recurse per level. */
  maxDepth: number;
  /**
   * The yaml package's weighted alias expansion budget; keeps shared subtrees from exploding
   * validators that walk them.
   */
  maxAliasCount: number;
}

/** Limits for `.github/harness.yml`: a real file holds a few hundred lexemes. */
export const CONFIG_YAML_LIMITS: Readonly<YamlLimits> = { maxTokens: 8_192, maxDepth: 64, maxAliasCount: 16 };

/** Limits for blueprint files, which hold prompts and more steps than a config. */
export const BLUEPRINT_YAML_LIMITS: Readonly<YamlLimits> = { maxTokens: 16_384, maxDepth: 64, maxAliasCount: 16 };

/**
 * YAML that is malformed or beyond a limit; the message is a sentence without the file's name,
 * for the caller to prefix.
 */
export class BoundedYamlError extends HarnessError {
  constructor(message: string) {
    super("invalid_yaml", message);
  }
}

const numbers = new Intl.NumberFormat("en-US");
const MAX_REPORTED_KEY_CHARS = 60;
/** The yaml package's messages can quote the source (a lexeme, an alias name): any length. */
const MAX_REPORTED_MESSAGE_CHARS = 200;

/**
 * Parses one YAML document into plain data (`null` for an empty file) within `limits`, in time
 * linear in `text.length`. Throws `BoundedYamlError` for malformed YAML, duplicate keys, keys
 * that are not plain values, several documents, and anything beyond a limit.
 */
export function parseBoundedYaml(text: string, limits: Readonly<YamlLimits> = CONFIG_YAML_LIMITS): unknown {
  const lines = new LineCounter();
  const at = (offset: number): string => {
    const { line, col } = lines.linePos(offset);
    return line > 0 ? ` at line ${String(line)}, column ${String(col)}` : "";
  };
  const parser = new Parser(lines.addNewLine);
  // `Parser.parse` records the first line's start itself; driving `next` by hand must too.
  lines.addNewLine(0);
  // uniqueKeys off: its pairwise comparison is the quadratic step; merge keys off: `<<` copies maps.
  const composer = new Composer({ schema: "core", merge: false, uniqueKeys: false, strict: true, logLevel: "silent" });
  const documents: Document.Parsed[] = [];
  let tokens = 0;
  let offset = 0;
  let documentTokens = 0;
  const compose = (token: Parameters<Composer["next"]>[0]): void => {
    // Stray tokens come one by one; handing thousands to the composer costs an Error object each.
    if (token.type === "error")
      throw new BoundedYamlError(
        `is not valid YAML${at(token.offset)}: ${brief(token.message, MAX_REPORTED_MESSAGE_CHARS)}`,
      );
    if (token.type === "document" && ++documentTokens > 1)
      throw new BoundedYamlError(
        `holds more than one YAML document (a second \`---\`${at(token.offset)}); Harness reads one`,
      );
    for (const document of composer.next(token)) documents.push(document);
  };
  for (const lexeme of new Lexer().lex(text)) {
    if (++tokens > limits.maxTokens)
      throw new BoundedYamlError(
        `is too complex: more than ${numbers.format(limits.maxTokens)} YAML tokens ` +
          `(keys, values, punctuation, comments, line breaks) by line ${String(lines.linePos(offset).line)}`,
      );
    for (const token of parser.next(lexeme)) compose(token);
    // The parser's stack holds the document, each open collection and at most one scalar.
    if (parser.stack.length > limits.maxDepth + 2)
      throw new BoundedYamlError(`nests collections more than ${String(limits.maxDepth)} levels deep${at(offset)}`);
    offset += lexeme.length;
  }
  for (const token of parser.end()) compose(token);
  for (const document of composer.end(false, text.length)) documents.push(document);

  const [document] = documents;
  if (!document) return null;
  const [error] = document.errors;
  if (error)
    throw new BoundedYamlError(
      `is not valid YAML${at(error.pos[0])}: ${brief(error.message, MAX_REPORTED_MESSAGE_CHARS)}`,
    );
  checkShape(document.contents, limits.maxDepth, at);
  try {
    return document.toJS({ maxAliasCount: limits.maxAliasCount });
  } catch (error) {
    // The yaml package throws a ReferenceError for excessive or unresolvable aliases.
    if (error instanceof ReferenceError) {
      const detail = /Excessive alias count/.test(error.message)
        ? `uses aliases (\`*name\`) beyond the ${String(limits.maxAliasCount)} Harness allows`
        : `is not valid YAML: ${brief(error.message, MAX_REPORTED_MESSAGE_CHARS)}`;
      throw new BoundedYamlError(detail);
    }
    throw error;
  }
}

/**
 * Depth, duplicate keys and self-referencing aliases in one iterative pass (no recursion, so
 * depth cannot overflow the stack).
 */
function checkShape(root: Node | null, maxDepth: number, at: (offset: number) => string): void {
  const anchors = new Map<string, Array<{ start: number; end: number }>>();
  const aliases: Array<{ name: string; offset: number }> = [];
  const pending: Array<{ node: Node; depth: number }> = root ? [{ node: root, depth: 1 }] : [];
  for (let next = pending.pop(); next; next = pending.pop()) {
    const { node, depth } = next;
    if (isAlias(node)) {
      aliases.push({ name: node.source, offset: node.range?.[0] ?? 0 });
      continue;
    }
    if (node.anchor) {
      const ranges = anchors.get(node.anchor) ?? [];
      ranges.push({ start: node.range?.[0] ?? 0, end: node.range?.[1] ?? 0 });
      anchors.set(node.anchor, ranges);
    }
    if (isMap(node)) {
      if (depth > maxDepth)
        throw new BoundedYamlError(
          `nests collections more than ${String(maxDepth)} levels deep${at(node.range?.[0] ?? 0)}`,
        );
      const seen = new Set<string>();
      for (const pair of node.items) {
        const key = pair.key as Node | null;
        if (key !== null && !isScalar(key))
          throw new BoundedYamlError(
            `has a key that is ${isAlias(key) ? "an alias" : "a list or map"}${at(key.range?.[0] ?? 0)}; ` +
              `keys must be plain values`,
          );
        // The same spelling the conversion to an object uses, so `1` and `"1"` collide as they would there.
        const name = keyName(key?.value);
        if (seen.has(name))
          throw new BoundedYamlError(
            `repeats the key \`${brief(name, MAX_REPORTED_KEY_CHARS)}\`${at(key?.range?.[0] ?? 0)}; ` +
              `each key may appear once in a map`,
          );
        seen.add(name);
        if (key?.anchor) pending.push({ node: key, depth: depth + 1 });
        if (pair.value) pending.push({ node: pair.value as Node, depth: depth + 1 });
      }
    } else if (isSeq(node)) {
      if (depth > maxDepth)
        throw new BoundedYamlError(
          `nests collections more than ${String(maxDepth)} levels deep${at(node.range?.[0] ?? 0)}`,
        );
      for (const item of node.items) if (item) pending.push({ node: item as Node, depth: depth + 1 });
    }
  }
  // An alias names the latest anchor before it; inside that anchor's own node it would make the data contain itself.
  for (const ranges of anchors.values()) ranges.sort((a, b) => a.start - b.start);
  for (const alias of aliases) {
    const ranges = anchors.get(alias.name) ?? [];
    let low = 0;
    let high = ranges.length;
    while (low < high) {
      const middle = (low + high) >>> 1;
      if ((ranges[middle]?.start ?? 0) < alias.offset) low = middle + 1;
      else high = middle;
    }
    const anchor = ranges[low - 1];
    if (anchor && alias.offset < anchor.end)
      throw new BoundedYamlError(
        `has an alias (\`*${brief(alias.name, MAX_REPORTED_KEY_CHARS)}\`${at(alias.offset)}) ` +
          `inside the node it refers to`,
      );
  }
}

/** A key as the conversion to an object spells it: `null` as "", primitives as `String` does. */
function keyName(value: unknown): string {
  switch (typeof value) {
    case "string":
      return value;
    case "number":
    case "boolean":
    case "bigint":
      return String(value);
    default:
      // Core-schema scalars are primitives; anything else is named by its JSON form.
      return value === null || value === undefined ? "" : JSON.stringify(value);
  }
}

/** The first line of `text`, cut to `max` characters. */
function brief(text: string, max: number): string {
  const line = text.split("\n", 1)[0] ?? "";
  return line.length > max ? `${line.slice(0, max)}…` : line;
}
