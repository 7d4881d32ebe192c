// Restoring the metadata image (a restart, a follower installing the leader's snapshot) a
// piece at a time: at 1,000 hosts / 1,000 clusters / 100,000 kept jobs one JSON.parse of
// the 43 MB image held the event loop for 1.7 s, longer than an election timeout.

import { describe, expect, it } from 'vitest';
import { parseJsonInPieces, runToEnd } from '../../src/meta/snapshot/json-in-pieces';
import { restoreMeta, restoreMetaInPieces, snapshotMeta } from '../../src/meta/snapshot/image';
import { MetaStateMachine } from '../../src/meta/state-machine';
import { loadFleetStateDirectly } from '../../../../bench/scale/meta-state';

const bytesOf = (text: string) => new TextEncoder().encode(text);

const TRICKY = [
  '{"a":1,"b":[1,2,{"c":"x,y}]"}],"d":{"e":null,"f":true,"g":false},"h":-1.5e3}',
  ' { "spaced" : [ 1 , 2 ,3 ] , "empty" : { } , "none" : [ ] } ',
  '{"quote \\" inside":"back\\\\slash","unicode":"héllo ✓ 𝄞","esc":"\\u0041\\n"}',
  '{"__proto__":{"polluted":true},"constructor":1,"toString":"s","k":{"__proto__":[1]}}',
  '[[[[1,2],[3]],{"x":[{"y":"}"}]}],"]",[],{}]',
  '"just a string"',
  '42',
];

describe('parseJsonInPieces', () => {
  it.each([1, 7, 64, 1 << 16])('gives what JSON.parse gives, pieces of %i bytes', (pieceBytes) => {
    for (const text of TRICKY) {
      const parsed = runToEnd(parseJsonInPieces(bytesOf(text), 6, { pieceBytes }));
      expect(parsed).toStrictEqual(JSON.parse(text));
    }
  });

  it('keeps a "__proto__" key as an own member, never as the prototype', () => {
    const parsed = runToEnd(parseJsonInPieces(bytesOf(TRICKY[3]), 6, { pieceBytes: 1 })) as Record<string, unknown>;
    expect(Object.getPrototypeOf(parsed)).toBe(Object.prototype);
    expect(Object.hasOwn(parsed, '__proto__')).toBe(true);
    expect(({} as { polluted?: boolean }).polluted).toBeUndefined();
  });

  it('refuses text that is not one JSON value', () => {
    for (const bad of ['{"a":1', '{"a" 1}', '[1 2]', '{"a":1}x']) {
      expect(() => runToEnd(parseJsonInPieces(bytesOf(bad), 6, { pieceBytes: 1 }))).toThrow(SyntaxError);
    }
  });
});

describe('restoring the metadata image in pieces', () => {
  // 200 hosts, 200 clusters of 3x3+2, 20,000 kept jobs: a 9 MB image.
  const image = snapshotMeta(loadFleetStateDirectly(200, 200, 20_000));

  it('lets the event loop turn while a fleet-scale image is restored, and ends with the same state', async () => {
    const sm = new MetaStateMachine();
    let turns = 0;
    let longestGapMs = 0;
    let last = performance.now();
    let ticking = true;
    const tick = () => {
      turns++;
      longestGapMs = Math.max(longestGapMs, performance.now() - last);
      last = performance.now();
      if (ticking) setImmediate(tick);
    };
    setImmediate(tick);
    await sm.restore(image, { index: 7, term: 1, conf: { voters: [], learners: [] } } as never);
    ticking = false;
    console.log(`restore of a ${(image.byteLength / 1e6).toFixed(1)} MB image: ${turns} event-loop turns, longest gap ${longestGapMs.toFixed(0)} ms`);
    // Before: restore was one JSON.parse, and no turn ran until it ended.
    expect(turns).toBeGreaterThanOrEqual(3);
    expect(sm.appliedIndex()).toBe(7);
    expect(Buffer.from(snapshotMeta(sm.state)).equals(Buffer.from(image))).toBe(true);
    expect(Object.getPrototypeOf(sm.state.jobs)).toBeNull();
    expect(Object.getPrototypeOf(sm.state.machines)).toBeNull();
  }, 60_000);

  it('takes no more than about one piece of the image per step', () => {
    const steps = restoreMetaInPieces(image);
    let pieces = 0;
    while (!steps.next().done) pieces++;
    // 64 KB pieces, plus the steps that turn the dicts back into dicts.
    expect(pieces).toBeGreaterThanOrEqual(Math.floor(image.byteLength / (64 * 1024)));
  });

  it('reads a small image with prototype names as keys exactly as before (restoreMeta, pieces of 1 byte)', () => {
    const text = JSON.stringify({ format: 1, state: { jobs: { __proto__: null, toString: { id: 'toString', stepOutputs: {} } } } })
      .replace('"jobs":{', '"jobs":{"__proto__":{"id":"__proto__","stepOutputs":{}},');
    const whole = restoreMeta(bytesOf(text));
    const inPieces = runToEnd(restoreMetaInPieces(bytesOf(text), 1));
    expect(Object.keys(inPieces.jobs)).toEqual(['__proto__', 'toString']);
    expect(snapshotMeta(inPieces)).toEqual(snapshotMeta(whole));
  });
});
