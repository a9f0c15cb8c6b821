import Docker from 'dockerode';

/** Labels on everything Tether creates in Docker; containers are found by these, never by name. */
export const LABELS = Object.freeze({
  managed: 'tether.managed',
  node: 'tether.node',
  service: 'tether.service',
  deployment: 'tether.deployment',
  role: 'tether.role',
  /** Replica slot (0, 1, …) of a service container within its deployment. */
  replica: 'tether.replica',
  /** A named volume's name within its service (the volume's owner is tether.service). */
  volume: 'tether.volume',
  /** The allocation a service container runs (capability workload.allocations); such a container fills no replica slot. */
  allocation: 'tether.allocation',
  /** `true` on a container of a fenced release (capability workload.fence): the agent stops it when no panel is heard. */
  fence: 'tether.fence',
});

/** A dockerode client for `DOCKER_HOST` (unix://path or tcp://host:port) or the default socket. */
export function createDockerClient(dockerHost: string | undefined): Docker {
  if (!dockerHost) return new Docker({ socketPath: '/var/run/docker.sock' });
  if (dockerHost.startsWith('unix://')) return new Docker({ socketPath: dockerHost.slice('unix://'.length) });
  const url = new URL(dockerHost.replace(/^tcp:/, 'http:'));
  return new Docker({ host: url.hostname, port: Number(url.port || 2375), protocol: 'http' });
}

/** Creations in flight per client and name: the runtime and the proxy container ask at once when an agent starts. */
const ensuring = new WeakMap<Docker, Map<string, Promise<void>>>();

/**
 * Ensures Tether's user-defined bridge network exists. Service containers
 * join it with a stable alias per service (see serviceUpstreamHost in
 * @tether/protocol), and the proxy container joins it too, so upstreams stay
 * the same across redeploys. Concurrent callers on one client share one
 * list-then-create: Docker 20.10 can create two networks of one name when two
 * creates race (CheckDuplicate is not atomic), and every later use of that
 * name then fails as ambiguous (seen in first-hour.test: the proxy container
 * could not start).
 */
export function ensureNetwork(docker: Docker, name: string): Promise<void> {
  let byName = ensuring.get(docker);
  if (!byName) ensuring.set(docker, (byName = new Map()));
  const inFlight = byName.get(name);
  if (inFlight) return inFlight;
  const done = createNetworkOnce(docker, name).finally(() => byName.delete(name));
  byName.set(name, done);
  return done;
}

async function createNetworkOnce(docker: Docker, name: string): Promise<void> {
  const existing = await docker.listNetworks({ filters: { name: [name] } });
  if (existing.some((n) => n.Name === name)) return;
  try {
    await docker.createNetwork({ Name: name, Driver: 'bridge', CheckDuplicate: true, Labels: { [LABELS.managed]: 'true' } });
  } catch (err) {
    // Another agent or test created it between the list and the create.
    if ((err as { statusCode?: number }).statusCode !== 409) throw err;
  }
}

/** Docker's label filter (`key=value` per label). */
export const labelFilter = (labels: Record<string, string>) => Object.entries(labels).map(([k, v]) => `${k}=${v}`);

/** dockerode 5 honours `abortSignal` on every call; @types/dockerode does not declare it everywhere. */
export const withSignal = <T>(abortSignal: AbortSignal, options: object = {}): T => ({ ...options, abortSignal }) as unknown as T;
