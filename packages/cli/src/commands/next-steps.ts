import { CliError } from '../errors.js';
import type { ApiClient } from '../api-client.js';

// What a token that sees no services should do next. The panel has no "who am
// I": GET /v1/teams answers operators (every team) and refuses team tokens,
// which is the one difference that matters here.

interface Team {
  id: string;
  name: string;
}

const createExample = (url: string, teamId: string | undefined) =>
  [
    `  curl -X POST ${url}/v1/services -H "Authorization: Bearer $TOKEN" -H 'content-type: application/json' \\`,
    `    -d '{${teamId ? `"teamId":"${teamId}",` : ''}"name":"web","image":"<your image>","internalPort":8080}'`,
    '  tether deploy web --wait',
  ].join('\n');

/** Lines for `tether status` (and others) when the token sees no service. */
export async function noServicesHint(client: ApiClient): Promise<string> {
  let teams: Team[];
  try {
    teams = (await client.call<Team[]>('GET', '/v1/teams')).body;
  } catch (err) {
    if (!(err instanceof CliError) || err.apiCode !== 'FORBIDDEN') throw err;
    return [
      'No services yet. This is a team token: it sees its own team\'s services only, and that team has none.',
      'Create one (the image must be reachable from the node), then deploy it:',
      createExample(client.url, undefined),
      'A service you expected belongs to another team? Ask an operator for a token of that team.',
    ].join('\n');
  }
  if (teams.length === 0) {
    return [
      'No services yet, and no teams: this operator token sees every team, and there is none.',
      `Create a team first:  curl -X POST ${client.url}/v1/teams -H "Authorization: Bearer $TOKEN" -H 'content-type: application/json' -d '{"name":"<team>"}'`,
      'then a service in it, and deploy it (docs/api.md, "Services").',
    ].join('\n');
  }
  return [
    `No services yet in any team. This operator token sees every team: ${teams.map((t) => `${t.name} (${t.id})`).join(', ')}.`,
    'Create one in a team, then deploy it:',
    createExample(client.url, teams[0]!.id),
  ].join('\n');
}
