import { describe, expect, it } from 'vitest';
import { V1_EXAMPLES, V1_MESSAGE_TYPES, V1_SCHEMAS, decodeV1 } from '@tether/testkit';
import {
  CAPABILITIES,
  canonicalRoutes,
  EXAMPLE_MESSAGES,
  FRAME_ERROR_CODES,
  MESSAGE_SCHEMAS,
  MESSAGE_TYPES,
  MIN_PROTOCOL_VERSION,
  PROTOCOL_VERSION,
  decode,
  encode,
  pinnedProtocolRange,
  routingHash,
  versionBelow,
  workloadCapabilities,
  rollsOutWithoutOverlap,
  type Message,
  type MessageOf,
  type Route,
} from '../src/index.js';

// The first release's wire (version 1, frozen in @tether/testkit from commit
// a4fea2f) against this one, both ways: what a v1 end sends, this end takes;
// what this end sends to a v1 end, v1's own schemas take. And the rule that
// keeps it so: no v1 message gained or lost a required field.

type Schema = Record<string, unknown>;
const json = (schema: unknown): Schema => JSON.parse(JSON.stringify(schema)) as Schema;

/** Where `now` differs from `v1` in what a peer must send or may rely on: required fields and v1's fields. */
function contractBreaks(v1: Schema, now: Schema, at: string): string[] {
  const breaks: string[] = [];
  const required = (s: Schema) => new Set((s.required as string[] | undefined) ?? []);
  if (v1.type === 'object') {
    const before = required(v1);
    const after = required(now);
    for (const field of after) if (!before.has(field)) breaks.push(`${at}.${field} is required now, v1 did not send it`);
    for (const field of before) if (!after.has(field)) breaks.push(`${at}.${field} is optional now, a v1 peer still requires it`);
    const nowProps = (now.properties ?? {}) as Record<string, Schema>;
    for (const [field, schema] of Object.entries((v1.properties ?? {}) as Record<string, Schema>)) {
      if (!nowProps[field]) breaks.push(`${at}.${field} is gone`);
      else breaks.push(...contractBreaks(schema, nowProps[field], `${at}.${field}`));
    }
  }
  if (v1.items && now.items) breaks.push(...contractBreaks(v1.items as Schema, now.items as Schema, `${at}[]`));
  const v1Any = v1.anyOf as Schema[] | undefined;
  const nowAny = now.anyOf as Schema[] | undefined;
  if (v1Any && nowAny) v1Any.forEach((member, i) => nowAny[i] && breaks.push(...contractBreaks(member, nowAny[i], `${at}|${i}`)));
  if (v1.const !== undefined && v1.const !== now.const) breaks.push(`${at} is ${String(now.const)} now, was ${String(v1.const)}`);
  return breaks;
}

describe('the v1 contract holds', () => {
  it('every v1 message still exists with the same required fields at every depth', () => {
    const breaks = V1_MESSAGE_TYPES.flatMap((type) => {
      const now = (MESSAGE_SCHEMAS as Record<string, unknown>)[type];
      return now ? contractBreaks(V1_SCHEMAS[type]!, json(now), type) : [`${type} is gone`];
    });
    expect(breaks).toEqual([]);
  });

  it('the checker sees a field made required and a field dropped', () => {
    const hello = json(MESSAGE_SCHEMAS.hello);
    const stricter = { ...hello, required: [...(hello.required as string[]), 'capabilities'] };
    expect(contractBreaks(V1_SCHEMAS.hello!, stricter, 'hello')).toEqual(['hello.capabilities is required now, v1 did not send it']);
    const props = { ...(hello.properties as Schema) };
    delete props.routing;
    expect(contractBreaks(V1_SCHEMAS.hello!, { ...hello, properties: props }, 'hello')).toContain('hello.routing is gone');
  });

  it('messages added since v1 are exactly those a capability announces', () => {
    const added = MESSAGE_TYPES.filter((type) => !V1_MESSAGE_TYPES.includes(type)).sort();
    expect(added).toEqual(['allocations', 'allocations.drained', 'allocations.status', 'certificates', 'certificates.report', 'deploy.drained', 'logs.chunk', 'logs.close', 'logs.credit', 'logs.end', 'logs.open', 'proxy.events', 'volumes.remove', 'volumes.report']);
    // workload.allocations adds allocations and allocations.status (and containers' allocationId);
    // allocations.drain adds allocations.drained;
    // workload.drain adds deploy.drained (and the field drainSeconds); workload.volumes adds volumes.remove, volumes.inventory adds volumes.report (and volumes.remove's `names`); the other workload.* capabilities,
    // `secrets` and `registry.auth` add fields only (see the next test); proxy.static adds no message either: only the reload kind `static-move`
    // inside proxy.events, which the agent sends only to a panel that named the capability back (apps/host-agent/src/connection/event-sender.ts);
    // routing.remote adds fields only (hello's privateAddress, allocations.status's endpoint, routing.map routes' remote);
    // certificates.share adds certificates and certificates.report (and hello's challengePort, routes' certificateIssuer);
    // workload.fence adds fields only (hello's fence, a release's fence); workload.stop-first a release's stopFirst.
    expect(Object.values(CAPABILITIES).sort()).toEqual(['allocations.drain', 'certificates.share', 'logs', 'proxy.events', 'proxy.static', 'registry.auth', 'routes.probe', 'routing.remote', 'secrets', 'volumes.inventory', 'workload.allocations', 'workload.command', 'workload.drain', 'workload.fence', 'workload.healthCheck', 'workload.resources', 'workload.stop-first', 'workload.volumes']);
    // A v1 peer refuses them: they may travel only on a session whose hello and welcome both named the capability.
    for (const type of added) {
      const refused = decodeV1(encode(EXAMPLE_MESSAGES[type] as Message));
      expect(refused.ok ? null : refused.code).toBe('UNKNOWN_TYPE');
    }
  });
});

describe('workload fields behind capabilities', () => {
  it('a v1 agent would take a deploy with the capability-gated workload fields and silently run it without them: hence the capabilities', () => {
    const deploy = EXAMPLE_MESSAGES.deploy as MessageOf<'deploy'>;
    const workload = {
      ...deploy.workload,
      command: ['worker'],
      args: ['--queue', 'mail'],
      resources: { cpus: 0.5, memoryMiB: 256 },
      volumes: [{ name: 'data', mountPath: '/data', readOnly: false }],
      healthCheck: { path: '/health', port: 8080, intervalSeconds: 5, timeoutSeconds: 2, healthyThreshold: 1, unhealthyThreshold: 3, startPeriodSeconds: 0 },
      drainSeconds: 8,
      fence: true as const,
    };
    expect(decodeV1(encode({ ...deploy, workload })).ok).toBe(true);
    expect(workloadCapabilities(workload).sort()).toEqual(['workload.command', 'workload.drain', 'workload.fence', 'workload.healthCheck', 'workload.resources', 'workload.volumes']);
    expect(workloadCapabilities(deploy.workload)).toEqual([]);
    expect(workloadCapabilities({ ...deploy.workload, drainSeconds: 0 })).toEqual(['workload.drain']);
    expect(workloadCapabilities({ ...deploy.workload, volumes: [] })).toEqual([]);
    expect(workloadCapabilities({ ...deploy.workload, args: ['x'] })).toEqual(['workload.command']);
  });

  it('a fenced release needs workload.fence and rolls out without overlap, as a writable volume does', () => {
    const deploy = EXAMPLE_MESSAGES.deploy as MessageOf<'deploy'>;
    expect(workloadCapabilities({ ...deploy.workload, fence: true })).toEqual(['workload.fence']);
    expect(rollsOutWithoutOverlap({ fence: true })).toBe(true);
    expect(rollsOutWithoutOverlap({ volumes: [{ name: 'data', mountPath: '/data', readOnly: false }] })).toBe(true);
    expect(rollsOutWithoutOverlap({ volumes: [{ name: 'data', mountPath: '/data', readOnly: true }] })).toBe(false);
    expect(rollsOutWithoutOverlap({})).toBe(false);
  });

  it('a release that asks to stop first (rollout.maxSurge 0) needs workload.stop-first and rolls out without overlap', () => {
    const deploy = EXAMPLE_MESSAGES.deploy as MessageOf<'deploy'>;
    // A v1 agent would take it and overlap anyway: hence the capability.
    expect(decodeV1(encode({ ...deploy, workload: { ...deploy.workload, stopFirst: true as const } })).ok).toBe(true);
    expect(workloadCapabilities({ ...deploy.workload, stopFirst: true })).toEqual(['workload.stop-first']);
    expect(rollsOutWithoutOverlap({ stopFirst: true })).toBe(true);
  });
});

describe('remote endpoints behind routing.remote', () => {
  it("a v1 agent would take a routing map whose routes name remote endpoints and answer its local replicas only: hence the capability", () => {
    const map = EXAMPLE_MESSAGES['routing.map'] as MessageOf<'routing.map'>;
    const route = { ...map.routes[0]!, remote: [{ node: 'edge-2', endpoint: '10.0.0.2:32768' }] };
    const decoded = decodeV1(encode({ ...map, routes: [route] }));
    expect(decoded.ok).toBe(true);
    // Without the capability the map's hash is the one it had before the field existed.
    expect(routingHash([map.routes[0]!])).not.toBe(routingHash([route]));
    expect(routingHash([{ ...map.routes[0]!, remote: [{ node: 'b', endpoint: '10.0.0.3:1' }, { node: 'a', endpoint: '10.0.0.2:1' }] }])).toBe(
      routingHash([{ ...map.routes[0]!, remote: [{ node: 'a', endpoint: '10.0.0.2:1' }, { node: 'b', endpoint: '10.0.0.3:1' }] }]),
    );
  });

  it('an endpoint is an address and a port: a name, a missing port or a bracketless IPv6 address is refused', () => {
    const map = EXAMPLE_MESSAGES['routing.map'] as MessageOf<'routing.map'>;
    const withEndpoint = (endpoint: string) => encodeOrCode({ ...map, routes: [{ ...map.routes[0]!, remote: [{ node: 'edge-2', endpoint }] }] });
    expect(withEndpoint('10.0.0.2:32768')).toBe('ok');
    expect(withEndpoint('[fd00::2]:32768')).toBe('ok');
    for (const bad of ['edge-2:80', '10.0.0.2', 'fd00::2:80', '10.0.0.2:80/x']) expect(withEndpoint(bad)).not.toBe('ok');
  });
});

describe('shared certificates behind certificates.share', () => {
  const map = EXAMPLE_MESSAGES['routing.map'] as MessageOf<'routing.map'>;
  const certificateIssuer = { node: 'edge-1', challengeVia: '10.0.0.1:80' };

  it('a v1 agent would take a route naming another issuer and ask the CA itself: hence the capability; without the field the hash is unchanged', () => {
    const route = { ...map.routes[0]!, certificateIssuer };
    expect(decodeV1(encode({ ...map, routes: [route] })).ok).toBe(true);
    expect(routingHash([map.routes[0]!])).toBe(routingHash([{ ...map.routes[0]! }]));
    expect(routingHash([route])).not.toBe(routingHash([map.routes[0]!]));
    expect(canonicalRoutes([{ ...route, certificateIssuer: { challengeVia: '10.0.0.1:80', node: 'edge-1' } }])).toEqual([route]);
  });

  it('challengeVia is an address and a port; a certificate frame holds PEM texts and at least the armour', () => {
    const withVia = (challengeVia: string) => encodeOrCode({ ...map, routes: [{ ...map.routes[0]!, certificateIssuer: { ...certificateIssuer, challengeVia } }] });
    expect(withVia('[fd00::1]:8080')).toBe('ok');
    for (const bad of ['edge-1:80', '10.0.0.1', '']) expect(withVia(bad)).not.toBe('ok');
    const report = EXAMPLE_MESSAGES['certificates.report'] as MessageOf<'certificates.report'>;
    const one = report.certificates[0]!;
    expect(encodeOrCode(report)).toBe('ok');
    expect(encodeOrCode({ ...report, certificates: [] })).not.toBe('ok');
    expect(encodeOrCode({ ...report, certificates: [{ ...one, keyPem: 'not a key' }] })).not.toBe('ok');
    expect(encodeOrCode({ ...report, certificates: [{ ...one, domain: '' }] })).not.toBe('ok');
    // The panel's complete set may be empty (nothing left to serve for another issuer).
    expect(encodeOrCode({ ...(EXAMPLE_MESSAGES.certificates as MessageOf<'certificates'>), certificates: [] })).toBe('ok');
  });
});

describe('registry credentials behind registry.auth', () => {
  it('a v1 agent would take a deploy with registryAuth and pull without it: hence the capability', () => {
    const deploy = EXAMPLE_MESSAGES.deploy as MessageOf<'deploy'>;
    const workload = { ...deploy.workload, image: 'registry.example.com:5000/team/app:1', registryAuth: { host: 'registry.example.com:5000', username: 'ci', password: 'pw' } };
    expect(decodeV1(encode({ ...deploy, workload })).ok).toBe(true);
    expect(decode(encode({ ...deploy, workload }))).toEqual({ ok: true, message: { ...deploy, workload } });
    const bad = decode(JSON.stringify({ ...deploy, workload: { ...workload, registryAuth: { host: 'r', username: '', password: 'pw' } } }));
    expect(bad.ok).toBe(false);
  });
});

describe('a v1 end and this end understand each other', () => {
  it.each(V1_MESSAGE_TYPES)('%s as v1 sent it decodes here unchanged', (type) => {
    const frame = V1_EXAMPLES[type]!;
    expect(decodeV1(JSON.stringify(frame)).ok).toBe(true);
    expect(decode(JSON.stringify(frame))).toEqual({ ok: true, message: frame });
  });

  it('routing hashes are computed as v1 computed them', () => {
    const map = V1_EXAMPLES['routing.map'] as unknown as { hash: string; routes: Route[] };
    expect(map.routes.length).toBeGreaterThan(0);
    expect(routingHash(map.routes)).toBe(map.hash);
  });

  it.each(V1_MESSAGE_TYPES)('%s as this end sends it passes v1\'s own validation', (type) => {
    const result = decodeV1(encode(EXAMPLE_MESSAGES[type as keyof typeof EXAMPLE_MESSAGES] as Message), { maxBytes: 16 * 1024 * 1024 });
    expect(result).toMatchObject({ ok: true });
  });

  it('v1 accepts this end\'s optional fields (capabilities, reload kinds, canary) because it ignores unknown ones; a closed-world v1 would not', () => {
    const hello = encode(EXAMPLE_MESSAGES.hello);
    expect(decodeV1(hello).ok).toBe(true);
    const closed = decodeV1(hello, { closedWorld: true });
    expect(closed.ok ? null : closed.code).toBe('INVALID_FIELD');
    // Stripped of what v1 lacks, it passes even that: the fields are optional, so a panel can leave them out for a v1 agent.
    const { capabilities: _c, ...bare } = EXAMPLE_MESSAGES.hello;
    expect(decodeV1(encode(bare as Message), { closedWorld: true }).ok).toBe(true);
  });
});

describe('version range', () => {
  const hello = (protocolVersion: number) => JSON.stringify({ ...V1_EXAMPLES.hello, protocolVersion });
  const codeOf = (raw: string, max?: number) => {
    const result = decode(raw, max === undefined ? {} : { protocolVersions: pinnedProtocolRange(max) });
    return result.ok ? 'ok' : result.error.code;
  };

  it('a hello from MIN_PROTOCOL_VERSION to PROTOCOL_VERSION is accepted; older and newer are refused with their code', () => {
    for (let v = MIN_PROTOCOL_VERSION; v <= PROTOCOL_VERSION; v++) expect(codeOf(hello(v))).toBe('ok');
    expect(codeOf(hello(MIN_PROTOCOL_VERSION - 1))).toBe(FRAME_ERROR_CODES.UNSUPPORTED_PROTOCOL_VERSION);
    expect(codeOf(hello(PROTOCOL_VERSION + 1))).toBe(FRAME_ERROR_CODES.UNSUPPORTED_PROTOCOL_VERSION);
    const refused = decode(hello(PROTOCOL_VERSION + 1));
    expect(refused.ok ? '' : refused.error.message).toContain(`this end speaks ${MIN_PROTOCOL_VERSION}`);
  });

  it('a pin outside MIN_PROTOCOL_VERSION..PROTOCOL_VERSION is refused', () => {
    expect(() => pinnedProtocolRange(MIN_PROTOCOL_VERSION - 1)).toThrow(RangeError);
    expect(() => pinnedProtocolRange(PROTOCOL_VERSION + 1)).toThrow(RangeError);
    expect(pinnedProtocolRange(MIN_PROTOCOL_VERSION)).toEqual({ min: MIN_PROTOCOL_VERSION, max: MIN_PROTOCOL_VERSION });
  });

  it('an agent steps down one version at a time and never below its oldest', () => {
    expect(versionBelow({ min: 1, max: 3 }, 3)).toBe(2);
    expect(versionBelow({ min: 1, max: 2 }, 5)).toBe(2);
    expect(versionBelow({ min: 2, max: 3 }, 2)).toBeNull();
    expect(versionBelow({ min: 1, max: 1 }, 1)).toBeNull();
  });
});

/** 'ok' when encode() takes the message, else the code of what it threw. */
function encodeOrCode(message: Message): string {
  try {
    encode(message);
    return 'ok';
  } catch (err) {
    return (err as { code?: string }).code ?? String(err);
  }
}
