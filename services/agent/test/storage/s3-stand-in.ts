// s3rver (npm), the S3-compatible STAND-IN the tests use for a real S3 (Ceph's radosgw is too
// heavy for these machines): a real HTTP server speaking the S3 REST API on a loopback
// address, storing objects in a directory. It records every request it answered (method,
// path, partNumber, uploadId, status), which is how a test shows which parts were sent.
// What it does not prove against a real S3: docs/backup-s3.md.

import type { Server } from 'node:http';
import S3rver from 's3rver';

export interface StandInRequest {
  method: string;
  key: string;
  partNumber?: number;
  uploadId?: string;
  status: number;
}

export interface S3StandIn {
  endpoint: string;
  address: string;
  port: number;
  bucket: string;
  /** The directory s3rver keeps the bucket's objects in. */
  directory: string;
  requests: StandInRequest[];
  credentials: { access_key_id: string; secret_access_key: string };
  close(): Promise<void>;
}

/** s3rver's default credentials (it checks signatures against them). */
const CREDENTIALS = { access_key_id: 'S3RVER', secret_access_key: 'S3RVER' };

export async function startS3StandIn(address: string, port: number, directory: string, bucket = 'kcm-backups'): Promise<S3StandIn> {
  const s3rver = new S3rver({ address, port, directory, silent: true, configureBuckets: [{ name: bucket }] });
  await s3rver.run();
  const server = s3rver.httpServer as Server;
  const requests: StandInRequest[] = [];
  server.on('request', (req, res) => {
    const url = new URL(req.url ?? '/', `http://${address}`);
    res.on('finish', () => {
      const part = url.searchParams.get('partNumber');
      requests.push({
        method: req.method ?? '',
        key: decodeURIComponent(url.pathname.replace(`/${bucket}/`, '')),
        ...(part ? { partNumber: Number(part) } : {}),
        ...(url.searchParams.get('uploadId') ? { uploadId: url.searchParams.get('uploadId')! } : {}),
        status: res.statusCode,
      });
    });
  });
  return { endpoint: `http://${address}:${port}`, address, port, bucket, directory, requests, credentials: CREDENTIALS, close: () => s3rver.close() as unknown as Promise<void> };
}

/** The part uploads the stand-in stored (status 200), in the order it answered them. */
export const storedParts = (s: S3StandIn, key: string) => s.requests.filter((r) => r.method === 'PUT' && r.partNumber !== undefined && r.status === 200 && r.key.endsWith(key));
