// The actions of the audit trail, by the route that makes them (docs/api.md,
// "Audit trail", lists them). A success row is written by the domain function
// with the same action name; a refusal is named from here.

export interface RouteAction {
  action: string;
  targetType: string;
  /** Which path parameter is the target's id (none: the target is made by the request). */
  idParam?: 'id';
  /** Codes answered after the change committed (its success row is written): the outcome failed, the action was not refused. */
  afterChange?: readonly string[];
}

export const ROUTE_ACTIONS: Readonly<Record<string, RouteAction>> = {
  'POST /v1/teams': { action: 'team.create', targetType: 'team' },
  'POST /v1/teams/:id/tokens': { action: 'token.create', targetType: 'team', idParam: 'id' },
  'DELETE /v1/tokens/:id': { action: 'token.revoke', targetType: 'token', idParam: 'id' },
  'POST /v1/nodes': { action: 'node.create', targetType: 'node' },
  'PATCH /v1/nodes/:id': { action: 'node.update', targetType: 'node', idParam: 'id' },
  'POST /v1/nodes/:id/cordon': { action: 'node.cordon', targetType: 'node', idParam: 'id' },
  'POST /v1/nodes/:id/uncordon': { action: 'node.uncordon', targetType: 'node', idParam: 'id' },
  'POST /v1/nodes/:id/evacuate': { action: 'node.evacuate', targetType: 'node', idParam: 'id' },
  'DELETE /v1/nodes/:id': { action: 'node.decommission', targetType: 'node', idParam: 'id' },
  'POST /v1/nodes/:id/lost': { action: 'node.lost', targetType: 'node', idParam: 'id' },
  'POST /v1/services': { action: 'service.create', targetType: 'service' },
  'PATCH /v1/services/:id': { action: 'service.update', targetType: 'service', idParam: 'id' },
  'DELETE /v1/services/:id': { action: 'service.delete', targetType: 'service', idParam: 'id' },
  'DELETE /v1/volumes/:id': { action: 'volume.delete', targetType: 'volume', idParam: 'id' },
  'POST /v1/routes': { action: 'route.create', targetType: 'route' },
  'DELETE /v1/routes/:id': { action: 'route.delete', targetType: 'route', idParam: 'id' },
  'POST /v1/registries': { action: 'registry.create', targetType: 'registry' },
  'PUT /v1/registries/:id': { action: 'registry.replace', targetType: 'registry', idParam: 'id' },
  'DELETE /v1/registries/:id': { action: 'registry.delete', targetType: 'registry', idParam: 'id' },
  'POST /v1/services/:id/deployments': {
    action: 'deployment.create',
    targetType: 'service',
    idParam: 'id',
    // The deployment row exists and ends with its reason (unreachable, ack_timeout, failed).
    afterChange: ['NODE_UNREACHABLE', 'ACK_TIMEOUT', 'AGENT_LACKS_CAPABILITY', 'STORED_SECRET_UNREADABLE', 'PANEL_LEASE_LOST'],
  },
  'POST /v1/services/:id/rollback': {
    action: 'deployment.rollback',
    targetType: 'service',
    idParam: 'id',
    afterChange: ['NODE_UNREACHABLE', 'ACK_TIMEOUT', 'AGENT_LACKS_CAPABILITY', 'PANEL_LEASE_LOST'],
  },
  'POST /dashboard/api/sign-in': { action: 'session.sign-in', targetType: 'dashboard' },
  'POST /dashboard/api/sign-out': { action: 'session.sign-out', targetType: 'dashboard' },
};

/**
 * Every action a row can name (success rows add secret.set and secret.remove, made by service changes, and
 * service.failover, made by the scheduler with the actor `scheduler`: issue 38).
 */
export const AUDIT_ACTIONS: readonly string[] = [...new Set([...Object.values(ROUTE_ACTIONS).map((a) => a.action), 'secret.set', 'secret.remove', 'service.failover'])].sort();
