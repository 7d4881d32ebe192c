// Looking at a listener from outside, for the HTTPS tests: which certificate a new TLS
// connection is served, and what a plain-HTTP client gets back from the port.

import { connect as netConnect } from 'node:net';
import { connect as tlsConnect } from 'node:tls';

/** The serial number of the certificate a new TLS connection to host:port is served, trusting `ca`. */
export function servedSerial(host: string, port: number, ca: Buffer): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = tlsConnect({ host, port, ca }, () => {
      const serial = socket.getPeerCertificate().serialNumber;
      socket.end();
      resolve(serial);
    });
    socket.on('error', reject);
  });
}

/** Writes raw bytes to host:port (what a client configured with http:// sends) and reads the whole answer until the server closes. */
export function plainExchange(host: string, port: number, bytes: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = netConnect({ host, port }, () => socket.write(bytes));
    let answer = '';
    socket.on('data', (chunk) => (answer += chunk.toString('utf8')));
    socket.on('end', () => resolve(answer));
    socket.on('error', reject);
  });
}
