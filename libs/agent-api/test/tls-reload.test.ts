// Certificates renewed on disk without a restart (tls/reloading.ts): after the files change,
// a new connection to a gRPC server made with serverCredentials() is served with the new
// certificate, a new channel presents the new client certificate, and a connection opened
// before keeps working. A half-written renewal (a key of another certificate) is not used.

import { copyFileSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import * as tls from 'node:tls';
import * as grpc from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { activeTls, channelCredentials, issueCert, loadTlsMaterial, reloadTlsNow, serverCredentials, useInsecure, useTls, type TlsFiles } from '@kcm/agent-api';
import { testCa } from '../../../test/helpers/pki';

const HOST = '127.0.0.1';
const PATH = '/kcm.test.Echo/ClientSerial';
const bytes = { serialize: (b: Buffer) => b, deserialize: (b: Buffer) => b };
const service: grpc.ServiceDefinition = {
  ClientSerial: { path: PATH, requestStream: false, responseStream: false, requestSerialize: bytes.serialize, requestDeserialize: bytes.deserialize, responseSerialize: bytes.serialize, responseDeserialize: bytes.deserialize },
};

/** The serial of the certificate the server presents to a new TLS connection. */
function serverSerial(port: number, client: TlsFiles): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = tls.connect({ host: HOST, port, ca: readFileSync(client.ca), cert: readFileSync(client.cert), key: readFileSync(client.key), ALPNProtocols: ['h2'] }, () => {
      resolve(socket.getPeerX509Certificate()!.serialNumber);
      socket.destroy();
    });
    socket.once('error', reject);
  });
}

/** The serial of the client certificate the server saw on this client's connection. */
function clientSerialSeen(client: grpc.Client): Promise<string> {
  return new Promise((resolve, reject) =>
    client.makeUnaryRequest(PATH, bytes.serialize, bytes.deserialize, Buffer.alloc(0), (err, reply) => (err ? reject(err) : resolve(reply!.toString()))),
  );
}

describe('TLS certificates reloaded without a restart', () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'kcm-tls-reload-'));
  const live = path.join(dir, 'live');
  const renewed = path.join(dir, 'renewed');
  const other = path.join(dir, 'other');
  let files: TlsFiles;
  let server: grpc.Server;
  let port = 0;
  const clients: grpc.Client[] = [];

  beforeAll(async () => {
    files = issueCert(testCa(), live, { name: 'member', role: 'manager', hosts: [HOST] });
    // A long check period: the test looks at the files itself (reloadTlsNow), at the moments it chooses.
    useTls(loadTlsMaterial(files, 'manager'), { checkMs: 3_600_000 });
    server = new grpc.Server();
    server.addService(service, {
      ClientSerial: (call: grpc.ServerUnaryCall<Buffer, Buffer>, callback: grpc.sendUnaryData<Buffer>) =>
        callback(null, Buffer.from(call.getAuthContext().sslPeerCertificate?.serialNumber ?? 'none')),
    });
    port = await new Promise<number>((resolve, reject) => server.bindAsync(`${HOST}:0`, serverCredentials(), (err, p) => (err ? reject(err) : resolve(p))));
  });

  afterAll(() => {
    for (const c of clients) c.close();
    server?.forceShutdown();
    useInsecure();
    rmSync(dir, { recursive: true, force: true });
  });

  // A pool of its own: grpc-js would otherwise hand a new client the connection already open.
  const newClient = () => {
    const client = new grpc.Client(`${HOST}:${port}`, channelCredentials(), { 'grpc.use_local_subchannel_pool': 1 });
    clients.push(client);
    return client;
  };

  it('a new connection sees the renewed certificate; one opened before keeps working', async () => {
    const first = activeTls()!.cert.serialNumber;
    expect(await serverSerial(port, files)).toBe(first);
    const before = newClient();
    expect(await clientSerialSeen(before)).toBe(first);

    const next = issueCert(testCa(), renewed, { name: 'member', role: 'manager', hosts: [HOST] });
    const nextSerial = loadTlsMaterial(next, 'manager').cert.serialNumber;
    expect(nextSerial).not.toBe(first);
    copyFileSync(next.key, files.key);
    copyFileSync(next.cert, files.cert);
    expect(reloadTlsNow()).toBe(true);

    expect(activeTls()!.cert.serialNumber).toBe(nextSerial);
    expect(await serverSerial(port, files)).toBe(nextSerial);
    // A connection made now presents the renewed client certificate; the one from before still
    // has its connection, made with the first certificate, and its calls go on.
    expect(await clientSerialSeen(newClient())).toBe(nextSerial);
    expect(await clientSerialSeen(before)).toBe(first);
  });

  it('a renewal caught half written (the key of another certificate) is not used', async () => {
    const inUse = activeTls()!.cert.serialNumber;
    const foreign = issueCert(testCa(), other, { name: 'member', role: 'manager', hosts: [HOST] });
    copyFileSync(foreign.key, files.key);
    expect(reloadTlsNow()).toBe(false);
    expect(activeTls()!.cert.serialNumber).toBe(inUse);
    expect(await clientSerialSeen(newClient())).toBe(inUse);
    // The matching certificate lands: the set is whole and is taken.
    copyFileSync(foreign.cert, files.cert);
    expect(reloadTlsNow()).toBe(true);
    expect(await serverSerial(port, files)).toBe(loadTlsMaterial(foreign, 'manager').cert.serialNumber);
  });
});
