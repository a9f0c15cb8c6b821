import { CAPABILITIES, createIdGenerator } from '@tether/protocol';
import { AppError } from '../errors.js';
import type { SessionRegistry } from '../sessions/registry.js';
import { AckTimeoutError, SessionClosedError, type AgentSession } from '../sessions/session.js';

/**
 * Removes a deleted service's named volumes on its node (DELETE /v1/services/:id?deleteVolumes=true), or
 * single kept volumes (DELETE /v1/volumes/:id: `names`, which needs the agent's `volumes.inventory`).
 */
export interface VolumeRemover {
  /** Throws what remove() would throw for a node that cannot take it now, before anything is deleted. */
  check(node: { id: string; name: string }, names?: readonly string[]): void;
  /** Sends `volumes.remove` and resolves on the agent's ACK (the agent then does the work). */
  remove(node: { id: string; name: string }, serviceId: string, names?: readonly string[]): Promise<void>;
}

// Over the node's live session on this panel only: a node without one (or held by another panel) is
// NODE_UNREACHABLE, answered before the service is deleted, so nothing is lost; the volumes stay.

export class SessionVolumeRemover implements VolumeRemover {
  private readonly nextId = createIdGenerator('p');

  constructor(private readonly registry: SessionRegistry) {}

  check(node: { id: string; name: string }, names?: readonly string[]): void {
    this.sessionOf(node, names);
  }

  async remove(node: { id: string; name: string }, serviceId: string, names?: readonly string[]): Promise<void> {
    const session = this.sessionOf(node, names);
    try {
      await session.sendAwaitingAck({ type: 'volumes.remove', id: this.nextId(), serviceId, ...(names ? { names: [...names] } : {}) });
    } catch (err) {
      if (err instanceof AckTimeoutError || err instanceof SessionClosedError) {
        const what = names ? 'the volume stays on the node' : 'the service is deleted and its volumes stay on the node';
        throw new AppError('NODE_UNREACHABLE', `node ${node.name} did not take the removal of the volumes (${err.message}); ${what}`);
      }
      throw err;
    }
  }

  private sessionOf(node: { id: string; name: string }, names?: readonly string[]): AgentSession {
    const session = this.registry.get(node.id);
    if (!session) throw new AppError('NODE_UNREACHABLE', `node ${node.name} has no live session on this panel: its volumes cannot be removed now; nothing was deleted`);
    const needed = names ? CAPABILITIES.VOLUMES_INVENTORY : CAPABILITIES.WORKLOAD_VOLUMES;
    if (!session.hasCapability(needed)) {
      throw new AppError('AGENT_LACKS_CAPABILITY', `node ${node.name}'s agent did not announce ${needed}: it cannot remove volumes; nothing was deleted`);
    }
    return session;
  }
}
