import { describe, expect, it } from 'vitest';
import { pino } from 'pino';
import { NetworkIsolation, elsewhere, ensureIsolation, isolationRule, type CommandRunner } from '../../src/docker/isolation.js';

// The isolation rule as text, with a scripted iptables: what is checked, inserted and removed, that a second pass
// changes nothing, and that a missing iptables is one error log with its code, not one per check.

const V4 = ['-m', 'conntrack', '--ctorigdst', '172.18.0.0/16', '!', '-i', 'br-0123456789ab', '-m', 'comment', '--comment', 'tether-isolation:tether', '-j', 'DROP'];

/** iptables and ip6tables that keep DOCKER-USER as `-S` lines; `-C` matches a rule this fake inserted. */
function fakeIptables(initial: string[] = []) {
  const chains: Record<string, string[]> = { iptables: [...initial], ip6tables: [] };
  const chain = chains.iptables!;
  const calls: string[] = [];
  const show = (args: readonly string[]) => `-A DOCKER-USER ${args.map((a) => (a.startsWith('tether-isolation') ? `"${a}"` : a)).join(' ')}`;
  const run: CommandRunner = async (command, args) => {
    calls.push(`${command} ${args.join(' ')}`);
    const [, op, , ...rule] = args;
    const chain = chains[command]!;
    if (op === '-S') return { code: 0, stdout: ['-N DOCKER-USER', ...chain, '-A DOCKER-USER -j RETURN'].join('\n') + '\n', stderr: '' };
    const index = chain.indexOf(show(rule));
    if (op === '-C') return index >= 0 ? { code: 0, stdout: '', stderr: '' } : { code: 1, stdout: '', stderr: 'iptables: Bad rule (does a matching rule exist in that chain?).' };
    if (op === '-I') chain.unshift(show(rule));
    if (op === '-D' && index >= 0) chain.splice(index, 1);
    return { code: 0, stdout: '', stderr: '' };
  };
  return { run, calls, chain };
}

describe('network isolation rule', () => {
  it('drops what was addressed to Tether\'s subnet and did not come from its bridge, and nothing else', () => {
    expect(isolationRule('tether', 'br-0123456789ab', '172.18.0.0/16')).toEqual(V4);
  });

  it('checks, inserts once, and a second pass only checks', async () => {
    const ipt = fakeIptables();
    const facts = { bridge: 'br-0123456789ab', subnets: ['172.18.0.0/16'] };
    expect(await ensureIsolation(ipt.run, 'tether', facts)).toEqual({ inserted: [['iptables', ...V4]], removed: [] });
    expect(ipt.calls).toEqual([
      'iptables -w -S DOCKER-USER',
      `iptables -w -C DOCKER-USER ${V4.join(' ')}`,
      `iptables -w -I DOCKER-USER ${V4.join(' ')}`,
    ]);
    ipt.calls.length = 0;
    expect(await ensureIsolation(ipt.run, 'tether', facts)).toEqual({ inserted: [], removed: [] });
    expect(ipt.calls).toEqual(['iptables -w -S DOCKER-USER', `iptables -w -C DOCKER-USER ${V4.join(' ')}`]);
  });

  it('removes this network\'s rule for an old subnet or bridge (a recreated network), never another network\'s; IPv6 goes to ip6tables', async () => {
    const stale = '-A DOCKER-USER ! -i br-dead00000000 -m conntrack --ctorigdst 172.30.0.0/16 -m comment --comment "tether-isolation:tether" -j DROP';
    const other = '-A DOCKER-USER ! -i br-other0000000 -m conntrack --ctorigdst 172.31.0.0/16 -m comment --comment "tether-isolation:tether-2" -j DROP';
    const ipt = fakeIptables([stale, other]);
    const result = await ensureIsolation(ipt.run, 'tether', { bridge: 'br-0123456789ab', subnets: ['172.18.0.0/16', 'fd00:18::/64'] });
    expect(result.removed).toEqual([['iptables', '-D', 'DOCKER-USER', '!', '-i', 'br-dead00000000', '-m', 'conntrack', '--ctorigdst', '172.30.0.0/16', '-m', 'comment', '--comment', 'tether-isolation:tether', '-j', 'DROP']]);
    expect(result.inserted.map((r) => `${r[0]} ${r[4]}`)).toEqual(['iptables 172.18.0.0/16', 'ip6tables fd00:18::/64']);
    expect(ipt.chain).toContain(other);
    expect(ipt.chain).not.toContain(stale);
  });

  it('iptables missing: one error log with ISOLATION_NOT_ENFORCED, however many checks; healed: enforced again', async () => {
    const lines: { level: number; code?: string; msg: string }[] = [];
    const logger = pino({ level: 'debug' }, { write: (line: string) => void lines.push(JSON.parse(line) as never) });
    let missing = true;
    const ipt = fakeIptables();
    const run: CommandRunner = (command, args) => (missing ? Promise.reject(Object.assign(new Error(`spawn ${command} ENOENT`), { code: 'ENOENT' })) : ipt.run(command, args));
    const docker = {
      listNetworks: async () => [{ Name: 'tether' }],
      getNetwork: () => ({ inspect: async () => ({ Id: '0123456789abcdef', Options: {}, IPAM: { Config: [{ Subnet: '172.18.0.0/16' }] } }) }),
    };
    const isolation = new NetworkIsolation({ docker: docker as never, network: 'tether', run, intervalMs: 60_000, logger });
    await isolation.check();
    await isolation.check();
    const errors = lines.filter((l) => l.level === 50);
    expect(errors).toHaveLength(1);
    expect(errors[0]).toMatchObject({ code: 'ISOLATION_NOT_ENFORCED', msg: expect.stringContaining('not enforced') });
    expect(isolation.enforced).toBe(false);
    missing = false;
    await isolation.check();
    expect(isolation.enforced).toBe(true);
    expect(ipt.chain).toEqual([expect.stringContaining('--ctorigdst 172.18.0.0/16')]);
    expect(lines.filter((l) => l.level === 50)).toHaveLength(1);
  });

  it('an engine on another machine (DOCKER_HOST=tcp://…) is never guarded with this host\'s iptables: not enforced, said once', async () => {
    const lines: { level: number; code?: string; err?: { message: string } }[] = [];
    const logger = pino({ level: 'info' }, { write: (line: string) => void lines.push(JSON.parse(line) as never) });
    const docker = {
      listNetworks: async () => [{ Name: 'tether' }],
      getNetwork: () => ({ inspect: async () => ({ Id: '0123456789abcdef', Options: {}, IPAM: { Config: [{ Subnet: '172.18.0.0/16' }] } }) }),
    };
    const isolation = new NetworkIsolation({ docker: docker as never, network: 'tether', run: elsewhere('tcp://10.0.0.9:2375'), intervalMs: 60_000, logger });
    await isolation.check();
    await isolation.check();
    expect(isolation.enforced).toBe(false);
    expect(lines.filter((l) => l.level === 50)).toEqual([expect.objectContaining({ code: 'ISOLATION_NOT_ENFORCED', err: expect.objectContaining({ message: expect.stringContaining('another machine') }) })]);
  });
});
