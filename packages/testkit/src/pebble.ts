import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { freeTcpPort } from '@tether/embedded-postgres';
import { spawnProcess, type ManagedProcess } from './process.js';
import { waitFor } from './wait.js';

// A real ACME CA for certificate tests: Debian's pebble (Let's Encrypt's test
// CA) with its own HTTPS certificate made here (its root is what Caddy must
// trust), validating HTTP-01 challenges on the port the proxy serves HTTP on,
// and resolving names through pebble-challtestsrv, a small DNS server whose
// answers the test sets (every name answers 127.0.0.1 unless told otherwise).
// Never PEBBLE_VA_ALWAYS_VALID: validation is real.

export interface TestPebble {
  /** The ACME directory URL. */
  directory: string;
  /** PEM file of the root of pebble's own HTTPS certificate (TETHER_PROXY_ACME_CA_ROOT). */
  caRoot: string;
  /** `127.0.0.1:PORT` of the DNS server pebble resolves names with (pebble-challtestsrv): the answers setAddress sets. */
  dnsServer: string;
  /** Makes `host` resolve to `address` for pebble's validation (an address no proxy serves makes it fail). */
  setAddress(host: string, address: string): Promise<void>;
  stop(): Promise<void>;
}

const portOpen = (port: number) =>
  new Promise<boolean>((resolve) => {
    const socket = net.connect(port, '127.0.0.1');
    socket.once('connect', () => (socket.destroy(), resolve(true)));
    socket.once('error', () => resolve(false));
  });

export async function startPebble(options: { httpPort: number }): Promise<TestPebble> {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'tether-pebble-'));
  const [acmePort, mgmtPort, tlsPort, dnsPort, dnsMgmtPort] = await Promise.all([freeTcpPort(), freeTcpPort(), freeTcpPort(), freeTcpPort(), freeTcpPort()]);
  const cert = path.join(dir, 'cert.pem');
  const key = path.join(dir, 'key.pem');
  execFileSync('openssl', ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-keyout', key, '-out', cert, '-days', '7', '-subj', '/CN=tether test pebble', '-addext', 'subjectAltName=IP:127.0.0.1,DNS:localhost'], { stdio: 'ignore' });
  const config = path.join(dir, 'pebble-config.json');
  writeFileSync(
    config,
    JSON.stringify({
      pebble: {
        listenAddress: `127.0.0.1:${acmePort}`,
        managementListenAddress: `127.0.0.1:${mgmtPort}`,
        certificate: cert,
        privateKey: key,
        httpPort: options.httpPort,
        tlsPort,
        ocspResponderURL: '',
        externalAccountBindingRequired: false,
      },
    }),
  );
  const processes: ManagedProcess[] = [];
  const stop = async () => {
    for (const p of processes) await p.stop(2_000);
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    processes.push(
      spawnProcess('pebble-challtestsrv', ['-dns01', `127.0.0.1:${dnsPort}`, '-http01', '', '-https01', '', '-tlsalpn01', '', '-management', `127.0.0.1:${dnsMgmtPort}`, '-defaultIPv4', '127.0.0.1', '-defaultIPv6', '']),
    );
    processes.push(
      spawnProcess('pebble', ['-config', config, '-dnsserver', `127.0.0.1:${dnsPort}`], {
        env: { ...process.env, PEBBLE_VA_NOSLEEP: '1', PEBBLE_WFE_NONCEREJECT: '0', PEBBLE_AUTHZREUSE: '0' },
      }),
    );
    await waitFor(async () => (await portOpen(acmePort)) && (await portOpen(dnsMgmtPort)), { timeoutMs: 15_000, message: `pebble and its DNS server listening\n${processes.map((p) => p.output()).join('\n')}` });
  } catch (error) {
    await stop();
    throw error;
  }
  return {
    directory: `https://127.0.0.1:${acmePort}/dir`,
    caRoot: cert,
    dnsServer: `127.0.0.1:${dnsPort}`,
    async setAddress(host, address) {
      const res = await fetch(`http://127.0.0.1:${dnsMgmtPort}/add-a`, { method: 'POST', body: JSON.stringify({ host, addresses: [address] }) });
      if (!res.ok) throw new Error(`challtestsrv add-a ${host}: ${res.status}`);
    },
    stop,
  };
}
