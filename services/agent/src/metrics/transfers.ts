// Transfers this agent receives, by what they are for: `backup` (a storage agent taking a
// backup stream into its storage), `rebuild` (a new or rebuilt standby receiving a copy of
// its source), `restore` (an instance reading a stored backup or archived binlog back). The
// code that receives knows the kind but not which agent of the process it serves (tests run
// several in one process), so the agent's server runs every call inside its recorder
// (servingRecorder, a server interceptor) and receivedTransfer() picks it up from there; a
// transfer started outside a served call (a unit test) is not counted.

import { AsyncLocalStorage } from 'node:async_hooks';
import * as grpc from '@grpc/grpc-js';

export type TransferKind = 'backup' | 'rebuild' | 'restore';

export interface TransferRecorder {
  received(kind: TransferKind, bytes: number): void;
  ended(kind: TransferKind, result: 'ok' | 'failed'): void;
}

export interface ReceivedTransfer {
  add(bytes: number): void;
  /** Once, when the transfer ended; later calls are ignored. */
  end(result: 'ok' | 'failed'): void;
}

const serving = new AsyncLocalStorage<TransferRecorder>();

/** Runs each call's handler inside `recorder` (handlers start at half close, as in tls/guard.ts). */
export function servingRecorder(recorder: TransferRecorder): grpc.ServerInterceptor {
  return (_method, call) =>
    new grpc.ServerInterceptingCall(call, {
      start(next) {
        next({ onReceiveHalfClose: (pass) => serving.run(recorder, pass) });
      },
    });
}

/** A transfer of `kind` starting now, counted for the agent serving the current call. */
export function receivedTransfer(kind: TransferKind): ReceivedTransfer {
  const recorder = serving.getStore();
  let ended = false;
  return {
    add(bytes) {
      if (bytes > 0) recorder?.received(kind, bytes);
    },
    end(result) {
      if (ended) return;
      ended = true;
      recorder?.ended(kind, result);
    },
  };
}

/** The stream's pieces, counted as one received transfer of `kind` (ended ok when the stream ends, failed when it throws). */
export async function* countedTransfer(kind: TransferKind, source: AsyncIterable<Buffer>): AsyncGenerator<Buffer> {
  const transfer = receivedTransfer(kind);
  try {
    for await (const piece of source) {
      transfer.add(piece.length);
      yield piece;
    }
    transfer.end('ok');
  } catch (err) {
    transfer.end('failed');
    throw err;
  } finally {
    // A reader that stopped early (return()) did not get the whole object: not a finished transfer.
    transfer.end('failed');
  }
}
