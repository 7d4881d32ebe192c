// npx tsx bench/backup/plane-pipe.ts <file> [--window-mb N] [--cipher NAME] [--plain] [--recv]
//
// The backup's path outside a cluster, to compare one change at a time on a shared machine:
// `zstd --fast=1 -T2 < file` -> this process (pipe reads gathered into 1 MiB frames, written
// to a mutual TLS socket as the plane's server does) -> a receiver process (sha256 + writev
// to a file in 4 MiB batches, as pull-backup.ts does). Prints wall time and each side's CPU.
// --window-mb 0 waits for the socket to drain after every frame (the plane before);
// N keeps up to N MiB queued on the socket. --plain: plain TCP instead of TLS (to size TLS's
// share of the agents' CPU; the plane itself is always mutual TLS).

import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { open, rm } from 'node:fs/promises';
import * as net from 'node:net';
import * as tls from 'node:tls';
import { parseArgs } from 'node:util';
import { readFileSync } from 'node:fs';
import { testCert } from '../../test/helpers/pki';

const { values, positionals } = parseArgs({ allowPositionals: true, options: { 'window-mb': { type: 'string', default: '0' }, cipher: { type: 'string' }, recv: { type: 'boolean', default: false }, plain: { type: 'boolean', default: false }, port: { type: 'string', default: '0' } } });
// The receiver uses the sender's certificate files (a test PKI is made per process).
const files = process.env.PLANE_PIPE_CERTS ? (JSON.parse(process.env.PLANE_PIPE_CERTS) as { ca: string; cert: string; key: string }) : testCert('agent', ['127.0.0.1']);
const material = { ca: readFileSync(files.ca), cert: readFileSync(files.cert), key: readFileSync(files.key) };
const cpu = () => {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1e6;
};

if (values.recv) {
  // Receiver: connects, reads everything, hashes and writes in 4 MiB batches.
  const out = await open('/tmp/srcprof/plane-pipe.out', 'w');
  const hash = createHash('sha256');
  const socket = values.plain
    ? net.connect({ host: '127.0.0.1', port: Number(values.port) })
    : tls.connect({ host: '127.0.0.1', port: Number(values.port), ...material, minVersion: 'TLSv1.3', ...(values.cipher ? { ciphersuites: values.cipher } : {}) });
  let batch: Buffer[] = [];
  let size = 0;
  let inFlight: Promise<unknown> = Promise.resolve();
  const c0 = cpu();
  socket.on('data', (chunk: Buffer) => {
    batch.push(chunk);
    size += chunk.length;
    if (size >= 4 * 1024 * 1024) {
      const b = batch;
      batch = [];
      size = 0;
      for (const p of b) hash.update(p);
      const prev = inFlight;
      inFlight = prev.then(() => out.writev(b));
      socket.pause();
      void prev.then(() => socket.resume());
    }
  });
  socket.on('end', async () => {
    for (const p of batch) hash.update(p);
    await inFlight;
    await out.writev(batch);
    await out.close();
    process.stdout.write(`${(cpu() - c0).toFixed(2)}\n`);
    process.exit(0);
  });
} else {
  const windowBytes = Number(values['window-mb']) * 1024 * 1024;
  const onConnection = async (socket: net.Socket) => {
    const started = performance.now();
    const c0 = cpu();
    const zstd = spawn('/usr/bin/zstd', ['--fast=1', '-T2', '-c', positionals[0]], { stdio: ['ignore', 'pipe', 'ignore'] });
    let held: Buffer[] = [];
    let heldBytes = 0;
    const pending: { bytes: number; done: Promise<void> }[] = [];
    let queued = 0;
    const send = async (pieces: Buffer[], length: number) => {
      const header = Buffer.alloc(5);
      header.writeUInt8(1, 0);
      header.writeUInt32BE(length, 1);
      socket.cork();
      socket.write(header);
      let flowing = true;
      let done!: () => void;
      const written = new Promise<void>((r) => (done = r));
      for (let i = 0; i < pieces.length; i++) flowing = socket.write(pieces[i], i === pieces.length - 1 ? () => done() : undefined);
      socket.uncork();
      if (windowBytes === 0) {
        if (!flowing) await new Promise((r) => socket.once('drain', r));
        return;
      }
      pending.push({ bytes: length, done: written });
      queued += length;
      while (queued > windowBytes) {
        const oldest = pending.shift()!;
        await oldest.done;
        queued -= oldest.bytes;
      }
    };
    for await (const piece of zstd.stdout as AsyncIterable<Buffer>) {
      held.push(piece);
      heldBytes += piece.length;
      if (heldBytes >= 1024 * 1024) {
        const h = held;
        const n = heldBytes;
        held = [];
        heldBytes = 0;
        await send(h, n);
      }
    }
    if (heldBytes) await send(held, heldBytes);
    socket.end();
    socket.once('close', () => {
      process.stdout.write(`sender ${(cpu() - c0).toFixed(2)} s CPU, ${((performance.now() - started) / 1000).toFixed(2)} s wall`);
      server.close();
    });
  };
  const server = values.plain
    ? net.createServer(onConnection)
    : tls.createServer({ ...material, requestCert: true, rejectUnauthorized: true, minVersion: 'TLSv1.3', ...(values.cipher ? { ciphersuites: values.cipher } : {}) }, onConnection);
  server.listen(0, '127.0.0.1', () => {
    const port = (server.address() as { port: number }).port;
    const recv = spawn(process.execPath, ['--import', 'tsx', new URL(import.meta.url).pathname, '--recv', '--port', String(port), ...(values.cipher ? ['--cipher', values.cipher] : []), ...(values.plain ? ['--plain'] : [])], { stdio: ['ignore', 'pipe', 'inherit'], env: { ...process.env, PLANE_PIPE_CERTS: JSON.stringify(files) } });
    let out = '';
    recv.stdout.on('data', (d) => (out += d));
    recv.on('exit', () => {
      process.stdout.write(`   receiver ${out.trim()} s CPU\n`);
      void rm('/tmp/srcprof/plane-pipe.out', { force: true });
    });
  });
}
