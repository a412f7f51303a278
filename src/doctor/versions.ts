/**
 * Just enough of semver for the doctor: versions as numbers, and the ranges package.json's
 * `engines` uses (`^20.18.1 || >=22`: alternatives of space-separated comparators).
 */

/** `v2.39.5`, `2.39.5.windows.1`, `20.19` → the first three numbers, missing ones 0; undefined without any. */
export function parseVersion(text: string): [number, number, number] | undefined {
  const match = /(\d+)(?:\.(\d+))?(?:\.(\d+))?/.exec(text);
  if (!match) return undefined;
  return [Number(match[1]), Number(match[2] ?? 0), Number(match[3] ?? 0)];
}

export function compareVersions(a: readonly number[], b: readonly number[]): number {
  for (let index = 0; index < 3; index += 1) {
    const difference = (a[index] ?? 0) - (b[index] ?? 0);
    if (difference !== 0) return Math.sign(difference);
  }
  return 0;
}

/** Whether `version` is in `range`; a comparator this does not understand never matches. */
export function satisfiesRange(version: string, range: string): boolean {
  const parsed = parseVersion(version);
  if (!parsed) return false;
  return range.split("||").some((alternative) => {
    const comparators = alternative.trim().split(/\s+/).filter(Boolean);
    return comparators.length > 0 && comparators.every((comparator) => meets(parsed, comparator));
  });
}

function meets(version: [number, number, number], comparator: string): boolean {
  const match = /^(\^|~|>=|<=|>|<|=)?v?(\d+(?:\.\d+){0,2})$/.exec(comparator);
  const bound = match?.[2] !== undefined ? parseVersion(match[2]) : undefined;
  if (!match || !bound) return false;
  const order = compareVersions(version, bound);
  switch (match[1]) {
    case "^":
      return order >= 0 && version[0] === bound[0];
    case "~":
      return order >= 0 && version[0] === bound[0] && version[1] === bound[1];
    case ">=":
      return order >= 0;
    case ">":
      return order > 0;
    case "<=":
      return order <= 0;
    case "<":
      return order < 0;
    default:
      return order === 0;
  }
}
