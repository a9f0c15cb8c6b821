import { AppError } from '../errors.js';
import type { Node } from '../generated/prisma/client.js';
import { lockNodeShared } from '../db/prisma-helpers.js';
import type { Tx } from '../db/database.js';

// Where a service runs. A named node must exist and not be decommissioned;
// without a name the service goes to the live-able node (not decommissioned)
// with the fewest services, ties broken by name so placement is predictable.
// The chosen node is locked FOR SHARE until the transaction ends, so a
// concurrent decommission waits for the placement instead of racing it.

export async function placeOnNode(tx: Tx, nodeName: string | undefined): Promise<Node> {
  if (nodeName !== undefined) {
    const node = await tx.node.findUnique({ where: { name: nodeName } });
    const locked = node && (await lockNodeShared(tx, node.id));
    if (!node || !locked) throw new AppError('UNKNOWN_NODE', `no node named ${nodeName}`);
    if (locked.decommissioned) throw new AppError('NODE_DECOMMISSIONED', `node ${nodeName} is decommissioned`);
    return node;
  }
  // A candidate can be decommissioned between the choice and the lock; choose again then.
  for (let attempt = 0; attempt < 3; attempt++) {
    const candidate = await tx.node.findFirst({
      where: { decommissioned: false },
      orderBy: [{ services: { _count: 'asc' } }, { name: 'asc' }],
    });
    if (!candidate) break;
    const locked = await lockNodeShared(tx, candidate.id);
    if (locked && !locked.decommissioned) return candidate;
  }
  throw new AppError('NO_NODE_AVAILABLE', 'no node is available: register one with POST /v1/nodes (operators)');
}
