import { Nullable } from '@tether/common';
import Type from 'typebox';
import { HEALTH_CHECK_DEFAULTS, MAX_VOLUMES } from '../domain/service-fields.js';
import { DEFAULT_DRAIN_SECONDS } from '../db/deployment-spec.js';

// The HTTP shapes of a service's command, args, resources and volumes. Their
// rules beyond the shape (volume names and paths) are the domain's
// (domain/service-fields.ts), answered with INVALID_VOLUME.

export const MAX_PROCESS_ARGS = 64;
const ProcessArg = Type.String({ maxLength: 4096, pattern: '^[^\\u0000]*$' });
const ProcessArgs = (description: string) => Nullable(Type.Array(ProcessArg, { minItems: 1, maxItems: MAX_PROCESS_ARGS }), { description });

export const Command = ProcessArgs(
  `replaces the image's ENTRYPOINT (Kubernetes' "command"); set alone, the image's CMD is not used either; null: the image's. 1-${MAX_PROCESS_ARGS} strings of at most 4096 characters, no NUL`,
);
export const Args = ProcessArgs(`replaces the image's CMD (Kubernetes' "args"); null: the image's. 1-${MAX_PROCESS_ARGS} strings of at most 4096 characters, no NUL`);

export const Resources = Nullable(
  Type.Object(
    {
      cpus: Type.Optional(Type.Number({ minimum: 0.01, maximum: 1024, description: 'CPUs the containers may use (Docker NanoCpus), e.g. 0.5' })),
      memoryMiB: Type.Optional(Type.Integer({ minimum: 6, maximum: 4_194_304, description: 'memory limit in MiB (Docker Memory, swap limited to the same); over it the kernel kills the process: oomKilled, OOM_KILLED' })),
    },
    { additionalProperties: false },
  ),
  { description: 'resource limits of each container; null or {}: none' },
);

const VolumeIn = Type.Object(
  {
    name: Type.String({ maxLength: 255, description: 'lowercase RFC 1123 label, unique per service; the volume is the service\'s own (never a host path or another service\'s)' }),
    mountPath: Type.String({ maxLength: 1100, description: 'absolute path in the container, without ".." segments, not /' }),
    readOnly: Type.Optional(Type.Boolean({ description: 'mount read-only (default false); a writable volume means replicas 0 or 1 and rollouts without overlap' })),
  },
  { additionalProperties: false },
);

export const VolumesIn = Type.Array(VolumeIn, {
  maxItems: 64,
  description: `named volumes (at most ${MAX_VOLUMES}; a PATCH replaces all of them), created on the node at the first deploy and kept across redeploys; anything but a valid name and path: 400 INVALID_VOLUME`,
});

const d = HEALTH_CHECK_DEFAULTS;
export const HealthCheckIn = Nullable(
  Type.Object(
    {
      path: Type.String({ minLength: 1, maxLength: 1024, pattern: '^/[\\x21-\\x7e]*$', description: 'the path the agent GETs, starting with /, printable ASCII without spaces (a query string is allowed)' }),
      port: Type.Optional(Nullable(Type.Integer({ minimum: 1, maximum: 65_535 }), { description: "the container port to probe; absent or null: the service's internalPort (a service with neither: 400 HEALTHCHECK_NEEDS_PORT)" })),
      intervalSeconds: Type.Optional(Type.Integer({ minimum: 1, maximum: 3600, description: `seconds from one probe's start to the next (default ${d.intervalSeconds})` })),
      timeoutSeconds: Type.Optional(Type.Integer({ minimum: 1, maximum: 600, description: `a probe without a complete answer within this fails (default ${d.timeoutSeconds})` })),
      healthyThreshold: Type.Optional(Type.Integer({ minimum: 1, maximum: 100, description: `passes (2xx or 3xx) in a row that make a container healthy (default ${d.healthyThreshold})` })),
      unhealthyThreshold: Type.Optional(Type.Integer({ minimum: 1, maximum: 100, description: `failures in a row that make it unhealthy, or fail its rollout (default ${d.unhealthyThreshold})` })),
      startPeriodSeconds: Type.Optional(Type.Integer({ minimum: 0, maximum: 3600, description: `failures this long after a container starts do not count (default ${d.startPeriodSeconds})` })),
    },
    { additionalProperties: false },
  ),
  {
    description:
      "an HTTP check the agent runs from outside the container (no curl or wget needed in the image): a new container takes traffic only once it passed, a check that does not pass fails the deployment HEALTHCHECK_FAILED (the old containers keep serving), and a running container that fails it reads unhealthy; null: none",
  },
);

export const HealthCheckOut = Nullable(
  Type.Object({
    path: Type.String(),
    port: Nullable(Type.Integer()),
    intervalSeconds: Type.Integer(),
    timeoutSeconds: Type.Integer(),
    healthyThreshold: Type.Integer(),
    unhealthyThreshold: Type.Integer(),
    startPeriodSeconds: Type.Integer(),
  }),
);

export const MAX_DRAIN_SECONDS = 3600;
export const DrainSeconds = Type.Integer({
  minimum: 0,
  maximum: MAX_DRAIN_SECONDS,
  description:
    `seconds the old containers of a rollout keep their open connections after the switch to the new ones (0-${MAX_DRAIN_SECONDS}, default ${DEFAULT_DRAIN_SECONDS}; 0: stopped at the switch); ` +
    `a rollout setting like replicas (a rollback keeps it). A value other than ${DEFAULT_DRAIN_SECONDS} needs an agent with workload.drain, else the deployment ends failed AGENT_LACKS_CAPABILITY`,
});

export const Failover = Type.Object(
  {
    fence: Type.Boolean({
      description:
        'work that must never run twice (issue 38): its agent stops it once it heard no panel for TETHER_FENCE_AFTER_MS, its rollouts stop the old container before the new one starts, ' +
        "and failover re-places it off an unreachable node only after the node's teardown + its fence deadline + its stop grace + 5 s (never before TETHER_RESCHEDULE_AFTER_MS). " +
        'Needs agents with workload.fence, else the deployment ends failed AGENT_LACKS_CAPABILITY',
    }),
  },
  { additionalProperties: false, description: 'failover settings (default: { fence: false }); takes effect with the next deployment' },
);

export const MAX_PROGRESS_DEADLINE_SECONDS = 86_400;
const Replicas = (description: string) => Type.Optional(Nullable(Type.Integer({ minimum: 0, maximum: 100 }), { description }));
export const RolloutIn = Nullable(
  Type.Object(
    {
      maxSurge: Replicas(
        'replicas a rollout may run above the wanted count, as Kubernetes\' strategy.rollingUpdate.maxSurge (0-100; null or absent: 1, or 0 with a writable volume or failover.fence, which refuse any other value). ' +
          '0: each old container stops before its replacement starts (agents need workload.stop-first)',
      ),
      maxUnavailable: Replicas('replicas a rollout may take below the wanted count (0-100; null or absent: 0, or 1 with a writable volume or failover.fence); maxSurge and maxUnavailable cannot both be 0'),
      progressDeadlineSeconds: Type.Optional(
        Nullable(Type.Integer({ minimum: 1, maximum: MAX_PROGRESS_DEADLINE_SECONDS }), {
          description: `a rollout that makes no step for this long ends failed PROGRESS_DEADLINE_EXCEEDED and its replicas go back (1-${MAX_PROGRESS_DEADLINE_SECONDS}; null or absent: the panel's TETHER_PROGRESS_DEADLINE_SECONDS, default 600)`,
        }),
      ),
    },
    { additionalProperties: false },
  ),
  {
    description:
      'how a release rolls out across nodes for a service managed by allocations (issue 36): each step moves up to maxSurge + maxUnavailable replicas, the next once they run it healthy. ' +
      'A PATCH replaces it whole (a field left out is its default); null: every one its default. A rollout setting like replicas (a rollback keeps it); its step sizes and deadline apply to the rollout under way at once. ' +
      'Anything else: 400 VALIDATION_FAILED naming details.field',
  },
);

export const RolloutOut = Type.Object(
  { maxSurge: Nullable(Type.Integer()), maxUnavailable: Nullable(Type.Integer()), progressDeadlineSeconds: Nullable(Type.Integer()) },
  { description: 'the rollout settings as given; null: the default' },
);

export const VolumeOut = Type.Object({ name: Type.String(), mountPath: Type.String(), readOnly: Type.Boolean() });

/** The new fields of a service as answered. */
export const ServiceFieldsOut = {
  command: Nullable(Type.Array(Type.String())),
  args: Nullable(Type.Array(Type.String())),
  resources: Nullable(Type.Object({ cpus: Type.Optional(Type.Number()), memoryMiB: Type.Optional(Type.Integer()) })),
  volumes: Type.Array(VolumeOut),
  healthCheck: HealthCheckOut,
  drainSeconds: Type.Integer(),
  failover: Type.Object({ fence: Type.Boolean() }),
  rollout: RolloutOut,
};

/** The new fields of a create or update body. */
export const ServiceFieldsIn = {
  command: Type.Optional(Command),
  args: Type.Optional(Args),
  resources: Type.Optional(Resources),
  volumes: Type.Optional(VolumesIn),
  healthCheck: Type.Optional(HealthCheckIn),
  drainSeconds: Type.Optional(DrainSeconds),
  failover: Type.Optional(Failover),
  rollout: Type.Optional(RolloutIn),
};
