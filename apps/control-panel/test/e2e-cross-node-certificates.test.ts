import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createHostNetwork, ensureHostNetworkSupport, ensurePebble, hostAgentEnv, waitFor, type HostNetwork, type ManagedProcess } from '@tether/testkit';
import { generateKey } from '../src/secrets/keyring.js';
import { ECHO_PORT, ensureEchoImage } from './helpers/echo-image.js';
import { startPanel, type Panel } from './helpers/panel-harness.js';
import { reloadsOf } from './helpers/routed-host.js';
import { explain, startHostAgents, stopHostAgents, type NodeOnHost } from './helpers/host-agents.js';

// One certificate issuer per domain (issue 37, capability certificates.share)
// end to end on two hosts of createHostNetwork: real panel (with a secrets
// key), real agents in container mode with TLS auto and the ACME issuer,
// pebble and its DNS server (pebble-challtestsrv) in the hub namespace. A
// 2-replica service runs on x1 and x2; the panel picks x1 as the domain's
// issuer. The CA's DNS names x2 only, so pebble's HTTP-01 validation reaches
// x2, whose Caddy forwards it to x1 over the private network. Then x1 reports
// the certificate, the panel relays it to x2, and x2 serves the same serial:
// one order at the CA, no Caddy load on either node after the first.

const support = await ensureHostNetworkSupport();
const pebbleReady = (await ensurePebble()).available;

const DOMAIN = 'shop.example.test';
const ACME_PORT = 14000;
const MGMT_PORT = 15000;
const DNS_PORT = 8053;
const DNS_MGMT_PORT = 8055;
/** Where pebble's HTTPS root sits inside each agent's Caddy container (its data mount). */
const CA_ROOT_IN_CADDY = '/data/pebble-https-root.pem';


describe.skipIf(!support.available || !pebbleReady)('one certificate issuer per domain across two hosts', () => {
  let net: HostNetwork;
  let panel: Panel;
  const nodes: NodeOnHost[] = [];
  const processes: ManagedProcess[] = [];
  let pebbleDir = '';
  let pebble: ManagedProcess;
  let issuingRoot = '';
  let loadsAfterSetup: number[] = [];

  const hubExec = async (command: string, args: string[]) => {
    const r = await net.exec(net.hub.netns, command, args);
    if (r.code !== 0) throw new Error(`${command} ${args.join(' ')}: ${r.code}\n${r.stderr}`);
    return r.stdout;
  };
  /** The certificate a TLS handshake from the hub to `n` with SNI = the domain gets, verified against pebble's issuing root. */
  const handshake = async (n: NodeOnHost) => {
    const r = await net.exec(net.hub.netns, 'sh', [
      '-c',
      `echo | timeout 20 openssl s_client -connect ${n.host.address}:443 -servername ${DOMAIN} -verify_return_error -verify_hostname ${DOMAIN} -CAfile ${path.join(pebbleDir, 'issuing-root.pem')} 2>/dev/null | openssl x509 -noout -serial -issuer -enddate`,
    ]);
    return r.code === 0 && r.stdout.includes('serial=') ? r.stdout.trim() : null;
  };
  const loads = async () => Promise.all(nodes.map(async (n) => (await reloadsOf(panel, n.id)).length));

  beforeAll(async () => {
    net = await createHostNetwork({ tag: 'xcert', hosts: 2 });
    const image = await ensureEchoImage();
    await net.startDaemons([image]);

    // pebble in the hub: its own HTTPS certificate names the hub's address (the agents' Caddys talk to it there).
    pebbleDir = mkdtempSync(path.join(os.tmpdir(), 'tether-xcert-pebble-'));
    const cert = path.join(pebbleDir, 'cert.pem');
    const key = path.join(pebbleDir, 'key.pem');
    execFileSync('openssl', ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-keyout', key, '-out', cert, '-days', '7', '-subj', '/CN=tether test pebble', '-addext', `subjectAltName=IP:${net.hub.address},IP:127.0.0.1`], { stdio: 'ignore' });
    const config = path.join(pebbleDir, 'pebble-config.json');
    writeFileSync(
      config,
      JSON.stringify({
        pebble: { listenAddress: `${net.hub.address}:${ACME_PORT}`, managementListenAddress: `127.0.0.1:${MGMT_PORT}`, certificate: cert, privateKey: key, httpPort: 80, tlsPort: 443, ocspResponderURL: '', externalAccountBindingRequired: false },
      }),
    );
    processes.push(
      net.spawnIn(net.hub.netns, 'pebble-challtestsrv', ['-dns01', `127.0.0.1:${DNS_PORT}`, '-http01', '', '-https01', '', '-tlsalpn01', '', '-management', `127.0.0.1:${DNS_MGMT_PORT}`, '-defaultIPv4', '192.0.2.1', '-defaultIPv6', '']),
    );
    pebble = net.spawnIn(net.hub.netns, 'pebble', ['-config', config, '-dnsserver', `127.0.0.1:${DNS_PORT}`], {
      env: { ...process.env, PEBBLE_VA_NOSLEEP: '1', PEBBLE_WFE_NONCEREJECT: '0', PEBBLE_AUTHZREUSE: '0' },
    });
    processes.push(pebble);
    await waitFor(async () => (await net.exec(net.hub.netns, 'curl', ['-sfk', `https://127.0.0.1:${MGMT_PORT}/roots/0`])).code === 0, { timeoutMs: 15_000, message: `pebble up\n${pebble.output()}` });
    issuingRoot = await hubExec('curl', ['-sfk', `https://127.0.0.1:${MGMT_PORT}/roots/0`]);
    writeFileSync(path.join(pebbleDir, 'issuing-root.pem'), issuingRoot);

    panel = await startPanel({
      env: {
        TETHER_SECRETS_KEY: generateKey(),
        TETHER_ALLOCATIONS: 'on',
        TETHER_SCHEDULER_INTERVAL_MS: '200',
        TETHER_HEARTBEAT_INTERVAL_MS: '300',
        TETHER_PING_INTERVAL_MS: '500',
        TETHER_ROUTING_DEBOUNCE_MS: '100',
      },
    });
    const panelUrl = await net.exposePanel(panel.port);
    nodes.push(
      ...(await startHostAgents(panel, net, {
        tag: 'xcert',
        capability: 'certificates.share',
        env: (host, node, stateDir) => {
          // The Caddy container reads the CA's HTTPS root from its data mount.
          mkdirSync(path.join(stateDir, 'caddy', 'data'), { recursive: true });
          writeFileSync(path.join(stateDir, 'caddy', 'data', path.basename(CA_ROOT_IN_CADDY)), execFileSync('cat', [cert]));
          return hostAgentEnv(host, {
            panelUrl,
            token: node.token,
            nodeName: node.name,
            stateDir,
            lookupRefreshMs: 500,
            remoteProbeMs: 300,
            extra: {
              TETHER_PROXY_TLS: 'auto',
              TETHER_PROXY_TLS_ISSUER: 'acme',
              TETHER_PROXY_HTTPS_PORT: '443',
              TETHER_PROXY_ACME_CA: `https://${net.hub.address}:${ACME_PORT}/dir`,
              TETHER_PROXY_ACME_CA_ROOT: CA_ROOT_IN_CADDY,
              TETHER_ROUTE_PROBE_INTERVAL_MS: '0',
            },
          });
        },
      })),
    );
    const team = await panel.api('POST', '/v1/teams', { name: 'xcert' });
    const service = await panel.api('POST', '/v1/services', { teamId: team.body.id, name: 'shop', image, internalPort: ECHO_PORT, replicas: 2, placement: { nodes: ['x1', 'x2'] } });
    expect(service.status).toBe(201);
    expect((await panel.api('POST', '/v1/routes', { domain: DOMAIN, serviceId: service.body.id })).status).toBe(201);
    const deploy = await panel.api('POST', `/v1/services/${service.body.id}/deployments`, {});
    await waitFor(async () => (await panel.api('GET', `/v1/deployments/${deploy.body.id}`)).body.status === 'running', { timeoutMs: 60_000, message: 'release running on both nodes' });
    // The CA's DNS names the non-issuer only: its validation must go through x2's forwarding.
    await hubExec('curl', ['-sf', '-X', 'POST', '-d', JSON.stringify({ host: DOMAIN, addresses: [net.hosts[1]!.address] }), `http://127.0.0.1:${DNS_MGMT_PORT}/add-a`]);
    // The maps naming the issuer are applied within a push or two.
    await new Promise((r) => setTimeout(r, 2_000));
    loadsAfterSetup = await loads();
  }, 240_000);

  afterEach((context) => {
    if (context.task.result?.state !== 'fail') return;
    console.error(explain(nodes, 5_000));
    console.error(`--- pebble:\n${pebble?.output().slice(-4_000)}`);
    console.error(`--- panel warnings:\n${panel.recentLogs()}`);
  });

  afterAll(async () => {
    await stopHostAgents(nodes);
    for (const p of processes) await p.stop(2_000).catch(() => undefined);
    await net?.destroy();
    await panel?.close();
    if (pebbleDir) rmSync(pebbleDir, { recursive: true, force: true });
  }, 60_000);

  it('x1 issues through the challenge x2 forwards; x2 serves the same certificate from the session; one order; no Caddy load', async () => {
    const [x1, x2] = nodes as [NodeOnHost, NodeOnHost];
    // x2's map names x1 as the issuer with its challenge endpoint.
    const row = await panel.prisma.domainCertificate.findUnique({ where: { domain: DOMAIN } });
    expect(row?.issuerNodeId).toBe(x1.id);
    // Before x1 has it, x2 refuses the name (its ask): no certificate of its own.
    expect(await handshake(x2)).toBeNull();

    const started = performance.now();
    const first = await handshake(x1);
    const issuedMs = performance.now() - started;
    expect(first).toMatch(/serial=/);
    const reachedAt = await waitFor(async () => ((await handshake(x2)) === first ? performance.now() : null), { timeoutMs: 20_000, intervalMs: 50, message: 'x2 serves the certificate x1 obtained' });
    console.log(`issuance through x2's forwarded challenge: ${issuedMs.toFixed(0)} ms; on x2 (reported, stored, relayed, installed) ${(reachedAt - started - issuedMs).toFixed(0)} ms later`);
    console.log(first);
    console.log(pebble.output().split('\n').filter((l) => /order|Issued/i.test(l)).join('\n'));

    const issued = pebble.output().match(/Issued certificate serial/g) ?? [];
    expect(issued).toHaveLength(1);
    expect(pebble.output().match(/POST \/order-plz/g) ?? []).toHaveLength(1);
    // x2 never spoke ACME: no account in its Caddy's storage.
    expect(existsSync(path.join(x2.stateDir, 'caddy', 'data', 'caddy', 'acme'))).toBe(false);
    expect(existsSync(path.join(x1.stateDir, 'caddy', 'data', 'caddy', 'acme'))).toBe(true);
    const stored = await panel.prisma.domainCertificate.findUnique({ where: { domain: DOMAIN } });
    expect(stored?.certificatePem).toContain('BEGIN CERTIFICATE');
    expect(await loads()).toEqual(loadsAfterSetup);
  });
});
