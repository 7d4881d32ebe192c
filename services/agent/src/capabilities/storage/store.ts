// What the storage capability stores objects with: one interface, two implementations. A
// root is a directory on this host: an `fs` storage's objects (object-store.ts), or the spool
// of an s3 storage opened earlier on this agent (s3/), whose objects are in its bucket. Put, Get, PullBackup, Verify, List, Delete and the data
// plane's `get` all go through storeFor(root), so every one of them reads and writes either.

import { FsObjectStore } from './object-store';
import { s3StoreOf } from './s3/targets';
import type { ObjectStore } from './store-types';

export type { ObjectStore, StoreWriter } from './store-types';

/** The store a request's root names: an opened s3 storage, else an fs directory. */
export function storeFor(root: string): ObjectStore {
  return s3StoreOf(root) ?? new FsObjectStore(root);
}
