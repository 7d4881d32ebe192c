// Where the shared corpus of histories with known verdicts lives, read-only: the
// KCM_LINEARIZABILITY_CORPUS directory if set, else `shared/` beside the clone (the
// workplace layout: /work/main next to /work/shared), else /work/shared itself, so a
// clone made elsewhere (a scratch CI checkout in /tmp) still finds it. Never skipped: a
// missing corpus fails the tests that need it.

import { existsSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

function corpusDir(): string {
  const candidates = [
    process.env.KCM_LINEARIZABILITY_CORPUS,
    fileURLToPath(new URL('../../../../../shared/testdata/linearizability/', import.meta.url)),
    '/work/shared/testdata/linearizability/',
  ].filter((dir): dir is string => dir !== undefined && dir !== '');
  return candidates.find((dir) => existsSync(`${dir}/jepsen-verdicts.txt`)) ?? candidates[0];
}

export const CORPUS_DIR = corpusDir();

export interface JepsenCase {
  file: string;
  linearizable: boolean;
}

/** The Jepsen logs that `jepsen-verdicts.txt` gives a verdict for. */
export function jepsenCases(): JepsenCase[] {
  return readFileSync(`${CORPUS_DIR}/jepsen-verdicts.txt`, 'utf8')
    .split('\n')
    .filter((line) => line.trim() !== '')
    .map((line) => {
      const [file, verdict] = line.trim().split(/\s+/);
      if (verdict !== 'linearizable' && verdict !== 'not-linearizable') throw new Error(`unknown verdict in: ${line}`);
      return { file: `jepsen/${file}`, linearizable: verdict === 'linearizable' };
    });
}

/** The key-value histories: `-ok` ones are linearizable, `-bad` ones are not. */
export const KV_CASES = ['c01-ok', 'c01-bad', 'c10-ok', 'c10-bad', 'c50-ok', 'c50-bad'].map((name) => ({
  file: `kv/${name}.txt`,
  linearizable: name.endsWith('-ok'),
}));

export function readCorpusFile(file: string): string {
  return readFileSync(`${CORPUS_DIR}/${file}`, 'utf8');
}
