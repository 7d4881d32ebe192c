// A real headless browser for tests: Debian's chromium (scripts/setup.sh installs it),
// driven by playwright-core, which downloads no browser of its own. The flags keep it off
// the network: no background connections, no component updates, no sync.

import { chromium, type Browser } from 'playwright-core';

export const CHROMIUM_PATH = process.env.KCM_CHROMIUM ?? '/usr/bin/chromium';

export function launchBrowser(): Promise<Browser> {
  return chromium.launch({
    executablePath: CHROMIUM_PATH,
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
}
