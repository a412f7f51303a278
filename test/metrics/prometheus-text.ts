/**
 * A strict parser for the Prometheus text exposition format 0.0.4, for tests. npm has no
 * maintained parser (parse-prometheus-text-format's last release is from 2018, untyped, and
 * lenient: it skips lines it does not understand), so this one follows the format's grammar
 * (prometheus.io/docs/instrumenting/exposition_formats) and the rules Prometheus enforces on
 * ingestion, and throws, naming the line, at the first violation:
 * - every line is a `# HELP`, a `# TYPE`, another comment, blank, or a sample;
 * - names match `[a-zA-Z_:][a-zA-Z0-9_:]*`, label names `[a-zA-Z_][a-zA-Z0-9_]*` (not `__…`);
 * - label values are quoted with only `\\`, `\"` and `\n` escapes; HELP text only `\\` and `\n`;
 * - values are floats as Go's ParseFloat reads them (so NaN and Inf in any case: prom-client
 *   writes `Nan`), timestamps integers;
 * - HELP and TYPE at most once per family, TYPE before the family's first sample, a family's
 *   lines contiguous, no series twice, counters never negative;
 * - histograms: `_bucket` series carry `le`, ascending, cumulative, ending at `+Inf` equal to
 *   `_count`, with `_sum` and `_count` present; summaries: `quantile` in [0, 1], `_sum`, `_count`.
 */

export type MetricType = "counter" | "gauge" | "histogram" | "summary" | "untyped";

export interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
  timestamp?: number;
}

export interface MetricFamily {
  name: string;
  type: MetricType;
  help?: string;
  samples: Sample[];
}

const METRIC_NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/;
const LABEL_NAME = /^[a-zA-Z_][a-zA-Z0-9_]*$/;
const TYPES = new Set<MetricType>(["counter", "gauge", "histogram", "summary", "untyped"]);
/** Go's strconv.ParseFloat, which Prometheus uses: decimals, and Inf/Infinity/NaN in any case. */
const FLOAT = /^[+-]?(?:\d+\.?\d*(?:[eE][+-]?\d+)?|\.\d+(?:[eE][+-]?\d+)?|inf|infinity)$/i;
const NAN = /^[+-]?nan$/i;

export class ExpositionError extends Error {
  constructor(line: number, message: string, text: string) {
    super(`line ${String(line)}: ${message}: ${JSON.stringify(text)}`);
  }
}

/** Parses and validates a whole exposition; returns its families by name. */
export function parsePrometheusText(text: string): Map<string, MetricFamily> {
  if (text.length > 0 && !text.endsWith("\n"))
    throw new ExpositionError(text.split("\n").length, "the exposition must end with a newline", text.slice(-40));
  const families = new Map<string, MetricFamily>();
  const closed = new Set<string>();
  const seenSeries = new Set<string>();
  const typed = new Set<string>();
  let current: string | undefined;
  const lines = text.split("\n");
  lines.pop();

  const enter = (family: string, lineNo: number, line: string): void => {
    if (current === family) return;
    if (closed.has(family)) throw new ExpositionError(lineNo, `the lines of ${family} are not contiguous`, line);
    if (current !== undefined) closed.add(current);
    current = family;
  };
  const familyOf = (name: string, lineNo: number, line: string): MetricFamily => {
    let family = families.get(name);
    if (!family) {
      family = { name, type: "untyped", samples: [] };
      families.set(name, family);
    }
    enter(name, lineNo, line);
    return family;
  };

  lines.forEach((line, index) => {
    const lineNo = index + 1;
    if (line.trim() === "") return;
    if (line.startsWith("#")) {
      const match = /^#\s+(HELP|TYPE)\s+(\S+)(?:\s(.*))?$/.exec(line);
      if (!match) return; // an ordinary comment
      const [, keyword, name = "", rest = ""] = match;
      if (!METRIC_NAME.test(name)) throw new ExpositionError(lineNo, "invalid metric name", line);
      const family = familyOf(name, lineNo, line);
      if (keyword === "HELP") {
        if (family.help !== undefined) throw new ExpositionError(lineNo, `second HELP for ${name}`, line);
        family.help = unescapeHelp(rest, lineNo, line);
      } else {
        const type = rest.trim();
        if (!TYPES.has(type as MetricType)) throw new ExpositionError(lineNo, `unknown type "${type}"`, line);
        if (family.samples.length > 0) throw new ExpositionError(lineNo, `TYPE for ${name} after its samples`, line);
        if (typed.has(name)) throw new ExpositionError(lineNo, `second TYPE for ${name}`, line);
        typed.add(name);
        family.type = type as MetricType;
      }
      return;
    }
    const sample = parseSample(line, lineNo);
    const familyName = resolveFamily(sample.name, families);
    const family = familyOf(familyName, lineNo, line);
    const seriesKey = `${sample.name}{${Object.entries(sample.labels)
      .sort(([a], [b]) => a.localeCompare(b))
      .map(([k, v]) => `${k}=${JSON.stringify(v)}`)
      .join(",")}}`;
    if (seenSeries.has(seriesKey)) throw new ExpositionError(lineNo, "the same series twice", line);
    seenSeries.add(seriesKey);
    if (family.type === "counter" && (sample.value < 0 || Number.isNaN(sample.value)))
      throw new ExpositionError(lineNo, "a counter below zero", line);
    if (family.type === "summary" && sample.name === familyName) {
      const quantile = sample.labels["quantile"];
      const q = Number(quantile);
      if (quantile === undefined || !(q >= 0 && q <= 1))
        throw new ExpositionError(lineNo, "a summary quantile without a quantile label in [0, 1]", line);
    }
    if (family.type === "histogram" && sample.name === `${familyName}_bucket` && sample.labels["le"] === undefined)
      throw new ExpositionError(lineNo, "a histogram bucket without le", line);
    family.samples.push(sample);
  });
  for (const family of families.values()) {
    if (family.type === "histogram") checkHistogram(family);
    if (family.type === "summary") checkSummary(family);
  }
  return families;
}

function resolveFamily(sampleName: string, families: Map<string, MetricFamily>): string {
  if (families.has(sampleName) && families.get(sampleName)?.type !== "untyped") return sampleName;
  for (const suffix of ["_bucket", "_sum", "_count"]) {
    if (!sampleName.endsWith(suffix)) continue;
    const base = sampleName.slice(0, -suffix.length);
    const type = families.get(base)?.type;
    if (type === "histogram" || (type === "summary" && suffix !== "_bucket")) return base;
  }
  return sampleName;
}

function parseSample(line: string, lineNo: number): Sample {
  let i = 0;
  const nameMatch = /^[a-zA-Z_:][a-zA-Z0-9_:]*/.exec(line);
  if (!nameMatch) throw new ExpositionError(lineNo, "a sample must start with a metric name", line);
  const name = nameMatch[0];
  i = name.length;
  const labels: Record<string, string> = {};
  if (line[i] === "{") {
    i++;
    for (;;) {
      if (line[i] === "}") {
        i++;
        break;
      }
      const labelMatch = /^[a-zA-Z_][a-zA-Z0-9_]*/.exec(line.slice(i));
      if (!labelMatch) throw new ExpositionError(lineNo, "invalid label name", line);
      const labelName = labelMatch[0];
      if (!LABEL_NAME.test(labelName) || labelName.startsWith("__"))
        throw new ExpositionError(lineNo, `reserved or invalid label name ${labelName}`, line);
      if (labelName in labels) throw new ExpositionError(lineNo, `label ${labelName} twice`, line);
      i += labelName.length;
      if (line[i] !== "=" || line[i + 1] !== '"')
        throw new ExpositionError(lineNo, `label ${labelName} must be followed by ="`, line);
      i += 2;
      let value = "";
      for (;;) {
        const char = line[i];
        if (char === undefined) throw new ExpositionError(lineNo, "unterminated label value", line);
        if (char === '"') {
          i++;
          break;
        }
        if (char === "\\") {
          const next = line[i + 1];
          if (next === "\\") value += "\\";
          else if (next === '"') value += '"';
          else if (next === "n") value += "\n";
          else throw new ExpositionError(lineNo, `invalid escape \\${next ?? ""} in a label value`, line);
          i += 2;
          continue;
        }
        value += char;
        i++;
      }
      labels[labelName] = value;
      if (line[i] === ",") {
        i++;
        continue;
      }
      if (line[i] === "}") {
        i++;
        break;
      }
      throw new ExpositionError(lineNo, "labels must be separated by commas and closed by }", line);
    }
  }
  if (line[i] !== " " && line[i] !== "\t")
    throw new ExpositionError(lineNo, "the value must follow after whitespace", line);
  const fields = line
    .slice(i)
    .trim()
    .split(/[ \t]+/);
  if (fields.length < 1 || fields.length > 2)
    throw new ExpositionError(lineNo, "a sample has a value and at most a timestamp", line);
  const value = parseValue(fields[0] ?? "", lineNo, line);
  const sample: Sample = { name, labels, value };
  if (fields[1] !== undefined) {
    if (!/^-?\d+$/.test(fields[1])) throw new ExpositionError(lineNo, "the timestamp must be an integer (ms)", line);
    sample.timestamp = Number(fields[1]);
  }
  return sample;
}

function parseValue(text: string, lineNo: number, line: string): number {
  if (NAN.test(text)) return Number.NaN;
  if (!FLOAT.test(text)) throw new ExpositionError(lineNo, `invalid value "${text}"`, line);
  if (/inf(?:inity)?$/i.test(text)) return text.startsWith("-") ? -Infinity : Infinity;
  return Number(text);
}

function unescapeHelp(text: string, lineNo: number, line: string): string {
  let out = "";
  for (let i = 0; i < text.length; i++) {
    const char = text.charAt(i);
    if (char !== "\\") {
      out += char;
      continue;
    }
    const next = text[i + 1];
    if (next === "\\") out += "\\";
    else if (next === "n") out += "\n";
    else throw new ExpositionError(lineNo, `invalid escape \\${next ?? ""} in HELP`, line);
    i++;
  }
  return out;
}

/** Label set without `le`/`quantile`, as a key: one histogram or summary series per key. */
function seriesKey(labels: Record<string, string>, drop: string): string {
  return JSON.stringify(
    Object.entries(labels)
      .filter(([k]) => k !== drop)
      .sort(([a], [b]) => a.localeCompare(b)),
  );
}

function checkHistogram(family: MetricFamily): void {
  const groups = new Map<string, { buckets: Array<[number, number]>; sum?: number; count?: number }>();
  const group = (labels: Record<string, string>) => {
    const key = seriesKey(labels, "le");
    let entry = groups.get(key);
    if (!entry) groups.set(key, (entry = { buckets: [] }));
    return entry;
  };
  for (const sample of family.samples) {
    if (sample.name === `${family.name}_bucket`) {
      const le = sample.labels["le"] ?? "";
      const bound = le === "+Inf" ? Infinity : Number(le);
      if (le !== "+Inf" && (!FLOAT.test(le) || Number.isNaN(bound)))
        throw new Error(`${family.name}: invalid le="${le}"`);
      group(sample.labels).buckets.push([bound, sample.value]);
    } else if (sample.name === `${family.name}_sum`) group(sample.labels).sum = sample.value;
    else if (sample.name === `${family.name}_count`) group(sample.labels).count = sample.value;
    else throw new Error(`${family.name}: unexpected sample ${sample.name} in a histogram`);
  }
  for (const [key, entry] of groups) {
    if (entry.sum === undefined || entry.count === undefined)
      throw new Error(`${family.name}${key}: a histogram needs _sum and _count`);
    let previousBound = -Infinity;
    let previousCount = 0;
    for (const [bound, count] of entry.buckets) {
      if (!(bound > previousBound)) throw new Error(`${family.name}${key}: buckets must ascend by le`);
      if (count < previousCount) throw new Error(`${family.name}${key}: bucket counts must be cumulative`);
      previousBound = bound;
      previousCount = count;
    }
    const last = entry.buckets.at(-1);
    if (!last || last[0] !== Infinity) throw new Error(`${family.name}${key}: the last bucket must be le="+Inf"`);
    if (last[1] !== entry.count)
      throw new Error(
        `${family.name}${key}: the +Inf bucket (${String(last[1])}) must equal _count (${String(entry.count)})`,
      );
  }
}

function checkSummary(family: MetricFamily): void {
  const groups = new Map<string, { sum?: number; count?: number }>();
  for (const sample of family.samples) {
    const key = seriesKey(sample.labels, "quantile");
    const entry = groups.get(key) ?? {};
    groups.set(key, entry);
    if (sample.name === `${family.name}_sum`) entry.sum = sample.value;
    else if (sample.name === `${family.name}_count`) entry.count = sample.value;
  }
  for (const [key, entry] of groups) {
    if (entry.sum === undefined || entry.count === undefined)
      throw new Error(`${family.name}${key}: a summary needs _sum and _count`);
  }
}

/** The value of one series, or undefined when it is not exposed. */
export function sampleValue(
  families: Map<string, MetricFamily>,
  family: string,
  name: string,
  labels: Record<string, string> = {},
): number | undefined {
  const match = families
    .get(family)
    ?.samples.find(
      (sample) =>
        sample.name === name &&
        Object.keys(labels).length === Object.keys(sample.labels).length &&
        Object.entries(labels).every(([k, v]) => sample.labels[k] === v),
    );
  return match?.value;
}
