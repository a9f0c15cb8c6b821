export * from './errors.js';
export type { ProxyConfigurator } from './configurator.js';
export { createCaddyAdmin, type CaddyAdminOptions } from './caddy-admin.js';
export { renderCaddyConfig, renderBootstrapConfig, type RenderOptions, type RenderedConfig, type ProxyTlsMode } from './render.js';
export { CaddyRoutingController, type CaddyRoutingControllerOptions, type ProxySupervisor, type ReloadRecord } from './routing-controller.js';
export { DISRUPTIVE_KINDS, RELOAD_KINDS, type ReloadKind } from './routing-state.js';
export { CaddyContainer } from './caddy-container.js';
export { ensureCaddyImage, CADDY_CONTAINER_ADMIN } from './caddy-image.js';
export * from './create-routing-controller.js';
