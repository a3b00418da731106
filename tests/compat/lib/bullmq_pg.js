// BullMQ on PostgreSQL for the compatibility tests: BullMQ 6.7's own backend
// (`createPostgresBackend`) made the default for every Queue, Worker and FlowProducer this
// process opens, the schema made by BullMQ's own migrations, and a dump of every BullMQ
// table for the differential tests to compare.
'use strict';
const { Client } = require('pg');
const { setDefaultBackendFactory } = require('bullmq/dist/cjs/utils/create-backend');
const { createPostgresBackend, runMigrations } = require('bullmq/dist/cjs/postgres');

setDefaultBackendFactory(createPostgresBackend);

// Makes BullMQ's schema in the database at `url` (BullMQ's own migrations).
async function migrate(url, schema = 'bullmq') {
  const client = new Client({ connectionString: url });
  await client.connect();
  try {
    await runMigrations(client, schema);
  } finally {
    await client.end();
  }
}

// Every BullMQ table's rows, sorted, with the columns that differ between two equal
// histories (sequence numbers, timestamps of the removal itself) left out.
const TABLES = {
  job: 'SELECT queue, id, name, state, data, opts, priority, attempts_made, return_value, failed_reason, finished_at_ms, parent_queue, parent_id, pending_deps, dedup_id, scheduler_id, lock_token FROM job ORDER BY queue, id',
  job_log: 'SELECT queue, job_id, idx, row FROM job_log ORDER BY queue, job_id, idx',
  job_dependency: 'SELECT parent_queue, parent_id, child_queue, child_id, child_key, status, value FROM job_dependency ORDER BY parent_queue, parent_id, child_key',
  dedup: 'SELECT queue, dedup_id, job_id FROM dedup ORDER BY queue, dedup_id',
  dedup_next: 'SELECT queue, dedup_id, payload FROM dedup_next ORDER BY queue, dedup_id',
  scheduler: 'SELECT queue, scheduler_id, name, pattern, every_ms, template_data FROM scheduler ORDER BY queue, scheduler_id',
  meta: 'SELECT queue, field, value FROM meta ORDER BY queue, field',
  // The events a removal publishes, without ids and clocks; `cleaned` counts differ by how
  // many calls a removal took, so only their total is kept.
  event: "SELECT queue, event, data FROM event WHERE event <> 'cleaned' ORDER BY queue, id",
  cleaned: "SELECT queue, sum((data->>'count')::int)::int AS count FROM event WHERE event = 'cleaned' GROUP BY queue ORDER BY queue",
};

async function dump(sql, schema = 'bullmq') {
  await sql(`SET search_path TO ${schema}`);
  const out = {};
  for (const [table, query] of Object.entries(TABLES)) {
    out[table] = (await sql(query)).rows;
  }
  return out;
}

module.exports = { migrate, dump };
