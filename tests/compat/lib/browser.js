// Headless Chromium for the console's tests: Debian's (or BULLSWEEP_CHROMIUM), driven by
// playwright-core; nothing downloads a browser.
'use strict';
const { chromium } = require('playwright-core');

// A browser with no sandbox, GPU, background network or first-run work.
function launchChromium() {
  return chromium.launch({
    executablePath: process.env.BULLSWEEP_CHROMIUM || '/usr/bin/chromium',
    args: ['--no-sandbox', '--disable-dev-shm-usage', '--disable-gpu', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
}

module.exports = { launchChromium };
