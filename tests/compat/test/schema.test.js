// The policy file's JSON Schema (`bullsweep schema`, shipped as docs/bullsweep.schema.json)
// judged by a real JSON Schema 2020-12 validator (ajv) beside `bullsweep check`:
// - the shipped file is what the command prints, and compiles in ajv's strict mode;
// - it accepts every policy example of the README and every policy file the repository ships,
//   and so does `check`;
// - it refuses the structural errors `check` refuses (unknown keys, wrong types, a negative
//   count, an unknown action or state);
// - it never refuses what `check` accepts: every key of the schema, in files `check` accepts,
//   is set to values of every type (and left out), and each file the schema refuses must be
//   one `check` refuses too.
// A YAML file is seen as YAML 1.2 reads it (as an editor does): the `yaml` package.
'use strict';
const { test } = require('node:test');
const assert = require('node:assert/strict');
const { execFile, execFileSync } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const Ajv2020 = require('ajv/dist/2020');
const YAML = require('yaml');
const { BIN } = require('../lib/harness');

const ROOT = path.resolve(__dirname, '..', '..', '..');
const SHIPPED = path.join(ROOT, 'docs', 'bullsweep.schema.json');
const DIR = fs.mkdtempSync(path.join(os.tmpdir(), 'bullsweep-schema-'));

const schema = JSON.parse(fs.readFileSync(SHIPPED, 'utf8'));
// Strict, so that a keyword ajv does not know or a misplaced one fails the test; union types
// (`type: [string, number, boolean]`) are plain JSON Schema.
const validate = new Ajv2020({ strict: true, allowUnionTypes: true, allErrors: true }).compile(schema);

// The schema's verdict on a YAML text: null when it accepts, else its errors.
function judge(text) {
  const doc = YAML.parse(text, { merge: true });
  if (validate(doc)) return null;
  return validate.errors.map((e) => `${e.instancePath || '/'} ${e.message}`).join('; ');
}

// `bullsweep check` on a YAML text: its exit code and stderr.
let files = 0;
function check(text) {
  const file = path.join(DIR, `p${files++}.yaml`);
  fs.writeFileSync(file, text);
  return new Promise((resolve) => {
    execFile(BIN, ['--config', file, 'check'], { cwd: DIR }, (err, _stdout, stderr) => {
      fs.rmSync(file, { force: true });
      resolve({ code: err ? (typeof err.code === 'number' ? err.code : 1) : 0, stderr });
    });
  });
}

// Runs `work` over `items`, two at a time (the machine has two cores).
async function eachTwoAtATime(items, work) {
  let next = 0;
  const lane = async () => {
    while (next < items.length) await work(items[next++]);
  };
  await Promise.all([lane(), lane()]);
}

const POLICY_KEYS = new Set(Object.keys(schema.properties));
// What an `action:` needs, for a README fragment that names actions without their targets.
const TARGETS = {
  archive: `archive: { url: "file://${DIR}/archive" }`,
  notify: 'notify: { log: true }',
  pii: 'pii: { patterns: [email] }',
};

// Every ```yaml block of the README, with its line. A block is a policy file when all its
// top-level keys are the policy file's (`version` included: a whole file; without it: a
// fragment, checked as a file with `version: 1` and the targets its actions need); a block
// with none of them is another file (the dashboard's tokens, a `bullsweep test` file, a CI
// job) and is skipped, named; a block with some is an error.
function readmeExamples() {
  const lines = fs.readFileSync(path.join(ROOT, 'README.md'), 'utf8').split('\n');
  const policies = [];
  const skipped = [];
  for (let i = 0; i < lines.length; i++) {
    const open = lines[i].match(/^(\s*)```(\S*)/);
    if (!open) continue;
    const indent = open[1].length;
    let end = i + 1;
    while (end < lines.length && !/^\s*```\s*$/.test(lines[end])) end++;
    const body = lines.slice(i + 1, end).map((l) => l.slice(indent)).join('\n') + '\n';
    const name = `README.md:${i + 1}`;
    i = end;
    if (open[2] !== 'yaml') continue;
    const doc = YAML.parse(body, { merge: true });
    const keys = doc && typeof doc === 'object' && !Array.isArray(doc) ? Object.keys(doc) : [];
    const known = keys.filter((k) => POLICY_KEYS.has(k));
    if (known.length === 0) {
      skipped.push(`${name} (top-level keys ${keys.join(', ') || 'none'}: not a policy file)`);
      continue;
    }
    assert.deepEqual(known, keys, `${name} mixes policy keys with others: ${keys.join(', ')}`);
    if (keys.includes('version')) {
      policies.push({ name, text: body });
    } else {
      const targets = Object.keys(TARGETS).filter((k) => !keys.includes(k)).map((k) => TARGETS[k]);
      policies.push({ name: `${name} (a fragment, with version: 1 and targets)`, text: ['version: 1', body, ...targets, ''].join('\n') });
    }
  }
  return { policies, skipped };
}

// The YAML files the repository ships that are not policy files, each with what it is. Every
// other YAML file git tracks is judged as a policy file (or as a ConfigMap holding some), so a
// policy file with a misspelled top-level key fails below instead of being skipped.
const NOT_POLICY_FILES = {
  'deploy/kubernetes/deployment.yaml': 'a Kubernetes Deployment',
  'deploy/kubernetes/poddisruptionbudget.yaml': 'a Kubernetes PodDisruptionBudget',
  'deploy/kubernetes/secret.yaml': 'a Kubernetes Secret',
  'deploy/kubernetes/service.yaml': 'a Kubernetes Service',
  'deploy/kubernetes/servicemonitor.yaml': "the Prometheus operator's ServiceMonitor",
  'deploy/prometheus/bullsweep.rules.yml': 'the Prometheus alerting rules',
  'deploy/prometheus/bullsweep.rules.test.yml': "promtool's unit tests of the rules",
  'examples/bullsweep.test.yaml': 'a `bullsweep test` file of golden cases',
};

// Every policy file the repository ships: YAML files git tracks but those listed above, the
// policy files inside a Kubernetes ConfigMap, and the demo's sample policy.
function shippedExamples() {
  const policies = [];
  const skipped = [];
  const tracked = execFileSync('git', ['ls-files', '*.yaml', '*.yml'], { cwd: ROOT, encoding: 'utf8' })
    .split('\n').filter(Boolean);
  for (const file of Object.keys(NOT_POLICY_FILES)) {
    assert.ok(tracked.includes(file), `${file} is listed as not a policy file but is not in the repository`);
  }
  for (const file of tracked) {
    const text = fs.readFileSync(path.join(ROOT, file), 'utf8');
    if (NOT_POLICY_FILES[file]) {
      skipped.push(`${file} (${NOT_POLICY_FILES[file]}: not a policy file)`);
      continue;
    }
    YAML.parseAllDocuments(text).forEach((d, n) => {
      const doc = d.toJS({ merge: true });
      const name = `${file}${n > 0 ? ` (document ${n + 1})` : ''}`;
      if (doc && doc.kind === 'ConfigMap') {
        for (const [key, value] of Object.entries(doc.data || {})) {
          if (/\.(ya?ml|json)$/.test(key)) policies.push({ name: `${name} data.${key}`, text: value });
        }
      } else {
        policies.push({ name, text: d.toString() });
      }
    });
  }
  const demo = fs.readFileSync(path.join(ROOT, 'crates/cli/src/commands/demo.rs'), 'utf8')
    .match(/pub const SAMPLE_POLICY: &str = r#"([\s\S]*?)"#;/);
  assert.ok(demo, "the demo's SAMPLE_POLICY is found in demo.rs");
  policies.push({ name: "the demo's sample policy (demo.rs SAMPLE_POLICY)", text: demo[1].replaceAll('{dir}', DIR) });
  return { policies, skipped };
}

// Files `check` accepts that hold, together with the examples, every key of the schema (the
// coverage test below says which key none holds).
const COVERAGE = [
  {
    name: 'coverage: every state, job rules, tenants, sources',
    text: `version: 1
environment: production
environments: { production: [prod] }
discovery: { layouts: ["bull:{queue}", "bull:{tenant}:{env}:{queue}"] }
schedule: 30m
timezone: UTC
archive: { url: "file://${DIR}/archive", compression: zstd }
notify: { log: true, webhook: { url: "https://hooks.example.com/x", headers: { X-Token: abc } } }
pii: { paths: [user.email], patterns: [email, credit-card], replacement: "[gone]" }
subjects: [{ name: user, paths: [user.id], tenantPath: tenantId }]
cost: { preset: aws-elasticache-r7g, replicas: 1, maxLeak: 0.5 }
doctor: { schedule: 12h, repair: [danglingIds, all] }
sources:
  orders: { postgres: { url: "postgres://app@db/shop", query: "SELECT id AS key FROM o WHERE id = ANY($1)", timeout: 2s, batchSize: 500 } }
  carts: { redis: { url: "redis://cache:6379/2", key: "cart:{key}", field: status, equals: open, timeout: 1s, batchSize: 100 } }
policies:
  - name: everything
    environment: production
    queueNamePattern: "all*"
    tenant: "acme*"
    timezone: Europe/Paris
    schedule: "CRON 0 3 * * *"
    mode: both
    dependsOn: [ledger]
    moveExhaustedTo: all-dlq
    protectWaitingParents: true
    sla: { maxDataAgeHours: 720, complianceTag: soc2, auditRequired: false }
    pii: { patterns: [email] }
    subjects: [{ name: card, paths: [card.holder] }]
    events: { maxLen: 1000, maxAge: 1d }
    source: { name: orders, key: data.orderId, action: remove }
    deleteWhen: sourceDeleted
    keepFor: 1h
    rules:
      completed: { maxAge: 7d, maxCount: 100, keepFor: 1h, action: anonymize, keepIf: { path: returnvalue.status, equals: failed } }
      failed: { maxAge: 30d, maxCount: 50, action: notify }
      waiting: { maxAge: 2d, keepFor: 1h, action: remove }
      delayed: { maxAge: 30d, action: archive }
      prioritized: { maxAge: 7d, action: notify }
      waiting-children: { maxAge: 14d }
      stalled: { maxAge: 1h, action: retry }
    jobs:
      - name: charge
        completed: { maxAge: 1d }
        failed: { maxAge: 2d }
        waiting: { maxAge: 3d }
        delayed: { maxAge: 4d }
        prioritized: { maxAge: 5d }
        waiting-children: { maxAge: 6d }
        source: { name: carts, key: data.cartId, action: notify }
        deleteWhen: sourceDeletedOrNoLongerMatching
        keepFor: 2h
  - name: dead
    queueNamePattern: "*-dlq"
    deadLetter: { warm: 2h, cold: 30d, purgeAfter: 90d }
tenants:
  - tenantId: acme
    environment: production
    overrides:
      completed: { maxAge: 1d, maxCount: 10 }
      failed: { maxAge: 2d }
      waiting: { maxAge: 3d }
      delayed: { maxAge: 4d }
      prioritized: { maxAge: 5d }
      waiting-children: { maxAge: 6d }
`,
  },
  {
    name: 'coverage: a price of its own, the audit trail, ttl',
    text: `version: 1
audit: { url: "file://${DIR}/audit.jsonl" }
cost: { perGbMonth: 12.5 }
policies:
  - name: expiring
    queueNamePattern: mail
    rules:
      completed: { ttl: 7d }
`,
  },
];

// Files `check` refuses for their structure, each with why; the schema must refuse them too.
const STRUCTURAL_ERRORS = [
  ['an unknown top-level key', 'version: 1\npolicy: []\n'],
  ['an unknown key in a policy', 'version: 1\npolicies: [{ name: a, queueNamePatern: "*" }]\n'],
  ['an unknown key in a rule', 'version: 1\npolicies: [{ name: a, queueNamePattern: "*", rules: { completed: { maxAgee: 7d } } }]\n'],
  ['an unknown key in a job rule', 'version: 1\npolicies: [{ name: a, queueNamePattern: "*", jobs: [{ name: j, complete: { maxAge: 1d } }] }]\n'],
  ['an unknown key in a tenant override', 'version: 1\npolicies: [{ name: a, queueNamePattern: "*" }]\ntenants: [{ tenantId: t, overrides: { completed: { maxCout: 1 } } }]\n'],
  ['an unknown key in a source', 'version: 1\nsources: { o: { postgres: { url: "postgres://a@b/c", query: "SELECT $1", timout: 2s } } }\n'],
  ['an unknown state', 'version: 1\npolicies: [{ name: a, queueNamePattern: "*", rules: { finished: { maxAge: 7d } } }]\n'],
  ['an unknown action', 'version: 1\npolicies: [{ name: a, queueNamePattern: "*", rules: { completed: { maxAge: 7d, action: delete } } }]\n'],
  ['an unknown stalled action', 'version: 1\npolicies: [{ name: a, queueNamePattern: "*", rules: { stalled: { maxAge: 1h, action: restart } } }]\n'],
  ['an unknown mode', 'version: 1\npolicies: [{ name: a, queueNamePattern: "*", mode: events }]\n'],
  ['an unknown doctor kind', 'version: 1\ndoctor: { repair: [orphans] }\n'],
  ['a negative maxCount', 'version: 1\npolicies: [{ name: a, queueNamePattern: "*", rules: { completed: { maxCount: -5 } } }]\n'],
  ['a quoted maxCount', 'version: 1\npolicies: [{ name: a, queueNamePattern: "*", rules: { completed: { maxCount: "500" } } }]\n'],
  ['a string where the rules mapping belongs', 'version: 1\npolicies: [{ name: a, queueNamePattern: "*", rules: everything }]\n'],
  ['a string where the audit mapping belongs', 'version: 1\naudit: file:///tmp/audit.jsonl\n'],
  ['a mapping where the policies list belongs', 'version: 1\npolicies: { name: a, queueNamePattern: "*" }\n'],
  ['a list where a duration belongs', 'version: 1\npolicies: [{ name: a, queueNamePattern: "*", rules: { completed: { maxAge: [7d] } } }]\n'],
  ['a list where a name belongs', 'version: 1\npolicies: [{ name: [a], queueNamePattern: "*" }]\n'],
  ['a list where a flag belongs', 'version: 1\nnotify: { log: [true] }\n'],
  ['a duration without a unit, quoted', 'version: 1\npolicies: [{ name: a, queueNamePattern: "*", rules: { completed: { maxAge: "3600" } } }]\n'],
  ['a fraction in a duration', 'version: 1\npolicies: [{ name: a, queueNamePattern: "*", rules: { completed: { maxAge: 1.5h } } }]\n'],
  ['no version', 'policies: [{ name: a, queueNamePattern: "*" }]\n'],
  ['a version this bullsweep does not read', 'version: 2\n'],
  ['a policy without a name', 'version: 1\npolicies: [{ queueNamePattern: "*" }]\n'],
  ['a source of both kinds', 'version: 1\nsources: { o: { postgres: { url: "postgres://a@b/c", query: "SELECT $1" }, redis: { key: "k:{key}" } } }\n'],
];

test('the shipped schema is what `bullsweep schema` prints, a draft 2020-12 schema', () => {
  const printed = execFileSync(BIN, ['schema'], { encoding: 'utf8' });
  assert.equal(printed, fs.readFileSync(SHIPPED, 'utf8'), 'docs/bullsweep.schema.json is out of date: bullsweep schema > docs/bullsweep.schema.json');
  assert.equal(schema.$schema, 'https://json-schema.org/draft/2020-12/schema');
  assert.equal(typeof validate, 'function');
});

test('the schema and check accept every README example and every shipped policy file', async (t) => {
  const readme = readmeExamples();
  const shipped = shippedExamples();
  const examples = [...readme.policies, ...shipped.policies, ...COVERAGE];
  for (const line of [...readme.skipped, ...shipped.skipped]) t.diagnostic(`skipped ${line}`);
  t.diagnostic(`${readme.policies.length} README examples, ${shipped.policies.length} shipped policy files, ${COVERAGE.length} coverage files`);
  assert.ok(readme.policies.some((e) => e.name === `README.md:${readmeLine('## The policy file')}`), "the README's complete example is among them");
  assert.ok(readme.policies.length >= 5, `README examples found: ${readme.policies.map((e) => e.name).join(', ')}`);
  assert.ok(shipped.policies.some((e) => e.name.startsWith('deploy/kubernetes/configmap.yaml')), 'the ConfigMap policy is among them');
  const failures = [];
  await eachTwoAtATime(examples, async (e) => {
    const refused = judge(e.text);
    if (refused) failures.push(`${e.name}: the schema refuses it: ${refused}`);
    const checked = await check(e.text);
    if (checked.code !== 0) failures.push(`${e.name}: check refuses it (exit ${checked.code}): ${checked.stderr}`);
  });
  assert.deepEqual(failures, []);
});

// The line of the first ```yaml fence after `heading`.
function readmeLine(heading) {
  const lines = fs.readFileSync(path.join(ROOT, 'README.md'), 'utf8').split('\n');
  const at = lines.indexOf(heading);
  return at + 1 + lines.slice(at).findIndex((l) => l.startsWith('```yaml'));
}

test('the schema refuses the structural errors check refuses', async () => {
  const failures = [];
  await eachTwoAtATime(STRUCTURAL_ERRORS, async ([why, text]) => {
    if (!judge(text)) failures.push(`${why}: the schema accepts it`);
    const checked = await check(text);
    if (checked.code !== 2) failures.push(`${why}: check exits ${checked.code}, not 2`);
  });
  assert.deepEqual(failures, []);
});

// The schema with its `$ref`s followed and a nullable key's null branch dropped, down to a
// mapping, a list or a value; and where in the schema that is: `at`, or the name of the last
// definition a `$ref` led to (`#stateRule`), since a definition is one schema wherever it is used.
function resolve(s, at) {
  for (;;) {
    if (s && s.$ref) {
      const name = s.$ref.replace('#/$defs/', '');
      [s, at] = [schema.$defs[name], `#${name}`];
    } else if (s && s.anyOf && s.anyOf.some((b) => b.type === 'null')) {
      s = s.anyOf.find((b) => b.type !== 'null');
    } else {
      return [s, at];
    }
  }
}

// Every key of the schema, where it is: `policies`, `#policy.rules`, `#stateRule.maxAge`,
// `sources.*`, `#source.redis.key`.
function schemaPaths(s, at, out) {
  [s, at] = resolve(s, at);
  if (s.type === 'array') schemaPaths(s.items, `${at}[]`, out);
  if (s.type === 'object' && s.properties) {
    for (const [k, v] of Object.entries(s.properties)) {
      out.add(`${at}.${k}`);
      schemaPaths(v, `${at}.${k}`, out);
    }
  }
  if (s.type === 'object' && typeof s.additionalProperties === 'object') {
    out.add(`${at}.*`);
    schemaPaths(s.additionalProperties, `${at}.*`, out);
  }
  return out;
}

// Every place in `value` with its key as `schemaPaths` writes it and its schema: [path in the
// value, key, schema].
function valuePaths(value, s, at, keyAt, out) {
  [s, keyAt] = resolve(s, keyAt);
  if (Array.isArray(value) && s.type === 'array') {
    value.forEach((item, i) => {
      out.push([[...at, i], `${keyAt}[]`, s.items]);
      valuePaths(item, s.items, [...at, i], `${keyAt}[]`, out);
    });
  } else if (value && typeof value === 'object' && s.type === 'object') {
    for (const [k, v] of Object.entries(value)) {
      const fixed = s.properties && s.properties[k];
      const child = fixed || (typeof s.additionalProperties === 'object' ? s.additionalProperties : null);
      if (!child) continue;
      const key = fixed ? `${keyAt}.${k}` : `${keyAt}.*`;
      out.push([[...at, k], key, child]);
      valuePaths(v, child, [...at, k], key, out);
    }
  }
  return out;
}

// A value of every type (the spellings YAML 1.1 and 1.2 read apart included), and the names
// the schema lists at this key.
function probes(at) {
  const names = new Set();
  JSON.stringify(at, (k, v) => {
    if (k === 'enum') v.forEach((n) => names.add(n));
    return v;
  });
  return [null, true, 'yes', 'off', 0, 1, -1, 2.5, 'text', '', '7d', ' 7d ', '1_000', '+0x10', '0b11', '5',
    'auto', 'CRON 0 3 * * *', [], ['a'], [null], {}, { a: 1 }, ...names];
}

const DELETE = Symbol('left out');

function mutate(doc, at, probe) {
  const copy = structuredClone(doc);
  let parent = copy;
  for (const k of at.slice(0, -1)) parent = parent[k];
  const last = at[at.length - 1];
  if (probe === DELETE) {
    if (Array.isArray(parent)) parent.splice(last, 1);
    else delete parent[last];
  } else {
    parent[last] = probe;
  }
  return copy;
}

test('the schema never refuses what check accepts: every key set to every type, or left out', async (t) => {
  const bases = [...readmeExamples().policies, ...shippedExamples().policies, ...COVERAGE];
  // Each key of the schema once, in the first file that has it.
  const places = new Map();
  for (const base of bases) {
    const doc = YAML.parse(base.text, { merge: true });
    for (const [at, key, keySchema] of valuePaths(doc, schema, [], '', [])) {
      if (!places.has(key)) places.set(key, { base, doc, at, keySchema });
    }
  }
  const uncovered = [...schemaPaths(schema, '', new Set())].filter((k) => !places.has(k));
  assert.deepEqual(uncovered, [], 'keys of the schema that no example or coverage file holds');

  const cases = [];
  for (const [key, { base, doc, at, keySchema }] of places) {
    for (const probe of [...probes(keySchema), DELETE]) cases.push({ key, base, text: YAML.stringify(mutate(doc, at, probe)), probe });
  }
  let refused = 0;
  const failures = [];
  await eachTwoAtATime(cases, async (c) => {
    const verdict = judge(c.text);
    if (!verdict) return;
    refused++;
    const checked = await check(c.text);
    if (checked.code === 0) {
      const shown = c.probe === DELETE ? 'left out' : JSON.stringify(c.probe);
      failures.push(`${c.key} = ${shown} (in ${c.base.name}): check accepts it, the schema says ${verdict}`);
    }
  });
  t.diagnostic(`${places.size} key paths, ${cases.length} files; the schema refused ${refused}, and check refused each of them`);
  assert.ok(refused > places.size, `the schema refused ${refused} of ${cases.length}`);
  assert.deepEqual(failures, []);
});
