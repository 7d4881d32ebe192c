import { describe, expect, it } from 'vitest';
import { describeProgress, fractionDone, progressOf, ttyProgressView } from '../src/progress';
import { displayWidth, renderAttachment, renderTable } from '../src/tables';

describe('tables', () => {
  it('aligns columns by display width, counting wide characters as two', () => {
    expect(displayWidth('集群a')).toBe(5);
    const table = renderTable([
      { nick_name: '商城', shards: '2' },
      { nick_name: 'shop', shards: '10' },
    ]);
    expect(table.split('\n')).toEqual(['NICK_NAME  SHARDS', '---------  ------', '商城       2', 'shop       10']);
  });

  it('renders cluster detail: scalars, then lists, with each shard\'s nodes titled by the shard', () => {
    const text = renderAttachment({
      cluster_name: 'cluster_1700000000_000001',
      nick_name: 'shop',
      list_comp: [{ comp_name: 'comp_1', hostaddr: '127.0.2.4', port: '5432', status: 'online' }],
      list_shard: [
        {
          shard_name: 'shard_1',
          nodes: '2',
          list_node: [
            { hostaddr: '127.0.2.1', port: '57001', status: 'online', master: 'true' },
            { hostaddr: '127.0.2.2', port: '57001', status: 'offline', master: 'false' },
          ],
        },
      ],
    });
    expect(text).toBe(
      [
        'cluster_name: cluster_1700000000_000001',
        'nick_name:    shop',
        '',
        'list_comp (1):',
        '  COMP_NAME  HOSTADDR   PORT  STATUS',
        '  ---------  ---------  ----  ------',
        '  comp_1     127.0.2.4  5432  online',
        '',
        'list_shard (1):',
        '  SHARD_NAME  NODES',
        '  ----------  -----',
        '  shard_1     2',
        '  list_node of shard_name shard_1 (2):',
        '    HOSTADDR   PORT   STATUS   MASTER',
        '    ---------  -----  -------  ------',
        '    127.0.2.1  57001  online   true',
        '    127.0.2.2  57001  offline  false',
      ].join('\n'),
    );
  });

  it('a column named like an Object.prototype member is blank in a row that lacks it', () => {
    const table = renderTable([
      { id: '1', constructor: 'x', toString: 'y' },
      { id: '2' },
    ]);
    expect(table.split('\n')).toEqual(['ID  CONSTRUCTOR  TOSTRING', '--  -----------  --------', '1   x            y', '2   -            -']);
  });

  it('says when there is nothing to show and marks empty lists', () => {
    expect(renderAttachment({})).toBe('(no result fields)');
    expect(renderAttachment({ list_cluster: [] })).toBe('list_cluster: (none)');
  });
});

describe('progress', () => {
  it('reads step, units and numbers sent as strings', () => {
    const p = progressOf({ progress: { step: '2', steps: '4', step_name: 'copy_rows', done: '25', total: '100', unit: 'rows' } });
    expect(p).toEqual({ step: 2, steps: 4, stepName: 'copy_rows', done: 25, total: 100, unit: 'rows' });
    expect(fractionDone(p!)).toBeCloseTo(0.3125);
    expect(describeProgress(p!)).toBe('step 2/4 copy_rows, 25/100 rows');
  });

  it('has no fraction without a step count, and ignores an attachment without progress', () => {
    expect(fractionDone({ stepName: 'x' })).toBeUndefined();
    expect(progressOf({ result: 1 })).toBeUndefined();
    expect(progressOf(null)).toBeUndefined();
  });

  it('a terminal bar is cut to the terminal width, and a terminal reporting no width gets a usable default', () => {
    const reply = { version: '1.0', error_code: '0', error_info: '', status: 'ongoing' as const, job_id: '7', job_type: 'create_cluster', attachment: { progress: { step: 1, steps: 2, step_name: 'x'.repeat(200) } } };
    for (const [columns, width] of [[60, 59], [0, 99], [undefined, 99]] as const) {
      let written = '';
      ttyProgressView({ write: (t: string) => (written += t), isTTY: true, columns }).update(reply);
      const line = written.replace('\r\x1b[2K', '');
      expect(line.length).toBe(width);
      expect(line.endsWith('…')).toBe(true);
    }
  });
});
