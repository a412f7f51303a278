import { spawnSync } from "node:child_process";
import { randomInt } from "node:crypto";
import { readdirSync, readFileSync } from "node:fs";
import { join, posix } from "node:path";
import { Deployment, type IDeployment } from "kubernetes-models/apps/v1";
import { HorizontalPodAutoscaler } from "kubernetes-models/autoscaling/v2";
import { Ingress } from "kubernetes-models/networking.k8s.io/v1";
import { PodDisruptionBudget } from "kubernetes-models/policy/v1";
import { ConfigMap, Namespace, Secret, Service, ServiceAccount } from "kubernetes-models/v1";
import { describe, expect, test } from "vitest";
import { parse, parseAllDocuments } from "yaml";
import { settingsFromEnv } from "../../src/runtime/app-settings.js";
import { fakePem, fakeToken } from "../helpers/fake-secrets.js";

/*
 * deploy/kubernetes, checked without a cluster: every object against the Kubernetes API's own
 * schemas (kubernetes-models), and what an operator relies on across the files — probes at the
 * app's port and paths, each Deployment's role, variables Harness reads, selectors that select,
 * the autoscaler on the worker Deployment, no secret committed, a kustomization that lists every
 * manifest — and each role's environment read by Harness's own settings parser.
 */

const ROOT = join(import.meta.dirname, "..", "..");
const DIR = join(ROOT, "deploy", "kubernetes");

type Validate = (doc: object) => void;

/** A kubernetes-models class as a check that throws its schema's errors, each with its path. */
function schema(Model: new (data: never) => { validate(): void }): Validate {
  return (doc) => {
    new Model(doc as never).validate();
  };
}

/** apiVersion/kind → its schema. A kind not here has none, and a manifest of it fails. */
const SCHEMAS = new Map<string, Validate>([
  ["v1/Namespace", schema(Namespace)],
  ["v1/ServiceAccount", schema(ServiceAccount)],
  ["v1/ConfigMap", schema(ConfigMap)],
  ["v1/Secret", schema(Secret)],
  ["v1/Service", schema(Service)],
  ["apps/v1/Deployment", schema(Deployment)],
  ["policy/v1/PodDisruptionBudget", schema(PodDisruptionBudget)],
  ["autoscaling/v2/HorizontalPodAutoscaler", schema(HorizontalPodAutoscaler)],
  ["networking.k8s.io/v1/Ingress", schema(Ingress)],
]);

/**
 * Files whose one kind has no schema in kubernetes-models, by design: they are read and their
 * kind checked, and any other document in them fails like an unknown kind anywhere else.
 */
const WITHOUT_SCHEMA = new Map<string, string>([
  ["kustomization.yaml", "kustomize.config.k8s.io/v1beta1/Kustomization"],
  // The Prometheus Operator's CRD: optional, outside the kustomization.
  ["podmonitor.yaml", "monitoring.coreos.com/v1/PodMonitor"],
]);

/** Manifests deliberately left out of the kustomization, and why. */
const NOT_APPLIED = new Map<string, string>([
  ["secret.example.yaml", "placeholders only: applying it would replace the real Secrets"],
  ["prometheus-adapter-rules.yaml", "Prometheus Adapter's configuration, in its own namespace"],
  ["podmonitor.yaml", "needs the Prometheus Operator's CRDs"],
]);

function typeOf(doc: Record<string, unknown>): string {
  return `${String(doc["apiVersion"])}/${String(doc["kind"])}`;
}

/** Validates one object against its kind's schema; throws naming the kind when there is none. */
function validateManifest(doc: Record<string, unknown>): void {
  const check = SCHEMAS.get(typeOf(doc));
  if (!check) throw new Error(`no Kubernetes schema for ${String(doc["apiVersion"])} ${String(doc["kind"])}`);
  check(doc);
}

interface Manifest {
  file: string;
  doc: Record<string, unknown>;
}

const FILES = readdirSync(DIR)
  .filter((name) => name.endsWith(".yaml") || name.endsWith(".yml"))
  .sort();

function textOf(file: string): string {
  return readFileSync(join(DIR, file), "utf8");
}

/**
 * Kubernetes reads manifests as YAML 1.1 (sigs.k8s.io/yaml): `0440` is octal and an unquoted
 * `off` a boolean. Parsing them the same way lets the schemas see what the cluster would.
 */
function documentsOf(file: string, text = textOf(file)): Record<string, unknown>[] {
  return parseAllDocuments(text, { version: "1.1" }).flatMap((document) => {
    if (document.errors.length > 0) throw new Error(`${file}: ${document.errors.map((e) => e.message).join("; ")}`);
    const value: unknown = document.toJS();
    if (value === null || value === undefined) return [];
    if (typeof value !== "object" || Array.isArray(value)) throw new Error(`${file}: a document is not an object`);
    return [{ ...value }];
  });
}

const MANIFESTS: Manifest[] = FILES.flatMap((file) => documentsOf(file).map((doc) => ({ file, doc })));

function all<T>(guard: (value: unknown) => value is T, files?: (file: string) => boolean): T[] {
  return MANIFESTS.filter((m) => !files || files(m.file))
    .map((m): unknown => m.doc)
    .filter(guard);
}

function only<T>(items: T[]): T {
  expect(items).toHaveLength(1);
  return items[0]!;
}

function named<T extends { metadata?: { name?: string } }>(items: T[], name: string): T {
  const found = items.filter((item) => item.metadata?.name === name);
  if (found.length !== 1) throw new Error(`expected one object named ${name}, found ${String(found.length)}`);
  return found[0]!;
}

const DEPLOYMENTS = all(Deployment.is);
const WEB = named(DEPLOYMENTS, "harness-web");
const WORKER = named(DEPLOYMENTS, "harness-worker");

function podSpec(deployment: IDeployment) {
  return deployment.spec!.template.spec!;
}

function containerOf(deployment: IDeployment) {
  const containers = podSpec(deployment).containers;
  expect(containers).toHaveLength(1);
  return containers[0]!;
}

function literalEnv(deployment: IDeployment): Record<string, string> {
  return Object.fromEntries((containerOf(deployment).env ?? []).map((entry) => [entry.name, entry.value ?? ""]));
}

function selects(selector: Record<string, string> | undefined, labels: Record<string, string> | undefined): boolean {
  if (!selector || Object.keys(selector).length === 0) return false;
  return Object.entries(selector).every(([key, value]) => labels?.[key] === value);
}

function podLabels(deployment: IDeployment): Record<string, string> | undefined {
  return deployment.spec!.template.metadata?.labels;
}

/** The runtime stage of the Dockerfile, its continuation lines joined. */
function dockerfileRuntime(): string {
  const text = readFileSync(join(ROOT, "Dockerfile"), "utf8").replace(/\\\n/g, " ");
  const stage = text.split(/^FROM .* AS runtime$/m)[1];
  if (stage === undefined) throw new Error("the Dockerfile has no runtime stage");
  return stage;
}

/** The image's own environment (its ENV lines), which a pod's variables override. */
function imageEnv(): Record<string, string> {
  const env: Record<string, string> = {};
  for (const line of dockerfileRuntime().split("\n")) {
    if (!line.startsWith("ENV ")) continue;
    for (const pair of line.slice(4).trim().split(/\s+/)) {
      const [name, value] = pair.split("=", 2);
      if (name && value !== undefined) env[name] = value;
    }
  }
  return env;
}

function imageIds(): { uid: number; gid: number } {
  const stage = dockerfileRuntime();
  const uid = /useradd [^\n&]*--uid (\d+)/.exec(stage)?.[1];
  const gid = /groupadd [^\n&]*--gid (\d+)/.exec(stage)?.[1];
  if (uid === undefined || gid === undefined) throw new Error("the Dockerfile does not fix the user's uid and gid");
  return { uid: Number(uid), gid: Number(gid) };
}

const EXAMPLE_SECRETS = all(Secret.is, (file) => file === "secret.example.yaml");

/** A value in the shape Harness checks for, made up now (test/helpers/fake-secrets.ts). */
function fakeValue(name: string): string {
  if (name === "APP_ID") return String(randomInt(1, 10_000_000));
  if (name === "REDIS_URL") return `redis://:${fakeToken("")}@redis.invalid:6379`;
  if (name.endsWith(".pem")) return fakePem();
  return fakeToken("fake-", 40);
}

/**
 * What a pod of the Deployment sees: the image's ENV, then envFrom (the ConfigMap's data, the
 * example Secret's keys with made-up values), then its own env; and the files its Secret
 * volumes mount, by path.
 */
function podView(deployment: IDeployment): { env: Record<string, string>; files: Map<string, string> } {
  const container = containerOf(deployment);
  const env: Record<string, string> = { ...imageEnv() };
  for (const source of container.envFrom ?? []) {
    if (source.configMapRef) Object.assign(env, named(all(ConfigMap.is), source.configMapRef.name!).data);
    if (source.secretRef) {
      const secret = named(EXAMPLE_SECRETS, source.secretRef.name!);
      for (const key of Object.keys(secret.stringData ?? {})) env[key] = fakeValue(key);
    }
  }
  Object.assign(env, literalEnv(deployment));
  const files = new Map<string, string>();
  for (const mount of container.volumeMounts ?? []) {
    const volume = (podSpec(deployment).volumes ?? []).find((v) => v.name === mount.name);
    if (!volume?.secret?.secretName) continue;
    const secret = named(EXAMPLE_SECRETS, volume.secret.secretName);
    for (const key of Object.keys(secret.stringData ?? {})) files.set(posix.join(mount.mountPath, key), fakeValue(key));
  }
  return { env, files };
}

function settingsOf(deployment: IDeployment) {
  const { env, files } = podView(deployment);
  const settings = settingsFromEnv(env, (path) => {
    const content = files.get(path);
    if (content === undefined) throw new Error(`ENOENT: no such file in the pod, ${path}`);
    return content;
  });
  if (settings.mode !== "app") throw new Error(`${deployment.metadata?.name ?? "?"} starts in setup mode`);
  return settings;
}

describe("every manifest in deploy/kubernetes against the Kubernetes API's schemas", () => {
  test("the directory holds the manifests", () => {
    expect(FILES).toEqual(expect.arrayContaining(["kustomization.yaml", "web-deployment.yaml"]));
    expect(MANIFESTS.length).toBeGreaterThanOrEqual(FILES.length);
  });

  test.each(FILES)("%s: each document is valid for its kind", (file) => {
    const docs = MANIFESTS.filter((m) => m.file === file).map((m) => m.doc);
    expect(docs.length).toBeGreaterThan(0);
    for (const doc of docs) {
      const exempt = WITHOUT_SCHEMA.get(file);
      if (exempt !== undefined) expect(typeOf(doc), `${file} holds only ${exempt}`).toBe(exempt);
      else
        expect(
          () => {
            validateManifest(doc);
          },
          `${file}: ${typeOf(doc)}`,
        ).not.toThrow();
    }
  });

  test("a wrong type is refused, naming the field's path", () => {
    const broken = structuredClone(WEB) as unknown as { spec: Record<string, unknown> };
    broken.spec["replicas"] = "two";
    expect(() => {
      validateManifest(broken);
    }).toThrow(/\/spec\/replicas must be integer/);
  });

  test("a probe without its port is refused, naming the field's path", () => {
    const broken = structuredClone(WORKER);
    delete (containerOf(broken).readinessProbe!.httpGet as { port?: unknown }).port;
    expect(() => {
      validateManifest(broken as unknown as Record<string, unknown>);
    }).toThrow(/\/spec\/template\/spec\/containers\/0\/readinessProbe\/httpGet must have required property '?port/);
  });

  test("an unquoted `off` is a boolean to Kubernetes, and a ConfigMap refuses it", () => {
    const [doc] = documentsOf("inline", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\ndata: {A: off}\n");
    expect(() => {
      validateManifest(doc!);
    }).toThrow(/\/data\/A must be string/);
  });

  test("a kind with no schema fails, named", () => {
    expect(() => {
      validateManifest({ apiVersion: "monitoring.coreos.com/v1", kind: "ServiceMonitor" });
    }).toThrow("no Kubernetes schema for monitoring.coreos.com/v1 ServiceMonitor");
  });
});

describe("what an operator relies on", () => {
  test("the web and worker Deployments set their role, and nothing else is deployed", () => {
    expect(DEPLOYMENTS.map((d) => d.metadata?.name).sort()).toEqual(["harness-web", "harness-worker"]);
    expect(literalEnv(WEB)["HARNESS_ROLE"]).toBe("web");
    expect(literalEnv(WORKER)["HARNESS_ROLE"]).toBe("worker");
    expect(literalEnv(WORKER)["HARNESS_CONCURRENCY"]).toMatch(/^[1-9]\d*$/);
    expect(WEB.spec?.replicas).toBe(2);
  });

  test.each([WEB, WORKER])("$metadata.name: probes /readyz and /healthz at the container's port", (deployment) => {
    const container = containerOf(deployment);
    const ports = container.ports ?? [];
    expect(ports).toHaveLength(1);
    const port = ports[0]!;
    // The port the image listens on (PORT in its ENV).
    expect(String(port.containerPort)).toBe(imageEnv()["PORT"]);
    const atPort = [port.name, port.containerPort];
    expect(container.readinessProbe?.httpGet?.path).toBe("/readyz");
    expect(atPort).toContain(container.readinessProbe?.httpGet?.port);
    expect(container.livenessProbe?.httpGet?.path).toBe("/healthz");
    expect(atPort).toContain(container.livenessProbe?.httpGet?.port);
    expect(container.startupProbe?.httpGet?.path).toBe("/healthz");
    expect(atPort).toContain(container.startupProbe?.httpGet?.port);
    // The scrape annotations name the same port.
    expect(deployment.spec!.template.metadata?.annotations?.["prometheus.io/port"]).toBe(String(port.containerPort));
  });

  test.each([WEB, WORKER])("$metadata.name: stops within its grace period after draining", (deployment) => {
    const spec = podSpec(deployment);
    const preStop = containerOf(deployment).lifecycle?.preStop?.exec?.command ?? [];
    const pause = preStop.length > 0 ? Number(preStop.at(-1)) : 0;
    expect(Number.isInteger(pause)).toBe(true);
    // Harness gives active runs 30 s after SIGTERM (docs/deploy.md), after any preStop pause.
    expect(spec.terminationGracePeriodSeconds).toBeGreaterThanOrEqual(45);
    expect(spec.terminationGracePeriodSeconds).toBeGreaterThan(pause + 30);
  });

  test.each([WEB, WORKER])("$metadata.name: runs as the image's user on a read-only root", (deployment) => {
    const spec = podSpec(deployment);
    const { uid, gid } = imageIds();
    expect(spec.securityContext).toMatchObject({ runAsNonRoot: true, runAsUser: uid, runAsGroup: gid, fsGroup: gid });
    expect(spec.automountServiceAccountToken).toBe(false);
    const container = containerOf(deployment);
    expect(container.securityContext).toMatchObject({
      readOnlyRootFilesystem: true,
      allowPrivilegeEscalation: false,
      capabilities: { drop: ["ALL"] },
    });
    // The model gateway's socket and each delivery's work go to the temp directory.
    const tmp = (container.volumeMounts ?? []).find((mount) => mount.mountPath === "/tmp");
    expect(spec.volumes?.find((volume) => volume.name === tmp?.name)?.emptyDir).toBeDefined();
    expect(container.resources?.requests).toBeDefined();
    expect(container.resources?.limits?.["memory"]).toBeDefined();
  });

  test.each([WEB, WORKER])("$metadata.name: Harness's settings accept the pod's environment", (deployment) => {
    const settings = settingsOf(deployment);
    const role = literalEnv(deployment)["HARNESS_ROLE"];
    expect(settings.role).toBe(role);
    expect(settings.queue?.kind).toBe("bullmq");
    expect(settings.sandbox).toBe("daytona");
    // Nothing is written under the read-only /app (the warm mirrors' default place).
    expect(settings.repoCache).toBeUndefined();
    expect(settings.web).toBeDefined();
    expect(settings.warnings).toEqual([]);
    expect(settings.concurrency).toBe(role === "web" ? 0 : Number(literalEnv(deployment)["HARNESS_CONCURRENCY"]));
  });

  test("every variable the manifests name is one Harness reads and the README documents", () => {
    const source = readdirSync(join(ROOT, "src"), { recursive: true, encoding: "utf8" })
      .filter((file) => file.endsWith(".ts"))
      .map((file) => readFileSync(join(ROOT, "src", file), "utf8"))
      .join("\n");
    const readme = readFileSync(join(ROOT, "README.md"), "utf8");
    const configuration = readme.slice(
      readme.indexOf("\n## Configuration"),
      readme.indexOf("\n## Run pages and metrics"),
    );
    const names = new Set<string>();
    for (const configMap of all(ConfigMap.is, (file) => !NOT_APPLIED.has(file)))
      for (const key of Object.keys(configMap.data ?? {})) names.add(key);
    for (const secret of EXAMPLE_SECRETS)
      for (const key of Object.keys(secret.stringData ?? {})) if (/^[A-Z][A-Z0-9_]*$/.test(key)) names.add(key);
    for (const deployment of DEPLOYMENTS) for (const key of Object.keys(literalEnv(deployment))) names.add(key);
    // Commented-out entries an operator may turn on: `#   NAME: "value"`.
    for (const file of ["configmap.yaml", "secret.example.yaml"])
      for (const match of textOf(file).matchAll(/^\s*#\s+([A-Z][A-Z0-9]*_[A-Z0-9_]+):\s/gm)) names.add(match[1]!);
    expect(names.size).toBeGreaterThan(15);
    const unknown = [...names].filter((name) => !new RegExp(`\\b${name}\\b`).test(source));
    expect(unknown, "variables no file in src/ mentions").toEqual([]);
    const undocumented = [...names].filter((name) => !configuration.includes(name));
    expect(undocumented, "variables the README's Configuration table does not list").toEqual([]);
  });

  test("the autoscaler scales the workers on the queue depth, one per HARNESS_CONCURRENCY runs", () => {
    const hpa = only(all(HorizontalPodAutoscaler.is));
    expect(hpa.spec.scaleTargetRef).toEqual({ apiVersion: "apps/v1", kind: "Deployment", name: "harness-worker" });
    // The autoscaler owns the number: applying the Deployment again must not reset it.
    expect(WORKER.spec).not.toHaveProperty("replicas");
    const metric = only(hpa.spec.metrics ?? []);
    expect(metric.type).toBe("External");
    const name = metric.external!.metric.name;
    expect(name).toBe("harness_queue_depth");
    expect(readFileSync(join(ROOT, "src", "metrics", "harness-metrics.ts"), "utf8")).toContain(`"${name}"`);
    const concurrency = Number(literalEnv(WORKER)["HARNESS_CONCURRENCY"]);
    expect(metric.external!.target).toEqual({ type: "AverageValue", averageValue: String(concurrency) });
    // More workers than the fleet may run at once would find nothing to start.
    const maxInFlight = Number(literalEnv(WORKER)["HARNESS_MAX_IN_FLIGHT"]);
    expect(maxInFlight).toBeGreaterThan(0);
    expect(hpa.spec.maxReplicas * concurrency).toBeLessThanOrEqual(maxInFlight);
    expect(hpa.spec.minReplicas).toBeLessThanOrEqual(hpa.spec.maxReplicas);
  });

  test("Prometheus Adapter's rule serves the metric the autoscaler asks for, counting the queue once", () => {
    const adapter = named(
      all(ConfigMap.is, (file) => file === "prometheus-adapter-rules.yaml"),
      "harness-adapter-rules",
    );
    const config = parse(adapter.data!["config.yaml"]!) as {
      externalRules: { seriesQuery: string; name: { as: string }; metricsQuery: string }[];
    };
    const rule = only(config.externalRules);
    const hpa = only(all(HorizontalPodAutoscaler.is));
    expect(rule.name.as).toBe(only(hpa.spec.metrics ?? []).external?.metric.name);
    expect(rule.seriesQuery).toContain("harness_queue_depth");
    // Every process reports the whole queue: the largest per state, never a sum over processes.
    expect(rule.metricsQuery).toBe("sum(max by (state) (<<.Series>>{<<.LabelMatchers>>}))");
    // The Helm values docs/deploy.md gives carry the same rule.
    const guide = readFileSync(join(ROOT, "docs", "deploy.md"), "utf8");
    const snippet = /```yaml\n(# adapter-values\.yaml\n[\s\S]*?)```/.exec(guide.replace(/^ {3}/gm, ""))?.[1];
    expect(snippet, "docs/deploy.md's adapter-values.yaml").toBeDefined();
    const values = parse(snippet!) as { rules: { external: unknown[] } };
    expect(values.rules.external).toEqual([rule]);
  });

  test("each disruption budget selects the pods of exactly one Deployment, and leaves one to stop", () => {
    const budgets = all(PodDisruptionBudget.is);
    expect(budgets).toHaveLength(2);
    for (const budget of budgets) {
      const selected = DEPLOYMENTS.filter((d) => selects(budget.spec?.selector?.matchLabels, podLabels(d)));
      expect(selected.map((d) => d.metadata?.name)).toEqual([budget.metadata?.name]);
      const minAvailable = budget.spec?.minAvailable;
      if (typeof minAvailable === "number") expect(minAvailable).toBeLessThan(selected[0]!.spec!.replicas!);
      else expect(budget.spec?.maxUnavailable).toBe(1);
    }
  });

  test("each Deployment's selector matches its own pods", () => {
    for (const deployment of DEPLOYMENTS)
      expect(selects(deployment.spec!.selector.matchLabels, podLabels(deployment))).toBe(true);
    expect(selects(WEB.spec!.selector.matchLabels, podLabels(WORKER))).toBe(false);
    expect(selects(WORKER.spec!.selector.matchLabels, podLabels(WEB))).toBe(false);
  });

  test("the Service sends to web pods only, at their port", () => {
    const service = named(all(Service.is), "harness-web");
    expect(selects(service.spec?.selector, podLabels(WEB))).toBe(true);
    expect(selects(service.spec?.selector, podLabels(WORKER))).toBe(false);
    const port = containerOf(WEB).ports![0]!;
    expect(service.spec?.ports?.map((p) => p.targetPort)).toEqual([port.name]);
    expect(service.spec?.ports?.[0]?.port).toBe(3000);
  });

  test("the Ingress routes the webhooks, run pages and gateway to web pods, and keeps /metrics private", () => {
    const ingress = named(all(Ingress.is), "harness");
    const service = named(all(Service.is), "harness-web");
    const rules = ingress.spec?.rules ?? [];
    expect(rules).toHaveLength(1);
    const host = rules[0]!.host;
    const paths = rules[0]!.http?.paths ?? [];
    for (const path of paths) {
      expect(path.backend.service?.name).toBe(service.metadata?.name);
      expect(service.spec?.ports?.map((p) => p.name)).toContain(path.backend.service?.port?.name);
    }
    // Kubernetes' Prefix matches whole path elements: /runs matches /runs/x, not /runsx.
    const routed = (url: string): boolean =>
      paths.some((p) =>
        p.pathType === "Exact"
          ? url === p.path
          : url === p.path || url.startsWith(`${p.path === "/" ? "" : (p.path ?? "")}/`),
      );
    const web = settingsOf(WEB);
    for (const url of [web.webhookPath, "/runs", "/runs/abc", "/auth/callback", "/gateway/v1/messages"])
      expect(routed(url), url).toBe(true);
    for (const url of ["/metrics", "/audit.jsonl", "/mcp", "/readyz", "/"]) expect(routed(url), url).toBe(false);
    // The public origin Harness puts in links and hands Daytona runs is the Ingress's host, on TLS.
    expect(web.publicUrl).toBe(`https://${host ?? ""}`);
    expect(ingress.spec?.tls?.[0]?.hosts).toEqual([host]);
  });

  test("the pods' references resolve: ConfigMap, Secrets, ServiceAccount", () => {
    for (const deployment of DEPLOYMENTS) {
      expect(named(all(ServiceAccount.is), podSpec(deployment).serviceAccountName!)).toBeDefined();
      for (const source of containerOf(deployment).envFrom ?? []) {
        if (source.configMapRef) expect(named(all(ConfigMap.is), source.configMapRef.name!)).toBeDefined();
        if (source.secretRef) expect(named(EXAMPLE_SECRETS, source.secretRef.name!)).toBeDefined();
      }
      for (const volume of podSpec(deployment).volumes ?? [])
        if (volume.secret) expect(named(EXAMPLE_SECRETS, volume.secret.secretName!)).toBeDefined();
    }
    // The private key is mounted where PRIVATE_KEY_PATH points: settingsOf reads it from there.
    expect(podView(WEB).files.get(podView(WEB).env["PRIVATE_KEY_PATH"]!)).toMatch(/^-----BEGIN /);
  });

  test("no secret is committed: Secrets only in the example, with placeholders", () => {
    for (const { file, doc } of MANIFESTS)
      if (doc["kind"] === "Secret") expect(file, "a Secret outside secret.example.yaml").toBe("secret.example.yaml");
    expect(EXAMPLE_SECRETS.length).toBeGreaterThan(0);
    for (const secret of EXAMPLE_SECRETS) {
      expect(secret.data).toBeUndefined();
      for (const [key, value] of Object.entries(secret.stringData ?? {}))
        expect(value, `${key} is a placeholder`).toMatch(/^<[^<>]+>$/);
    }
    const secretName = /key|token|secret|password|passwd|credential/i;
    for (const configMap of all(ConfigMap.is))
      for (const key of Object.keys(configMap.data ?? {}))
        if (key !== "PRIVATE_KEY_PATH") expect(key, "a secret's name in a ConfigMap").not.toMatch(secretName);
    for (const deployment of DEPLOYMENTS)
      for (const key of Object.keys(literalEnv(deployment)))
        expect(key, "a secret's name as a literal env value").not.toMatch(secretName);
    for (const file of FILES) {
      const text = textOf(file);
      expect(text, file).not.toMatch(/-----BEGIN [A-Z ]*PRIVATE KEY-----/);
      expect(text, file).not.toMatch(/\b(?:gh[pousr]_[A-Za-z0-9]{20,}|sk-[A-Za-z0-9_-]{20,}|dtn_[A-Za-z0-9]{20,})/);
    }
  });

  test("the kustomization lists every manifest but the ones kept out on purpose", () => {
    const [kustomization] = documentsOf("kustomization.yaml") as [{ resources: string[]; namespace?: string }];
    const listed = [...kustomization.resources].sort();
    const expected = FILES.filter((file) => file !== "kustomization.yaml" && !NOT_APPLIED.has(file));
    expect(listed).toEqual(expected);
    for (const file of NOT_APPLIED.keys()) expect(FILES).toContain(file);
    // The namespace the Secrets are created in (secret.example.yaml's commands).
    expect(kustomization.namespace).toBe("harness");
    expect(textOf("secret.example.yaml")).toContain(`--namespace ${kustomization.namespace}`);
  });

  test("the PodMonitor scrapes every Harness pod at the container's named port", () => {
    interface PodMonitor {
      spec: {
        selector: { matchLabels: Record<string, string> };
        podMetricsEndpoints: { port: string; path: string }[];
      };
    }
    const [monitor] = documentsOf("podmonitor.yaml") as unknown as [PodMonitor];
    for (const deployment of DEPLOYMENTS) {
      expect(selects(monitor.spec.selector.matchLabels, podLabels(deployment))).toBe(true);
      expect(monitor.spec.podMetricsEndpoints.map((e) => e.port)).toEqual([containerOf(deployment).ports![0]!.name]);
    }
    expect(monitor.spec.podMetricsEndpoints[0]?.path).toBe("/metrics");
  });
});

const kubectl = spawnSync("kubectl", ["version", "--client"], { encoding: "utf8" });
const haveKubectl = kubectl.status === 0;
if (!haveKubectl)
  console.warn("kubectl is not installed: the kustomize build of deploy/kubernetes is not checked here");

describe("kustomize", () => {
  test.skipIf(!haveKubectl)("kubectl kustomize builds the set, every object in the namespace", () => {
    const built = spawnSync("kubectl", ["kustomize", DIR], { encoding: "utf8" });
    expect(built.stderr).toBe("");
    expect(built.status).toBe(0);
    const objects = documentsOf("kubectl kustomize", built.stdout);
    const applied = MANIFESTS.filter((m) => !NOT_APPLIED.has(m.file) && m.file !== "kustomization.yaml");
    expect(objects.map((o) => typeOf(o)).sort()).toEqual(applied.map((m) => typeOf(m.doc)).sort());
    for (const object of objects) {
      validateManifest(object);
      const metadata = object["metadata"] as { namespace?: string };
      if (object["kind"] !== "Namespace") expect(metadata.namespace).toBe("harness");
    }
  });
});
