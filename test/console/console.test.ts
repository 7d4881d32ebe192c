// The web console in a real headless browser (issue 19 item 2), against a real manager with
// agents and real engines: the page, opened with a viewer token in the URL fragment, shows
// a create_cluster's progress while it runs, then the cluster drilled down to its shard's
// nodes (master and standbys, measured status) and compute node addresses, and picks up a
// later change (a machine set dead, then running again) without reloading. A cluster
// name is user input: the page must show it as text, never run it.

import { copyFile, mkdtemp } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KCM_PROTOCOL, KCM_VERSION } from '@kcm/common';
import { launchBrowser } from '../helpers/browser';
import { TEST_TOKENS } from '../helpers/tokens';
import { emit, waitForJobEnd } from '../helpers/emit-client';
import { startClusterFixture, type ClusterFixture } from '../cluster/cluster-fixture';
import { clusterParas } from '../cluster/cluster-paras';
import { registerMachines } from '../cluster/machines';

// What page.evaluate and waitForFunction run executes in the page: its globals, for the compiler only.
declare const document: { querySelectorAll(selector: string): ArrayLike<{ textContent: string | null }> & Iterable<{ textContent: string | null }> };
declare const window: Record<string, unknown>;
declare const sessionStorage: { getItem(key: string): string | null; setItem(key: string, value: string): void };

const MEMBER = '127.0.1.87:58187';
const AGENT_PORT = 58167;
/** Markup in a nick name: shown as these characters, or it ran (window.__xss). */
const NICK_NAME = '<img src=x onerror="window.__xss=1">demo';

describe('the web console in a headless browser (real engines)', () => {
  let f: ClusterFixture;
  let browser: Browser;
  let page: Page;
  let shots: string;
  const pageErrors: string[] = [];

  const shot = async (name: string) => {
    const file = path.join(shots, name);
    await page.screenshot({ path: file, fullPage: true });
    return file;
  };
  /** Waits until `text` of the element `selector` matches, reading the page as a person would. */
  const waitForText = (selector: string, pattern: RegExp, timeoutMs = 60_000) =>
    page.waitForFunction(([sel, source]) => [...document.querySelectorAll(sel)].some((el) => new RegExp(source).test(el.textContent ?? '')), [selector, pattern.source] as const, { timeout: timeoutMs, polling: 100 });

  beforeAll(async () => {
    shots = await mkdtemp(path.join(os.tmpdir(), 'kcm-console-'));
    [f, browser] = await Promise.all([startClusterFixture({ member: MEMBER, agentPort: AGENT_PORT }), launchBrowser()]);
    await registerMachines(f);
    page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
    page.on('pageerror', (err) => pageErrors.push(err.message));
  }, 120_000);

  afterAll(async () => {
    await browser?.close();
    await f?.close();
    console.log(`console screenshots in ${shots}`);
  }, 120_000);

  it('opens with a viewer token from the fragment, which leaves the address bar', async () => {
    await page.goto(`http://${MEMBER}/ui/#token=${TEST_TOKENS.viewer}&refresh=500`);
    await waitForText('#machines', /127\.0\.2\.3/);
    expect(page.url()).toBe(`http://${MEMBER}/ui/#refresh=500`);
    expect(await page.evaluate(() => sessionStorage.getItem('kcm.console.token'))).toBe(TEST_TOKENS.viewer);
    await waitForText('#group [data-leader]', new RegExp(MEMBER.replaceAll('.', '\\.')));
    // The build of the member serving the page, in the words of `kcm-manager --version` (issue 34).
    await waitForText('footer [data-build]', new RegExp(`^kcm ${KCM_VERSION.replaceAll('.', '\\.')} \\(kcm-protocol ${KCM_PROTOCOL}\\)$`));
    // Set once: a reload would lose it.
    await page.evaluate(() => Object.assign(window, { __sameDocument: true }));
  });

  it("shows a running create_cluster's progress, then the cluster's nodes with master and standbys and its compute node", async () => {
    const ack = await emit(MEMBER, 'create_cluster', clusterParas({ nick_name: NICK_NAME, computer_iplists: [] }));
    // The cluster is listed while it is being created: open it to drill down as it comes up.
    const cluster = page.locator('details.cluster', { hasText: 'demo' });
    await cluster.locator('summary').click({ timeout: 30_000 });
    await waitForText(`tr[data-job="${ack.job_id}"] [data-progress]`, /^step \d+\/\d+ \S/, 30_000);
    const running = await shot('1-create-cluster-running.png');
    if (process.env.KCM_CONSOLE_SCREENSHOT) await copyFile(running, process.env.KCM_CONSOLE_SCREENSHOT);

    const end = await waitForJobEnd([MEMBER], ack.job_id, 90_000);
    expect(end.status, end.error_info).toBe('done');
    await waitForText(`tr[data-job="${ack.job_id}"]`, /done/);
    const clusterId = (end.attachment as { cluster_id: string }).cluster_id;
    expect(await page.locator(`tr[data-job="${ack.job_id}"] td`).nth(2).textContent()).toBe(clusterId);
    await page.waitForFunction(() => document.querySelectorAll('details.cluster tr[data-node] [data-status="online"]').length === 3, undefined, { timeout: 30_000, polling: 100 });
    const roles = await cluster.locator('tr[data-node] td.role').allTextContents();
    expect(roles.sort()).toEqual(['master', 'standby', 'standby']);
    const comp = (end.attachment as { list_comp: { hostaddr: string; port: string }[] }).list_comp[0];
    await waitForText(`tr[data-comp="${comp.hostaddr}:${comp.port}"]`, /online/);
    await shot('2-cluster-detail.png');

    // The nick name is shown as the text it is, and nothing in it ran.
    expect(await cluster.locator('summary b').first().textContent()).toBe(NICK_NAME);
    expect(await page.evaluate(() => window.__xss)).toBeUndefined();
  });

  it('picks up a change of the fleet without reloading the page', async () => {
    const machine = page.locator('tr[data-machine="127.0.2.3"] [data-status]').first();
    expect(await machine.textContent()).toBe('online');
    const dead = await f.runJob('set_machine', { hostaddr: '127.0.2.3', node_stats: 'dead' });
    expect(dead.status, dead.error_info).toBe('done');
    await waitForText('tr[data-machine="127.0.2.3"]', /offline/, 10_000);
    await shot('3-machine-set-dead.png');
    const running = await f.runJob('set_machine', { hostaddr: '127.0.2.3', node_stats: 'running' });
    expect(running.status, running.error_info).toBe('done');
    await waitForText('tr[data-machine="127.0.2.3"]', /online/, 10_000);
    expect(await page.evaluate(() => window.__sameDocument)).toBe(true);
    expect(pageErrors).toEqual([]);
  });

  it('shows a refused token and asks for another', async () => {
    await page.evaluate(() => sessionStorage.setItem('kcm.console.token', 'not-a-token'));
    await waitForText('.login [role="alert"]', /refused the token \(401\)/, 10_000);
    await page.fill('#token', TEST_TOKENS.viewer);
    await page.click('.login button[type="submit"]');
    await waitForText('#jobs', /set_machine/, 10_000);
  });
});
