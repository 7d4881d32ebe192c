// Where the shared corpus of histories with known verdicts lives: /work/shared beside the
// clone (the same layout in CI), read-only. Resolved from this file, not the cwd.

import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

export const CORPUS_DIR = fileURLToPath(new URL('../../../../../shared/testdata/linearizability/', import.meta.url));

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
