import { afterAll } from 'vitest';
import { stopSharedPostgres } from './helpers/rest-harness.js';

// The REST API suites, run in one file so they share one PostgreSQL server
// (each suite has its own fresh database and its own panel). Each suite lives
// in test/api/:
//   auth              bearer tokens, 401/403, revocation, batched last-use, first operator token
//   teams-nodes       operator endpoints: teams, customer tokens, nodes, decommissioning
//   node-lost         POST /v1/nodes/:id/lost: confirmation, services moved home, pending ones, idempotence
//   services          services CRUD, spec validation, placement, events
//   routes            domains and path prefixes, DOMAIN_TAKEN, attach/detach events
//   deployments       persist-then-dispatch, the dispatcher seam, listing
//   tenant-isolation  two teams x every customer endpoint x every verb
//   edges             malformed HTTP, URLs and bodies: coded answers, nothing echoed or stored altered
//   stored-text       a NUL in every parameter and body string of every operation: 400 naming it (issue 32)
import './api/auth.js';
import './api/teams-nodes.js';
import './api/node-lost.js';
import './api/services.js';
import './api/routes.js';
import './api/deployments.js';
import './api/deployment-waits.js';
import './api/tenant-isolation.js';
import './api/edges.js';
import './api/stored-text.js';

afterAll(async () => {
  await stopSharedPostgres();
});
