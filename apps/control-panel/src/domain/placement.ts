import { AppError } from '../errors.js';
import type { Node } from '../generated/prisma/client.js';
import { lockNodeShared } from '../db/prisma-helpers.js';
import type { Tx } from '../db/database.js';

// Where a service runs. A named node must exist and be neither decommissioned
// nor cordoned; without a name the service goes to the node that is neither
// with the fewest services, ties broken by name so placement is predictable.
// A cordon only stops new placements: services already there keep deploying.
// The chosen node is locked FOR SHARE until the transaction ends, so a
// concurrent decommission waits for the placement instead of racing it.

export async function placeOnNode(tx: Tx, nodeName: string | undefined): Promise<Node> {
  if (nodeName !== undefined) {
    const node = await tx.node.findUnique({ where: { name: nodeName } });
    const locked = node && (await lockNodeShared(tx, node.id));
    if (!node || !locked) throw new AppError('UNKNOWN_NODE', `no node named ${nodeName}`);
    if (locked.decommissioned) throw new AppError('NODE_DECOMMISSIONED', `node ${nodeName} is decommissioned`);
    if (locked.cordoned) throw new AppError('NODE_CORDONED', `node ${nodeName} is cordoned: choose another node, or uncordon it (POST /v1/nodes/${node.id}/uncordon, operators)`);
    return node;
  }
  // A candidate can be decommissioned or cordoned between the choice and the lock; choose again then.
  for (let attempt = 0; attempt < 3; attempt++) {
    const candidate = await tx.node.findFirst({
      where: { decommissioned: false, cordoned: false },
      orderBy: [{ services: { _count: 'asc' } }, { name: 'asc' }],
    });
    if (!candidate) break;
    const locked = await lockNodeShared(tx, candidate.id);
    if (locked && !locked.decommissioned && !locked.cordoned) return candidate;
  }
  const cordoned = await tx.node.count({ where: { decommissioned: false, cordoned: true } });
  throw new AppError(
    'NO_NODE_AVAILABLE',
    cordoned > 0
      ? `no node is available: every node is cordoned (${cordoned}); uncordon one or register another with POST /v1/nodes (operators)`
      : 'no node is available: register one with POST /v1/nodes (operators)',
  );
}
