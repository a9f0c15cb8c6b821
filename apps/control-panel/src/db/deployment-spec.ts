// What a deployment row carries out: a snapshot of its service's spec, stored
// as JSON in deployments.spec (the REST side writes it, the agent side reads it).

export interface ServiceSpec {
  name: string;
  image: string;
  env: Record<string, string>;
  internalPort: number | null;
  replicas: number;
  /** The secret versions the deployment runs with (names and versions, never values); absent on older rows. */
  secrets?: { name: string; version: number }[];
}
