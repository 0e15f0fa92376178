// Offline checks of deploy/: rendered Kubernetes manifests against the Kubernetes API schemas, the
// invariants the sidecar deployment relies on, and the Dockerfile. Run by validate.sh from a
// directory whose node_modules holds the packages of tests/deploy/package.json.
//
//   node validate_manifests.mjs [--extract DIR] [--negative-controls] [--dockerfile F --local-env F]
//                               NAME=RENDERED.yaml...
//
// Three layers, each reporting every problem it finds:
//  1. schema: kubernetes-models (the Kubernetes OpenAPI schemas compiled to ajv validators): types,
//     required fields, enums, formats;
//  2. strict fields: every key must be a field of its API type (@kubernetes/client-node's field
//     lists, generated from the same OpenAPI document), as `kubectl apply --validate=strict` would
//     say: the schemas alone accept a misspelled key and drop it silently;
//  3. invariants of this deployment (see deploy/README.md): native sidecar, probes on the admin
//     port, Service targeting the proxy, grace period covering preStop + upstream timeout + drain,
//     ConfigMap references and ${VAR}s resolvable, non-root read-only containers, a PDB, a
//     migration Job, relay replicas.
// --negative-controls breaks the first rendering in known ways and fails unless each break is
// caught, so this validator cannot silently turn into a no-op.
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { parse as parseYaml, parseAllDocuments } from "yaml";

// ---------- small helpers ----------

const DURATION_UNITS_MS = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };

// idemproxy's duration syntax: a number and a unit, or "0".
// NaN for anything else (idemproxy --check names the error; NaN fails every comparison here).
function durationSeconds(text, fallbackSeconds) {
  if (text === undefined || text === null) return fallbackSeconds;
  const value = String(text).trim();
  if (value === "0") return 0;
  const match = /^(\d+(?:\.\d+)?)(ms|s|m|h|d)$/.exec(value);
  return match ? (Number(match[1]) * DURATION_UNITS_MS[match[2]]) / 1000 : Number.NaN;
}

// The upstreams of an idemproxy config: `upstreams:` (named), or the one `upstream:` (defaults filled in).
function upstreamsOf(config) {
  return Array.isArray(config.upstreams) ? config.upstreams : [config.upstream ?? {}];
}

// Each exchange the timing model bounds (README "Timing"): one per upstream, and one per route that
// sets its own timeout, as [connect_timeout seconds, TCP + TLS connects, timeout seconds].
function exchangesOf(config) {
  const upstreams = upstreamsOf(config);
  const of = (upstream, timeout) => [durationSeconds(upstream.connect_timeout, 1),
    String(upstream.url ?? "").startsWith("https://") ? 2 : 1, timeout ?? durationSeconds(upstream.timeout, 30)];
  const exchanges = upstreams.map((upstream) => of(upstream));
  for (const route of config.routes ?? []) {
    const upstream = upstreams.find((u) => u.name === route.upstream) ?? upstreams[0];
    if (route.timeout !== undefined) exchanges.push(of(upstream, durationSeconds(route.timeout, 30)));
  }
  return exchanges;
}

// The longest time a request may wait for its answer's head: over every upstream and route.
function longestUpstreamTimeout(config) {
  return Math.max(...exchangesOf(config).map(([, , timeout]) => timeout));
}

// idemproxy's drain_timeout when its config sets none: the timing model's longest exchange plus its
// 1 s margin (README "Timing"): 2 × store.postgres.query_timeout + store.postgres.acquire_timeout +
// the upstream's connect_timeout (twice for an https upstream: TCP, then the TLS handshake) + the
// route's or upstream's timeout + 1 s, the longest over every upstream and route. Each timeout falls
// back to idemproxy's default (37 s with all of them). `idemproxy --check` prints the same figures.
function defaultDrainSeconds(config) {
  const postgres = config.store?.postgres ?? {};
  const store = 2 * durationSeconds(postgres.query_timeout, 2) + durationSeconds(postgres.acquire_timeout, 1);
  return store + Math.max(...exchangesOf(config).map(([connect, connects, timeout]) => connects * connect + timeout)) + 1;
}

// "0.0.0.0:8080", "[::]:8080" -> 8080
function portOf(address) {
  const match = /:(\d+)$/.exec(String(address ?? ""));
  return match ? Number(match[1]) : undefined;
}

function objectId(doc) {
  const ns = doc?.metadata?.namespace ? `${doc.metadata.namespace}/` : "";
  return `${doc?.kind ?? "?"} ${ns}${doc?.metadata?.name ?? "?"}`;
}

function selectorMatches(matchLabels, labels) {
  if (!matchLabels || Object.keys(matchLabels).length === 0) return false;
  return Object.entries(matchLabels).every(([key, value]) => labels?.[key] === value);
}

const WORKLOAD_KINDS = new Set(["Deployment", "StatefulSet", "DaemonSet", "Job"]);

function podSpecOf(doc) {
  if (WORKLOAD_KINDS.has(doc.kind)) return doc.spec?.template?.spec;
  if (doc.kind === "CronJob") return doc.spec?.jobTemplate?.spec?.template?.spec;
  if (doc.kind === "Pod") return doc.spec;
  return undefined;
}

function podLabelsOf(doc) {
  return doc.kind === "Pod" ? doc.metadata?.labels : doc.spec?.template?.metadata?.labels;
}

function allContainers(pod) {
  return [
    ...(pod?.initContainers ?? []).map((container) => ({ container, init: true })),
    ...(pod?.containers ?? []).map((container) => ({ container, init: false })),
  ];
}

// The program a container runs: its command, else the image's ENTRYPOINT (idemproxy, from
// deploy/Dockerfile) for our image.
function programOf(container) {
  if (container.command?.length) return path.basename(container.command[0]);
  return /idemproxy/.test(container.image ?? "") ? "idemproxy" : undefined;
}

function argValue(args, flag) {
  const index = (args ?? []).indexOf(flag);
  return index >= 0 ? args[index + 1] : undefined;
}

function containerPortNumber(container, port) {
  if (typeof port === "number") return port;
  return (container.ports ?? []).find((p) => p.name === port)?.containerPort;
}

// ---------- Prometheus Operator resources ----------

// monitoring.coreos.com/v1 is a CRD: kubernetes-models has no schema for it. These are the fields
// its PrometheusRule and PodMonitor define that deploy/monitoring may use; any other key is
// reported, as the strict layer does for built-in types (the API server would prune it silently).
const MONITORING_FIELDS = {
  metadata: ["name", "namespace", "labels", "annotations"],
  PrometheusRule: ["apiVersion", "kind", "metadata", "spec"],
  "PrometheusRule.spec": ["groups"],
  "PrometheusRule.group": ["name", "interval", "limit", "partial_response_strategy", "rules"],
  "PrometheusRule.rule": ["alert", "record", "expr", "for", "keep_firing_for", "labels", "annotations"],
  PodMonitor: ["apiVersion", "kind", "metadata", "spec"],
  "PodMonitor.spec": ["selector", "namespaceSelector", "podMetricsEndpoints", "jobLabel", "podTargetLabels", "sampleLimit"],
  "PodMonitor.endpoint": ["port", "path", "scheme", "interval", "scrapeTimeout", "authorization", "honorLabels", "relabelings", "metricRelabelings"],
  "PodMonitor.authorization": ["type", "credentials"],
  "PodMonitor.credentials": ["name", "key", "optional"],
};

function monitoringErrors(doc) {
  const errors = [];
  const keys = (value, list, where) => {
    if (value === null || typeof value !== "object" || Array.isArray(value)) return errors.push(`${where || "/"}: must be object`);
    for (const key of Object.keys(value)) {
      if (!MONITORING_FIELDS[list].includes(key)) errors.push(`${where || "/"}: unknown field "${key}"`);
    }
  };
  const text = (value, where) => typeof value === "string" && value.length > 0 || errors.push(`${where}: must be a non-empty string`);
  const strings = (value, where) => {
    if (value === undefined) return;
    if (value === null || typeof value !== "object") return errors.push(`${where}: must be object`);
    for (const [key, item] of Object.entries(value)) if (typeof item !== "string") errors.push(`${where}/${key}: must be string`);
  };
  if (!MONITORING_FIELDS[doc.kind]) return [`no schema for ${doc.apiVersion} ${doc.kind} (misspelled kind or apiVersion?)`];
  keys(doc, doc.kind, "");
  keys(doc.metadata, "metadata", "/metadata");
  text(doc.metadata?.name, "/metadata/name");
  keys(doc.spec, `${doc.kind}.spec`, "/spec");
  if (doc.kind === "PrometheusRule") {
    if (!Array.isArray(doc.spec?.groups) || doc.spec.groups.length === 0) errors.push("/spec/groups: must be a non-empty array");
    (doc.spec?.groups ?? []).forEach((group, g) => {
      keys(group, "PrometheusRule.group", `/spec/groups/${g}`);
      text(group?.name, `/spec/groups/${g}/name`);
      (group?.rules ?? []).forEach((rule, r) => {
        const where = `/spec/groups/${g}/rules/${r}`;
        keys(rule, "PrometheusRule.rule", where);
        if (("alert" in rule) === ("record" in rule)) errors.push(`${where}: needs exactly one of alert and record`);
        text(rule?.expr, `${where}/expr`);
        strings(rule?.labels, `${where}/labels`);
        strings(rule?.annotations, `${where}/annotations`);
      });
    });
  } else {
    if (!Array.isArray(doc.spec?.podMetricsEndpoints) || doc.spec.podMetricsEndpoints.length === 0) {
      errors.push("/spec/podMetricsEndpoints: must be a non-empty array");
    }
    (doc.spec?.podMetricsEndpoints ?? []).forEach((endpoint, e) => {
      const where = `/spec/podMetricsEndpoints/${e}`;
      keys(endpoint, "PodMonitor.endpoint", where);
      if (endpoint?.authorization !== undefined) {
        keys(endpoint.authorization, "PodMonitor.authorization", `${where}/authorization`);
        keys(endpoint.authorization.credentials, "PodMonitor.credentials", `${where}/authorization/credentials`);
      }
    });
  }
  return errors;
}

// ---------- layer 1: schemas ----------

async function schemaErrors(doc) {
  if (typeof doc?.apiVersion !== "string" || typeof doc?.kind !== "string") {
    return ["apiVersion and kind are required"];
  }
  if (doc.apiVersion === "monitoring.coreos.com/v1") return monitoringErrors(doc);
  let model;
  try {
    model = (await import(`kubernetes-models/${doc.apiVersion}/${doc.kind}`))[doc.kind];
  } catch (error) {
    if (error.code !== "ERR_MODULE_NOT_FOUND" && error.code !== "ERR_PACKAGE_PATH_NOT_EXPORTED") throw error;
  }
  if (!model) return [`no schema for ${doc.apiVersion} ${doc.kind} (misspelled kind or apiVersion?)`];
  try {
    new model(doc).validate();
    return [];
  } catch (error) {
    if (!Array.isArray(error.errors)) throw error;
    return error.errors.map((e) => {
      const detail = e.params?.allowedValues ? ` (${e.params.allowedValues.join(", ")})` : "";
      return `${e.instancePath || "/"}: ${e.message}${detail}`;
    });
  }
}

// ---------- layer 2: strict fields ----------

const SCALAR_TYPES = new Set(["string", "number", "boolean", "Date", "IntOrString", "any", "object"]);
const fieldLists = new Map();

async function fieldsOf(typeName) {
  if (!fieldLists.has(typeName)) {
    let fields = null;
    try {
      const module = await import(`@kubernetes/client-node/dist/gen/models/${typeName}.js`);
      fields = new Map(module[typeName].getAttributeTypeMap().map((a) => [a.baseName, a.type]));
    } catch (error) {
      if (error.code !== "ERR_MODULE_NOT_FOUND") throw error;
    }
    fieldLists.set(typeName, fields);
  }
  return fieldLists.get(typeName);
}

async function unknownFields(value, type, where, out) {
  if (value === null || typeof value !== "object") return;
  let match;
  if ((match = /^Array<(.+)>$/.exec(type))) {
    if (Array.isArray(value)) {
      for (const [index, item] of value.entries()) await unknownFields(item, match[1], `${where}/${index}`, out);
    }
    return;
  }
  if ((match = /^\{ \[key: string\]: (.+); \}$/.exec(type))) {
    if (!Array.isArray(value)) {
      for (const [key, item] of Object.entries(value)) await unknownFields(item, match[1], `${where}/${key}`, out);
    }
    return;
  }
  if (SCALAR_TYPES.has(type) || Array.isArray(value)) return;  // wrong types are layer 1's
  const fields = await fieldsOf(type);
  if (!fields) {
    out.push(`${where || "/"}: no field list for API type ${type}`);
    return;
  }
  for (const [key, item] of Object.entries(value)) {
    const fieldType = fields.get(key);
    if (fieldType === undefined) {
      out.push(`${where || "/"}: unknown field "${key}"`);
    } else {
      await unknownFields(item, fieldType, `${where}/${key}`, out);
    }
  }
}

async function strictErrors(doc) {
  if (doc.apiVersion === "monitoring.coreos.com/v1") return [];  // monitoringErrors checked every field
  const version = doc.apiVersion.split("/").pop();
  const prefix = version[0].toUpperCase() + version.slice(1);
  const group = doc.apiVersion.includes("/") ? doc.apiVersion.split("/")[0].split(".")[0] : "core";
  const groupPrefix = group[0].toUpperCase() + group.slice(1);
  for (const candidate of [`${prefix}${doc.kind}`, `${groupPrefix}${prefix}${doc.kind}`]) {
    if (await fieldsOf(candidate)) {
      const out = [];
      await unknownFields(doc, candidate, "", out);
      return out;
    }
  }
  return [`no field list for ${doc.apiVersion} ${doc.kind}`];
}

// ---------- layer 3: this deployment's invariants ----------

function checkInvariants(docs) {
  const errors = [];
  const fail = (doc, message) => errors.push(`${objectId(doc)}: ${message}`);
  const configMaps = docs.filter((d) => d.kind === "ConfigMap");
  const services = docs.filter((d) => d.kind === "Service");
  const pdbs = docs.filter((d) => d.kind === "PodDisruptionBudget");
  const workloads = docs.filter((d) => podSpecOf(d));
  const sameNamespace = (a, b) => (a.metadata?.namespace ?? "") === (b.metadata?.namespace ?? "");
  const findConfigMap = (doc, name) => configMaps.find((c) => c.metadata?.name === name && sameNamespace(c, doc));
  let sidecars = 0;
  let relays = 0;
  const migrations = new Set();

  // The file a container's --config names, read from the ConfigMap volume mounted at its folder.
  const configFileOf = (doc, pod, container) => {
    const file = argValue(container.args, "--config");
    if (!file) return undefined;
    const mount = (container.volumeMounts ?? []).find((m) => m.mountPath === path.dirname(file) && !m.subPath);
    const volume = mount && (pod.volumes ?? []).find((v) => v.name === mount.name);
    const configMap = volume?.configMap && findConfigMap(doc, volume.configMap.name);
    const text = configMap?.data?.[path.basename(file)];
    if (text === undefined) {
      fail(doc, `container ${container.name}: --config ${file} is not a key of a ConfigMap mounted (without subPath) at ${path.dirname(file)}`);
      return undefined;
    }
    // Every ${VAR} without a default must be set on the container, or the process refuses to start.
    const defined = new Set((container.env ?? []).map((e) => e.name));
    for (const match of text.replace(/\$\$/g, "").matchAll(/\$\{([A-Za-z_][A-Za-z0-9_]*)\}/g)) {
      if (!defined.has(match[1])) fail(doc, `container ${container.name}: ${file} uses \${${match[1]}}, which its env does not set`);
    }
    try {
      return parseYaml(text) ?? {};
    } catch (error) {
      fail(doc, `container ${container.name}: ${file} is not valid YAML: ${error.message}`);
      return undefined;
    }
  };

  const checkProbe = (doc, container, kind, probePath, adminPort) => {
    const probe = container[kind];
    const get = probe?.httpGet;
    if (!get) return fail(doc, `container ${container.name}: needs an httpGet ${kind} on ${probePath}`);
    if (get.path !== probePath) fail(doc, `container ${container.name}: ${kind} must probe ${probePath}, not ${get.path}`);
    const port = containerPortNumber(container, get.port);
    if (port !== adminPort) fail(doc, `container ${container.name}: ${kind} port ${get.port} is not the admin port ${adminPort}`);
  };

  for (const doc of workloads) {
    const pod = podSpecOf(doc);
    const labels = podLabelsOf(doc);
    if (doc.spec?.selector?.matchLabels && !selectorMatches(doc.spec.selector.matchLabels, labels)) {
      fail(doc, "spec.selector.matchLabels does not match the pod template's labels");
    }
    for (const volume of pod.volumes ?? []) {
      if (volume.configMap && !findConfigMap(doc, volume.configMap.name)) {
        fail(doc, `volume ${volume.name}: ConfigMap ${volume.configMap.name} is not in the rendering`);
      }
    }
    for (const { container } of allContainers(pod)) {
      const security = container.securityContext ?? {};
      if ((security.runAsNonRoot ?? pod.securityContext?.runAsNonRoot) !== true) fail(doc, `container ${container.name}: runAsNonRoot must be true`);
      if (security.readOnlyRootFilesystem !== true) fail(doc, `container ${container.name}: readOnlyRootFilesystem must be true`);
      if (security.allowPrivilegeEscalation !== false) fail(doc, `container ${container.name}: allowPrivilegeEscalation must be false`);
      if (!(security.capabilities?.drop ?? []).includes("ALL")) fail(doc, `container ${container.name}: capabilities must drop ALL`);
      const resources = container.resources ?? {};
      for (const [section, key] of [["requests", "cpu"], ["requests", "memory"], ["limits", "memory"]]) {
        if (resources[section]?.[key] === undefined) fail(doc, `container ${container.name}: resources.${section}.${key} is missing`);
      }
      for (const env of container.env ?? []) {
        const ref = env.valueFrom?.configMapKeyRef;
        if (ref && !ref.optional && !findConfigMap(doc, ref.name)?.data?.[ref.key]) {
          fail(doc, `container ${container.name}: env ${env.name} refers to ConfigMap ${ref.name} key ${ref.key}, not in the rendering`);
        }
      }
    }

    for (const { container, init } of allContainers(pod)) {
      const program = programOf(container);
      const migrate = (container.args ?? []).includes("--migrate");
      if (migrate) {
        if (doc.kind !== "Job") fail(doc, `container ${container.name}: --migrate belongs in a Job`);
        migrations.add(program);
        configFileOf(doc, pod, container);
        continue;
      }
      if (program === "idemproxy") {
        sidecars += 1;
        checkSidecar(doc, pod, labels, container, init);
      } else if (program === "idemrelay") {
        relays += 1;
        checkRelay(doc, pod, container);
      }
    }
  }

  function checkSidecar(doc, pod, labels, sidecar, init) {
    if (!init || sidecar.restartPolicy !== "Always") {
      fail(doc, `container ${sidecar.name}: idemproxy must be a native sidecar (an initContainer with restartPolicy: Always)`);
    }
    const config = configFileOf(doc, pod, sidecar);
    if (!config) return;
    const listenPort = portOf(config.listen ?? "127.0.0.1:8080");
    const adminPort = portOf(config.admin?.listen ?? "127.0.0.1:9090");
    if (!String(config.listen ?? "").startsWith("0.0.0.0:") && !String(config.listen ?? "").startsWith("[::]:")) {
      fail(doc, `idemproxy listen ${config.listen ?? "(default)"} is not reachable from the Service: use 0.0.0.0:PORT`);
    }
    if (!String(config.admin?.listen ?? "").startsWith("0.0.0.0:") && !String(config.admin?.listen ?? "").startsWith("[::]:")) {
      fail(doc, `idemproxy admin.listen ${config.admin?.listen ?? "(default)"} is not reachable by the kubelet's probes: use 0.0.0.0:PORT`);
    }
    for (const port of [listenPort, adminPort]) {
      if (!(sidecar.ports ?? []).some((p) => p.containerPort === port)) fail(doc, `container ${sidecar.name}: port ${port} from its config is not declared`);
    }
    checkProbe(doc, sidecar, "readinessProbe", "/readyz", adminPort);
    checkProbe(doc, sidecar, "livenessProbe", "/healthz", adminPort);
    if (!sidecar.startupProbe) fail(doc, `container ${sidecar.name}: needs a startupProbe, or the app starts before the proxy listens`);

    for (const declared of upstreamsOf(config)) {
      const url = declared.url ?? "";
      if (url.startsWith("unix:")) continue;  // a socket on a volume the pod shares
      const upstream = /^http:\/\/(127\.0\.0\.1|localhost|\[::1\]):(\d+)\/?$/.exec(url);
      const app = upstream && (pod.containers ?? []).find((c) => (c.ports ?? []).some((p) => p.containerPort === Number(upstream[2])));
      if (!app) fail(doc, `idemproxy upstream.url ${declared.url} is not a loopback port of an app container in the pod`);
    }

    // Shutdown: the app's preStop, then the app (its requests can run up to upstream.timeout), then
    // the sidecar's preStop and drain. All of it inside the one grace period.
    const grace = pod.terminationGracePeriodSeconds ?? 30;
    const preStop = (pod.containers ?? []).reduce((sum, c) => sum + (c.lifecycle?.preStop?.sleep?.seconds ?? 0), 0) +
      (sidecar.lifecycle?.preStop?.sleep?.seconds ?? 0);
    const upstreamTimeout = longestUpstreamTimeout(config);
    const drain = durationSeconds(config.drain_timeout, defaultDrainSeconds(config));
    if (!(grace >= preStop + upstreamTimeout + drain)) {
      const seconds = (value) => (Number.isNaN(value) ? "(unreadable)" : `${value}s`);
      fail(doc, `terminationGracePeriodSeconds ${grace} < preStop ${preStop}s + upstream.timeout ${seconds(upstreamTimeout)} + drain_timeout ${seconds(drain)}`);
    }
    if (!(pod.containers ?? []).some((c) => c.lifecycle?.preStop)) {
      fail(doc, "no app container has a preStop hook: it would get SIGTERM while endpoints still send it traffic");
    }

    const fronting = services.filter((s) => sameNamespace(s, doc) && selectorMatches(s.spec?.selector, labels));
    if (fronting.length === 0) fail(doc, "no Service selects these pods");
    for (const service of fronting) {
      for (const port of service.spec?.ports ?? []) {
        const target = containerPortNumber(sidecar, port.targetPort ?? port.port);
        if (target !== listenPort) {
          fail(service, `port ${port.name ?? port.port} targets ${port.targetPort ?? port.port}, not idemproxy's ${listenPort}: clients would bypass the proxy`);
        }
      }
    }
    if (doc.kind === "Deployment" && !pdbs.some((p) => sameNamespace(p, doc) && selectorMatches(p.spec?.selector?.matchLabels, labels))) {
      fail(doc, "no PodDisruptionBudget selects these pods");
    }
  }

  function checkRelay(doc, pod, relay) {
    if (doc.kind !== "Deployment") fail(doc, `container ${relay.name}: idemrelay runs as its own Deployment`);
    if ((doc.spec?.replicas ?? 1) < 2) fail(doc, `idemrelay needs at least 2 replicas, has ${doc.spec?.replicas ?? 1}`);
    const config = configFileOf(doc, pod, relay);
    if (!config) return;
    const adminPort = portOf(config.admin?.listen);
    if (adminPort === undefined) return fail(doc, "idemrelay admin.listen is not set: no probes or metrics");
    checkProbe(doc, relay, "readinessProbe", "/readyz", adminPort);
    checkProbe(doc, relay, "livenessProbe", "/healthz", adminPort);
    const shutdown = durationSeconds(config.relay?.shutdown_timeout, 10);
    if (!((pod.terminationGracePeriodSeconds ?? 30) > shutdown)) {
      fail(doc, `terminationGracePeriodSeconds ${pod.terminationGracePeriodSeconds ?? 30} must exceed relay.shutdown_timeout (${config.relay?.shutdown_timeout ?? "10s"})`);
    }
  }

  if (sidecars === 0) errors.push("no idemproxy sidecar in the rendering");
  if (sidecars > 0 && !migrations.has("idemproxy")) errors.push("no Job runs idemproxy --migrate");
  if (relays > 0 && !migrations.has("idemrelay")) errors.push("no Job runs idemrelay --migrate");
  // A PodMonitor scrapes something: pods of a workload here, through a port they name.
  for (const monitor of docs.filter((d) => d.kind === "PodMonitor")) {
    const pods = workloads.filter((w) => sameNamespace(w, monitor) && selectorMatches(monitor.spec?.selector?.matchLabels, podLabelsOf(w)));
    if (pods.length === 0) fail(monitor, "its selector matches no pods");
    for (const endpoint of monitor.spec?.podMetricsEndpoints ?? []) {
      const named = pods.some((w) => allContainers(podSpecOf(w)).some(({ container }) => (container.ports ?? []).some((p) => p.name === endpoint.port)));
      if (pods.length > 0 && !named) fail(monitor, `no selected pod has a port named ${endpoint.port}`);
    }
  }
  for (const service of services) {
    if (service.spec?.selector && !workloads.some((w) => sameNamespace(w, service) && selectorMatches(service.spec.selector, podLabelsOf(w)))) {
      errors.push(`${objectId(service)}: its selector matches no pods`);
    }
  }
  return errors;
}

// ---------- one rendering ----------

async function validateDocs(docs) {
  const errors = [];
  for (const doc of docs) {
    for (const message of await schemaErrors(doc)) errors.push(`${objectId(doc)}: schema: ${message}`);
    if (typeof doc?.apiVersion === "string" && typeof doc?.kind === "string") {
      for (const message of await strictErrors(doc)) errors.push(`${objectId(doc)}: strict: ${message}`);
    }
  }
  return errors.concat(checkInvariants(docs));
}

function loadRendering(file) {
  const documents = parseAllDocuments(readFileSync(file, "utf8"));
  const docs = [];
  for (const document of documents) {
    if (document.errors.length) throw new Error(`${file}: ${document.errors.map((e) => e.message).join("; ")}`);
    const value = document.toJS();
    if (value !== null) docs.push(value);
  }
  if (docs.length === 0) throw new Error(`${file}: no objects`);
  return docs;
}

// ---------- negative controls ----------

const findDoc = (docs, kind, predicate = () => true) => {
  const doc = docs.find((d) => d.kind === kind && predicate(d));
  if (!doc) throw new Error(`negative control: no ${kind} to break`);
  return doc;
};
const sidecarOf = (docs) => findDoc(docs, "Deployment", (d) => d.spec.template.spec.initContainers?.length).spec.template.spec.initContainers[0];

const NEGATIVE_CONTROLS = [
  ["misspelled field", /unknown field "imagePullPolicyy"/, (docs) => { sidecarOf(docs).imagePullPolicyy = "Always"; }],
  ["wrong type", /replicas: must be integer/, (docs) => { findDoc(docs, "Deployment").spec.replicas = "three"; }],
  ["missing required field", /must have required property '?port'?/, (docs) => { delete findDoc(docs, "Service").spec.ports[0].port; }],
  ["bad enum", /protocol: must be equal to one of the allowed values/, (docs) => { findDoc(docs, "Service").spec.ports[0].protocol = "tcp"; }],
  ["misspelled kind", /no schema for apps\/v1 Deploymnet/, (docs) => { findDoc(docs, "Deployment").kind = "Deploymnet"; }],
  ["sidecar not native", /native sidecar/, (docs) => { delete sidecarOf(docs).restartPolicy; }],
  ["grace too short", /terminationGracePeriodSeconds 30 </, (docs) => { findDoc(docs, "Deployment", (d) => d.spec.template.spec.initContainers?.length).spec.template.spec.terminationGracePeriodSeconds = 30; }],
  ["Service bypasses the proxy", /clients would bypass the proxy/, (docs) => { findDoc(docs, "Service").spec.ports[0].targetPort = 3000; }],
  ["readiness on /healthz", /readinessProbe must probe \/readyz/, (docs) => { sidecarOf(docs).readinessProbe.httpGet.path = "/healthz"; }],
  ["dangling ConfigMap", /is not in the rendering/, (docs) => { findDoc(docs, "Deployment", (d) => d.spec.template.spec.initContainers?.length).spec.template.spec.volumes[0].configMap.name = "nope"; }],
  ["unset config variable", /which its env does not set/, (docs) => { const s = sidecarOf(docs); s.env = s.env.filter((e) => e.name !== "IDEMPROXY_PG_DSN"); }],
  ["writable root filesystem", /readOnlyRootFilesystem must be true/, (docs) => { sidecarOf(docs).securityContext.readOnlyRootFilesystem = false; }],
];

async function runNegativeControls(name, file) {
  let failures = 0;
  for (const [what, expected, breakIt] of NEGATIVE_CONTROLS) {
    const docs = loadRendering(file);
    breakIt(docs);
    const errors = await validateDocs(docs);
    if (errors.some((e) => expected.test(e))) {
      console.log(`  caught: ${what}`);
    } else {
      failures += 1;
      console.log(`  NOT CAUGHT: ${what} (expected ${expected}); got: ${errors.join(" | ") || "no error"}`);
    }
  }
  console.log(`negative controls on ${name}: ${NEGATIVE_CONTROLS.length - failures} of ${NEGATIVE_CONTROLS.length} caught`);
  return failures;
}

// ---------- Dockerfile ----------

function checkDockerfile(file, localEnvFile) {
  const errors = [];
  const text = readFileSync(file, "utf8").replace(/\\\n/g, " ");
  const lines = text.split("\n").map((l) => l.trim()).filter((l) => l && !l.startsWith("#"));
  const args = Object.fromEntries(lines.filter((l) => /^ARG\s+\w+=/.test(l)).map((l) => l.slice(4).trim().split("=")));
  const stages = [];
  for (const line of lines) {
    const [instruction, ...rest] = line.split(/\s+/);
    const upper = instruction.toUpperCase();
    if (upper === "FROM") stages.push({ from: rest[0].replace(/\$\{(\w+)\}/g, (_, v) => args[v] ?? ""), lines: [] });
    else if (stages.length) stages.at(-1).lines.push({ instruction: upper, rest: rest.join(" ") });
  }
  if (stages.length < 2) errors.push("Dockerfile: expected a multi-stage build (build + runtime)");
  for (const stage of stages) {
    if (stage.from !== "debian:bookworm-slim") errors.push(`Dockerfile: stage FROM ${stage.from}, expected debian:bookworm-slim`);
  }
  if (/^\s*HEALTHCHECK/im.test(text)) errors.push("Dockerfile: no HEALTHCHECK (Kubernetes probes /healthz and /readyz)");
  const runtime = stages.at(-1) ?? { lines: [] };
  const last = (instruction) => runtime.lines.filter((l) => l.instruction === instruction).at(-1)?.rest;
  const user = last("USER");
  if (!user || !/^\d+(:\d+)?$/.test(user) || Number(user.split(":")[0]) === 0) errors.push(`Dockerfile: runtime USER must be a numeric non-root uid, is ${user}`);
  if (last("STOPSIGNAL") !== "SIGTERM") errors.push("Dockerfile: STOPSIGNAL SIGTERM missing in the runtime stage");
  if (!/idemproxy/.test(last("ENTRYPOINT") ?? "")) errors.push("Dockerfile: ENTRYPOINT must run idemproxy");
  const runtimeInstalls = runtime.lines.filter((l) => l.instruction === "RUN").map((l) => l.rest).join(" ");
  for (const dev of runtimeInstalls.match(/\S+-dev\b/g) ?? []) errors.push(`Dockerfile: runtime stage installs ${dev}`);
  // The build stage must have every library the project builds against (deploy/local-env.sh lists
  // them for the tests; the test-only GoogleTest packages aside).
  const buildInstalls = stages.slice(0, -1).flatMap((s) => s.lines.filter((l) => l.instruction === "RUN").map((l) => l.rest)).join(" ");
  const localEnv = readFileSync(localEnvFile, "utf8");
  const packageList = /IDEM_PACKAGES=\(([^)]*)\)/.exec(localEnv)?.[1] ?? "";
  const libraries = packageList.split(/\s+/).filter((p) => /^lib.*-dev$/.test(p) && !/^lib(gtest|gmock)-dev$/.test(p));
  if (libraries.length === 0) errors.push(`${localEnvFile}: no IDEM_PACKAGES=( lib…-dev … ) list found to compare with`);
  for (const dev of libraries) {
    if (!new RegExp(`(^|\\s)${dev.replace(/[.+]/g, "\\$&")}(\\s|$)`).test(buildInstalls)) errors.push(`Dockerfile: build stage lacks ${dev} (in deploy/local-env.sh)`);
  }
  if (!/--target idemproxy idemrelay/.test(buildInstalls)) errors.push("Dockerfile: build stage must build the idemproxy and idemrelay targets");
  // The image ships binaries built with the flags the test suite builds with.
  const buildType = (source) => /-DCMAKE_BUILD_TYPE=(\w+)/.exec(source)?.[1];
  if (buildType(buildInstalls) !== buildType(localEnv)) {
    errors.push(`Dockerfile: CMAKE_BUILD_TYPE ${buildType(buildInstalls)} differs from the tests' ${buildType(localEnv)} (deploy/local-env.sh)`);
  }
  return errors;
}

// ---------- main ----------

async function main(argv) {
  let extractDir;
  let negative = false;
  let dockerfile;
  let localEnv;
  const renderings = [];
  for (let i = 0; i < argv.length; i += 1) {
    if (argv[i] === "--extract") extractDir = argv[++i];
    else if (argv[i] === "--negative-controls") negative = true;
    else if (argv[i] === "--dockerfile") dockerfile = argv[++i];
    else if (argv[i] === "--local-env") localEnv = argv[++i];
    else {
      const [name, file] = argv[i].split("=");
      if (!file) throw new Error(`expected NAME=FILE, got ${argv[i]}`);
      renderings.push({ name, file });
    }
  }
  let problems = 0;
  if (dockerfile) {
    const errors = checkDockerfile(dockerfile, localEnv);
    for (const error of errors) console.log(`  ${error}`);
    console.log(`${dockerfile}: ${errors.length ? `${errors.length} problem(s)` : "ok"}`);
    problems += errors.length;
  }
  for (const { name, file } of renderings) {
    const docs = loadRendering(file);
    const errors = await validateDocs(docs);
    for (const error of errors) console.log(`  ${error}`);
    console.log(`${name}: ${docs.length} objects, ${errors.length ? `${errors.length} problem(s)` : "valid"}`);
    problems += errors.length;
    if (extractDir) {
      for (const configMap of docs.filter((d) => d.kind === "ConfigMap")) {
        const dir = path.join(extractDir, name, configMap.metadata.name);
        mkdirSync(dir, { recursive: true });
        for (const [key, value] of Object.entries(configMap.data ?? {})) writeFileSync(path.join(dir, key), value);
      }
    }
  }
  if (negative && renderings.length) problems += await runNegativeControls(renderings[0].name, renderings[0].file);
  return problems === 0 ? 0 : 1;
}

main(process.argv.slice(2)).then(
  (status) => { process.exitCode = status; },
  (error) => { console.error(error.stack ?? String(error)); process.exitCode = 2; },
);
