// A private PostgreSQL for the source tests: the Rust tests' own (`bullsweep-testkit
// postgres`: a fresh cluster in a temporary directory, on a free loopback port, trust
// authentication), running while its standard input stays open, with `pg` to seed it.
'use strict';
const { spawn } = require('node:child_process');
const { Client } = require('pg');
const { TESTKIT } = require('./harness');

// Starts the server; resolves { url, sql(text, params), stop() }.
async function startPostgres() {
  const proc = spawn(TESTKIT, ['postgres'], { stdio: ['pipe', 'pipe', 'inherit'] });
  const exited = new Promise((resolve) => proc.on('exit', resolve));
  const { url } = await new Promise((resolve, reject) => {
    let out = '';
    proc.stdout.on('data', (d) => {
      out += d;
      const line = out.split('\n')[0];
      if (out.includes('\n')) resolve(JSON.parse(line));
    });
    proc.on('exit', (code) => reject(new Error(`bullsweep-testkit postgres exited with ${code}: apt-get install -y postgresql`)));
  });
  const client = new Client({ connectionString: url });
  await client.connect();
  return {
    url,
    sql: (text, params) => client.query(text, params),
    // Closes the pipe: the testkit stops the server and removes its directory.
    stop: async () => {
      await client.end();
      proc.stdin.end();
      await exited;
    },
  };
}

module.exports = { startPostgres };
