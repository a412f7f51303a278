import { describe, expect, test } from "vitest";
import { parsePrometheusText, sampleValue } from "./prometheus-text.js";

// The validator the /metrics tests rely on must itself refuse what Prometheus would refuse.

const GOOD = [
  "# A comment that is neither HELP nor TYPE",
  "# HELP http_requests_total The total number of HTTP requests.",
  "# TYPE http_requests_total counter",
  'http_requests_total{method="post",code="200"} 1027 1395066363000',
  'http_requests_total{method="post",code="400"}    3 1395066363000',
  "",
  "# HELP msdos_file_access_time_seconds Escaped \\\\ and \\n newline",
  "# TYPE msdos_file_access_time_seconds gauge",
  'msdos_file_access_time_seconds{path="C:\\\\DIR\\\\FILE.TXT",' +
    'error="Cannot find file:\\n\\"FILE.TXT\\""} 1.458255915e9',
  "metric_without_timestamp_and_labels 12.47",
  'something_weird{problem="division by zero"} +Inf -3982045',
  "# TYPE http_request_duration_seconds histogram",
  'http_request_duration_seconds_bucket{le="0.05"} 24054',
  'http_request_duration_seconds_bucket{le="0.1"} 33444',
  'http_request_duration_seconds_bucket{le="+Inf"} 144320',
  "http_request_duration_seconds_sum 53423",
  "http_request_duration_seconds_count 144320",
  "# TYPE rpc_duration_seconds summary",
  'rpc_duration_seconds{quantile="0.5"} 4773',
  'rpc_duration_seconds{quantile="0.99"} 76656',
  "rpc_duration_seconds_sum 1.7560473e+07",
  "rpc_duration_seconds_count 2693",
  "nan_gauge NaN",
  "prom_client_nan Nan",
  "go_parsefloat_inf -infinity",
  "",
].join("\n");

describe("the strict exposition parser", () => {
  test("accepts the format's own example and reads its values", () => {
    const families = parsePrometheusText(GOOD);
    expect(families.get("http_requests_total")?.type).toBe("counter");
    expect(sampleValue(families, "http_requests_total", "http_requests_total", { method: "post", code: "400" })).toBe(
      3,
    );
    expect(families.get("msdos_file_access_time_seconds")?.help).toBe("Escaped \\ and \n newline");
    expect(families.get("msdos_file_access_time_seconds")?.samples[0]?.labels["error"]).toBe(
      'Cannot find file:\n"FILE.TXT"',
    );
    expect(sampleValue(families, "something_weird", "something_weird", { problem: "division by zero" })).toBe(Infinity);
    expect(sampleValue(families, "http_request_duration_seconds", "http_request_duration_seconds_count")).toBe(144320);
    expect(Number.isNaN(sampleValue(families, "nan_gauge", "nan_gauge"))).toBe(true);
    // Prometheus reads values with Go's ParseFloat, which ignores case: prom-client writes `Nan`.
    expect(Number.isNaN(sampleValue(families, "prom_client_nan", "prom_client_nan"))).toBe(true);
    expect(sampleValue(families, "go_parsefloat_inf", "go_parsefloat_inf")).toBe(-Infinity);
  });

  const bad: Array<[string, string]> = [
    ["no final newline", "a 1"],
    ["a name starting with a digit", "1abc 1\n"],
    ["a hyphen in a name", "a-b 1\n"],
    ["a value that is not a number", "a one\n"],
    ["a missing value", "a\n"],
    ["two dots in a value", "a 1.2.3\n"],
    ["a word that only starts like NaN", "a nan1\n"],
    ["three fields", "a 1 2 3\n"],
    ["a fractional timestamp", "a 1 2.5\n"],
    ["an unquoted label value", "a{b=c} 1\n"],
    ["an unterminated label value", 'a{b="c} 1\n'],
    ["an invalid escape in a label value", 'a{b="\\t"} 1\n'],
    ["a reserved label name", 'a{__name__="x"} 1\n'],
    ["the same label twice", 'a{b="1",b="2"} 1\n'],
    ["labels without a comma", 'a{b="1" c="2"} 1\n'],
    ["an unknown type", "# TYPE a countr\na 1\n"],
    ["TYPE after the samples", "a 1\n# TYPE a gauge\n"],
    ["two TYPE lines", "# TYPE a gauge\n# TYPE a gauge\na 1\n"],
    ["two HELP lines", "# HELP a x\n# HELP a y\na 1\n"],
    ["an invalid escape in HELP", "# HELP a bad \\t escape\na 1\n"],
    ["a family split in two", '# TYPE a gauge\na 1\n# TYPE b gauge\nb 1\na{x="1"} 2\n'],
    ["the same series twice", "a 1\na 2\n"],
    ["a negative counter", "# TYPE a_total counter\na_total -1\n"],
    ["a histogram without +Inf", '# TYPE h histogram\nh_bucket{le="1"} 1\nh_sum 1\nh_count 1\n'],
    [
      "a histogram whose +Inf is not its count",
      '# TYPE h histogram\nh_bucket{le="1"} 1\nh_bucket{le="+Inf"} 2\nh_sum 1\nh_count 3\n',
    ],
    [
      "non-cumulative buckets",
      '# TYPE h histogram\nh_bucket{le="1"} 2\nh_bucket{le="2"} 1\nh_bucket{le="+Inf"} 2\nh_sum 1\nh_count 2\n',
    ],
    [
      "buckets out of order",
      '# TYPE h histogram\nh_bucket{le="2"} 1\nh_bucket{le="1"} 1\nh_bucket{le="+Inf"} 1\nh_sum 1\nh_count 1\n',
    ],
    ["a bucket without le", "# TYPE h histogram\nh_bucket 1\nh_sum 1\nh_count 1\n"],
    ["a histogram without _sum", '# TYPE h histogram\nh_bucket{le="+Inf"} 1\nh_count 1\n'],
    ["a summary quantile out of range", '# TYPE s summary\ns{quantile="2"} 1\ns_sum 1\ns_count 1\n'],
  ];
  test.each(bad)("refuses %s", (_what, text) => {
    expect(() => parsePrometheusText(text)).toThrow();
  });
});
