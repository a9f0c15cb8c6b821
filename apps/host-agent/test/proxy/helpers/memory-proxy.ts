import type { ProxyConfigurator } from '../../../src/proxy/index.js';

/** A proxy that keeps its config in memory, for controller logic that needs no real Caddy. */
export function memoryProxy(): ProxyConfigurator & { running: unknown; loads: number } {
  return {
    target: 'memory',
    running: null as unknown,
    loads: 0,
    async readRunning() {
      return JSON.stringify(this.running);
    },
    async hasObject(id: string) {
      return JSON.stringify(this.running).includes(`"@id":${JSON.stringify(id)}`);
    },
    async load(json: string) {
      this.loads += 1;
      this.running = JSON.parse(json);
    },
    async close() {},
  };
}
