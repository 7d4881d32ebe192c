// What the storage capability stores objects with: one interface, two implementations. An
// `fs` root is a directory on this host (object-store.ts); an `s3://` root names a bucket
// opened earlier on this agent (s3/). Put, Get, PullBackup, Verify, List, Delete and the data
// plane's `get` all go through storeFor(root), so every one of them reads and writes either.

import { FsObjectStore } from './object-store';
import { isS3Root, s3StoreOf } from './s3/targets';
import type { ObjectStore } from './store-types';

export type { ObjectStore, StoreWriter } from './store-types';

/** The store a request's root names: an opened s3 root, else an fs directory. */
export function storeFor(root: string): ObjectStore {
  return isS3Root(root) ? s3StoreOf(root) : new FsObjectStore(root);
}
