'use strict';
// The BullMQ build under test: `bullmq` (6.x) by default, or the package named by
// BULLSWEEP_BULLMQ (`bullmq5`, an alias of BullMQ 5.81 in package.json), so the suites that
// build data can prove both major versions' data is governed alike.
module.exports = require(process.env.BULLSWEEP_BULLMQ || 'bullmq');
