// Issue 28: README's CI recipes (GitHub Actions and GitLab CI) are valid YAML, run `check`,
// `test --junit` and `plan --against --format markdown`, post the plan as a comment, and every
// bullsweep command line in them uses a subcommand and flags the real binary accepts.
'use strict';
const { test } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const { execFileSync } = require('node:child_process');
const YAML = require('yaml');
const { BIN } = require('../lib/harness');

const README = fs.readFileSync(path.join(__dirname, '..', '..', '..', 'README.md'), 'utf8');

// The YAML blocks of the section "### In CI".
function recipes() {
  const start = README.indexOf('\n### In CI\n');
  assert.ok(start > 0, 'README has a section "In CI"');
  const end = README.indexOf('\n## ', start + 1);
  const section = README.slice(start, end);
  return [...section.matchAll(/```yaml\n([\s\S]*?)```/g)].map((m) => YAML.parse(m[1]));
}

// Every shell line of a recipe (`run:` of GitHub steps, `script:`/`before_script:` of GitLab).
function shellLines(doc) {
  const out = [];
  const walk = (v, key) => {
    if (typeof v === 'string' && ['run', 'script', 'before_script'].includes(key)) out.push(...v.split('\n'));
    else if (Array.isArray(v)) v.forEach((x) => walk(x, key));
    else if (v && typeof v === 'object') for (const [k, x] of Object.entries(v)) walk(x, k);
  };
  walk(doc, null);
  return out.map((l) => l.trim()).filter(Boolean);
}

// The words of each bullsweep invocation on a line (up to a redirection or `||`).
function invocations(line) {
  const words = line.match(/"[^"]*"|'[^']*'|\S+/g) || [];
  const out = [];
  words.forEach((w, i) => {
    if (w !== 'bullsweep' || words[i - 1] === 'install' || words[i - 1] === '--locked' || /"$/.test(words[i - 1] || '')) return;
    const rest = [];
    for (const x of words.slice(i + 1)) {
      if (['>', '||', '&&', '|'].includes(x)) break;
      rest.push(x);
    }
    out.push(rest);
  });
  return out;
}

const GLOBAL_WITH_VALUE = ['--config', '--redis', '--env'];

test('the CI recipes run check, test --junit and plan --against, and post the plan', () => {
  const docs = recipes();
  assert.equal(docs.length, 2, 'a GitHub Actions and a GitLab CI recipe');
  const [github, gitlab] = docs;
  assert.ok(github.on.pull_request, 'GitHub: on pull requests');
  assert.equal(github.permissions['pull-requests'], 'write', 'GitHub: may comment');
  assert.ok(gitlab['bullsweep-policy'].artifacts.reports.junit, 'GitLab: reads the JUnit file');
  for (const [name, doc] of [['GitHub', github], ['GitLab', gitlab]]) {
    const calls = shellLines(doc).flatMap(invocations);
    const subs = calls.map((c) => c.find((w, i) => !w.startsWith('-') && !GLOBAL_WITH_VALUE.includes(c[i - 1])));
    assert.deepEqual([...new Set(subs)], ['check', 'test', 'plan'], `${name}: check, test, plan`);
    const all = calls.map((c) => c.join(' ')).join('\n');
    assert.match(all, /test \S+ --junit junit\.xml/, `${name}: JUnit for the CI system`);
    assert.match(all, /plan --against \S+ --format markdown/, `${name}: the plan as Markdown`);
    const shell = shellLines(doc).join('\n');
    assert.match(shell, name === 'GitHub' ? /gh pr comment .* --body-file plan\.md/ : /merge_requests\/\$CI_MERGE_REQUEST_IID\/notes/, `${name}: posts the comment`);
    // Exit 2 (changes) must not fail the job; other failures must.
    assert.match(shell, /\[ "\$code" -eq 2 \]|\|\| \[ \$\? -eq 2 \]/, `${name}: exit 2 is not a failure`);
  }
});

test('every bullsweep command line of the recipes is accepted by the binary', () => {
  for (const doc of recipes()) {
    for (const call of shellLines(doc).flatMap(invocations)) {
      const sub = call.find((w, i) => !w.startsWith('-') && !GLOBAL_WITH_VALUE.includes(call[i - 1]));
      const help = execFileSync(BIN, [sub, '--help'], { encoding: 'utf8' });
      for (const flag of call.filter((w) => w.startsWith('--'))) {
        assert.ok(help.includes(`${flag} `) || help.includes(`${flag}\n`) || help.includes(`${flag}=`) || help.includes(`${flag} <`),
          `bullsweep ${sub} has no ${flag}: ${call.join(' ')}`);
      }
    }
  }
});
