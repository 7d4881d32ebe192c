// Secrets at rest: the box itself, the config rule that a manager without a key does not
// start, and a create_cluster whose replicated state holds no clear password.

import { chmodSync, mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import { afterAll, describe, expect, it } from 'vitest';
import { silentLogger } from '@kcm/common';
import { MemoryStorage } from '@kcm/raft';
import { buildManager } from '../../src/app';
import { parseManagerConfig } from '../../src/config';
import { SecretBox, secretBoxFor } from '../../src/secrets/secret-box';
import { HIDDEN_SECRET, revealSealed } from '../../src/secrets/reveal';
import { openTestAccounts } from '../../../../test/helpers/secrets';
import { createParas, request, startHarness } from '../jobs/grow-harness';

const dir = mkdtempSync(path.join(os.tmpdir(), 'kcm-secrets-'));
afterAll(() => {});

function keyFile(bytes: Buffer, mode = 0o600): string {
  const file = path.join(dir, `key-${randomBytes(4).toString('hex')}`);
  writeFileSync(file, bytes, { mode });
  chmodSync(file, mode);
  return file;
}

describe('SecretBox', () => {
  const box = SecretBox.withKey(randomBytes(32));

  it('seals to text that does not contain the secret, differs every time, and opens again', () => {
    const a = box.seal('Sup3r-secret_pw');
    const b = box.seal('Sup3r-secret_pw');
    expect(a).not.toContain('Sup3r');
    expect(a).not.toBe(b);
    expect(box.open(a)).toBe('Sup3r-secret_pw');
  });

  it('refuses another key and an altered text without quoting either', () => {
    const sealed = box.seal('Sup3r-secret_pw');
    expect(() => SecretBox.withKey(randomBytes(32)).open(sealed)).toThrow(/does not open with this manager's secrets key/);
    const altered = sealed.slice(0, -2) + (sealed.endsWith('A') ? 'BB' : 'AA');
    expect(() => box.open(altered)).toThrow(/does not open/);
    expect(() => box.open('clear-text')).toThrow(/not a sealed secret/);
  });

  it('get_status shows sealed values opened to an allowed caller and hidden to any other', () => {
    const result = { cluster_id: '1', storage_pwd: box.seal('pw-one'), list: [{ computer_pwd: box.seal('pw-two') }] };
    expect(revealSealed(result, box, true)).toEqual({ cluster_id: '1', storage_pwd: 'pw-one', list: [{ computer_pwd: 'pw-two' }] });
    expect(revealSealed(result, box, false)).toEqual({ cluster_id: '1', storage_pwd: HIDDEN_SECRET, list: [{ computer_pwd: HIDDEN_SECRET }] });
  });
});

describe('the managers\' secrets key', () => {
  it('is required: without secretsKeyFile a manager refuses to start unless insecure', async () => {
    const config = parseManagerConfig({ member: '127.0.99.251:1', dataDir: '/nonexistent', agentPort: 1, logLevel: 'silent' });
    await expect(buildManager(config, { logger: silentLogger(), storage: MemoryStorage.bootstrap(['127.0.99.251:1']) })).rejects.toThrow(/secretsKeyFile is required/);
    expect(secretBoxFor({ insecure: true }).sealsForReal).toBe(false);
  });

  it('must be 32 bytes and readable by its owner only', () => {
    expect(() => secretBoxFor({ secretsKeyFile: keyFile(randomBytes(16)) })).toThrow(/must hold 32 bytes/);
    expect(() => secretBoxFor({ secretsKeyFile: keyFile(randomBytes(32), 0o644) })).toThrow(/readable by others/);
    expect(secretBoxFor({ secretsKeyFile: keyFile(randomBytes(32)) }).sealsForReal).toBe(true);
  });
});

describe('create_cluster with secrets at rest', () => {
  it('commits only sealed passwords: the state and its snapshot image hold none in clear, the agents get them opened', async () => {
    const h = await startHarness({ hosts: ['10.0.0.1', '10.0.0.2', '10.0.0.3'], portsPerMachine: 10 });
    const status = await h.run('create_cluster', createParas({ cpu_limit_node: 'share', storage_iplists: [], shards: '1', comps: '1' }));
    expect(status.status).toBe('done');
    const cluster = Object.values(h.store.s.clusters)[0];
    const clear = Object.values(openTestAccounts(cluster.accounts)).map((a) => a.password);
    const image = JSON.stringify(h.store.s);
    for (const password of clear) expect(image.includes(password)).toBe(false);
    // The agents were given the real passwords, and the creator's get_status shows them.
    const install = h.calls.find((c) => c.method === 'mariadb.install')!;
    expect(install.request.admin.password).toBe(clear[0]);
    expect(status.attachment).toMatchObject({ storage_pwd: clear[2], computer_pwd: clear[3] });
  });
});

describe('who sees create_cluster\'s passwords in get_status', () => {
  it('the token that created the cluster and admins see them; another operator, a viewer and a caller with no identity see them hidden', async () => {
    const h = await startHarness({ hosts: ['10.0.0.1', '10.0.0.2', '10.0.0.3'], portsPerMachine: 10 });
    const creator = { name: 'alice', role: 'operator' } as const;
    const { jobId } = await h.manager.service.submitJob(request('create_cluster', createParas({ cpu_limit_node: 'share', storage_iplists: [], shards: '1', comps: '1' })), { identity: creator });
    const statusAs = (identity?: { name: string; role: 'viewer' | 'operator' | 'admin' }) => h.manager.service.getStatus(jobId, identity ? { identity } : {});
    for (let i = 0; i < 200 && (await statusAs(creator)).status !== 'done'; i++) await new Promise((r) => setTimeout(r, 50));
    const cluster = Object.values(h.store.s.clusters)[0];
    const { storage, computer } = openTestAccounts(cluster.accounts);
    const shown = { storage_pwd: storage.password, computer_pwd: computer.password };
    const hidden = { storage_pwd: HIDDEN_SECRET, computer_pwd: HIDDEN_SECRET };
    expect((await statusAs(creator)).attachment).toMatchObject(shown);
    expect((await statusAs({ name: 'root', role: 'admin' })).attachment).toMatchObject(shown);
    expect((await statusAs({ name: 'bob', role: 'operator' })).attachment).toMatchObject(hidden);
    expect((await statusAs({ name: 'alice-viewer', role: 'viewer' })).attachment).toMatchObject(hidden);
    expect((await statusAs()).attachment).toMatchObject(hidden);
    // Everything else in the result is there for everyone.
    expect((await statusAs({ name: 'bob', role: 'operator' })).attachment).toMatchObject({ cluster_id: cluster.id, storage_user: storage.user });
  });
});
