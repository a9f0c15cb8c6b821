import type { PostgresPair } from '@tether/testkit';
import type { Panel } from './panel-harness.js';
import type { RawAgent } from './raw-agent.js';

/** The failover suites' teardown: agents closed first (no reconnect into a closing panel), then panels, then the servers. */
export async function stopPairSuite(agents: readonly RawAgent[], panels: readonly Panel[], pair: PostgresPair | undefined): Promise<void> {
  for (const a of agents) a.close();
  for (const p of panels) await p.close();
  await pair?.stop();
}
