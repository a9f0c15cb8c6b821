// Hostile and careless clients against one panel (issue 25): a real panel
// process (dist/main.js, default limits) on an embedded PostgreSQL, traffic
// from several 127.0.0.x source addresses, all on loopback. In order:
//   1. baseline: another tenant's GET /v1/services/:id and an operator's
//      GET /v1/teams, p50/p99 of --requests each; statements per second the
//      panel sends while nothing happens (pg_stat_statements, its database);
//   2. streams: --streams deployment event streams (GET /v1/deployments/:id/events)
//      of deployments that stay `delivered`, from as many teams and tokens as
//      the per-token and per-team caps need; the same REST figures while they
//      are open, and the statements per second they cost while idle;
//   3. caps: one more token opens streams until refused (which one, which
//      code), and a token of a full team opens one;
//   4. junk upgrades: --junk upgrade attempts kept in flight (a third each:
//      upgrades of /healthz, agent upgrades with made-up tokens, upgrade
//      requests whose headers never end) while --agents agents with real
//      node tokens open sessions (half as many before, without junk): how
//      many got `welcome`, and how fast;
//   5. sign-in flood: wrong fleet-page sign-ins from one address for
//      --flood s: answered per second, how many were checked (401) and
//      refused (429), statements they cost.
// Run from the repository root after `npm run build`:
//
//   pnpm --filter @tether/bench hostile
//
// Figures go to docs/benchmarks.md ("Hostile clients").
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import http from 'node:http';
import net from 'node:net';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import pg from 'pg';
import WebSocket from 'ws';
import { PROTOCOL_VERSION, createIdGenerator, encode } from '@tether/protocol';
import { startEmbeddedPostgres, freeTcpPort } from '@tether/embedded-postgres';

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.resolve(here, '..');
const { values } = parseArgs({
  options: {
    streams: { type: 'string', default: '2000' },
    requests: { type: 'string', default: '300' },
    junk: { type: 'string', default: '1000' },
    agents: { type: 'string', default: '200' },
    window: { type: 'string', default: '10' },
    flood: { type: 'string', default: '5' },
  },
});
const STREAMS = Number(values.streams);
const REQUESTS = Number(values.requests);
const JUNK = Number(values.junk);
const AGENTS = Number(values.agents);
const WINDOW_S = Number(values.window);
const FLOOD_S = Number(values.flood);
// The panel's defaults (docs/operations.md): TETHER_STREAMS_PER_TOKEN, TETHER_STREAMS_PER_TEAM.
const PER_TOKEN = 100;
const PER_TEAM = 500;

const log = (line: string) => console.log(`[${new Date().toISOString().slice(11, 19)}] ${line}`);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const pct = (xs: number[], p: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length ? s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))]! : NaN;
};
const ms = (x: number) => `${x.toFixed(1)} ms`;

/** One keep-alive agent per source address, for ordinary REST calls. */
const agents = new Map<string, http.Agent>();
const agentOf = (from: string) => agents.get(from) ?? agents.set(from, new http.Agent({ keepAlive: true, localAddress: from, maxSockets: 64 })).get(from)!;

let base = '';
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- answers are read ad hoc
async function call(method: string, p: string, token: string | null, body?: unknown, from = '127.0.0.2', headers: Record<string, string> = {}): Promise<{ status: number; body: any; ms: number }> {
  const started = performance.now();
  const payload = body === undefined ? undefined : JSON.stringify(body);
  return new Promise((resolve, reject) => {
    const req = http.request(`${base}${p}`, {
      method,
      agent: agentOf(from),
      headers: { ...(token ? { authorization: `Bearer ${token}` } : {}), ...(payload ? { 'content-type': 'application/json' } : {}), ...headers },
    });
    req.on('response', (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (text += c));
      res.on('end', () => resolve({ status: res.statusCode!, body: text ? JSON.parse(text) : null, ms: performance.now() - started }));
    });
    req.on('error', reject);
    req.end(payload);
  });
}

async function ok<T = any>(method: string, p: string, token: string, body?: unknown): Promise<T> { // eslint-disable-line @typescript-eslint/no-explicit-any
  const res = await call(method, p, token, body);
  if (res.status >= 300) throw new Error(`${method} ${p}: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body as T;
}

/** A node's agent that ACKs what it is sent and never finishes a deployment: they stay `delivered`. */
function ackingAgent(token: string, node: string): Promise<WebSocket> {
  const nextId = createIdGenerator('b');
  const routing = { appliedHash: null, reloadsTotal: 0, reloadsToday: 0, lastReloadAt: null, lastReloadReason: null };
  const runtime = { available: true, error: null };
  const socket = new WebSocket(`${base.replace(/^http/, 'ws')}/v1/agent/connect`, { headers: { authorization: `Bearer ${token}` }, perMessageDeflate: false, localAddress: '127.0.0.3' });
  let seq = 0;
  const beat = setInterval(() => socket.send(encode({ type: 'heartbeat', id: nextId(), seq: seq++, containers: [], runtime, routing })), 5_000);
  socket.on('close', () => clearInterval(beat));
  socket.on('message', (data) => {
    const m = JSON.parse(String(data)) as { type: string; id: string };
    if (m.type === 'deploy' || m.type === 'workloads' || m.type === 'routing.map') socket.send(encode({ type: 'ack', id: nextId(), ref: m.id }));
    if (m.type === 'ping') socket.send(encode({ type: 'pong', id: nextId(), ref: m.id }));
  });
  return new Promise((resolve, reject) => {
    socket.once('open', () => socket.send(encode({ type: 'hello', id: nextId(), node, agentVersion: 'bench-hostile', protocolVersion: PROTOCOL_VERSION, containers: [], runtime, routing })));
    socket.on('message', (data) => String(data).startsWith('{"type":"welcome"') && resolve(socket));
    socket.once('error', reject);
  });
}

/** An event stream held open; resolves with its status once the answer starts (200: after the first event). */
function openStream(deploymentId: string, token: string, from: string): Promise<{ status: number; code?: string; req: http.ClientRequest }> {
  return new Promise((resolve, reject) => {
    const req = http.get(`${base}/v1/deployments/${deploymentId}/events`, { headers: { authorization: `Bearer ${token}` }, agent: false, localAddress: from });
    req.on('response', (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => {
        text += c;
        if (res.statusCode === 200 && text.includes('event: deployment')) resolve({ status: 200, req });
      });
      res.on('end', () => resolve({ status: res.statusCode!, code: (JSON.parse(text || '{}') as { error?: { code?: string } }).error?.code, req }));
      res.on('error', () => undefined);
    });
    req.on('error', (err) => (req.destroyed ? undefined : reject(err)));
  });
}

async function restFigures(label: string, other: { token: string; serviceId: string }, operator: string): Promise<void> {
  const svc: number[] = [];
  const teams: number[] = [];
  for (let i = 0; i < REQUESTS; i++) {
    const a = await call('GET', `/v1/services/${other.serviceId}`, other.token, undefined, '127.0.0.4');
    if (a.status !== 200) throw new Error(`other tenant: ${a.status}`);
    svc.push(a.ms);
    const b = await call('GET', '/v1/teams', operator, undefined, '127.0.0.4');
    teams.push(b.ms);
  }
  log(`${label}: other tenant GET /v1/services/:id p50 ${ms(pct(svc, 50))} p99 ${ms(pct(svc, 99))}; operator GET /v1/teams p50 ${ms(pct(teams, 50))} p99 ${ms(pct(teams, 99))} (${REQUESTS} each)`);
}

/** Agents with real node tokens open sessions over 5 s from their own address: how many got `welcome`, how fast. */
async function agentsConnect(label: string, nodes: { name: string; token: string }[], sockets: WebSocket[]): Promise<void> {
  const welcomes: number[] = [];
  let failed = 0;
  const started = performance.now();
  await Promise.all(
    nodes.map(async (n, i) => {
      await sleep((i * 5_000) / nodes.length);
      const t0 = performance.now();
      try {
        const ws = await Promise.race([ackingAgent(n.token, n.name), sleep(10_000).then(() => Promise.reject(new Error('no welcome in 10 s')))]);
        welcomes.push(performance.now() - t0);
        sockets.push(ws);
      } catch {
        failed++;
      }
    }),
  );
  log(`${label}: ${welcomes.length}/${nodes.length} welcomed (${failed} failed) over ${((performance.now() - started) / 1000).toFixed(1)} s; upgrade → welcome p50 ${ms(pct(welcomes, 50))} p99 ${ms(pct(welcomes, 99))}`);
}

async function main(): Promise<void> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'tether-hostile-'));
  const db = await startEmbeddedPostgres({ dataDir: path.join(dir, 'pg'), persistent: false, settings: { shared_preload_libraries: 'pg_stat_statements', 'pg_stat_statements.track': 'top' } });
  const dbUrl = await db.createDatabase('tether');
  const sql = new pg.Client({ connectionString: dbUrl });
  await sql.connect();
  await sql.query('CREATE EXTENSION IF NOT EXISTS pg_stat_statements');
  const statements = async () => {
    const { rows } = await sql.query<{ all: string | null; dep: string | null }>(
      `SELECT sum(calls) AS all, sum(calls) FILTER (WHERE query ILIKE '%deployments%') AS dep FROM pg_stat_statements
        WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database()) AND query NOT ILIKE '%pg_stat_statements%'`,
    );
    return { all: Number(rows[0]!.all ?? 0), dep: Number(rows[0]!.dep ?? 0) };
  };
  const perSecond = async (label: string) => {
    const s0 = await statements();
    await sleep(WINDOW_S * 1000);
    const s1 = await statements();
    log(`${label}: ${((s1.all - s0.all) / WINDOW_S).toFixed(2)} statements/s (${((s1.dep - s0.dep) / WINDOW_S).toFixed(2)}/s on deployments) over ${WINDOW_S} s`);
  };

  const admin = `tth_op_${randomBytes(24).toString('base64url')}`;
  const port = await freeTcpPort();
  let panel: ChildProcess | undefined;
  const held: http.ClientRequest[] = [];
  const sockets: WebSocket[] = [];
  try {
    panel = spawn(process.execPath, [path.join(root, 'apps/control-panel/dist/main.js')], {
      env: { ...process.env, DATABASE_URL: dbUrl, TETHER_PORT: String(port), TETHER_LOG_LEVEL: 'warn', TETHER_ADMIN_TOKEN: admin, TETHER_DATA_DIR: path.join(dir, 'panel') },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    base = await new Promise<string>((resolve, reject) => {
      let out = '';
      panel!.stdout!.on('data', (c: Buffer) => {
        out += c.toString();
        const m = out.match(/listening on (\S+)/);
        if (m) resolve(m[1]!);
      });
      panel!.once('exit', (code) => reject(new Error(`panel exited ${code}`)));
    });
    log(`panel on ${base}; streams ${STREAMS}, junk upgrades ${JUNK}, agents ${AGENTS}`);

    // One node whose agent ACKs and never finishes; per team a service on it with one delivered deployment.
    const host = await ok<{ token: string }>('POST', '/v1/nodes', admin, { name: 'bench-host' });
    sockets.push(await ackingAgent(host.token, 'bench-host'));
    const teamCount = Math.ceil(STREAMS / PER_TEAM) + 1;
    const tenants: { teamId: string; tokens: string[]; deploymentId: string; serviceId: string }[] = [];
    for (let t = 0; t < teamCount + 1; t++) {
      const team = await ok<{ id: string }>('POST', '/v1/teams', admin, { name: `bench-team-${t}` });
      const tokens: string[] = [];
      for (let k = 0; k < PER_TEAM / PER_TOKEN + 1; k++) tokens.push((await ok<{ token: string }>('POST', `/v1/teams/${team.id}/tokens`, admin, { name: `t${k}` })).token);
      const service = await ok<{ id: string }>('POST', '/v1/services', tokens[0]!, { name: `svc-${t}`, image: 'bench/idle:1', node: 'bench-host' });
      const deployment = await ok<{ id: string; status: string }>('POST', `/v1/services/${service.id}/deployments`, tokens[0]!, {});
      if (deployment.status !== 'delivered') throw new Error(`deployment ${deployment.status}`);
      tenants.push({ teamId: team.id, tokens, deploymentId: deployment.id, serviceId: service.id });
    }
    const other = { token: tenants.at(-1)!.tokens[0]!, serviceId: tenants.at(-1)!.serviceId };

    // 1. baseline
    await restFigures('baseline', other, admin);
    await perSecond('baseline idle');

    // 2. streams: PER_TEAM per team, PER_TOKEN per token, spread over source addresses (their connection cap).
    const opening: Promise<{ status: number; code?: string }>[] = [];
    const started = performance.now();
    for (let i = 0; i < STREAMS; i++) {
      const tenant = tenants[Math.floor(i / PER_TEAM)]!;
      const token = tenant.tokens[Math.floor((i % PER_TEAM) / PER_TOKEN)]!;
      opening.push(openStream(tenant.deploymentId, token, `127.0.0.${10 + (i % 8)}`).then((s) => (held.push(s.req), s)));
      if (i % 100 === 99) await Promise.all(opening.slice(-100));
    }
    const opened = await Promise.all(opening);
    const refusedEarly = opened.filter((s) => s.status !== 200);
    log(`streams: ${opened.length - refusedEarly.length}/${STREAMS} open in ${((performance.now() - started) / 1000).toFixed(1)} s from ${Math.min(teamCount, Math.ceil(STREAMS / PER_TEAM))} teams, ${Math.ceil(STREAMS / PER_TOKEN)} tokens${refusedEarly.length ? `; refused: ${JSON.stringify(refusedEarly.slice(0, 3).map((s) => [s.status, s.code]))}` : ''}`);
    await sleep(2_000);
    await perSecond(`${STREAMS} idle streams`);
    await restFigures(`${STREAMS} streams open`, other, admin);

    // 3. caps: a token of a fresh team until refused; a token of a full team.
    const probe = tenants.at(-1)!;
    let refusedAt: { n: number; status: number; code?: string } | undefined;
    for (let n = 1; n <= PER_TOKEN + 5 && !refusedAt; n++) {
      const s = await openStream(probe.deploymentId, probe.tokens[1]!, '127.0.0.20');
      held.push(s.req);
      if (s.status !== 200) refusedAt = { n, status: s.status, ...(s.code ? { code: s.code } : {}) };
    }
    log(`per token: stream #${refusedAt?.n} refused ${refusedAt?.status} ${refusedAt?.code} (the first ${PER_TOKEN} served)`);
    const full = tenants[0]!;
    const team = await openStream(full.deploymentId, full.tokens.at(-1)!, '127.0.0.20');
    held.push(team.req);
    log(`per team: a fresh token of a team holding ${PER_TEAM}: ${team.status} ${team.code ?? ''}`);
    for (const r of held.splice(0)) r.destroy();
    await sleep(1_000);

    // 4. junk upgrades held while agents connect.
    const nodeTokens: { name: string; token: string }[] = [];
    for (let i = 0; i < AGENTS * 1.5; i++) nodeTokens.push({ name: `agent-${i}`, ...(await ok<{ token: string }>('POST', '/v1/nodes', admin, { name: `agent-${i}` })) });
    await agentsConnect('agents, no junk', nodeTokens.slice(0, AGENTS / 2), sockets);
    const junkCounts = new Map<string, number>();
    let junking = true;
    const junkSockets = new Set<net.Socket>();
    const junk = (kind: number, from: string) => {
      if (!junking) return;
      const s = net.connect({ host: '127.0.0.1', port, localAddress: from });
      junkSockets.add(s);
      let answer = '';
      s.setEncoding('latin1');
      s.on('data', (c: string) => (answer += c));
      s.on('error', () => undefined);
      s.on('close', () => {
        junkSockets.delete(s);
        const status = /^HTTP\/1\.1 (\d{3})/.exec(answer)?.[1] ?? 'closed';
        const key = `${['healthz upgrade', 'made-up token upgrade', 'unfinished upgrade'][kind]} → ${status}`;
        junkCounts.set(key, (junkCounts.get(key) ?? 0) + 1);
        setTimeout(() => junk(kind, from), 10);
      });
      const upgrade = 'Connection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n';
      if (kind === 0) s.write(`GET /healthz HTTP/1.1\r\nHost: x\r\n${upgrade}\r\n`);
      else if (kind === 1) s.write(`GET /v1/agent/connect HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer tth_node_${randomBytes(16).toString('hex')}\r\n${upgrade}\r\n`);
      else s.write(`GET /v1/agent/connect HTTP/1.1\r\nHost: x\r\n${upgrade}`);
    };
    for (let i = 0; i < JUNK; i++) junk(i % 3, `127.0.0.${30 + (i % 4)}`);
    await sleep(2_000);
    log(`junk: ${junkSockets.size} junk connections open`);
    await agentsConnect(`agents during junk`, nodeTokens.slice(AGENTS / 2), sockets);
    log(`junk held at the end: ${junkSockets.size}`);
    junking = false;
    log(`junk answers: ${[...junkCounts].map(([k, v]) => `${k}: ${v}`).join('; ')}`);
    for (const s of junkSockets) s.destroy();

    // 5. sign-in flood from one address.
    const signIns = new Map<number, number>();
    const s0 = await statements();
    const until = performance.now() + FLOOD_S * 1000;
    await Promise.all(
      Array.from({ length: 16 }, async () => {
        while (performance.now() < until) {
          const r = await call('POST', '/dashboard/api/sign-in', null, { token: 'tth_op_wrong' }, '127.0.0.60', { origin: base });
          signIns.set(r.status, (signIns.get(r.status) ?? 0) + 1);
        }
      }),
    );
    const s1 = await statements();
    const total = [...signIns.values()].reduce((a, b) => a + b, 0);
    log(`sign-in flood (${FLOOD_S} s, one address): ${(total / FLOOD_S).toFixed(0)} answered/s; ${[...signIns].map(([k, v]) => `${k}: ${v}`).join(', ')}; ${s1.all - s0.all} statements`);
  } finally {
    for (const r of held) r.destroy();
    for (const s of sockets) s.terminate();
    for (const a of agents.values()) a.destroy();
    await sql.end().catch(() => undefined);
    if (panel && panel.exitCode === null) {
      const exited = new Promise((r) => panel!.once('exit', r));
      panel.kill('SIGTERM');
      const timer = setTimeout(() => panel!.kill('SIGKILL'), 20_000);
      await exited;
      clearTimeout(timer);
    }
    await db.stop();
    await rm(dir, { recursive: true, force: true });
  }
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    console.error(err);
    process.exit(1);
  },
);
