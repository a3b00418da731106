// What the event benches' loads share: jobs added at a steady rate, then the wait for the
// workers to complete them.
'use strict';

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// Calls `addBatch(names)` (a list of job numbers) every 10 ms so that `rate` jobs a second are
// added for `seconds`; then waits until `completed()` reaches them all (at most 30 s more).
// Resolves {total, ms}: the jobs added and the time from the first add to the last completion.
async function addAtRate(addBatch, rate, seconds, completed) {
  const started = Date.now();
  const total = Math.round(rate * seconds);
  const tick = 10;
  let added = 0;
  while (added < total) {
    const due = Math.min(total, Math.round(((Date.now() - started) / 1000) * rate) + Math.round((rate * tick) / 1000));
    if (due > added) {
      const batch = [];
      for (; added < due; added++) batch.push(added);
      await addBatch(batch);
    }
    await sleep(tick);
  }
  while (completed() < total && Date.now() - started < seconds * 1000 + 30000) await sleep(20);
  return { total, ms: Date.now() - started };
}

module.exports = { addAtRate };
