// Erasure written the way a BullMQ user writes it, for the forget benches' BullMQ contenders:
// Queue.getJobs pages of 1,000 over each of `states`, filtered in JS by `data.user.id`, then
// job.remove() of each match.
'use strict';

const PAGE = 1000;

// Erases `subject`'s jobs from `queue`; resolves { scanned, removed }.
async function eraseByScan(queue, states, subject) {
  let scanned = 0;
  const matches = [];
  for (const state of states) {
    for (let start = 0; ; start += PAGE) {
      const jobs = await queue.getJobs([state], start, start + PAGE - 1, true);
      scanned += jobs.length;
      for (const job of jobs) {
        if (job && job.data && job.data.user && job.data.user.id === subject) matches.push(job);
      }
      if (jobs.length < PAGE) break;
    }
  }
  for (const job of matches) await job.remove();
  return { scanned, removed: matches.length };
}

module.exports = { eraseByScan };
